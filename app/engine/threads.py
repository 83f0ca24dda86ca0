"""How many threads llama.cpp computes with: counted for prompts, measured for decoding.

Prompt processing is compute-bound and gains from every physical core (1.84 times as fast on
two cores as on one, ARCHITECTURE.md "Measured facts"), so it uses them all: sibling
hyperthreads share a core's arithmetic units and are not counted. Decoding one token at a
time is bound by memory and by the barrier llama.cpp's threads meet after every graph node;
whether more threads help depends on the CPU, the model and what else runs, so the app
measures it
(:func:`calibrate`): a few seconds of decoding at each count from 1 to the physical cores, on
the worker's thread, in the app's real conditions, and keeps the fastest.

One more fact shapes this: the build uses OpenMP, which keeps one team of threads per calling
thread. llama.cpp is therefore only ever called from the worker's thread for the life of a model
(a second calling thread halves decode speed: 111 tok/s from one thread, 34 from another).
"""

from __future__ import annotations

import math
import os
import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import psutil

from app.engine.backend import Backend, ChatMessage, GenerationReport, GenerationSettings
from app.engine.stop import StopSignal


def physical_cores() -> int:
    """The physical cores this process may run on (Linux, macOS, Windows), at least one.

    psutil counts cores, not logical CPUs; a process limited to fewer CPUs (a container's
    affinity mask) gets no more threads than it has CPUs.
    """
    cores = psutil.cpu_count(logical=False) or os.cpu_count() or 1
    try:
        allowed = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # macOS and Windows have no affinity call here
        allowed = os.cpu_count() or cores
    return max(1, min(cores, allowed))


def machine_fingerprint() -> str:
    """What a decode-thread measurement depends on besides the model: the CPU and its cores."""
    model = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    model = line.partition(":")[2].strip()
                    break
    except OSError:
        pass
    return f"{model or platform.processor() or platform.machine()}; {physical_cores()} cores"


@dataclass(frozen=True)
class ThreadChoice:
    """Decode threads chosen by measurement.

    Attributes:
        n_threads: the count chosen.
        rates: tokens per second measured at each count (the best of its tries).
    """

    n_threads: int
    rates: dict[int, float] = field(default_factory=dict)


CALIBRATION = "\0floodgate-thread-calibration"
"""The conversation id the calibration decodes under (forgotten afterwards)."""

_PROMPT: list[ChatMessage] = [
    {"role": "user", "content": "Write a long story about a lighthouse keeper and a storm."}
]

TRY_SECONDS = 0.6
"""Decoding time per try: long enough for a stable rate, short enough for a few seconds total."""

TRIES = 2
"""Tries per thread count, alternating counts, so a passing disturbance does not decide."""

NEAR_BEST = 0.97
"""A count within 3 % of the fastest is as good: the fewest such threads leave the rest free."""


STREAMED_TOKENS = 64
"""A reply decoding fewer tokens than this says too little of its rate to be counted."""

STREAMED_CONTEXT = 512
"""A reply counts only if the middle of its decoding is within this many tokens of context.

Decoding slows as the context grows (attention reads every position): 177 tokens/s at 38
tokens of context, 160 at 366, 137 at 770, about 100 at 1,549 (SmolLM2-135M, two threads,
this 2-core EPYC). The calibration decodes right after a short prompt; rates compared across
counts must come from contexts alike, or a count tried late in a long conversation loses to
one measured early in a new one.
"""


