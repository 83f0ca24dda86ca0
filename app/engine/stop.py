"""The stop signal: one ``threading.Event`` that Python waits and native code both see."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class StopSignal:
    """Set once by Stop; seen by every wait and by llama.cpp's abort callback.

    Listeners let the parts that block wake at once: the queue a producer waits on, and the
    native flag llama.cpp reads after every graph node. A listener added after the signal was
    set runs immediately, so a Stop pressed before the worker started is never lost.
    """

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._listeners: list[Callable[[], None]] = []
        self.set_at: float | None = None
        """``time.perf_counter()`` of the first :meth:`set`, for stop-latency figures."""

    def set(self) -> bool:
        """Request the stop. Returns False if it had been requested already."""
        with self._lock:
            if self._event.is_set():
                return False
            self.set_at = time.perf_counter()
            self._event.set()
            listeners = list(self._listeners)
        for listener in listeners:
            listener()
        return True

    def is_set(self) -> bool:
        """Whether Stop was requested."""
        return self._event.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Sleep until Stop or ``timeout``; True if stopped."""
        return self._event.wait(timeout)

    def add_listener(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call ``listener`` on :meth:`set` (now, if already set). Returns a remover."""
        with self._lock:
            already = self._event.is_set()
            if not already:
                self._listeners.append(listener)
        if already:
            listener()

        def remove() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return remove
