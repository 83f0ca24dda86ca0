"""The timeline's readings as columns of one preallocated numpy array.

Each reading is written into the next free row; the oldest rows are dropped by moving the
rest down (a few kilobytes), so a redraw hands pyqtgraph views of ready arrays instead of
building a table from Python objects every time.
"""

from __future__ import annotations

import math
from typing import Final

import numpy as np
import numpy.typing as npt

from app.flow.metrics import FlowSample

AT, TOKENS, DEPTH, BOUND, FRAME, LAG, PREFILL, GPU_MB, GUESSED, KEPT = range(10)
"""The columns: time (``perf_counter`` seconds), then each :class:`FlowSample` figure."""

_COLUMNS: Final = 10

Column = npt.NDArray[np.float64]


class SampleSeries:
    """The readings of the last ``keep_seconds``, newest last.

    Args:
        keep_seconds: how much history to keep.
        capacity: rows allocated at first (doubled if readings come faster than expected).
    """

    def __init__(self, keep_seconds: float, capacity: int = 256) -> None:
        self.keep_seconds = keep_seconds
        self._rows = np.full((capacity, _COLUMNS), math.nan)
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def append(self, sample: FlowSample) -> None:
        """Keep ``sample`` and drop the readings older than ``keep_seconds`` before it."""
        self._drop_before(sample.at - self.keep_seconds)
        if self._count == len(self._rows):
            grown = np.full((2 * len(self._rows), _COLUMNS), math.nan)
            grown[: self._count] = self._rows[: self._count]
            self._rows = grown
        self._rows[self._count] = (
            sample.at,
            sample.tokens_per_s,
            sample.queue_depth,
            sample.queue_bound,
            sample.frame_cost_ms,
            sample.loop_lag_ms,
            sample.prefill,
            sample.gpu_mb,
            sample.guessed_per_s,
            sample.kept_per_s,
        )
        self._count += 1

    def _drop_before(self, oldest: float) -> None:
        n = self._count
        first = int(np.searchsorted(self._rows[:n, AT], oldest, side="left"))
        if first:
            self._rows[: n - first] = self._rows[first:n]
            self._count = n - first

    def column(self, index: int) -> Column:
        """One column of the kept readings (a view: valid until the next :meth:`append`)."""
        return self._rows[: self._count, index]

    def nearest(self, at: float) -> int | None:
        """The row of the reading nearest in time to ``at``; None when there is none."""
        n = self._count
        if not n:
            return None
        times = self._rows[:n, AT]
        i = int(np.searchsorted(times, at))
        if i == n or (i > 0 and at - times[i - 1] <= times[i] - at):
            return i - 1
        return i

    def row(self, index: int) -> FlowSample:
        """The reading in row ``index``."""
        at, tokens, depth, bound, frame, lag, prefill, gpu, guessed, kept = (
            float(v) for v in self._rows[index]
        )
        return FlowSample(
            at, tokens, int(depth), int(bound), frame, lag, prefill, gpu, guessed, kept
        )
