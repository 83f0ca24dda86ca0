"""Driving the llama.cpp engine directly, as the worker does, without the app around it.

The prompt-processing figures (time to first token, prefill rates) are the engine's: a
``LlamaBackend.stream_reply`` run on a thread of its own, with the main thread free to watch
its report and press Stop in the middle of prompt processing.
"""

from __future__ import annotations

import math
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from app.engine import ChatMessage, GenerationReport, GenerationSettings, StopSignal
from app.engine.llama import LlamaBackend
from app.trace import TRACE

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

    @property
    def prefill_tok_s(self) -> float:
        """Tokens processed (not taken from a cache) per second of prompt processing."""
        r = self.report
        if r.prefill_started_at is None or r.prefill_ended_at is None:
            return math.nan
        seconds = r.prefill_ended_at - r.prefill_started_at
        processed = r.prompt_tokens - r.cached_tokens
        return processed / seconds if seconds > 0 and processed > 0 else math.nan


def reply_on_thread(
    backend: LlamaBackend,
    messages: list[ChatMessage],
    settings: GenerationSettings,
    conversation: str,
    stop_when: Callable[[GenerationReport], bool] | None = None,
) -> Reply:
    """Run ``stream_reply`` on a thread; Stop once ``stop_when(report)`` holds, if given."""
    stop = StopSignal()
    report = GenerationReport()
    pieces: list[str] = []
    first: list[float] = []

    def work() -> None:
        TRACE.name_thread("bench engine")  # the engine's spans, when the run is recorded
        for piece in backend.stream_reply(
            messages, settings, stop, report, conversation=conversation
        ):
            if not first:
                first.append(time.perf_counter())
            pieces.append(piece)

    began = time.perf_counter()
    thread = threading.Thread(target=work, name="bench engine")
    thread.start()
    stopped_at = 0
    if stop_when is not None:
        while thread.is_alive() and not stop_when(report):
            time.sleep(0.001)
        stopped_at = report.prefill_done
        stop.set()
    thread.join()
    ttft = (first[0] - began) * 1000 if first else math.nan
    return Reply("".join(pieces), ttft, report, stopped_at)
