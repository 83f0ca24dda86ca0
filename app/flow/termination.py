"""Polite signals (SIGTERM, SIGINT, SIGHUP) end Floodgate the way its own controls do.

A logout, ``kill``, a service manager or Ctrl+C in the terminal send one of them. By default
Python ends the process at once: the window's reply in progress would be left as "streaming"
(shown as interrupted) and the next launch, or the next ``floodgate serve``, would report a
crash. Taken over, they call what ends the app politely: the window closes as Ctrl+Q does
(the reply stopped and saved, the model freed), the server stops its requests and exits.

Python runs a signal's handler only when its main thread runs Python code, and Qt's event loop
waits in C: so the signal also writes its number to a socket (``signal.set_wakeup_fd``), which
a :class:`QSocketNotifier` watches, and the ending is called from that notifier's slot, on the
main thread, between two events (not from the handler, which could run in the middle of any
Python code).
"""

from __future__ import annotations

import contextlib
import signal
import socket
from collections.abc import Callable, Sequence
from types import FrameType

from PySide6.QtCore import QObject, QSocketNotifier, Slot

SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGINT", "SIGHUP") if hasattr(signal, name)
)
"""What ends a desktop app politely: ``kill``, Ctrl+C, the terminal closing (where they exist)."""

Handler = Callable[[int, FrameType | None], object] | int | signal.Handlers | None


def _note(_number: int, _frame: FrameType | None) -> None:
    """The Python-level handler: nothing, the wakeup socket carries the signal to Qt."""


class PoliteEnd(QObject):
    """While installed, the given signals call ``end`` on the main thread, from Qt's loop.

    Args:
        end: what ends the app politely (the main window's ``close``, the server's stop).
        signals: the signals taken over (by default :data:`SIGNALS`).
    """

    def __init__(
        self,
        end: Callable[[], object],
        signals: Sequence[int] = SIGNALS,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self._end = end
        self._signals = tuple(signals)
        self._reader, self._writer = socket.socketpair()
        self._reader.setblocking(False)
        self._writer.setblocking(False)
        self._notifier = QSocketNotifier(self._reader.fileno(), QSocketNotifier.Type.Read, self)
        self._notifier.activated.connect(self._on_signal)
        self._previous: dict[int, Handler] = {}
        self._previous_fd = -1
        self._installed = False

    def install(self) -> None:
        """Take the signals over (only the main thread can)."""
        self._previous_fd = signal.set_wakeup_fd(self._writer.fileno(), warn_on_full_buffer=False)
        self._previous = {number: signal.signal(number, _note) for number in self._signals}
        self._installed = True

    def remove(self) -> None:
        """Give the signals back to whoever had them, and close the socket."""
        if self._installed:
            for number, handler in self._previous.items():
                signal.signal(number, handler)
            signal.set_wakeup_fd(self._previous_fd)
            self._installed = False
        self._notifier.setEnabled(False)
        self._reader.close()
        self._writer.close()

    @Slot()
    def _on_signal(self) -> None:
        with contextlib.suppress(OSError):
            received = self._reader.recv(64)
            if any(number in received for number in self._signals):
                self._end()
