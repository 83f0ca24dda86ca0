"""Selecting text across the conversation, as in a browser.

Each row shows its text in its own widget, so no widget can select across two rows. The view
owns one :class:`Selection` instead: from an anchor to a focus :class:`Spot` (a row and a
character in that row's text). The rows in between paint their part of it, and copying walks
the rows in reading order, taking each row's plain text.

:class:`MouseSelection` drives it from the mouse: presses on the rows' text fall through to
the row stack (text widgets do not take them), so a drag can start in one row and end in
another, Shift+click extends, a double click selects a word, and a click that did not drag
follows a link. Buttons, and the sideways scroll bar of code, keep their own clicks.

A streaming reply only ever changes the last rows, and the selection is kept as row indices
and character offsets, so text arriving while the user selects moves nothing under the
pointer and loses nothing already selected.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QEvent, QObject, QPoint, Qt, Signal
from PySide6.QtGui import QMouseEvent
from PySide6.QtWidgets import QApplication, QScrollArea
from typing_extensions import override

from app.ui.chat.rows.base import Row
from app.ui.chat.rows.stack import RowStack

AUTOSCROLL_STEP_PX = 20
"""How far the view scrolls per pointer move while a drag is above or below it."""


@dataclass(frozen=True, order=True)
class Spot:
    """A place in the conversation: a row and a character position in its text."""

    row: int
    offset: int


class Selection:
    """The selected stretch of the conversation, from :attr:`anchor` to :attr:`focus`."""

    def __init__(self, stack: RowStack) -> None:
        self._stack = stack
        self.anchor: Spot | None = None
        self.focus: Spot | None = None
        self._painted: tuple[int, int] = (0, -1)

    @property
    def empty(self) -> bool:
        """Nothing is selected."""
        return self.anchor is None or self.focus is None or self.anchor == self.focus

    def bounds(self) -> tuple[Spot, Spot] | None:
        """The first and last spots of the selection, in reading order."""
        if self.anchor is None or self.focus is None:
            return None
        return min(self.anchor, self.focus), max(self.anchor, self.focus)

    def spot_at(self, point: QPoint) -> Spot | None:
        """The spot under ``point`` (in the stack's coordinates)."""
        stack = self._stack
        if not stack.rows:
            return None
        i = stack.row_at(max(0, point.y()))
        block = stack.rows[i].text_block()
        if block is None:
            return Spot(i, 0)
        return Spot(i, block.position_at(block.mapFrom(stack, point)))

    def select(self, anchor: Spot, focus: Spot) -> None:
        """Select from ``anchor`` to ``focus``."""
        self.anchor, self.focus = anchor, focus
        self._paint()

    def extend(self, focus: Spot) -> None:
        """Move the selection's focus end (the anchor stays), as Shift+click does."""
        self.select(self.anchor if self.anchor is not None else focus, focus)

    def select_rows(self, first: int, last: int) -> None:
        """Select rows ``first`` to ``last`` whole."""
        if not self._stack.rows:
            return
        last = min(last, len(self._stack.rows) - 1)
        block = self._stack.rows[last].text_block()
        self.select(Spot(first, 0), Spot(last, block.length() if block is not None else 0))

    def clear(self) -> None:
        """Select nothing."""
        self.anchor = self.focus = None
        self._paint()

    def forget(self) -> None:
        """The rows are gone (the view was cleared): drop the selection without painting."""
        self.anchor = self.focus = None
        self._painted = (0, -1)

    def _range_in(self, i: int, row: Row) -> tuple[int, int]:
        """The selected part of row ``i``'s text."""
        bounds = self.bounds()
        block = row.text_block()
        if bounds is None or block is None or self.empty:
            return 0, 0
        start, end = bounds
        if not start.row <= i <= end.row:
            return 0, 0
        first = start.offset if i == start.row else 0
        last = end.offset if i == end.row else block.length()
        return first, last

    def _paint(self) -> None:
        rows = self._stack.rows
        bounds = self.bounds()
        now = (bounds[0].row, bounds[1].row) if bounds is not None and not self.empty else (0, -1)
        # The rows selected before and those selected now: only they can change.
        spans = [span for span in (now, self._painted) if span[0] <= span[1]]
        self._painted = now
        if not spans:
            return
        low, high = min(s[0] for s in spans), max(s[1] for s in spans)
        for i in range(max(0, low), min(high, len(rows) - 1) + 1):
            block = rows[i].text_block()
            if block is not None:
                block.set_selection(*self._range_in(i, rows[i]))

    def row_added(self, i: int, row: Row) -> None:
        """A row was appended at ``i``: paint its share of the selection."""
        # A row that replaces one of a streaming reply's open rows takes its share at once.
        if self.empty:
            return
        block = row.text_block()
        if block is not None:
            block.set_selection(*self._range_in(i, row))

    def text(self) -> str:
        """The selected text, as plain text in reading order (rows folded away are left out)."""
        bounds = self.bounds()
        if bounds is None or self.empty:
            return ""
        rows = self._stack.rows
        parts: list[str] = []
        separator = ""
        for i in range(bounds[0].row, min(bounds[1].row, len(rows) - 1) + 1):
            row = rows[i]
            block = row.text_block()
            if block is None or not self._stack.is_shown(i):
                continue
            first, last = self._range_in(i, row)
            if parts:
                parts.append(separator)
            parts.append(block.plain_text()[first:last])
            separator = row.copy_separator()
        return "".join(parts)


class MouseSelection(QObject):
    """Drives a :class:`Selection` with the mouse on a view's row stack.

    Signals:
        dragged(): the user is dragging out a selection (the view stops following the reply,
            so the text under the pointer stays where it is).
    """

    dragged = Signal()

    def __init__(self, view: QScrollArea, stack: RowStack, selection: Selection) -> None:
        super().__init__(view)
        self._view = view
        self._stack = stack
        self.selection = selection
        self._pressed_at: QPoint | None = None
        self._dragging = False
        stack.installEventFilter(self)

    @override
    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is not self._stack or not isinstance(event, QMouseEvent):
            return False
        point = event.position().toPoint()
        kind = event.type()
        if kind == QEvent.Type.MouseButtonDblClick:
            return self._word(point)
        if kind == QEvent.Type.MouseButtonPress:
            return self._press(point, event)
        if kind == QEvent.Type.MouseMove and self._pressed_at is not None:
            return self._move(point)
        if kind == QEvent.Type.MouseButtonRelease and self._pressed_at is not None:
            return self._release(point)
        return False

    def _press(self, point: QPoint, event: QMouseEvent) -> bool:
        if event.button() != Qt.MouseButton.LeftButton:
            return False
        spot = self.selection.spot_at(point)
        if spot is None:
            return False
        self._pressed_at = point
        self._dragging = False
        if event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
            self.selection.extend(spot)
            self._dragging = True
        else:
            self.selection.select(spot, spot)
        return True

    def _move(self, point: QPoint) -> bool:
        assert self._pressed_at is not None
        far = (point - self._pressed_at).manhattanLength() >= QApplication.startDragDistance()
        if not self._dragging and not far:
            return True
        self._dragging = True
        self.dragged.emit()
        self._autoscroll(point)
        spot = self.selection.spot_at(point)
        if spot is not None:
            self.selection.extend(spot)
        return True

    def _release(self, point: QPoint) -> bool:
        dragged = self._dragging
        self._pressed_at = None
        self._dragging = False
        if not dragged:
            self._follow_link(point)
        return True

    def _word(self, point: QPoint) -> bool:
        spot = self.selection.spot_at(point)
        if spot is None:
            return False
        block = self._stack.rows[spot.row].text_block()
        if block is not None:
            start, end = block.word_at(spot.offset)
            self.selection.select(Spot(spot.row, start), Spot(spot.row, end))
        self._pressed_at = point
        self._dragging = True  # a double click never follows a link
        return True

    def _follow_link(self, point: QPoint) -> None:
        if not self._stack.rows:
            return
        row = self._stack.rows[self._stack.row_at(max(0, point.y()))]
        block = row.text_block()
        if block is None:
            return
        href = block.anchor_at(block.mapFrom(self._stack, point))
        if href:
            block.link_activated.emit(href)

    def _autoscroll(self, point: QPoint) -> None:
        # Dragging above or below what is shown scrolls, as a browser does.
        bar = self._view.verticalScrollBar()
        shown = self._stack.mapTo(self._view.viewport(), point).y()
        if shown < 0:
            bar.setValue(bar.value() - AUTOSCROLL_STEP_PX)
        elif shown > self._view.viewport().height():
            bar.setValue(bar.value() + AUTOSCROLL_STEP_PX)
