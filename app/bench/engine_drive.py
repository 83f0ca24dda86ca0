"""Driving the llama.cpp engine directly, as the worker does, without the app around it.

The prompt-processing figures (time to first token, prefill rates) are the engine's: a
``LlamaBackend.stream_reply`` run on an :class:`EngineThread`, with the main thread free to
watch its report and press Stop in the middle of prompt processing. As in the app, one thread
opens, drives and closes the engines: llama.cpp's OpenMP build keeps a team of threads per
calling thread, and a second caller slows decoding (ARCHITECTURE.md, "Measured facts"). The
thread ends with its section, and its team with it.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TypeVar

from app.engine import ChatMessage, EngineOptions, GenerationReport, GenerationSettings, StopSignal
from app.engine.llama import LlamaBackend, open_llama
from app.trace import TRACE

T = TypeVar("T")

_VOCABULARY = (
    "river stone garden letter window harbour lantern mountain valley market story kitchen "
    "season forest engine signal bridge library candle orchard village winter meadow ladder "
    "paper copper silver thunder quiet early gentle patient careful distant golden narrow "
    "walks reads writes carries builds opens follows remembers answers gathers watches"
)
_WORDS = _VOCABULARY.split()


def filler(seed: int, words: int) -> str:
    """Deterministic English-like prose of about ``words`` words (varied, not repetitive)."""
    rng = random.Random(seed)
    sentences = []
    count = 0
    while count < words:
        n = rng.randint(8, 16)
        sentence = " ".join(rng.choice(_WORDS) for _ in range(n))
        sentences.append(sentence.capitalize() + ".")
        count += n
    return " ".join(sentences)


def history(
    count_tokens: Callable[[str], int], seed: int, tokens: int, question: str
) -> list[ChatMessage]:
    """A conversation of several turns with about ``tokens`` tokens, ending in ``question``."""
    messages: list[ChatMessage] = []
    total = 0
    turn = 0
    while total < tokens:
        text = filler(seed * 1000 + turn, 60)
        if turn % 2 == 0:
            messages.append({"role": "user", "content": text})
        else:
            messages.append({"role": "assistant", "content": text})
        total += count_tokens(text) + 8  # what the template adds, about
        turn += 1
    if messages[-1]["role"] == "user":
        messages.append({"role": "assistant", "content": "I see."})
    messages.append({"role": "user", "content": question})
    return messages


@dataclass
class Reply:
    """One reply, driven on a thread: its text, its time to first token, its report."""

    text: str
    ttft_ms: float
    report: GenerationReport = field(default_factory=GenerationReport)
    stopped_at: int = 0
    stop_set_at: float | None = None
    """``time.perf_counter()`` when Stop was pressed (None: it was not)."""

    @property
    def prefill_tok_s(self) -> float:
        """Tokens processed (not taken from a cache) per second of prompt processing."""
        r = self.report
        if r.prefill_started_at is None or r.prefill_ended_at is None:
            return math.nan
        seconds = r.prefill_ended_at - r.prefill_started_at
        processed = r.prompt_tokens - r.cached_tokens
        return processed / seconds if seconds > 0 and processed > 0 else math.nan


class EngineThread:
    """The one thread that opens, drives and closes the engines of a section, as the worker.

    Use as a context manager: the thread ends (and llama.cpp's threads with it) on leaving.
    """

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bench engine")
        self._pool.submit(TRACE.name_thread, "bench engine").result()

    def __enter__(self) -> EngineThread:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._pool.shutdown(wait=True)

    def call(self, action: Callable[[], T]) -> T:
        """Run ``action`` on the thread and wait for its result."""
        return self._pool.submit(action).result()

    def open(self, model: Path, options: EngineOptions) -> LlamaBackend:
        """Open ``model`` on the thread."""
        return self.call(lambda: open_llama(model, options))

    def close(self, backend: LlamaBackend) -> None:
        """Free ``backend`` on the thread."""
        self.call(backend.close)

    def reply(
        self,
        backend: LlamaBackend,
        messages: list[ChatMessage],
        settings: GenerationSettings,
        conversation: str,
        stop_when: Callable[[GenerationReport, float], bool] | None = None,
    ) -> Reply:
        """Run ``stream_reply`` on the thread; Stop once ``stop_when`` holds, if given.

        ``stop_when`` is given the report and the seconds since the reply was asked for. A
        stopped reply's ``stopped_at`` is the prompt tokens the engine kept: a Stop inside a
        chunk of prompt processing keeps the chunks before it.
        """
        stop = StopSignal()
        report = GenerationReport()
        pieces: list[str] = []
        first: list[float] = []

        def work() -> None:
            for piece in backend.stream_reply(
                messages, settings, stop, report, conversation=conversation
            ):
                if not first:
                    first.append(time.perf_counter())
                pieces.append(piece)

        began = time.perf_counter()
        done = self._pool.submit(work)
        stopped_at = 0
        if stop_when is not None:
            while not done.done() and not stop_when(report, time.perf_counter() - began):
                time.sleep(0.001)
            stop.set()
        done.result()
        if stop_when is not None:
            stopped_at = report.prefill_done
        ttft = (first[0] - began) * 1000 if first else math.nan
        return Reply("".join(pieces), ttft, report, stopped_at, stop.set_at)