def next_decode_threads(idle: dict[int, float], streaming: dict[int, float], current: int) -> int:
    """The decode threads for the next reply, from the calibration and the replies so far.

    The calibration decodes with the window idle; a reply decodes while the window shows it,
    which takes CPU time from decoding. So a count's calibration rate bounds its rate while
    the window streams, and only a count whose calibration rate beats the current count's
    streaming rate can be faster while streaming: it decodes the next reply, to find out
    (each count once, until measured again). So does a count whose calibration rate was
    within 3 % of the current count's: the calibration's few seconds cannot tell such counts
    apart (on a 2-core VM, two threads calibrated at 145.6 tokens/s against one's 149.3, and
    while the window streamed two decoded at 157 against one's 144-145, 2026-12-06), so the
    replies do. Once counts have streamed, the calibration's choice is kept unless another
    count streams more than 3 % faster.

    Args:
        idle: the calibration's tokens per second, by count.
        streaming: tokens per second of replies, by the count they were decoded with.
        current: the count in use.
    """
    here = streaming.get(current)
    if here is None or not idle:
        return current
    tied = idle.get(current, math.inf) * NEAR_BEST
    untried = [
        n
        for n, rate in idle.items()
        if n not in streaming and (rate * NEAR_BEST > here or rate >= tied)
    ]
    if untried:
        return max(untried, key=idle.__getitem__)
    fastest = max(idle.values())
    calibrated = min(n for n, rate in idle.items() if rate >= fastest * NEAR_BEST)
    base = calibrated if calibrated in streaming else current
    best = max(streaming, key=streaming.__getitem__)
    return best if streaming[best] * NEAR_BEST > streaming[base] else base


def calibrate(
    model: Backend,
    candidates: Sequence[int],
    n_threads_batch: int,
    stop: StopSignal,
    on_progress: Callable[[int, float | None], None] | None = None,
    try_seconds: float = TRY_SECONDS,
) -> ThreadChoice | None:
    """Measure decode speed at each of ``candidates`` threads; None if stopped first.

    Each try streams a greedy reply to a fixed prompt for ``try_seconds`` (its prompt is
    processed once and kept), counting pieces per second after the first. Counts are tried
    in turn, ``TRIES`` rounds, and each keeps its best rate.

    Args:
        model: the open model (called from its own thread only).
        candidates: thread counts to try, e.g. 1 … physical cores.
        n_threads_batch: prompt-processing threads, kept as they are.
        stop: ends the calibration at once (the native abort, as for a reply).
        on_progress: told each count as its try starts (rate None) and ends (its rate).
        try_seconds: decoding time per try.
    """
    rates: dict[int, float] = {}
    settings = GenerationSettings(temperature=0.0, max_tokens=4096, seed=0)
    try:
        for _ in range(TRIES):
            for n in candidates:
                if stop.is_set():
                    return None
                model.set_threads(n, n_threads_batch)
                if on_progress is not None:
                    on_progress(n, None)
                rate = _decode_rate(model, settings, stop, try_seconds)
                if rate is None:
                    return None
                rates[n] = max(rate, rates.get(n, 0.0))
                if on_progress is not None:
                    on_progress(n, rates[n])
    finally:
        model.forget(CALIBRATION)
    best = max(rates.values())
    chosen = min(n for n, rate in rates.items() if rate >= best * NEAR_BEST)
    model.set_threads(chosen, n_threads_batch)
    return ThreadChoice(chosen, rates)


def _decode_rate(
    model: Backend, settings: GenerationSettings, stop: StopSignal, seconds: float
) -> float | None:
    """Pieces per second while decoding, over about ``seconds`` (replies again if one ends)."""
    pieces = 0
    decoding = 0.0
    while decoding < seconds and not stop.is_set():
        report = GenerationReport()
        stream = model.stream_reply(_PROMPT, settings, stop, report, conversation=CALIBRATION)
        first = now = 0.0
        count = 0
        try:
            for _piece in stream:
                now = time.perf_counter()
                if count == 0:
                    first = now  # the prompt is processed by then: decoding starts here
                count += 1
                if decoding + (now - first) >= seconds:
                    break
        finally:
            stream.close()
        if count < 2:
            return None  # the model says nothing: no rate to measure
        pieces += count - 1
        decoding += now - first
    if stop.is_set() or decoding <= 0:
        return None
    return pieces / decoding
