"""The queue that builds a large message's rows a slice per event-loop turn, in order.

A message is built at once when it is small and nothing is waiting; otherwise its work joins
a queue that a :class:`~app.flow.pacing.Slicer` works through a slice per event-loop turn, and
every later call joins the queue behind it, so rows always land in the order they were asked
for.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable

from PySide6.QtCore import QObject

from app.flow.pacing import Slicer, keep_built
from app.ui.chat.reply_rows import ReplyRows

__all__ = ["BUILD_ROWS", "FEED_CHARS", "SLICE_CHARS", "BuildQueue", "Job"]

FEED_CHARS = 2000
"""A large piece of a reply is fed to its Markdown stream this many characters at a time: the
stream's cost per update is bounded only for small feeds."""

SLICE_CHARS = 16000
"""At most this much text is fed per event-loop turn while building (whatever the clock says)."""

BUILD_ROWS = 24
"""At most this many rows are made per event-loop turn while building."""

Job = Callable[[float], bool]
"""A piece of building: works until the deadline it is given; returns True when done."""


def _once(action: Callable[[], None]) -> Job:
    def step(_deadline: float) -> bool:
        action()
        return True

    return step


class BuildQueue:
    """Jobs that build rows, worked through a slice per event-loop turn, in the order asked.

    Args:
        parent: the object the slicer lives with (the view).
    """

    def __init__(self, parent: QObject) -> None:
        self._jobs: deque[Job] = deque()
        self._builder = Slicer(self._build_step, parent=parent)
        self._slice_chars = 0
        self.slice_rows = 0
        """Rows made in this slice so far."""
        self._in_job = False
        self.slices = 0
        """Slices of building done (tests and the bench count the work per slice by it)."""

    @property
    def building(self) -> bool:
        """Whether rows asked for are still being built (a slice per event-loop turn)."""
        return bool(self._jobs)

    def finish(self) -> None:
        """Build everything still waiting, now."""
        while self._jobs:
            self._build_step(math.inf)
        self._builder.cancel()

    def clear(self) -> None:
        """Drop everything still waiting."""
        self._jobs.clear()
        self._builder.cancel()

    def later(self, job: Job) -> None:
        """Do ``job`` after everything already waiting."""
        self._jobs.append(job)
        if not self._builder.running:
            self._builder.schedule()

    def now_or_later(self, action: Callable[[], None]) -> None:
        """Do ``action`` now if nothing is waiting, else after what is."""
        # A job's own calls (a note after a reply) are its work: done in it, not queued.
        if self._jobs and not self._in_job:
            self.later(_once(action))
        else:
            action()

    def _build_step(self, deadline: float) -> bool:
        try:
            return self._build_slice(deadline)
        finally:
            # The rows made so far stay: out of the collector's scans, whose pauses grew with
            # every slice (to 60 ms) while a 1 MB reply was being built.
            keep_built()

    def _build_slice(self, deadline: float) -> bool:
        self.slices += 1
        # Finishing at once (an infinite deadline) has no limit per slice either.
        self._slice_chars = 0 if math.isfinite(deadline) else -(10**18)
        self.slice_rows = 0
        while self._jobs:
            self._in_job = True
            try:
                done = self._jobs[0](deadline)
            finally:
                self._in_job = False
            if not done:
                return False
            self._jobs.popleft()
            if self._jobs and time.perf_counter() > deadline:
                return False
        return True

    def _spent(self, deadline: float) -> bool:
        """Whether this slice has done some work and its time is up.

        Checked before each piece fed and each drain, not only after: a slice whose rows
        took its time and then fed one more piece (5 ms for 2,000 characters of Markdown) and
        made a row ran to twice its budget, 15-18 ms, every slice of a 1 MB reply.
        """
        worked = self._slice_chars > 0 or self.slice_rows > 0
        return worked and time.perf_counter() > deadline

    def feed_job(self, reply: ReplyRows, text: str, *, then_open: bool = True) -> Job:
        """Feeds ``text`` to a reply in small pieces and makes their rows, a slice at a time.

        ``then_open``: the reply goes on streaming, so the last piece shows its open blocks
        (a whole reply, which finishes next, does not).
        """
        position = 0
        size = FEED_CHARS

        def step(deadline: float) -> bool:
            nonlocal position, size
            packing = reply.pack
            reply.pack = True
            try:
                while True:
                    if reply.pending:
                        if not self._drain(reply, deadline):
                            return False
                    elif position >= len(text):
                        return True
                    elif (
                        self._slice_chars > 0 and self._slice_chars + size > SLICE_CHARS
                    ) or self._spent(deadline):
                        return False
                    else:
                        piece = text[position : position + size]
                        position += len(piece)
                        self._slice_chars += len(piece)
                        last = position >= len(text)
                        reply.append(piece, bulk=True, show_open=then_open and last)
            finally:
                reply.pack = packing

        return step

    def finish_job(self, reply: ReplyRows, *, timed: bool) -> Job:
        """Ends a reply, making the rows of its last blocks a slice at a time."""
        started = False

        def step(deadline: float) -> bool:
            nonlocal started
            if not started:
                started = True
                reply.finish(timed=timed, bulk=True)
            return self._drain(reply, deadline)

        return step

    def _drain(self, reply: ReplyRows, deadline: float) -> bool:
        """Makes a reply's waiting rows within the slice; returns whether none are left."""
        if (self.slice_rows >= BUILD_ROWS and math.isfinite(deadline)) or self._spent(deadline):
            return False
        # What is left of the slice's rows: a job drains more than once per slice (feed a
        # piece, make its rows, feed the next).
        most = BUILD_ROWS - self.slice_rows if math.isfinite(deadline) else 10**9
        self.slice_rows += reply.drain(deadline, most)
        return not reply.pending
