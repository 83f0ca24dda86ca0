"""A scripted stand-in for a model: exact pieces at an exact rate, for tests and the bench.

It is for the cases the real model cannot make deterministic or extreme (a fire hose of
5,000 pieces a second, a prefill of a chosen length); behaviour that depends on the model
itself is tested with llama.cpp.
"""

from __future__ import annotations

import time
from collections.abc import Generator, Iterable, Sequence
from dataclasses import replace
from pathlib import Path

from app.engine.backend import (
    BackendOpener,
    ChatMessage,
    EngineOptions,
    GenerationReport,
    GenerationSettings,
    ModelInfo,
)
from app.engine.prompt_cache import CacheStats
from app.engine.stop import StopSignal

PREFILL_STEP_S = 0.05
"""How often the pretend prompt processing reports progress."""


class ScriptedBackend:
    """Replies with the pieces it was given, paced like a model.

    Args:
        pieces: the reply, piece by piece; used for every reply unless :meth:`enqueue`
            queued others.
        rate: pieces per second (``0`` means as fast as the consumer takes them).
        prefill_seconds: time before the first piece, like prompt processing.
        path: reported as the model's path.
        n_ctx: reported as the model's context.
        parallel: reported as the replies it decodes side by side (it decodes one at a time).
    """

    def __init__(
        self,
        pieces: Iterable[str] = ("Hello", ",", " world", "."),
        *,
        rate: float = 0.0,
        prefill_seconds: float = 0.0,
        path: Path = Path("scripted.gguf"),
        n_ctx: int = 4096,
        parallel: int = 1,
    ) -> None:
        self._default = list(pieces)
        self._queued: list[list[str]] = []
        self.rate = rate
        self.prefill_seconds = prefill_seconds
        self.received: list[list[ChatMessage]] = []
        """The messages of every reply asked for, in order (for tests)."""
        self.sampled_with: list[GenerationSettings] = []
        """The settings of every reply asked for, in order (for tests)."""
        self.closed = False
        self.forgotten: list[str] = []
        """Conversations the flow asked to forget, in order (for tests)."""
        self.threads = (1, 1)
        """The thread counts last set (decode, prompt)."""
        self._info = ModelInfo(
            path=path,
            name=path.stem,
            n_ctx=n_ctx,
            has_chat_template=True,
            chat_format="scripted",
            parallel=parallel,
        )

    @property
    def info(self) -> ModelInfo:
        """Metadata of the pretend model."""
        return self._info

    def reopen(self, path: Path, draft_model: Path | None = None) -> None:
        """Be the model at ``path`` (named after it), open again after :meth:`close`.

        A ``draft_model`` asked for is said to write ahead (none is opened).
        """
        self._info = replace(self._info, path=path, name=path.stem, draft_model=draft_model)
        self.closed = False

    def count_tokens(self, text: str) -> int:
        """A pretend tokenizer: one token per word."""
        return len(text.split())

    def enqueue(self, pieces: Iterable[str]) -> None:
        """Use ``pieces`` for the next reply only."""
        self._queued.append(list(pieces))

    def stream_reply(
        self,
        messages: Sequence[ChatMessage],
        settings: GenerationSettings,
        stop: StopSignal,
        report: GenerationReport,
        *,
        conversation: str = "",
        prompt: str | None = None,
    ) -> Generator[str, None, None]:
        """Yield the scripted pieces at ``rate``, ending early on Stop.

        The pretend prompt processing reports its progress the way the llama.cpp engine does
        (``report.prefill_done`` of ``report.prompt_tokens``), spread over ``prefill_seconds``.
        """
        if prompt is not None:
            messages = [ChatMessage(role="user", content=prompt)]
        self.received.append(list(messages))
        self.sampled_with.append(settings)
        pieces = self._queued.pop(0) if self._queued else self._default
        if not self._prefill(messages, stop, report):
            return
        start = time.perf_counter()
        for index, piece in enumerate(pieces):
            if self.rate:
                delay = start + index / self.rate - time.perf_counter()
                # Sleeping under ~1 ms costs more than it saves; catch up in a burst instead.
                if delay > 0.001 and stop.wait(delay):
                    break
            if stop.is_set():
                break
            report.pieces += 1
            report.reply_tokens += 1
            yield piece
        if not stop.is_set() and len(pieces) >= settings.max_tokens:
            report.finish = "length"

    def _prefill(
        self, messages: Sequence[ChatMessage], stop: StopSignal, report: GenerationReport
    ) -> bool:
        """Pretend to process the prompt; False if Stop came first."""
        total = sum(len(m["content"].split()) for m in messages)
        report.prompt_tokens = total
        report.prefill_started_at = began = time.perf_counter()
        if self.prefill_seconds:
            steps = max(1, round(self.prefill_seconds / PREFILL_STEP_S))
            for step in range(1, steps + 1):
                if stop.wait(began + step * self.prefill_seconds / steps - time.perf_counter()):
                    return False
                report.prefill_done = total * step // steps
        report.prefill_done = total
        report.prefill_ended_at = time.perf_counter()
        return True

    def forget(self, conversation: str) -> None:
        """Note that ``conversation`` was forgotten (the pretend model keeps nothing)."""
        self.forgotten.append(conversation)

    def set_threads(self, n_threads: int, n_threads_batch: int) -> None:
        """Note the thread counts (the pretend model computes nothing)."""
        self.threads = (n_threads, n_threads_batch)

    def clear_cache(self) -> None:
        """Nothing to clear: the pretend model keeps no processed prompts."""

    def cache_stats(self) -> CacheStats | None:
        """None: the pretend model keeps no processed prompts."""
        return None

    def close(self) -> None:
        """Mark the pretend model freed."""
        self.closed = True


def scripted_opener(backend: ScriptedBackend) -> BackendOpener:
    """Return a :data:`~app.engine.backend.BackendOpener` that always opens ``backend``."""

    def open_model(path: Path, options: EngineOptions) -> ScriptedBackend:
        backend.reopen(path, options.draft_model)
        return backend

    return open_model
