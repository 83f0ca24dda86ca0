"""SIGTERM and SIGINT close the window as the user would.

A logout, ``kill``, a service manager or Ctrl+C in the terminal that started Floodgate send
one of them. By default Python ends the process at once: the reply in progress would be left
as "streaming" (shown as interrupted) and the next launch would report a crash. Taken over,
they close the window, so the reply stops, is saved as stopped, and the model is freed, as
Ctrl+Q does.

Python runs a signal's handler only when its main thread runs Python code, and Qt's event loop
waits in C: so the signal also writes its number to a socket (``signal.set_wakeup_fd``), which
a :class:`QSocketNotifier` watches, and the window is closed from that notifier's slot, on the
UI thread, between two events (not from the handler, which could run in the middle of any
Python code).
"""

from __future__ import annotations

import contextlib
import signal
import socket
from collections.abc import Callable
from types import FrameType

from PySide6.QtCore import QObject, QSocketNotifier, Slot

SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGINT", "SIGHUP") if hasattr(signal, name)
)
"""What ends a desktop app politely: ``kill``, Ctrl+C, the terminal closing (where they exist)."""

Handler = Callable[[int, FrameType | None], object] | int | signal.Handlers | None


def _note(_number: int, _frame: FrameType | None) -> None:
    """The Python-level handler: nothing, the wakeup socket carries the signal to Qt."""


class CloseOnTermination(QObject):
    """While installed, the signals in :data:`SIGNALS` call ``close`` on the UI thread.

    Args:
        close: what ends the app politely (the main window's ``close``).
    """

    def __init__(self, close: Callable[[], object], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._close = close
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
        self._previous = {number: signal.signal(number, _note) for number in SIGNALS}
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
            if any(number in received for number in SIGNALS):
                self._close()
