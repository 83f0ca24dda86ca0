"""The frame pump: drains the queue once per frame and applies it as one update."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable

from PySide6.QtCore import QObject, Qt, QTimer, Signal, Slot

from app.flow.metrics import FlowMetrics
from app.flow.piece_queue import PieceQueue
from app.trace import TRACE


class _Arrivals(QObject):
    """A queued signal: how the worker's thread wakes the UI thread at a piece's arrival.

    Qt posts one event for it, handled straight by the pump; asyncio's way in from another
    thread under qasync (``call_soon_threadsafe``, then a zero timer per callback) cost the
    UI thread three times as much per wake-up (0.36 ms against 0.10 ms on a 2-core Xeon).
    """

    arrived = Signal()


EARLY = 1 / 8
"""How early, as a share of a frame, a piece may come and still be shown at once as its
frame's (:class:`FramePump`): updates come at least ``1 - EARLY`` of a frame apart."""


class FramePump(QObject):
    """Moves reply text from the queue to the view at the screen's pace, whatever the token rate.

    It shows what the queue holds at most once a frame, as one update: a model producing 5,000
    pieces a second costs the window 60 updates a second. It wakes only when there is
    something to show: a piece that arrives more than a frame after the last update is shown
    at once (not at the next tick of a clock); while pieces come faster than frames, a frame
    is shown when the first piece produced once it is due arrives (the clock shows it only if
    none comes shortly after); an empty queue wakes nothing (the worker's next piece does, with
    one queued signal), except, while the prompt is processed and nothing has been shown,
    every ``idle_interval`` for its progress. An update costs one wake-up: a piece's arrival.
    On a machine whose cores all decode, every wake-up of the UI thread takes time from the
    model.

    It is driven by Qt (a queued signal, a precise timer), not by asyncio's own waits:
    :meth:`run` only awaits the end.

    Args:
        frame_interval: seconds per frame (1 / the screen's refresh rate).
        apply: shows text in the view; runs on the event loop's thread.
        metrics: where frame cost, loop lag and token-to-screen times are recorded.
        idle_interval: seconds between wake-ups while nothing arrives before the first piece.
        on_clock: while pieces come faster than frames, show each frame by the clock at the
            moment it is due (the pump's design until 2026-12-04, kept as the bench's
            baseline), not at the first piece to arrive once it is due.
    """

    def __init__(
        self,
        frame_interval: float,
        apply: Callable[[str], None],
        metrics: FlowMetrics,
        idle_interval: float = 0.25,
        *,
        on_clock: bool = False,
    ) -> None:
        super().__init__()
        self._frame_interval = frame_interval
        self._slack = frame_interval * EARLY
        """A piece within an eighth of a frame of its frame is shown at once: waiting two
        milliseconds for the clock would cost a second wake-up."""
        self.on_clock = on_clock
        self.idle_interval = idle_interval
        self._apply = apply
        self._metrics = metrics
        self._gap = math.inf
        """Seconds between pieces of late (a moving average over the frames shown)."""
        self._due = -math.inf
        """When the next update may be shown: a frame after the last one."""
        self._clock_for: float | None = None
        """What the clock was set for (a frame's latest moment, or an idle tick's)."""
        self._clock_frame = False
        """The clock shows a frame (else it is an idle tick, for the prompt's progress)."""
        self._waiting = False
        """A piece's arrival (or the end, or Stop) is to wake the pump."""
        self._queue: PieceQueue | None = None
        self._on_frame: Callable[[], None] | None = None
        self._done: asyncio.Future[None] | None = None
        self._clock = QTimer(self)
        self._clock.setSingleShot(True)
        self._clock.setTimerType(Qt.TimerType.PreciseTimer)
        self._clock.timeout.connect(self._on_clock)
        self._arrivals = _Arrivals(self)
        self._arrivals.arrived.connect(self._on_arrival, Qt.ConnectionType.QueuedConnection)
        self._wake = self._arrivals.arrived.emit

    async def run(self, queue: PieceQueue, on_frame: Callable[[], None] | None = None) -> None:
        """Pump until the producer has ended and everything it produced is shown.

        Args:
            queue: the reply's queue.
            on_frame: called after each update (and each idle wake-up): figures, progress.
        """
        self._queue, self._on_frame = queue, on_frame
        self._gap, self._due = math.inf, -math.inf
        self._done = asyncio.get_running_loop().create_future()
        try:
            self._step()
            await self._done
        finally:
            self._clock.stop()
            queue.forget_wake(self._wake)
            self._done = None

    # -- what wakes it ------------------------------------------------------------------------

    @Slot()
    def _on_clock(self) -> None:
        if self._done is None or self._done.done():
            return
        self._metrics.reply.wakes += 1
        at, self._clock_for = self._clock_for, None
        assert self._queue is not None
        # A piece's arrival wakes nothing from now on (one already on its way is ignored).
        self._waiting = False
        self._queue.forget_wake(self._wake)
        if self._clock_frame and at is not None:
            self._metrics.loop_lag_ms.add(max(0.0, time.perf_counter() - at) * 1000)
            self._step(clock=True)
            return
        # An idle tick, before the first piece: the figures and the prompt's progress.
        self._show(self._queue)

    @Slot()
    def _on_arrival(self) -> None:
        if self._done is None or self._done.done() or not self._waiting:
            return
        assert self._queue is not None
        self._metrics.reply.wakes += 1
        self._waiting = False
        self._clock.stop()  # an idle tick, or the clock of a frame no piece came for
        self._clock_for = None
        now = time.perf_counter()
        woke_at = self._queue.woke_reader_at
        if now >= self._due - self._slack and woke_at is not None:
            # How late the loop ran this: since the worker woke it (with a piece, the end or
            # Stop). A wake before the frame is due records nothing: the clock then shows it.
            self._metrics.loop_lag_ms.add(max(0.0, now - woke_at) * 1000)
        self._step()

    @property
    def frame_interval(self) -> float:
        """Seconds per frame (1 / the screen's refresh rate)."""
        return self._frame_interval

    @frame_interval.setter
    def frame_interval(self, seconds: float) -> None:
        self._frame_interval = seconds
        self._slack = seconds * EARLY

    def _set_clock(self, at: float, *, frame: bool = True) -> None:
        # Whole milliseconds, rounded down: a frame shown a fraction of a millisecond early
        # costs nothing, one shown late adds to every piece's time to the screen.
        self._clock_for, self._clock_frame = at, frame
        self._clock.start(max(0, int((at - time.perf_counter()) * 1000)))

    # -- what it does when woken ------------------------------------------------------------

    def _step(self, *, clock: bool = False) -> None:
        """Show what waits if its frame is due; else set what wakes the pump next."""
        queue = self._queue
        assert queue is not None
        now = time.perf_counter()
        if not clock and now < self._due and self._gap < self._frame_interval - self._slack:
            # Pieces come faster than frames. The frame is shown when the first piece produced
            # once it is due arrives, with every piece that came before it: that piece waits
            # for nothing and the others for less than a frame. Shown by a clock at the
            # moment it is due, the piece just after it would wait a whole frame (at 60 Hz a
            # piece's wait then spreads evenly up to 16.7 ms); and frames come a little less
            # often than the screen's (pieces 11 ms apart: every second one, 45 a second).
            # The arrival is the one wake-up; the clock shows what waits only if no piece
            # comes within about a gap and a half of the frame.
            if self.on_clock:
                self._set_clock(self._due)
                return
            # A piece up to a quarter of a gap early (an eighth of a frame at most) counts
            # as due: pieces 8 ms apart show two to a frame, and a fast stream, whose first
            # piece once due comes within a gap of the moment, still gets one update a frame.
            not_before = self._due - min(self._slack, self._gap / 4)
            if queue.wake_on_arrival(self._wake, not_before=not_before):
                self._waiting = True
                self._set_clock(self._due + min(1.5 * self._gap, self._frame_interval))
                return
        if queue.depth == 0 and not queue.finished:
            # Slower than frames (or none came by the frame): the piece's arrival is the
            # one wake-up. Before the first piece, the prompt's progress needs a word now
            # and then.
            self._waiting = True
            if queue.wake_on_arrival(self._wake):
                if self._metrics.reply.first_shown_at is None:
                    self._set_clock(now + self.idle_interval, frame=False)
                return
            self._waiting = False  # it came meanwhile
        if not clock and now < self._due - self._slack:
            # A piece came less than a frame after the last update: it waits for its frame.
            self._set_clock(self._due)
            return
        self._show(queue)

    def _show(self, queue: PieceQueue) -> None:
        metrics = self._metrics
        shown = self._frame(queue)
        if shown is not None:
            began, newest = shown
            # The next frame is due a frame after this one's moment: the newest piece's, if
            # the frame showed it as it arrived, so that the time the UI thread took to wake
            # and to apply it is not added to the next frame's wait (and pieces 8 ms apart
            # still show two to a frame); else when this update began.
            moment = newest if began - newest < self._slack else began
            self._due = moment + self._frame_interval
        metrics.queue_max = queue.max_depth
        metrics.backpressure_waits = queue.backpressure_waits
        metrics.backpressure_ms = queue.backpressure_seconds * 1000
        if self._on_frame is not None:
            self._on_frame()
        if queue.finished:
            assert self._done is not None
            if not self._done.done():
                self._done.set_result(None)
            return
        self._step()

    def _frame(self, queue: PieceQueue) -> tuple[float, float] | None:
        """Drain the queue and show what it held as one update.

        Returns:
            When the update began and when its newest piece was produced
            (``time.perf_counter()``); None if there was nothing to show.
        """
        metrics, reply = self._metrics, self._metrics.reply
        tracing = TRACE.recording  # one attribute read per frame while not recording
        if tracing:
            with TRACE.span("drain"):
                pieces = queue.drain()
        else:
            pieces = queue.drain()
        metrics.queue_depth = len(pieces)
        if not pieces:
            return None
        if tracing:
            metrics.trace_frame(len(pieces), metrics.loop_lag_ms.last or 0.0)
        began = time.perf_counter()
        text = "".join(piece.text for piece in pieces)
        if tracing:
            with TRACE.span("apply", pieces=len(pieces), chars=len(text)):
                self._apply(text)
        else:
            self._apply(text)
        shown = time.perf_counter()
        metrics.frame_cost_ms.add((shown - began) * 1000)
        metrics.token_to_screen_ms.extend([(shown - p.produced_at) * 1000 for p in pieces])
        if metrics.arrivals is not None:
            metrics.arrivals.extend(p.produced_at for p in pieces)
        if reply.first_shown_at is None:
            reply.first_shown_at = shown
            reply.first_produced_at = pieces[0].produced_at
        if reply.last_produced_at is not None:
            # How far apart the pieces came, of late: it decides what wakes the next frame.
            gap = (pieces[-1].produced_at - reply.last_produced_at) / len(pieces)
            self._gap = gap if math.isinf(self._gap) else 0.7 * self._gap + 0.3 * gap
        reply.last_shown_at = shown
        reply.last_produced_at = pieces[-1].produced_at
        reply.pieces_shown += len(pieces)
        reply.frames += 1
        return began, pieces[-1].produced_at
