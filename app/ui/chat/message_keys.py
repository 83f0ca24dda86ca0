"""Moving through the conversation with the keyboard alone.

Ctrl+Down and Ctrl+Up (or F6 and Shift+F6) move the focus from one message's header to the
next or previous one; Tab then goes through that message's buttons, left to right, and on out
of the view; Shift+Tab comes back. Only one message's header is in Qt's Tab chain at a time (a
roving tab stop), and the buttons are stepped through here rather than by Qt's chain, so Tab
never has to walk through every button of a long conversation, and buttons added to a message
later (its variants, Regenerate) still come in reading order.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QApplication, QScrollArea, QWidget

from app.ui.chat.rows.base import Row
from app.ui.chat.rows.header import HeaderRow
from app.ui.chat.rows.stack import RowStack


def navigation_step(event: QKeyEvent) -> int:
    """How many messages a key moves by (0: it is not a key that moves between messages)."""
    modifiers = event.modifiers() & ~Qt.KeyboardModifier.KeypadModifier
    key = event.key()
    if key == Qt.Key.Key_F6 and modifiers == Qt.KeyboardModifier.NoModifier:
        return 1
    if key == Qt.Key.Key_F6 and modifiers == Qt.KeyboardModifier.ShiftModifier:
        return -1
    if modifiers == Qt.KeyboardModifier.ControlModifier and key == Qt.Key.Key_Down:
        return 1
    if modifiers == Qt.KeyboardModifier.ControlModifier and key == Qt.Key.Key_Up:
        return -1
    return 0


class MessageKeys:
    """Keyboard navigation between the messages of a view's row stack, and through one message.

    Args:
        view: the scroll area showing the stack (scrolled to show what gets the focus).
        stack: the conversation's rows.
    """

    def __init__(self, view: QScrollArea, stack: RowStack) -> None:
        self._view = view
        self._stack = stack
        self._current: int | None = None
        """The header of the message Tab reaches (None: the last message)."""
        self._last_header = -1

    def forget(self) -> None:
        """The rows are gone (the view was cleared)."""
        self._current = None
        self._last_header = -1

    # -- messages -----------------------------------------------------------------------------

    def headers(self) -> list[int]:
        """The indices of the messages' header rows."""
        return [i for i, row in enumerate(self._stack.rows) if isinstance(row, HeaderRow)]

    def message_end(self, header: int) -> int:
        """The index after the last row of the message whose header is at ``header``."""
        rows = self._stack.rows
        end = header + 1
        while end < len(rows) and not isinstance(rows[end], HeaderRow):
            end += 1
        return end

    def message_of(self, widget: QWidget | None) -> int | None:
        """The header index of the message ``widget`` is in (None: not in a message)."""
        while widget is not None and not isinstance(widget, Row):
            widget = widget.parentWidget()
        if widget is None:
            return None
        i = self._stack.index_of(widget)
        while i >= 0 and not isinstance(self._stack.rows[i], HeaderRow):
            i -= 1
        return i if i >= 0 else None

    def _set_reachable(self, header: int, reachable: bool) -> None:
        if 0 <= header < len(self._stack.rows):
            policy = Qt.FocusPolicy.TabFocus if reachable else Qt.FocusPolicy.NoFocus
            self._stack.rows[header].setFocusPolicy(policy)

    def _current_header(self) -> int:
        return self._last_header if self._current is None else self._current

    def row_added(self, i: int, row: Row) -> None:
        """A row was appended at ``i``; a new message becomes the reachable one.

        (Unless the user moved to another message: that one stays reachable.)
        """
        if isinstance(row, HeaderRow):
            if self._current is None:
                self._set_reachable(self._last_header, False)
                self._set_reachable(i, True)
            self._last_header = i

    # -- moving -------------------------------------------------------------------------------

    def focus(self, index: int = -1) -> bool:
        """Put the keyboard focus on message ``index``'s header (Python indexing)."""
        headers = self.headers()
        if not headers:
            return False
        header = headers[max(-len(headers), min(index, len(headers) - 1))]
        previous = self._current_header()
        if previous != header:
            self._set_reachable(previous, False)
        self._set_reachable(header, True)
        self._current = None if header == headers[-1] else header
        row = self._stack.rows[header]
        row.setFocus(Qt.FocusReason.OtherFocusReason)
        self._view.ensureWidgetVisible(row, 0, 0)
        return True

    def move(self, step: int) -> bool:
        """Move the focus ``step`` messages down (up if negative) from the focused one."""
        headers = self.headers()
        if not headers:
            return False
        here = self.message_of(QApplication.focusWidget())
        if here is None or here not in headers:
            current = self._current_header()  # entering the messages: the current one first
            return self.focus(headers.index(current) if current in headers else -1)
        return self.focus(max(0, min(headers.index(here) + step, len(headers) - 1)))

    def handle_key(self, event: QKeyEvent) -> bool:
        """Move between messages if ``event`` is one of the keys that do; returns whether."""
        step = navigation_step(event)
        return bool(step) and self.move(step)

    # -- Tab within a message -----------------------------------------------------------------

    def _tab_stops(self, header: int) -> list[QWidget]:
        """The message's header, then its buttons in reading order (shown and enabled)."""
        rows = self._stack.rows[header : self.message_end(header)]
        stops: list[QWidget] = [rows[0]]
        for row in rows:
            if row.isVisibleTo(self._stack):
                stops.extend(c for c in row.controls() if c.isVisibleTo(row) and c.isEnabled())
        return stops

    def tab(self, forward: bool) -> bool:
        """Tab (or Shift+Tab) from the focused header or button; False if not in a message."""
        focused = QApplication.focusWidget()
        header = self.message_of(focused)
        if header is None or focused is None:
            return False
        stops = self._tab_stops(header)
        if focused not in stops:
            return False
        i = stops.index(focused) + (1 if forward else -1)
        if 0 <= i < len(stops):
            reason = Qt.FocusReason.TabFocusReason if forward else Qt.FocusReason.BacktabFocusReason
            stops[i].setFocus(reason)
            self._view.ensureWidgetVisible(stops[i], 0, 0)
            return True
        return self._leave(forward)

    def _leave(self, forward: bool) -> bool:
        """Tab out of the view: to the first widget after (or before) it that takes Tab."""
        view = self._view
        widget: QWidget | None = view
        while True:
            assert widget is not None
            widget = widget.nextInFocusChain() if forward else widget.previousInFocusChain()
            if widget is None or widget is view:
                return False
            inside = view.isAncestorOf(widget)
            takes_tab = bool(widget.focusPolicy() & Qt.FocusPolicy.TabFocus)
            if not inside and takes_tab and widget.isVisible() and widget.isEnabled():
                reason = (
                    Qt.FocusReason.TabFocusReason if forward else Qt.FocusReason.BacktabFocusReason
                )
                widget.setFocus(reason)
                return True
