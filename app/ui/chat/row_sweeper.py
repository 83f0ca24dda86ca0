"""Deleting a cleared conversation's rows a slice at a time, then handing its memory back."""

from __future__ import annotations

import ctypes
import functools
import threading
from collections.abc import Callable

from PySide6.QtCore import QObject

from app.flow.pacing import Slicer
from app.ui.chat.rows.stack import RowStack

CLEAR_ROWS = 200
"""Rows of a cleared conversation deleted per event-loop turn (at most; the clock also says)."""


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """The C library's ``malloc_trim`` (glibc), looked up once (``find_library`` took 60 ms)."""
    try:
        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None  # not glibc
    return trim


def _give_back_memory() -> None:
    """Return freed heap to the system (glibc keeps it otherwise: RSS stayed at its peak)."""
    trim = _malloc_trim()
    if trim is not None:
        # On a thread of its own: handing 100 MB back takes 60 ms (ctypes lets go of the GIL).
        threading.Thread(target=trim, args=(0,), name="malloc_trim", daemon=True).start()


class RowSweeper:
    """Deletes the rows a stack has taken out of sight, a slice per event-loop turn.

    Args:
        stack: the conversation's rows (its doomed rows are swept from the next turn on).
        parent: the Qt owner of the slicer (sweeping stops when it is deleted).
    """

    def __init__(self, stack: RowStack, parent: QObject) -> None:
        self._stack = stack
        self._slicer = Slicer(self._step, parent=parent)
        self._cleared = False
        stack.on_doomed = self._slicer.schedule

    def sweep_cleared(self) -> None:
        """Sweep a whole cleared conversation; its memory goes back to the system after."""
        self._cleared = True
        self._slicer.schedule()

    def _step(self, deadline: float) -> bool:
        # Deleting thousands of rows in one turn froze New chat for seconds.
        done = self._stack.sweep(deadline, CLEAR_ROWS)
        if done and self._cleared:
            # A cleared conversation's memory goes back to the system (not after the few
            # rows a finished reply replaces).
            self._cleared = False
            _give_back_memory()
        return done
