"""The frame pump: drains the queue once per frame and applies it as one update."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from app.flow.metrics import FlowMetrics
from app.flow.queue import PieceQueue
from app.trace import TRACE


class FramePump:
    """Moves reply text from the queue to the view at the screen's pace, whatever the token rate.

    Each frame it takes every piece waiting and hands their joined text to ``apply`` in one
    call, so a model producing 5,000 pieces a second costs the window 60 updates a second, and
    a slow one costs an update only when there is something new.

    Args:
        frame_interval: seconds per frame (1 / the screen's refresh rate).
        apply: shows text in the view; runs on the event loop's thread.
        metrics: where frame cost and token-to-screen times are recorded.
    """

    def __init__(
        self,
        frame_interval: float,
        apply: Callable[[str], None],
        metrics: FlowMetrics,
    ) -> None:
        self.frame_interval = frame_interval
        self._apply = apply
        self._metrics = metrics

    async def run(self, queue: PieceQueue, on_frame: Callable[[], None] | None = None) -> None:
        """Pump until the producer has ended and everything it produced is shown.

        Args:
            queue: the reply's queue.
            on_frame: called once a frame after the update (figures, prompt progress).
        """
        metrics = self._metrics
        reply = metrics.reply
        next_frame = time.perf_counter()
        while True:
            next_frame += self.frame_interval
            now = time.perf_counter()
            if next_frame < now:
                # Late (a busy loop): realign rather than fire a burst of catch-up frames.
                next_frame = now
            await asyncio.sleep(next_frame - now)
            # How late the frame woke is the loop's lag, measured with no extra wake-ups.
            lag_ms = max(0.0, time.perf_counter() - next_frame) * 1000
            metrics.loop_lag_ms.add(lag_ms)
            tracing = TRACE.recording  # one attribute read per frame while not recording
            if tracing:
                with TRACE.span("drain"):
                    pieces = queue.drain()
            else:
                pieces = queue.drain()
            metrics.trace_frame(len(pieces), lag_ms)
            metrics.queue_depth = len(pieces)
            if pieces:
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
            metrics.queue_max = queue.max_depth
            metrics.backpressure_waits = queue.backpressure_waits
            metrics.backpressure_ms = queue.backpressure_seconds * 1000
            if on_frame is not None:
                on_frame()
            if queue.finished:
                return
