"""The conversation view: prompts and replies, with replies appended as they stream."""

from __future__ import annotations

from PySide6.QtGui import QColor, QFont, QPalette, QTextBlockFormat, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import QTextBrowser, QWidget

PIN_SLACK_PX = 4
"""How close to the bottom counts as 'at the bottom' (a partly shown last line still pins)."""


class ChatView(QTextBrowser):
    """A read-only document of turns; a streaming reply grows by appends at its end.

    Appending inserts at a cursor kept at the reply's end, so each update lays out only the
    last paragraph; the document is never re-set, whatever the reply's length. While the
    user is at the bottom the view follows the reply; scrolling up detaches it, scrolling
    back to the bottom re-attaches it.
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("chatView")
        self.setOpenLinks(False)
        self.setOpenExternalLinks(False)
        self.setUndoRedoEnabled(False)
        self.document().setDocumentMargin(12)
        self._reply_cursor: QTextCursor | None = None
        self._pinned = True
        bar = self.verticalScrollBar()
        bar.valueChanged.connect(self._on_scrolled)
        bar.rangeChanged.connect(self._on_range_changed)
        self.updates = 0
        """Appends applied to replies (the bench and tests count frames by it)."""

    # -- formats ------------------------------------------------------------------------------

    def _tint(self, alpha: int) -> QColor:
        color = QColor(self.palette().color(QPalette.ColorRole.Highlight))
        color.setAlpha(alpha)
        return color

    def _header_format(self) -> tuple[QTextBlockFormat, QTextCharFormat]:
        block = QTextBlockFormat()
        block.setTopMargin(14)
        block.setBottomMargin(2)
        char = QTextCharFormat()
        char.setFontWeight(QFont.Weight.Bold)
        return block, char

    def _body_format(self, user: bool) -> tuple[QTextBlockFormat, QTextCharFormat]:
        block = QTextBlockFormat()
        block.setLeftMargin(8)
        block.setRightMargin(8)
        if user:
            block.setBackground(self._tint(40))
        return block, QTextCharFormat()

    def _note_format(self, error: bool) -> tuple[QTextBlockFormat, QTextCharFormat]:
        block = QTextBlockFormat()
        block.setLeftMargin(8)
        block.setTopMargin(2)
        char = QTextCharFormat()
        char.setFontItalic(True)
        role = QPalette.ColorRole.Text if error else QPalette.ColorRole.PlaceholderText
        char.setForeground(QColor("#c0392b") if error else self.palette().color(role))
        return block, char

    # -- building the document ----------------------------------------------------------------

    def _new_block(self, fmt: tuple[QTextBlockFormat, QTextCharFormat]) -> QTextCursor:
        cursor = QTextCursor(self.document())
        cursor.movePosition(QTextCursor.MoveOperation.End)
        if not self.document().isEmpty():
            cursor.insertBlock(fmt[0], fmt[1])
        else:
            cursor.setBlockFormat(fmt[0])
            cursor.setBlockCharFormat(fmt[1])
        cursor.setCharFormat(fmt[1])
        return cursor

    def _add_paragraphs(self, header: str, text: str, user: bool) -> QTextCursor:
        header_format = self._header_format()
        self._new_block(header_format).insertText(header, header_format[1])
        body_format = self._body_format(user)
        body = self._new_block(body_format)
        body.insertText(text, body_format[1])
        return body

    def add_user_message(self, text: str) -> None:
        """Show a prompt the user sent."""
        self._add_paragraphs("You", text, user=True)

    def begin_reply(self, speaker: str = "Floodgate") -> None:
        """Start an empty reply that :meth:`append_to_reply` grows."""
        self._reply_cursor = self._add_paragraphs(speaker, "", user=False)

    def append_to_reply(self, text: str) -> None:
        """Append streamed text to the reply in progress."""
        if self._reply_cursor is None:
            self.begin_reply()
            assert self._reply_cursor is not None
        self._reply_cursor.insertText(text)
        self.updates += 1

    def end_reply(self, note: str = "", *, error: bool = False) -> None:
        """Close the reply in progress, with a note under it (for example "Stopped.")."""
        self._reply_cursor = None
        if note:
            self.add_note(note, error=error)

    def add_note(self, text: str, *, error: bool = False) -> None:
        """Show a line from the app itself (a notice or an error) in the conversation."""
        fmt = self._note_format(error)
        self._new_block(fmt).insertText(text, fmt[1])

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
