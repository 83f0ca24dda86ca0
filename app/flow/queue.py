"""The bounded queue between the inference worker and the frame pump."""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import NamedTuple

from app.engine.stop import StopSignal


class Piece(NamedTuple):
    """A piece of reply text and when the worker produced it (``time.perf_counter()``)."""

    text: str
    produced_at: float


class PieceQueue:
    """A bounded, thread-safe queue of reply pieces with backpressure.

    The worker puts; when the queue holds ``bound`` pieces it waits (inference
    pauses; nothing is dropped) until the frame pump drains it, or until Stop, which
    wakes it at once. The worker calls :meth:`end` when the reply is over.

    Args:
        bound: the most pieces the queue holds.
        stop: the reply's stop signal.
    """

    def __init__(self, bound: int, stop: StopSignal) -> None:
        if bound < 1:
            raise ValueError("the queue bound must be at least 1")
        self.bound = bound
        self._items: deque[Piece] = deque()
        self._cond = threading.Condition()
        self._ended = False
        self._stop = stop
        self.max_depth = 0
        self.backpressure_waits = 0
        self.backpressure_seconds = 0.0
        self.pieces_in = 0
        self._remove_listener = stop.add_listener(self._wake)

    def _wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def put(self, text: str) -> bool:
        """Add a piece, waiting while the queue is full.

        Returns:
            False if Stop was requested (the piece is not added), True otherwise.
        """
        produced_at = time.perf_counter()
        with self._cond:
            if len(self._items) >= self.bound and not self._stop.is_set():
                self.backpressure_waits += 1
                began = time.perf_counter()
                while len(self._items) >= self.bound and not self._stop.is_set():
                    self._cond.wait()
                self.backpressure_seconds += time.perf_counter() - began
            if self._stop.is_set():
                return False
            self._items.append(Piece(text, produced_at))
            self.pieces_in += 1
            self.max_depth = max(self.max_depth, len(self._items))
            return True

    def drain(self) -> list[Piece]:
        """Take every piece available now, without waiting."""
        with self._cond:
            items = list(self._items)
            self._items.clear()
            self._cond.notify_all()
        return items

    def end(self) -> None:
        """Mark the reply complete: no more pieces will come."""
        with self._cond:
            self._ended = True
        self._remove_listener()

    @property
    def depth(self) -> int:
        """Pieces waiting now."""
        with self._cond:
            return len(self._items)

    @property
    def finished(self) -> bool:
        """The producer has ended and every piece has been drained."""
        with self._cond:
            return self._ended and not self._items
