"""Pacing work against the frame budget: a throttle, a pace by cost, and a slicer over frames.

Every place that must not do something on every frame (saving a streaming reply, refreshing
figures) asks a :class:`Throttle`; a job whose cost depends on the machine (the timeline's
redraw) asks a :class:`SharePace`; every place that has more work than fits in one frame
(building a long conversation, measuring rows after a resize) hands it to a :class:`Slicer`.
One frame at 60 Hz is 16.7 ms; a slice of about half of it leaves room for painting and input.
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable
from typing import Final

from PySide6.QtCore import QObject, QTimer

HALF_A_FRAME_S = 0.008
"""Work per slice: half a 60 Hz frame, so the other half paints and answers the user."""


class Throttle:
    """Lets an action through at most once every ``every`` seconds.

    Args:
        every: the shortest time between two actions, in seconds.
        clock: the time source (tests pass their own).
    """

    def __init__(self, every: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.every = every
        self._clock = clock
        self._last = -math.inf

    def ready(self) -> bool:
        """Whether the action may run now; if so, the next one waits ``every`` seconds."""
        now = self._clock()
        if now - self._last < self.every:
            return False
        self._last = now
        return True

    def restart(self) -> None:
        """Count from now, as if the action had just run."""
        self._last = self._clock()


class SharePace:
    """Paces a job that repeats so that it takes at most ``share`` of its thread's time.

    The caller says what each run cost (its thread's CPU seconds); the pace follows a moving
    average of that and makes the next run due ``cost / share`` seconds after the last one,
    at most ``most`` seconds. So a job that is cheap on this machine runs whenever asked, and
    one that is dear runs less often rather than taking more of the thread (on a machine whose
    cores all decode, every millisecond of the UI thread is taken from the model).

    Args:
        share: the most of its thread's time the job may take (0.005: 5 ms a second).
        most: the longest time between runs, whatever they cost.
        step: how far apart the caller asks (a timer's interval): the run is due at the ask
            nearest its time, not at the first one after it (and a timer that fires a little
            early is not taken for one that came too soon).
    """

    SMOOTHING: Final = 0.25
    """How much of each run's cost the moving average takes in (one dear run moves it a
    little; a machine that stays busy moves it within a few runs)."""

    def __init__(self, share: float, most: float, step: float = 0.0) -> None:
        if not 0 < share <= 1 or most <= 0 or step < 0:
            raise ValueError(f"no pace with share {share}, most {most} s, step {step} s")
        self.share = share
        self.most = most
        self.step = step
        self.cost: float | None = None
        """The moving average of a run's cost, in seconds (None before the first)."""
        self._last = -math.inf

    @property
    def gap(self) -> float:
        """Seconds from one run to the next, at the cost measured so far."""
        if self.cost is None:
            return 0.0
        return min(self.most, self.cost / self.share)

    def due(self, now: float) -> bool:
        """Whether the job may run at ``now`` (seconds, on the clock the caller gives).

        A time before the last run (another clock) is due: there is nothing to count from.
        """
        since = now - self._last
        return since < 0 or since >= self.gap - self.step / 2

    def ran(self, now: float, cost: float | None = None) -> None:
        """The job ran at ``now``; ``cost``: what the run before it cost, when known."""
        self._last = now
        if cost is not None:
            previous = self.cost
            self.cost = cost if previous is None else previous + self.SMOOTHING * (cost - previous)


Step = Callable[[float], bool]
"""Does work until ``time.perf_counter()`` passes the deadline it is given (or the work is
done); returns True when nothing is left."""


class Slicer(QObject):
    """Runs a :data:`Step` a slice at a time, one slice per event-loop turn, until it is done.

    A QTimer with a zero interval fires once the loop has handled what is pending (paint
    events, input), so the window stays live between slices, under a qasync loop or a bare Qt
    one alike.

    Args:
        step: the work; called with the deadline of each slice.
        budget: seconds per slice.
        parent: the Qt owner (the slicer stops when it is deleted).
    """

    def __init__(
        self, step: Step, budget: float = HALF_A_FRAME_S, parent: QObject | None = None
    ) -> None:
        super().__init__(parent)
        self._step = step
        self.budget = budget
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(0)
        self._timer.timeout.connect(self._slice)

    @property
    def running(self) -> bool:
        """Work is left for later slices."""
        return self._timer.isActive()

    def start(self) -> None:
        """Do a first slice now; the rest, if any, in later turns of the loop."""
        self._timer.stop()
        self._slice()

    def schedule(self) -> None:
        """Do the work in slices from the next turn of the loop on."""
        self._timer.start()

    def finish(self) -> None:
        """Do everything that is left, now."""
        self._timer.stop()
        self._step(math.inf)

    def cancel(self) -> None:
        """Drop the work that is left."""
        self._timer.stop()

    def _slice(self) -> None:
        if not self._step(time.perf_counter() + self.budget):
            self._timer.start()


def keep_built() -> None:
    """What is alive now lives on (rows just built): the cyclic collector stops scanning it.

    A full collection walks every tracked object, so its pause grows with the heap: with a
    1 MB reply's rows built it took 30-60 ms, several times while they were being built.
    Frozen objects are still freed when their last reference goes (rows hold no reference
    cycles: see ``Row.dispose``). The young generations are collected first (about a
    millisecond), so that cyclic garbage made since the last slice is not frozen with them.
    """
    gc.collect(1)
    gc.freeze()
