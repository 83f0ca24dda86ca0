"""The conversation view: prompts and replies, with replies rendered as Markdown as they stream.

Besides showing the conversation, the view lets the user select across it as in a browser
(:mod:`app.ui.selection`), move between messages with the keyboard (Ctrl+Up/Down or F6 and
Shift+F6; Tab then goes through that message's buttons), and exposes it to screen readers
(:mod:`app.ui.accessibility`), announcing each finished reply once.
"""

from __future__ import annotations

import time

from PySide6.QtCore import QCoreApplication, QEvent, Qt
from PySide6.QtGui import QGuiApplication, QKeyEvent, QKeySequence, QPalette, QResizeEvent
from PySide6.QtWidgets import QApplication, QFrame, QScrollArea, QWidget
from typing_extensions import override

from app.flow.pacing import Slicer
from app.ui import accessibility
from app.ui.colors import Theme, theme_for
from app.ui.header_row import HeaderRow
from app.ui.reply_rows import ReplyRows
from app.ui.row_base import Row
from app.ui.row_stack import RowStack
from app.ui.rows import TextRow
from app.ui.selection import MouseSelection, Selection

RELAYOUT_SLICE_S = 0.006
"""Work per event-loop turn when re-measuring rows for a new width (a third of a frame)."""

PIN_SLACK_PX = 4
"""How close to the bottom counts as 'at the bottom' (a partly shown last line still pins)."""

ANNOUNCED_CHARS = 2000
"""A finished reply is announced up to this many characters (the rest is read in the view)."""


