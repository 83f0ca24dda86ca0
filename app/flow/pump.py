"""The frame pump: drains the queue once per frame and applies it as one update."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable

from app.flow.metrics import FlowMetrics
from app.flow.queue import PieceQueue
from app.trace import TRACE


class FramePump:
    """Moves reply text from the queue to the view at the screen's pace, whatever the token rate.

    It shows what the queue holds at most once a frame, as one update: a model producing 5,000
    pieces a second costs the window 60 updates a second. It wakes only when there is
    something to show: a piece that arrives more than a frame after the last update is shown
    at once (not at the next tick of a clock); one that arrives sooner waits for its frame;
    an empty queue wakes nothing (the worker's next piece does, with one call to the loop),
    except, while the prompt is processed and nothing has been shown, every
    ``idle_interval`` for its progress. On a machine whose cores all decode, every wake-up of
    the UI thread takes time from the model.

    Args:
        frame_interval: seconds per frame (1 / the screen's refresh rate).
        apply: shows text in the view; runs on the event loop's thread.
        metrics: where frame cost, loop lag and token-to-screen times are recorded.
        idle_interval: seconds between wake-ups while nothing arrives before the first piece.
    """

    def __init__(
        self,
        frame_interval: float,
        apply: Callable[[str], None],
        metrics: FlowMetrics,
        idle_interval: float = 0.25,
    ) -> None:
        self.frame_interval = frame_interval
        self.idle_interval = idle_interval
        self._apply = apply
        self._metrics = metrics

    async def run(self, queue: PieceQueue, on_frame: Callable[[], None] | None = None) -> None:
        """Pump until the producer has ended and everything it produced is shown.

        Args:
            queue: the reply's queue.
            on_frame: called after each update (and each idle wake-up): figures, progress.
        """
        metrics = self._metrics
        reply = metrics.reply
        due = -math.inf  # when the next update may be shown: a frame after the last one
        while True:
            # First a piece, then its frame: a piece that comes a frame or more after the last
            # update (a reply at up to the screen's rate) costs one wake-up, its arrival; a
            # clock that woke for the frame first would find the queue empty as often as not.
            waiting_since: float | None = None
            if queue.depth == 0 and not queue.finished:
                waiting_since = time.perf_counter()
                # Before the first piece, the prompt's progress still needs a word now and then.
                idle = self.idle_interval if reply.first_shown_at is None else None
                await queue.wait_async(idle)
            now = time.perf_counter()
            if now < due:
                # An update was shown less than a frame ago: while a reply streams, more
                # pieces come meanwhile, and the next frame shows them all at once.
                await asyncio.sleep(due - now)
                metrics.loop_lag_ms.add(max(0.0, time.perf_counter() - due) * 1000)
            elif waiting_since is not None:
                # How late the loop ran this: after a piece arrived, since it was produced.
                arrived = queue.first_produced_at()
                if arrived is not None and arrived >= waiting_since:
                    metrics.loop_lag_ms.add(max(0.0, now - arrived) * 1000)
            if self._frame(queue):
                due = time.perf_counter() + self.frame_interval
            metrics.queue_max = queue.max_depth
            metrics.backpressure_waits = queue.backpressure_waits
            metrics.backpressure_ms = queue.backpressure_seconds * 1000
            if on_frame is not None:
                on_frame()
            if queue.finished:
                return

    def _frame(self, queue: PieceQueue) -> bool:
        """Drain the queue and show what it held as one update; whether there was anything."""
        metrics, reply = self._metrics, self._metrics.reply
        tracing = TRACE.recording  # one attribute read per frame while not recording
        if tracing:
            with TRACE.span("drain"):
                pieces = queue.drain()
        else:
            pieces = queue.drain()
        metrics.queue_depth = len(pieces)
        if not pieces:
            return False
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
        metrics.token_to_screen_ms.extend((shown - p.produced_at) * 1000 for p in pieces)
        if reply.first_shown_at is None:
            reply.first_shown_at = shown
            reply.first_produced_at = pieces[0].produced_at
        reply.last_shown_at = shown
        reply.last_produced_at = pieces[-1].produced_at
        reply.pieces_shown += len(pieces)
        reply.frames += 1
        return True
