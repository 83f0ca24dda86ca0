"""Where the conversation view stands: following the reply, or kept on the row being read."""

from __future__ import annotations

import time
from collections.abc import Callable

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QScrollArea

from app.flow.pacing import Slicer
from app.ui.chat.rows.stack import RowStack

RELAYOUT_SLICE_S = 0.006
"""Work per event-loop turn when re-measuring rows for a new width (a third of a frame)."""

PIN_SLACK_PX = 4
"""How close to the bottom counts as 'at the bottom' (a partly shown last line still pins)."""


class ScrollPlace(QObject):
    """The view's place in the conversation, as its rows grow and change width.

    While the user is at the bottom the view follows the reply (:attr:`pinned`); scrolling up
    (or dragging out a selection, :meth:`detach`) detaches it, scrolling back to the bottom
    re-attaches it. A new width measures the rows on screen at once and the rest a slice per
    event-loop turn (:meth:`lay_out_again`), keeping the row the reader is looking at in place.

    Args:
        view: the scroll area showing the stack (its bar and its viewport).
        stack: the conversation's rows.
        row_width: the rows' width now.
    """

    def __init__(self, view: QScrollArea, stack: RowStack, row_width: Callable[[], int]) -> None:
        super().__init__(view)
        self._view = view
        self._stack = stack
        self._row_width = row_width
        self.pinned = True
        """Whether the view follows new text to the bottom."""
        self._bar = bar = view.verticalScrollBar()
        bar.valueChanged.connect(self._on_scrolled)
        bar.rangeChanged.connect(self._on_range_changed)
        self._relayout = Slicer(self._relayout_step, RELAYOUT_SLICE_S, self)

    def detach(self) -> None:
        """Stop following the reply until the user is back at the bottom."""
        # Text arriving below must not scroll what the user is selecting out from under them.
        self.pinned = False

    def lay_out_again(self) -> None:
        """Give the rows the view's width: those on screen now, the rest in later slices."""
        # The rows on screen now; the rest a slice per event-loop turn, so that resizing a
        # window over a long conversation stays smooth.
        top = self._bar.value()
        stale = self._stack.set_width(self._row_width(), top, top + self._view.viewport().height())
        if stale:
            self._relayout.schedule()

    def _relayout_step(self, deadline: float) -> bool:
        bar = self._bar
        # Keep the row the reader is looking at where it is, while rows above it change height.
        anchor = None if self.pinned else self._stack.row_at(bar.value())
        offset = bar.value() - self._stack.tops[anchor] if anchor is not None else 0
        left = self._stack.measure_stale(max(0.0, deadline - time.perf_counter()))
        if anchor is not None:
            bar.setValue(self._stack.tops[anchor] + offset)
        return not left

    def _on_scrolled(self, value: int) -> None:
        self.pinned = value >= self._bar.maximum() - PIN_SLACK_PX

    def _on_range_changed(self, _minimum: int, maximum: int) -> None:
        if self.pinned:
            self._bar.setValue(maximum)