class ChatView(QScrollArea):
    """The conversation, as a column of rows; a streaming reply grows at the bottom.

    Replies are Markdown, rendered as they stream: each update re-renders only the reply's
    last, still-open block (see :mod:`app.ui.markdown`), and the rows above it are final, so an
    update costs the same at the start of a long reply as at its end. Prompts and the app's
    own notes are plain text. While the user is at the bottom the view follows the reply;
    scrolling up (or dragging out a selection) detaches it, scrolling back to the bottom
    re-attaches it.
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        accessibility.install()
        self.setObjectName("chatView")
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setWidgetResizable(False)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setFocusPolicy(Qt.FocusPolicy.NoFocus)  # Tab lands on the current message instead
        self.viewport().setBackgroundRole(QPalette.ColorRole.Base)
        self.viewport().setAutoFillBackground(True)
        self.stack = RowStack()
        self.stack.setObjectName("conversationRows")
        self.stack.setFocusPolicy(Qt.FocusPolicy.ClickFocus)  # Ctrl+C after selecting
        self.stack.setCursor(Qt.CursorShape.IBeamCursor)
        self.setWidget(self.stack)
        self.theme: Theme = theme_for(self.palette())
        self._reply: ReplyRows | None = None
        self._pinned = True
        bar = self.verticalScrollBar()
        bar.valueChanged.connect(self._on_scrolled)
        bar.rangeChanged.connect(self._on_range_changed)
        self.updates = 0
        """Appends applied to replies (the bench and tests count frames by it)."""
        self._relayout = Slicer(self._relayout_step, RELAYOUT_SLICE_S, self)
        self.selection = Selection(self.stack)
        self._mouse = MouseSelection(self, self.stack, self.selection)
        self._mouse.dragged.connect(self._stop_following)
        self._current: int | None = None
        """The header of the message Tab reaches (None: the last message)."""
        self._last_header = -1
        self.stack.on_append = self._on_row_added

    # -- building the conversation ------------------------------------------------------------

    def add_user_message(self, text: str) -> HeaderRow:
        """Show a prompt the user sent (as plain text: it is never interpreted)."""
        you = QCoreApplication.translate("ChatView", "You")
        header = HeaderRow(you, lambda: text, prompt=True)
        self.stack.append(header)
        row = TextRow(self.theme, "user")
        row.author = you
        row.set_plain(text)
        self.stack.append(row)
        return header

    def begin_reply(self, speaker: str = "Floodgate") -> HeaderRow:
        """Start an empty reply that :meth:`append_to_reply` grows; returns its header."""
        self._reply = ReplyRows(self, speaker)
        return self._reply.header

    def add_reply(self, speaker: str, text: str) -> HeaderRow:
        """Show a whole reply at once (a saved conversation); returns its header."""
        reply = ReplyRows(self, speaker)
        reply.append(text)
        reply.finish(timed=False)
        return reply.header

    def append_to_reply(self, text: str) -> None:
        """Append streamed text to the reply in progress."""
        if self._reply is None:
            self.begin_reply()
            assert self._reply is not None
        self._reply.append(text)
        self.updates += 1

    def end_reply(self, note: str = "", *, error: bool = False) -> None:
        """Close the reply in progress, with a note under it (for example "Stopped.").

        A screen reader is told the reply once, here, never piece by piece.
        """
        reply = self._reply
        if reply is not None:
            reply.finish()
        self._reply = None
        if note:
            self.add_note(note, error=error)
        if reply is not None:
            self.announce_reply(reply.speaker, reply.answer_text(), note)

    def announce_reply(self, speaker: str, text: str, note: str = "") -> bool:
        """Have a screen reader say a finished reply; returns whether it could be announced."""
        if len(text) > ANNOUNCED_CHARS:
            text = text[:ANNOUNCED_CHARS] + "…"
        message = QCoreApplication.translate("ChatView", "{speaker} replied: {text}").format(
            speaker=speaker, text=text
        )
        return accessibility.announce(self, f"{message} {note}".strip())

    def add_note(self, text: str, *, error: bool = False) -> None:
        """Show a line from the app itself (a notice or an error) in the conversation."""
        row = TextRow(self.theme, "error" if error else "note")
        row.set_plain(text)
        self.stack.append(row)

    def clear(self) -> None:
        """Remove everything shown."""
        self._reply = None
        self.selection.forget()
        self._current = None
        self._last_header = -1
        self.stack.clear()

    def toPlainText(self) -> str:
        """Everything shown, as text (replies as the Markdown the model wrote)."""
        return "\n".join(row.plain_text() for row in self.stack.rows if row.isVisibleTo(self.stack))

    # -- selecting and copying ----------------------------------------------------------------

    def selected_text(self) -> str:
        """What is selected, as plain text in reading order."""
        return self.selection.text()

    def select_all(self) -> None:
        """Select the whole conversation."""
        self.selection.select_rows(0, len(self.stack.rows) - 1)

    def copy_selection(self) -> bool:
        """Put the selection on the clipboard; returns whether there was one."""
        text = self.selected_text()
        if text:
            QGuiApplication.clipboard().setText(text)
        return bool(text)

    def _stop_following(self) -> None:
        # Text arriving below must not scroll what the user is selecting out from under them.
        self._pinned = False

    # -- moving between messages with the keyboard --------------------------------------------

    def _headers(self) -> list[int]:
        return [i for i, row in enumerate(self.stack.rows) if isinstance(row, HeaderRow)]

    def _message_end(self, header: int) -> int:
        rows = self.stack.rows
        end = header + 1
        while end < len(rows) and not isinstance(rows[end], HeaderRow):
            end += 1
        return end

    def _message_of(self, widget: QWidget | None) -> int | None:
        """The header index of the message ``widget`` is in (None: not in a message)."""
        while widget is not None and not isinstance(widget, Row):
            widget = widget.parentWidget()
        if widget is None:
            return None
        i = self.stack.index_of(widget)
        while i >= 0 and not isinstance(self.stack.rows[i], HeaderRow):
            i -= 1
        return i if i >= 0 else None

    def _set_reachable(self, header: int, reachable: bool) -> None:
        # Only one message's header is in Qt's Tab chain (a roving tab stop), and Tab steps
        # through that message's buttons from there (see focusNextPrevChild).
        if 0 <= header < len(self.stack.rows):
            policy = Qt.FocusPolicy.TabFocus if reachable else Qt.FocusPolicy.NoFocus
            self.stack.rows[header].setFocusPolicy(policy)

    def _current_header(self) -> int:
        return self._last_header if self._current is None else self._current

    def _on_row_added(self, i: int, row: Row) -> None:
        self.selection.row_added(i, row)
        if isinstance(row, HeaderRow):
            if self._current is None:
                self._set_reachable(self._last_header, False)
                self._set_reachable(i, True)
            self._last_header = i

    def _tab_stops(self, header: int) -> list[QWidget]:
        """The message's header, then its buttons in reading order (shown and enabled)."""
        rows = self.stack.rows[header : self._message_end(header)]
        stops: list[QWidget] = [rows[0]]
        for row in rows:
            if row.isVisibleTo(self.stack):
                stops.extend(c for c in row.controls() if c.isVisibleTo(row) and c.isEnabled())
        return stops

    @override
    def focusNextPrevChild(self, next: bool) -> bool:
        focused = QApplication.focusWidget()
        header = self._message_of(focused)
        if header is None or focused is None:
            return super().focusNextPrevChild(next)
        stops = self._tab_stops(header)
        if focused not in stops:
            return super().focusNextPrevChild(next)
        i = stops.index(focused) + (1 if next else -1)
        if 0 <= i < len(stops):
            reason = Qt.FocusReason.TabFocusReason if next else Qt.FocusReason.BacktabFocusReason
            stops[i].setFocus(reason)
            self.ensureWidgetVisible(stops[i], 0, 0)
            return True
        return self._leave(next)

    def _leave(self, forward: bool) -> bool:
        """Tab out of the view: to the first widget after (or before) it that takes Tab."""
        widget: QWidget | None = self
        while True:
            assert widget is not None
            widget = widget.nextInFocusChain() if forward else widget.previousInFocusChain()
            if widget is None or widget is self:
                return False
            inside = self.isAncestorOf(widget)
            takes_tab = bool(widget.focusPolicy() & Qt.FocusPolicy.TabFocus)
            if not inside and takes_tab and widget.isVisible() and widget.isEnabled():
                reason = (
                    Qt.FocusReason.TabFocusReason if forward else Qt.FocusReason.BacktabFocusReason
                )
                widget.setFocus(reason)
                return True

    def focus_message(self, index: int = -1) -> bool:
        """Put the keyboard focus on a message's header (by default the last message's)."""
        headers = self._headers()
        if not headers:
            return False
        header = headers[max(-len(headers), min(index, len(headers) - 1))]
        previous = self._current_header()
        if previous != header:
            self._set_reachable(previous, False)
        self._set_reachable(header, True)
        self._current = None if header == headers[-1] else header
        row = self.stack.rows[header]
        row.setFocus(Qt.FocusReason.OtherFocusReason)
        self.ensureWidgetVisible(row, 0, 0)
        return True

    def move_between_messages(self, step: int) -> bool:
        """Move the focus ``step`` messages down (up if negative) from the focused one."""
        headers = self._headers()
        if not headers:
            return False
        here = self._message_of(QApplication.focusWidget())
        if here is None or here not in headers:
            current = self._current_header()  # entering the messages: the current one first
            return self.focus_message(headers.index(current) if current in headers else -1)
        position = max(0, min(headers.index(here) + step, len(headers) - 1))
        return self.focus_message(position)

    @override
    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.matches(QKeySequence.StandardKey.Copy) and self.copy_selection():
            event.accept()
            return
        if event.matches(QKeySequence.StandardKey.SelectAll):
            focused = QApplication.focusWidget()
            message = None if focused is self.stack else self._message_of(focused)
            if message is None:
                self.select_all()
            else:
                self.selection.select_rows(message, self._message_end(message) - 1)
            event.accept()
            return
        step = self._navigation_step(event)
        if step and self.move_between_messages(step):
            event.accept()
            return
        super().keyPressEvent(event)

    @staticmethod
    def _navigation_step(event: QKeyEvent) -> int:
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

    # -- layout and theme ---------------------------------------------------------------------

    @override
    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if self.viewport().width() != self.stack.width():
            self._lay_out_again()  # a taller or shorter window changes no row

    def _lay_out_again(self) -> None:
        # The rows on screen now; the rest a slice per event-loop turn, so that resizing a
        # window over a long conversation stays smooth.
        top = self.verticalScrollBar().value()
        stale = self.stack.set_width(self.viewport().width(), top, top + self.viewport().height())
        if stale:
            self._relayout.schedule()

    def _relayout_step(self, deadline: float) -> bool:
        bar = self.verticalScrollBar()
        # Keep the row the reader is looking at where it is, while rows above it change height.
        anchor = None if self._pinned else self.stack.row_at(bar.value())
        offset = bar.value() - self.stack.tops[anchor] if anchor is not None else 0
        left = self.stack.measure_stale(max(0.0, deadline - time.perf_counter()))
        if anchor is not None:
            bar.setValue(self.stack.tops[anchor] + offset)
        return not left

    @override
    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange:
            self.theme = theme_for(self.palette())
            for row in self.stack.rows:
                row.restyle(self.theme)
            self._lay_out_again()

    # -- following the reply ------------------------------------------------------------------

    @property
    def pinned(self) -> bool:
        """Whether the view follows new text to the bottom."""
        return self._pinned

    def _on_scrolled(self, value: int) -> None:
        self._pinned = value >= self.verticalScrollBar().maximum() - PIN_SLACK_PX

    def _on_range_changed(self, _minimum: int, maximum: int) -> None:
        if self._pinned:
            self.verticalScrollBar().setValue(maximum)
