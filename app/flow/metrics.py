"""Figures the app measures about its own flow, for the diagnostics panel and the bench."""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field


class Distribution:
    """The recent samples of one figure (milliseconds), summarised as percentiles.

    Args:
        keep: how many recent samples to keep; older ones fall off so memory stays flat.
    """

    def __init__(self, keep: int = 20_000) -> None:
        self._samples: deque[float] = deque(maxlen=keep)
        self.count = 0

    def add(self, value: float) -> None:
        """Record one sample."""
        self._samples.append(value)
        self.count += 1

    def extend(self, values: Iterable[float]) -> None:
        """Record several samples."""
        for value in values:
            self.add(value)

    @property
    def last(self) -> float | None:
        """The newest sample, if any."""
        return self._samples[-1] if self._samples else None

    def percentile(self, q: float) -> float:
        """The ``q``-th percentile (nearest rank) of the kept samples; NaN when empty."""
        if not self._samples:
            return math.nan
        return _nearest_rank(sorted(self._samples), q)

    def summary(self) -> dict[str, float]:
        """``{"p50", "p95", "p99", "max", "n"}`` of the kept samples."""
        if not self._samples:
            return {"p50": math.nan, "p95": math.nan, "p99": math.nan, "max": math.nan, "n": 0}
        ordered = sorted(self._samples)
        return {
            "p50": _nearest_rank(ordered, 50),
            "p95": _nearest_rank(ordered, 95),
            "p99": _nearest_rank(ordered, 99),
            "max": ordered[-1],
            "n": len(ordered),
        }


def _nearest_rank(ordered: list[float], q: float) -> float:
    return ordered[max(1, math.ceil(q / 100 * len(ordered))) - 1]


@dataclass
class ReplyFigures:
    """Live figures of the reply being streamed (or the last one)."""

    sent_at: float = 0.0
    first_shown_at: float | None = None
    last_shown_at: float | None = None
    first_produced_at: float | None = None
    last_produced_at: float | None = None
    pieces_shown: int = 0
    frames: int = 0

    @property
    def time_to_first_piece_ms(self) -> float | None:
        """From Send to the first piece on screen."""
        if self.first_shown_at is None:
            return None
        return (self.first_shown_at - self.sent_at) * 1000

    @property
    def tokens_per_s(self) -> float | None:
        """Pieces produced per second, from the first piece to the latest."""
        return _rate(self.pieces_shown, self.first_produced_at, self.last_produced_at)

    @property
    def shown_per_s(self) -> float | None:
        """Pieces shown per second, from the first on screen to the latest (what the user sees)."""
        return _rate(self.pieces_shown, self.first_shown_at, self.last_shown_at)


def _rate(count: int, first: float | None, last: float | None) -> float | None:
    if first is None or last is None or count < 2 or last <= first:
        return None
    return (count - 1) / (last - first)


@dataclass
class FlowMetrics:
    """Everything the diagnostics panel shows; distributions cover recent replies."""

    frame_cost_ms: Distribution = field(default_factory=Distribution)
    token_to_screen_ms: Distribution = field(default_factory=Distribution)
    loop_lag_ms: Distribution = field(default_factory=Distribution)
    """How late each frame tick woke (the bench adds a finer 5 ms heartbeat of its own)."""
    stop_latency_ms: Distribution = field(default_factory=Distribution)
    reply: ReplyFigures = field(default_factory=ReplyFigures)
    queue_depth: int = 0
    queue_bound: int = 0
    queue_max: int = 0
    backpressure_waits: int = 0
    backpressure_ms: float = 0.0


async def watch_loop_lag(into: Distribution, interval: float = 0.005) -> None:
    """Record, until cancelled, how late a heartbeat of ``interval`` seconds wakes up.

    Lateness is the time the event loop was busy with something else: what a user feels as
    a sluggish window.
    """
    while True:
        began = time.perf_counter()
        await asyncio.sleep(interval)
        into.add(max(0.0, (time.perf_counter() - began - interval) * 1000))
