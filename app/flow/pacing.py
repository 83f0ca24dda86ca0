"""Pacing work against the frame budget: a throttle, and a slicer that spreads work over frames.

Every place that must not do something on every frame (saving a streaming reply, refreshing
figures) asks a :class:`Throttle`; every place that has more work than fits in one frame
(building a long conversation, measuring rows after a resize) hands it to a :class:`Slicer`.
One frame at 60 Hz is 16.7 ms; a slice of about half of it leaves room for painting and input.
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable

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
