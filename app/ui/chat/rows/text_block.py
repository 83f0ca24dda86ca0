"""A block of text the conversation view shows, and whose selection the view drives.

Each row of the conversation shows its text in a :class:`TextBlock`: a widget that paints a
:class:`QTextDocument` itself instead of a ``QLabel``. The view needs three things a label does
not give: the character under a point (to start and extend a selection that runs across rows),
painting a selection it decides, and the plain text of any part of the block (to copy it in
reading order). Mouse presses are not handled here: they go on to the row stack, which owns
the selection (see :mod:`app.ui.chat.selection`); a click on a link is reported back by the view
through :attr:`TextBlock.link_activated`.
"""

from __future__ import annotations

import math
import re
from collections import OrderedDict

from PySide6.QtCore import QEvent, QPoint, QPointF, QRectF, QSize, Qt, QUrl, Signal, Slot
from PySide6.QtGui import (
    QAbstractTextDocumentLayout,
    QDesktopServices,
    QMouseEvent,
    QPainter,
    QPaintEvent,
    QPalette,
    QResizeEvent,
    QTextCharFormat,
    QTextCursor,
    QTextDocument,
    QTextOption,
)
from PySide6.QtWidgets import QSizePolicy, QWidget
from shiboken6 import Shiboken
from typing_extensions import override

SAFE_LINK_SCHEMES = ("http", "https", "mailto")
"""The only links a click opens (in the system browser); other schemes are not followed."""


@Slot(str)
def open_link(href: str) -> None:
    """Open a link the user clicked in the system browser, if it is a web or mail link."""
    url = QUrl(href)
    if url.scheme().lower() in SAFE_LINK_SCHEMES:
        QDesktopServices.openUrl(url)


LIVE_DOCUMENTS = 300
"""At most this many blocks keep their laid-out document; the ones painted longest ago give
theirs up and make it again when shown. A document costs about 30 KB whatever its text: a
1 MB reply of short blocks kept them all would cost over 300 MB."""

_live: OrderedDict[int, TextBlock] = OrderedDict()
"""The blocks holding a document, the one painted (or made) longest ago first."""


def _keep(block: TextBlock) -> None:
    _live[id(block)] = block
    _live.move_to_end(id(block))
    while len(_live) > LIVE_DOCUMENTS:
        _key, oldest = _live.popitem(last=False)
        if Shiboken.isValid(oldest):  # its row may have been deleted meanwhile
            oldest.release()


def _forget(block: TextBlock) -> None:
    _live.pop(id(block), None)


_CLOSING_TAIL = re.compile(
    r"(?:\s*</(?:p|li|ul|ol|h[1-6]|em|strong|b|i|s|del|code|a|span|body|html)>)+\s*\Z"
)
"""Closing tags that may end a rich block whose last paragraph grows: text put just before them
lands in the document's last text block (a table or a code block ends in a frame, which a cursor
at the document's end is not in, so they are not here)."""

_NOT_PLAIN = re.compile(r"[<>&\t\n\r\f\v\u00a0\u2028\u2029]|  ")


def appended_text(old: str, new: str) -> str | None:
    """The text ``new`` adds at the end of ``old``'s last paragraph, if that is all it changes.

    Both are HTML from the Markdown renderer. The answer is text that means the same typed
    into the document as it does in HTML: no markup, no entity, no whitespace that HTML would
    fold (a line break, a double space, a space at either edge where it could join another).
    A streaming paragraph grows this way nearly every update, and typing the new words into
    the laid-out document costs a small part of parsing the whole paragraph's HTML again.

    Returns:
        The added text, or None when the change is anything else (then ``new`` is set whole).
    """
    tail = _CLOSING_TAIL.search(old)
    if tail is None or len(new) <= len(old):
        return None
    cut = tail.start()
    head = old[:cut]
    if not head or head[-1] in "> " or not new.startswith(head) or not new.endswith(old[cut:]):
        return None
    added = new[cut : cut + len(new) - len(old)]
    if _NOT_PLAIN.search(added) or added.endswith(" "):
        return None
    return added


def as_plain(text: str) -> str:
    """A document's text with its paragraph and line separators as newlines."""
    return text.replace("\u2029", "\n").replace("\u2028", "\n")


