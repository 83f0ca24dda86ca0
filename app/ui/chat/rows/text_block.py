"""A block of text the conversation view shows, and whose selection the view drives.

Each row of the conversation shows its text in a :class:`TextBlock`: a widget that paints a
:class:`QTextDocument` itself instead of a ``QLabel``. The view needs three things a label does
not give: the character under a point (to start and extend a selection that runs across rows),
painting a selection it decides, and the plain text of any part of the block (to copy it in
reading order). The text itself, and the document made for it only when needed, are
:mod:`app.ui.chat.rows.document_text`'s. Mouse presses are not handled here: they go on to
the row stack, which owns the selection (see :mod:`app.ui.chat.selection`); a click on a link
is reported back by the view through :attr:`TextBlock.link_activated`.
"""

from __future__ import annotations

import math

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
)
from PySide6.QtWidgets import QSizePolicy, QWidget
from typing_extensions import override

from app.ui.chat.rows.document_text import DocumentText, as_plain
from app.ui.chat.rows.tail import TailPlace

SAFE_LINK_SCHEMES = ("http", "https", "mailto")
"""The only links a click opens (in the system browser); other schemes are not followed."""


@Slot(str)
def open_link(href: str) -> None:
    """Open a link the user clicked in the system browser, if it is a web or mail link."""
    url = QUrl(href)
    if url.scheme().lower() in SAFE_LINK_SCHEMES:
        QDesktopServices.openUrl(url)


class TextBlock(DocumentText):
    """Text (plain, or rich HTML from the Markdown renderer) with a selection set from outside.

    The text and its document are :class:`DocumentText`'s; here they are measured, hit tested,
    selected and painted.

    Args:
        wrap: whether lines wrap at the widget's width (code does not wrap: it scrolls).

    Signals:
        link_activated(str): a link in the text was clicked (opened if it is safe).
    """

    link_activated = Signal(str)

    def __init__(self, parent: QWidget | None = None, *, wrap: bool = True) -> None:
        super().__init__(parent, wrap=wrap)
        self._selection = (0, 0)
        self._palette: QPalette | None = None
        self._context: QAbstractTextDocumentLayout.PaintContext | None = None
        self._context_selects = False
        self.setMouseTracking(True)  # a pointing hand over links
        self.setCursor(Qt.CursorShape.IBeamCursor)
        self.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.link_activated.connect(open_link)
        if wrap:
            policy = QSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)
            policy.setHeightForWidth(True)
            self.setSizePolicy(policy)

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
            self.settle()  # the lines break anew, the tail's words with them
            self._document.setTextWidth(width)

    @override
    def resizeEvent(self, event: QResizeEvent) -> None:
        self._set_text_width(max(1, self.contentsRect().width()))
        if event.oldSize().width() != event.size().width():
            # The lines break anew. A block with static contents (a reply's: see TextRow) is
            # otherwise given only the area a resize adds to paint.
            self.update()

    @override
    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.FontChange:
            self.settle()  # drawn in the old font
            self._heights.clear()
            self._ideal = None
            if self._document is not None:
                self._document.setDefaultFont(self.font())
        elif event.type() == QEvent.Type.PaletteChange:
            self._palette = None
            self._context = None  # it holds a copy of the old palette

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
        # The tail's words hold no link: the pointer moving over a streaming paragraph does
        # not have them typed in.
        return self.shown_document.documentLayout().anchorAt(self._to_document(point))

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

    def _paint_context(self) -> QAbstractTextDocumentLayout.PaintContext:
        # Made once per palette: setting a context's palette copies it, and this runs for
        # every row on screen in every frame of a streaming reply.
        if self._context is None:
            context = QAbstractTextDocumentLayout.PaintContext()
            context.palette = self._paint_palette()
            self._context = context
            self._context_selects = False
        return self._context

    @override
    def paintEvent(self, event: QPaintEvent) -> None:
        # Kept lean: it runs for every row on screen in every frame of a streaming reply.
        painter = QPainter(self)
        clip = event.rect()
        origin = self.contentsRect().topLeft()
        if not origin.isNull():  # only a code block's text has margins
            painter.translate(origin)
            clip.translate(-origin)
        tail = self.tail
        start, end = self._selection
        if (
            tail is not None
            and start == end
            and clip.left() >= tail[1].clear
            and clip.top() >= tail[1].top
            and clip.bottom() < tail[1].bottom
        ):
            # Most frames of a streaming reply: the tail's new words, where the document has
            # nothing to draw.
            self._draw_tail(painter, *tail)
            return
        document = self.shown_document
        context = self._paint_context()
        context.clip = QRectF(clip)
        if start != end:
            palette = self._paint_palette()
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
            self._context_selects = True
        elif self._context_selects:
            context.selections = []
            self._context_selects = False
        document.documentLayout().draw(painter, context)
        tail = self.tail  # none where a selection was painted: that typed it in
        if tail is not None:
            self._draw_tail(painter, *tail)

    def _draw_tail(self, painter: QPainter, text: str, place: TailPlace) -> None:
        """Draw words typed after the document's last line where typing them would show them."""
        painter.setLayoutDirection(Qt.LayoutDirection.LeftToRight)
        painter.setFont(place.font)
        painter.setPen(place.color or self._paint_palette().color(QPalette.ColorRole.Text))
        painter.drawText(place.origin(), text)

    @override
    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        if event.buttons() == Qt.MouseButton.NoButton:
            over_link = bool(self.anchor_at(event.position().toPoint()))
            if over_link:
                self.setCursor(Qt.CursorShape.PointingHandCursor)
            else:
                self.setCursor(Qt.CursorShape.IBeamCursor)
        event.ignore()  # the row stack drives selection
