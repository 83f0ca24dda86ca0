"""A streaming paragraph's *tail*: words typed after its last line, drawn there for now.

Typing a word into a laid-out document makes Qt lay its whole paragraph out again; a word that
fits on the last line moves nothing above it. So the paragraph's
:class:`~app.ui.chat.rows.document_text.DocumentText` keeps such words as its :class:`Tail`,
drawn after the line (where :func:`tail_of` says, as :class:`TailPlace` describes it), and
types them in (:func:`type_in`) when a word does not fit, or when anything reads the document;
:class:`~app.ui.chat.rows.text_block.TextBlock` paints them.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from PySide6.QtCore import QPointF, QRect, Qt
from PySide6.QtGui import QBrush, QColor, QFont, QFontMetricsF, QTextCursor, QTextDocument

RIGHT_TO_LEFT = re.compile(
    "[\u0590-\u08ff\u200f\u202b\u202e\u2067\ufb1d-\ufdff\ufe70-\ufefc"
    "\U00010800-\U00010fff\U0001e800-\U0001efff]"
)
"""Characters that are, or turn text, right to left: a line holding one may be reordered, so
its end is not where a tail is drawn."""

TAIL_SLACK = 1.0
"""A tail is drawn only where it ends this many pixels short of the line's end (and short of
its last glyph's overhang, which Qt counts when it breaks a line): Qt measures the line in
1/64 pixel and could break it where a tail that just fits was measured apart."""

_ASCII = [chr(c) for c in range(32, 127)]

_ASCII_EXTENT: dict[str, tuple[float, float]] = {}
"""By font: the widest advance of a printable ASCII character (the space included, with any
letter and word spacing), and the most such a glyph reaches past its advance. Measured once
per font: the font's own figures cover every glyph it has (22 and 8.5 pixels for the
default sans at 12 pixels, against 12 and 1 for ASCII), and ``maxWidth`` is not the widest on
every platform (Core Text reports a W's)."""


def _ascii_extent(font: QFont, metrics: QFontMetricsF) -> tuple[float, float]:
    key = font.key()
    extent = _ASCII_EXTENT.get(key)
    if extent is None:
        widest = max(metrics.horizontalAdvance(c) for c in _ASCII)
        overhang = max(0.0, *(-metrics.rightBearing(c) for c in _ASCII))
        extent = _ASCII_EXTENT[key] = (widest, overhang)
    return extent


@dataclass(frozen=True)
class TailPlace:
    """Where words typed after a paragraph's last line are drawn before the document has them.

    Typing a word into a laid-out document makes Qt lay its whole paragraph out again (0.07 ms
    plus 0.06 ms per 1,000 characters), though a word that fits on the last line moves nothing
    above it: Qt breaks lines greedily, and a tail that begins with a space is shaped apart
    from the text before it. So such words are drawn from the line's end in the format of the
    text there, and typed in when a word does not fit (every line or so), or before anything
    reads the document. Taken only where drawing it is exactly what typing it shows: a left
    aligned paragraph without right-to-left text, and a plain format (no underline, no
    background, upright).

    Attributes:
        x: where the last line's text ends, in the document.
        baseline: the last line's baseline, in the document.
        top: the last line's top, in the document.
        bottom: the last line's bottom, in the document.
        right: where words must end to fit on the line, in the document.
        overhang: the most an ASCII glyph of the font's reaches past its advance (Qt counts
            the last glyph's when it breaks a line).
        any_overhang: the most any glyph of the font's does.
        clear: where no glyph of the document's reaches (the tail begins with a space).
        font: the font of the text at the line's end.
        metrics: that font's metrics.
        widest: the widest an ASCII character of the font's is: with it, words of ASCII are known
            to fit without measuring them until the line is nearly full (measuring shapes the
            text: about 40 microseconds in a window whose cores decode).
        color: its colour, or None where it is the palette's text colour.
    """

    x: float
    baseline: float
    top: int
    bottom: int
    right: float
    overhang: float
    any_overhang: float
    clear: float
    font: QFont
    metrics: QFontMetricsF
    widest: float
    color: QColor | None

    def area(self, start: float, end: float) -> QRect:
        """The rectangle to paint for the tail's words from ``start`` to ``end`` (in its width).

        A pixel more on each side (``end`` takes in the last glyph's overhang).
        """
        left = int(self.x + start) - 1
        right = int(self.x + end) + 2
        return QRect(left, self.top, right - left, self.bottom - self.top)

    def origin(self) -> QPointF:
        """Where the tail's text starts, on the line's baseline."""
        return QPointF(self.x, self.baseline)


def tail_of(document: QTextDocument) -> TailPlace | None:
    """Where words typed at the end of ``document`` would be drawn, if they may be drawn so."""
    block = document.lastBlock()
    layout = block.layout()
    if layout is None or layout.lineCount() == 0:
        return None
    horizontal = int(block.blockFormat().alignment()) & int(Qt.AlignmentFlag.AlignHorizontal_Mask)
    horizontal &= ~int(Qt.AlignmentFlag.AlignAbsolute)
    if horizontal not in (0, int(Qt.AlignmentFlag.AlignLeft)):
        return None
    if block.textDirection() != Qt.LayoutDirection.LeftToRight or RIGHT_TO_LEFT.search(
        block.text()
    ):
        return None
    cursor = QTextCursor(document)
    cursor.movePosition(QTextCursor.MoveOperation.End)
    look = cursor.charFormat()
    font = look.font().resolve(document.defaultFont())
    if (
        font.italic()
        or font.underline()
        or font.strikeOut()
        or font.overline()
        or look.background().style() != Qt.BrushStyle.NoBrush
        or look.verticalAlignment() != look.VerticalAlignment.AlignNormal
        or look.isAnchor()
    ):
        return None
    brush: QBrush = look.foreground()
    color = None if brush.style() == Qt.BrushStyle.NoBrush else brush.color()
    line = layout.lineAt(layout.lineCount() - 1)
    origin = layout.position()
    top = origin.y() + line.y()
    x = origin.x() + line.x() + line.naturalTextWidth()
    metrics = QFontMetricsF(font)
    widest, overhang = _ascii_extent(font, metrics)
    return TailPlace(
        x=x,
        baseline=top + line.ascent(),
        top=int(top),
        bottom=int(top + line.height()) + 1,
        right=origin.x() + line.x() + line.width() - TAIL_SLACK,
        overhang=overhang,
        any_overhang=max(0.0, -metrics.minRightBearing()),
        clear=x + metrics.horizontalAdvance(" "),
        font=font,
        metrics=metrics,
        widest=widest,
        color=color,
    )


def type_in(document: QTextDocument, text: str) -> None:
    """Type ``text`` at the end of ``document``, in the format of the text before it."""
    # In an edit block: outside one, each move and insertion asks the layout where the
    # cursor's line puts it (QTextCursorPrivate::setX), which lays the paragraph out once more
    # (measured: 0.39 ms per word at 200 words, 0.22 ms in a block).
    cursor = QTextCursor(document)
    cursor.beginEditBlock()
    cursor.movePosition(QTextCursor.MoveOperation.End)
    cursor.insertText(text)
    cursor.endEditBlock()


class Tail:
    """A paragraph's tail: words typed after its last line, drawn there and not in it yet.

    Attributes:
        text: the words ("" when there are none).
        place: where they are drawn (None when there are none).
        refused: the paragraph takes no tail, as typed words leave it: not asked again.
    """

    def __init__(self) -> None:
        self.text = ""
        self.place: TailPlace | None = None
        self.refused = False
        self._known = 0.0
        """The width of the words as last measured (words added since come after it)."""
        self._most = 0.0
        """The most the words' width can be."""

    @property
    def most(self) -> float:
        """The most the words' width can be (what they were measured at, or a bound)."""
        return self._most

    def drop(self) -> None:
        """No words any more (typed in, or given up with the text they followed)."""
        self.text = ""
        self.place = None
        self._known = self._most = 0.0

    def grow(self, document: QTextDocument, added: str) -> QRect | None:
        """Draw ``added`` as (more of) the tail, if it fits on the last line: the area to paint.

        Args:
            document: the paragraph's laid-out document, without the tail's words.
            added: the words typed after the tail's.

        Returns:
            The rectangle to paint, in the document; None where the words are to be typed in
            (with the tail's, which the caller then drops).
        """
        place = self.place
        if not self.text:
            # Begun only at a space, so the tail is shaped apart from the text before it.
            if self.refused or not added.startswith(" "):
                return None
            place = tail_of(document)
            if place is None:
                layout = document.lastBlock().layout()
                self.refused = layout is not None and layout.lineCount() > 0  # else: not yet
                return None
        if place is None or RIGHT_TO_LEFT.search(added):
            return None
        text = self.text + added
        known = self._known
        most = self._most + place.widest * len(added) if added.isascii() else math.inf
        # Qt breaks a line where its text and its last glyph's overhang pass the line's end.
        overhang = place.overhang if text[-1].isascii() else place.any_overhang
        if not self.text or place.x + most + overhang > place.right:
            # It may not fit, or begins the tail: measured (a few times a line). The words
            # typed later are then painted from the first word's end, where the document has
            # nothing to draw.
            most = known = place.metrics.horizontalAdvance(text)
            if place.x + most + overhang > place.right:
                return None
        # Painted from the tail's width as last measured: the new words begin there or after.
        area = place.area(self._known, most + overhang)
        self.text, self.place = text, place
        self._known, self._most = known, most
        return area