def _last_line_top(document: QTextDocument) -> int:
    """Where the document's last line begins, in pixels from its top (0 when not laid out)."""
    block = document.lastBlock()
    layout = block.layout()
    if layout is None or layout.lineCount() == 0:
        return 0
    top = document.documentLayout().blockBoundingRect(block).top()
    return int(top + layout.lineAt(layout.lineCount() - 1).y())


class TextBlock(QWidget):
    """Text (plain, or rich HTML from the Markdown renderer) with a selection set from outside.

    Args:
        wrap: whether lines wrap at the widget's width (code does not wrap: it scrolls).

    Signals:
        link_activated(str): a link in the text was clicked (opened if it is safe).
    """

    link_activated = Signal(str)

    def __init__(self, parent: QWidget | None = None, *, wrap: bool = True) -> None:
        super().__init__(parent)
        self._document: QTextDocument | None = None
        self._wrap = wrap
        self._format = Qt.TextFormat.PlainText
        self._plain: str | None = ""
        self._laid: str = ""
        """The plain text the document holds (all of it, or a folded prompt's beginning)."""
        self._full: str | None = None
        """The whole text, when the document holds only its beginning (a folded prompt)."""
        self._html = ""
        self._style_sheet = ""
        self._text_width = -1.0
        self._length: int | None = 0
        self._heights: dict[int, int] = {}
        self._ideal: QSize | None = None
        self._selection = (0, 0)
        self._palette: QPalette | None = None
        self.typed = 0
        """How many updates typed their words into the document (the tests count them)."""
        self.setMouseTracking(True)  # a pointing hand over links
        self.setCursor(Qt.CursorShape.IBeamCursor)
        self.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.link_activated.connect(open_link)
        if wrap:
            policy = QSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)
            policy.setHeightForWidth(True)
            self.setSizePolicy(policy)

    # -- the document -------------------------------------------------------------------------

    @property
    def document(self) -> QTextDocument:
        """The laid-out text: made when needed (painting, measuring, hit testing)."""
        if self._document is None:
            self._document = self._make_document()
        _keep(self)
        return self._document

    def _make_document(self) -> QTextDocument:
        document = QTextDocument(self)
        document.setDocumentMargin(0)
        document.setDefaultFont(self.font())
        document.setUndoRedoEnabled(False)
        if not self._wrap:
            option = QTextOption(document.defaultTextOption())
            option.setWrapMode(QTextOption.WrapMode.NoWrap)
            document.setDefaultTextOption(option)
        if self._format == Qt.TextFormat.RichText:
            document.setDefaultStyleSheet(self._style_sheet)
            document.setHtml(self._html)
        else:
            document.setPlainText(self._laid)
        if self._wrap and self._text_width >= 0:
            document.setTextWidth(self._text_width)
        if self._length is None:
            self._length = document.characterCount() - 1
        return document

    @property
    def holds_document(self) -> bool:
        """Whether the laid-out document is in memory now."""
        return self._document is not None

    def forget(self) -> None:
        """The block is about to be deleted: it leaves the blocks that keep a document."""
        _forget(self)

    def release(self) -> None:
        """Give up the laid-out document (made again when needed); what it measured is kept."""
        _forget(self)
        if self._document is not None:
            if self._plain is None:
                # Kept: copying a selection across thousands of rows reads it from each.
                self._plain = as_plain(self._document.toPlainText())
            document, self._document = self._document, None
            document.setParent(None)  # freed with its last reference, now

    def _new_content(self) -> None:
        self._heights.clear()
        self._ideal = None
        self._length = None
        self._plain = None

    # -- content ------------------------------------------------------------------------------

    def set_plain(self, text: str, *, shown: str | None = None) -> None:
        """Show text as it is: never interpreted as markup.

        Args:
            text: the text.
            shown: only this beginning of it is laid out (a folded 1 MB paste would take
                hundreds of milliseconds and megabytes to lay out whole); copying and the
                selection's offsets still cover all of ``text``.
        """
        self._format = Qt.TextFormat.PlainText
        self._full = None if shown is None else text
        self._laid = text if shown is None else shown
        self._new_content()
        if self._document is not None:
            self._document.setPlainText(self._laid)
        self._changed()

    @property
    def cut(self) -> bool:
        """Whether only the beginning of the text is laid out."""
        return self._full is not None

    def set_html(self, html: str, *, style_sheet: str = "") -> None:
        """Show rich text (safe HTML made by :mod:`app.markdown.stream` or Pygments).

        Args:
            html: the text.
            style_sheet: CSS for it. Given here rather than in a ``<style>`` element of
                ``html``: the document keeps it parsed, where a ``<style>`` would be parsed
                again with every update of a streaming paragraph.
        """
        document = self._document
        added = (
            appended_text(self._html, html)
            if document is not None
            and self._format == Qt.TextFormat.RichText
            and style_sheet == self._style_sheet
            else None
        )
        self._format = Qt.TextFormat.RichText
        self._html = html
        self._laid = ""
        self._full = None
        self._new_content()
        if document is not None and added is not None:
            # The words a streaming paragraph grew by, typed at its end in the format of the
            # text before them: the document lays out only its last paragraph again.
            # In an edit block: outside one, each move and insertion asks the layout where
            # the cursor's line puts it (QTextCursorPrivate::setX), which lays the paragraph
            # out once more (measured: 0.39 ms per word at 200 words, 0.22 ms in a block).
            # Lines above the last one keep their breaks (Qt breaks lines greedily), so only
            # the last line down is painted again: a paragraph of ten lines repaints one.
            changed_from = _last_line_top(document)
            cursor = QTextCursor(document)
            cursor.beginEditBlock()
            cursor.movePosition(QTextCursor.MoveOperation.End)
            cursor.insertText(added)
            cursor.endEditBlock()
            self.typed += 1
        else:
            changed_from = 0
            if document is not None:
                if style_sheet != self._style_sheet:
                    document.setDefaultStyleSheet(style_sheet)
                document.setHtml(html)
        self._style_sheet = style_sheet
        self._changed(changed_from)

    @property
    def style_sheet(self) -> str:
        """The CSS rich text is shown with."""
        return self._style_sheet

    def textFormat(self) -> Qt.TextFormat:
        """How the text was given: plain (never interpreted) or rich."""
        return self._format

    def text(self) -> str:
        """The text as given: the plain text, or the HTML of a rich block."""
        if self._format == Qt.TextFormat.PlainText:
            return self.plain_text()
        return self._html

    def plain_text(self) -> str:
        """The text as shown, without markup."""
        if self._full is not None:
            return self._full
        if self._plain is None:
            self._plain = as_plain(self.document.toPlainText())
        return self._plain

    def length(self) -> int:
        """How many character positions the text has (selection offsets run 0 to this)."""
        if self._full is not None:
            return len(self._full)
        return self._laid_out()

    def _laid_out(self) -> int:
        if self._length is None:
            self._length = self.document.characterCount() - 1
        return self._length

    def _changed(self, from_y: int = 0) -> None:
        """Repaint from ``from_y`` (in the document) down: what changed."""
        if not self._wrap:
            self.updateGeometry()
        if from_y <= 0:
            self.update()
        else:
            top = self.contentsMargins().top() + from_y
            self.update(0, top, self.width(), self.height() - top)

    # -- geometry -----------------------------------------------------------------------------

    def height_for(self, width: int) -> int:
        """Height of the text laid out ``width`` pixels wide (margins included)."""
        margins = self.contentsMargins()
        if not self._wrap:
            return self._ideal_size().height() + margins.top() + margins.bottom()
        inner = max(1, width - margins.left() - margins.right())
        height = self._heights.get(inner)
        if height is None:
            self._set_text_width(inner)
            height = math.ceil(self.document.size().height())
            if len(self._heights) > 8:
                self._heights.clear()  # a window being resized: keep only recent widths
            self._heights[inner] = height
        return height + margins.top() + margins.bottom()

    def _ideal_size(self) -> QSize:
        """The unwrapped text's size, measured once (kept when the document is given up)."""
        if self._ideal is None:
            document = self.document
            self._ideal = QSize(
                math.ceil(document.idealWidth()), math.ceil(document.size().height())
            )
        return self._ideal

    def line_height(self) -> int:
        """The height of one line of text in the block's font."""
        return self.fontMetrics().lineSpacing()

    @override
    def heightForWidth(self, width: int) -> int:
        return self.height_for(width)

    @override
    def hasHeightForWidth(self) -> bool:
        return self._wrap

    @override
    def sizeHint(self) -> QSize:
        margins = self.contentsMargins()
        if self._wrap:
            width = max(1, self.width())
            return QSize(width, self.height_for(width))
        ideal = self._ideal_size()
        return QSize(
            ideal.width() + margins.left() + margins.right(),
            ideal.height() + margins.top() + margins.bottom(),
        )

    def _set_text_width(self, width: int) -> None:
        # QTextDocument lays out the whole text again on every setTextWidth, even to the same
        # width: measuring a row and then giving it that size must not pay for two layouts.
        if not self._wrap or self._text_width == width:
            return
        self._text_width = width
        if self._document is not None:
            self._document.setTextWidth(width)

    @override
    def resizeEvent(self, event: QResizeEvent) -> None:
        self._set_text_width(max(1, self.contentsRect().width()))

    @override
    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.FontChange:
            self._heights.clear()
            self._ideal = None
            if self._document is not None:
                self._document.setDefaultFont(self.font())
        elif event.type() == QEvent.Type.PaletteChange:
            self._palette = None

    # -- hit testing and selection ------------------------------------------------------------

    def _to_document(self, point: QPoint) -> QPointF:
        origin = self.contentsRect().topLeft()
        return QPointF(point.x() - origin.x(), point.y() - origin.y())

    def position_at(self, point: QPoint) -> int:
        """The character position nearest ``point`` (in this widget's coordinates)."""
        layout = self.document.documentLayout()
        position = layout.hitTest(self._to_document(point), Qt.HitTestAccuracy.FuzzyHit)
        return min(max(position, 0), self._laid_out())

    def anchor_at(self, point: QPoint) -> str:
        """The address of the link at ``point``, or ``""``."""
        return self.document.documentLayout().anchorAt(self._to_document(point))

    def word_at(self, position: int) -> tuple[int, int]:
        """The start and end of the word around ``position``."""
        cursor = QTextCursor(self.document)
        cursor.setPosition(min(position, self._laid_out()))
        cursor.select(QTextCursor.SelectionType.WordUnderCursor)
        return cursor.selectionStart(), cursor.selectionEnd()

    @property
    def selection(self) -> tuple[int, int]:
        """The selected range, as (start, end) character positions; empty when equal."""
        return self._selection

    def set_selection(self, start: int, end: int) -> None:
        """Select the characters from ``start`` to ``end`` (painted in the highlight colour)."""
        selection = (min(start, end), max(start, end))
        if selection != self._selection:
            self._selection = selection
            self.update()

    def selected_text(self) -> str:
        """The selected part of the text, as plain text."""
        start, end = self._selection
        if start == end:
            return ""
        if self._full is not None:
            return self._full[start:end]
        cursor = QTextCursor(self.document)
        cursor.setPosition(min(start, self.length()))
        cursor.setPosition(min(end, self.length()), QTextCursor.MoveMode.KeepAnchor)
        return as_plain(cursor.selectedText())

    # -- painting and the pointer -------------------------------------------------------------

    def _paint_palette(self) -> QPalette:
        # The document draws in the palette's Text colour; a label's text is its foreground.
        if self._palette is None:
            palette = QPalette(self.palette())
            palette.setColor(QPalette.ColorRole.Text, palette.color(self.foregroundRole()))
            self._palette = palette
        return self._palette

    @override
    def paintEvent(self, event: QPaintEvent) -> None:
        # Kept lean: it runs for every row on screen in every frame of a streaming reply.
        painter = QPainter(self)
        origin = self.contentsRect().topLeft()
        painter.translate(origin)
        context = QAbstractTextDocumentLayout.PaintContext()
        palette = self._paint_palette()
        context.palette = palette
        context.clip = QRectF(event.rect().translated(-origin))
        start, end = self._selection
        if start != end:
            chosen = QAbstractTextDocumentLayout.Selection()
            cursor = QTextCursor(self.document)
            cursor.setPosition(min(start, self._laid_out()))
            cursor.setPosition(min(end, self._laid_out()), QTextCursor.MoveMode.KeepAnchor)
            chosen.cursor = cursor
            look = QTextCharFormat()
            look.setBackground(palette.color(QPalette.ColorRole.Highlight))
            look.setForeground(palette.color(QPalette.ColorRole.HighlightedText))
            chosen.format = look
            context.selections = [chosen]
        self.document.documentLayout().draw(painter, context)

    @override
    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        if event.buttons() == Qt.MouseButton.NoButton:
            over_link = bool(self.anchor_at(event.position().toPoint()))
            if over_link:
                self.setCursor(Qt.CursorShape.PointingHandCursor)
            else:
                self.setCursor(Qt.CursorShape.IBeamCursor)
        event.ignore()  # the row stack drives selection
