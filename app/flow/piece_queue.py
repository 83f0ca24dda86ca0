"""The bounded queue between the inference worker and the frame pump."""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
import time
from collections import deque
from collections.abc import Callable
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
    wakes it at once. A reply decoded beside others calls :meth:`offer` instead: it leaves
    the batch rather than stopping it. The worker calls :meth:`end` when the reply is over.

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
        self._space: asyncio.Event | None = None
        self._space_loop: asyncio.AbstractEventLoop | None = None
        self._arrival: Callable[[], None] | None = None
        """What wakes the reader that waits (one call for the next piece, end or Stop)."""
        self._arrival_after = -math.inf
        """The reader that waits wants no piece produced before this (``perf_counter``)."""
        self._room: Callable[[], None] | None = None
        """What wakes a producer that :meth:`offer` turned away (once, when the reader takes)."""
        self._refused_at: float | None = None
        self.woke_reader_at: float | None = None
        """When the reader was last woken (a piece, the end or Stop): ``perf_counter``."""
        self._remove_listener = stop.add_listener(self._wake)

    def _wake(self) -> None:
        with self._cond:
            self._cond.notify_all()
        self._wake_async()
        self._wake_reader()

    def _wake_reader(self) -> None:
        # The reader that waits asked for one wake-up, so a fast producer costs one call per
        # wait, not one per piece.
        with self._cond:
            arrival, self._arrival = self._arrival, None
        if arrival is not None:
            self.woke_reader_at = time.perf_counter()
            with contextlib.suppress(RuntimeError):  # its reader is gone (a deleted QObject)
                arrival()

    def wake_on_arrival(self, wake: Callable[[], None], not_before: float = -math.inf) -> bool:
        """Have ``wake`` called once, from the producer's thread, at the next piece or end.

        Stop calls it too. The frame pump passes a queued Qt signal's ``emit``: the
        cheapest way into the UI thread from another (a tenth of a millisecond of its
        time, where asyncio's ``call_soon_threadsafe`` under qasync took a third).

        Args:
            wake: what to call.
            not_before: pieces produced before this moment (``time.perf_counter()``) wake
                nothing, whether they are waiting now or come later: the frame pump, while
                pieces come faster than frames, is woken by the first piece once its frame
                is due, and not by those before it.

        Returns:
            False, and registers nothing, if the end or a piece produced at or after
            ``not_before`` is already there.
        """
        with self._cond:
            if self._ended or (self._items and self._items[-1].produced_at >= not_before):
                return False
            self._arrival, self._arrival_after = wake, not_before
            return True

    def _arrived(self, produced_at: float) -> None:
        # After a piece is added: wake the reader that waits for it (Stop and the end wake it
        # whatever it waits for).
        if self._arrival is not None and produced_at >= self._arrival_after:
            self._wake_reader()

    def forget_wake(self, wake: Callable[[], None]) -> None:
        """Take back a wake-up asked for with :meth:`wake_on_arrival` (if not used yet)."""
        with self._cond:
            if self._arrival is wake:
                self._arrival = None

    @staticmethod
    def _event_setter(event: asyncio.Event) -> Callable[[], None]:
        loop = asyncio.get_running_loop()

        def wake() -> None:
            with contextlib.suppress(RuntimeError):  # that loop has closed: nobody waits
                loop.call_soon_threadsafe(event.set)

        return wake

    async def take_async(self) -> list[Piece]:
        """Wait, without blocking the loop, until pieces are there or the reply ended; take them.

        For a reader on another event loop than the frame pump's (the API server's): the
        worker's next :meth:`put` or :meth:`end`, or Stop, wakes it. Returns an empty list
        once the reply ended and every piece was taken, or when Stop was requested and
        nothing is waiting (the reader then decides whether to wait for the end).
        """
        while True:
            with self._cond:
                if self._items or self._ended or self._stop.is_set():
                    items = list(self._items)
                    self._items.clear()
                    self._cond.notify_all()
                    break
                event = asyncio.Event()
                self._arrival = self._event_setter(event)
                self._arrival_after = -math.inf
            await event.wait()
        self._wake_async()
        if self._room is not None and items:
            self._made_room()
        return items

    def _wake_async(self) -> None:
        # Drain and Stop may come from another thread than the loop an async producer waits on.
        if self._space is not None and self._space_loop is not None:
            self._space_loop.call_soon_threadsafe(self._space.set)

    async def put_async(self, text: str) -> bool:
        """:meth:`put` for a producer on the event loop (a remote stream).

        Waits for space without blocking the loop; while it waits, the producer reads nothing
        more from its source, so backpressure reaches the network.

        Returns:
            False if Stop was requested (the piece is not added), True otherwise.
        """
        produced_at = time.perf_counter()
        if self.depth >= self.bound and not self._stop.is_set():
            self.backpressure_waits += 1
            began = time.perf_counter()
            self._space_loop = asyncio.get_running_loop()
            while self.depth >= self.bound and not self._stop.is_set():
                self._space = asyncio.Event()
                if self.depth < self.bound or self._stop.is_set():
                    break  # drained (or stopped) between the check and the new event
                await self._space.wait()
            self.backpressure_seconds += time.perf_counter() - began
        if self._stop.is_set():
            return False
        with self._cond:
            self._items.append(Piece(text, produced_at))
            self.pieces_in += 1
            self.max_depth = max(self.max_depth, len(self._items))
        self._arrived(produced_at)
        return True

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
        self._arrived(produced_at)
        return True

    def offer(self, text: str, when_room: Callable[[], None]) -> bool:
        """Add a piece if the queue has room for it, without waiting.

        For a reply decoded side by side with others (:mod:`app.engine.batch`): where
        :meth:`put` would wait, this adds nothing, counts a backpressure wait, and has
        ``when_room`` called once, from the reader's thread, when the reader next takes
        pieces. The producer holds the piece meanwhile; the others in its batch go on.

        Returns:
            True if the piece was added; False if the queue is full or Stop was requested.
        """
        produced_at = time.perf_counter()
        with self._cond:
            if self._stop.is_set():
                return False
            if len(self._items) >= self.bound:
                if self._refused_at is None:
                    self.backpressure_waits += 1
                    self._refused_at = produced_at
                self._room = when_room
                return False
            self._items.append(Piece(text, produced_at))
            self.pieces_in += 1
            self.max_depth = max(self.max_depth, len(self._items))
        self._arrived(produced_at)
        return True

    def _made_room(self) -> None:
        # Called after the reader took pieces: a producer that offer() turned away goes on.
        with self._cond:
            room, self._room = self._room, None
            if self._refused_at is not None:
                self.backpressure_seconds += time.perf_counter() - self._refused_at
                self._refused_at = None
        if room is not None:
            room()

    def drain(self) -> list[Piece]:
        """Take every piece available now, without waiting."""
        with self._cond:
            items = list(self._items)
            self._items.clear()
            self._cond.notify_all()
        if self._space is not None:
            self._wake_async()
        if self._room is not None and items:
            self._made_room()
        return items

    def end(self) -> None:
        """Mark the reply complete: no more pieces will come."""
        with self._cond:
            self._ended = True
        self._remove_listener()
        self._wake_reader()

    # The two reads below take no lock: each is one read of a deque's length or a flag, which
    # no other thread can see half done, and the frame pump reads both once or twice a frame.
    # The producer appends its last piece before it sets ``_ended``, and only the reader takes
    # pieces out: "ended and empty" read here is never wrong.

    @property
    def depth(self) -> int:
        """Pieces waiting now."""
        return len(self._items)

    @property
    def finished(self) -> bool:
        """The producer has ended and every piece has been drained."""
        return self._ended and not self._items
