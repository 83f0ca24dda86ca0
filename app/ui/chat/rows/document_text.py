"""The text of a :class:`~app.ui.chat.rows.text_block.TextBlock`, in a document made when needed.

A block's text (plain, or rich HTML from the Markdown renderer) lives in a
:class:`QTextDocument` only while the block is painted, measured or hit tested: at most
:data:`LIVE_DOCUMENTS` blocks keep theirs, and a streaming paragraph's new words are typed into
its document instead of parsing its HTML again (:func:`appended_text`). Words that fit on the
paragraph's last line are not even typed at once: they are drawn after it as its *tail*
(:mod:`app.ui.chat.rows.tail`) and typed in when a word does not fit, or when anything reads
the document.
"""

from __future__ import annotations

import re
from collections import OrderedDict

from PySide6.QtCore import QRect, QSize, Qt
from PySide6.QtGui import QTextDocument, QTextOption
from PySide6.QtWidgets import QWidget
from shiboken6 import Shiboken

from app.ui.chat.rows.tail import Tail, TailPlace, type_in

LIVE_DOCUMENTS = 300
"""At most this many blocks keep their laid-out document; the ones painted longest ago give
theirs up and make it again when shown. A document costs about 30 KB whatever its text: a
1 MB reply of short blocks kept them all would cost over 300 MB."""

_live: OrderedDict[int, DocumentText] = OrderedDict()
"""The blocks holding a document, the one painted (or made) longest ago first."""


def _keep(block: DocumentText) -> None:
    _live[id(block)] = block
    _live.move_to_end(id(block))
    while len(_live) > LIVE_DOCUMENTS:
        _key, oldest = _live.popitem(last=False)
        if Shiboken.isValid(oldest):  # its row may have been deleted meanwhile
            oldest.release()


def _forget(block: DocumentText) -> None:
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


class DocumentText(QWidget):
    """A widget's text, plain or rich, held in a document made only when it is needed.

    What the document measured (its heights by width, its unwrapped size) is kept when the
    document is given up; new text forgets it. :class:`~app.ui.chat.rows.text_block.TextBlock`
    paints, measures and selects the text; this holds it.

    Args:
        wrap: whether lines wrap at the widget's width (code does not wrap: it scrolls).
    """

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
        self._tail = Tail()
        """Words typed after the document's last line and drawn there, not in it yet."""
        self.typed = 0
        """How many updates typed their words at the end (the tests count them)."""
        self.tailed = 0
        """How many of them drew their words as the tail, leaving the document as it was."""
        self.resized = True
        """Whether the last new text may have changed the text's size: false only where words
        typed at its end (:meth:`set_html`) left its height as it was."""
        self._resize_owed = False
        """Whether the tail's words changed the height when typed in (:meth:`settle`)."""

    # -- the document -------------------------------------------------------------------------

    @property
    def document(self) -> QTextDocument:
        """The laid-out text, all of it: made when needed (measuring, hit testing, copying).

        Words drawn as the tail are typed in first.
        """
        document = self.shown_document
        if self._tail.text:
            self.settle()
        return document

    @property
    def shown_document(self) -> QTextDocument:
        """The document as painted: the words of :attr:`tail` are drawn after it."""
        if self._document is None:
            self._document = self._make_document()
        _keep(self)
        return self._document

    @property
    def tail(self) -> tuple[str, TailPlace] | None:
        """Words typed after the document's last line and where they are drawn, if any."""
        tail = self._tail
        place = tail.place
        return (tail.text, place) if tail.text and place is not None else None

    def settle(self) -> None:
        """Type the tail's words into the document, where they then are (nothing if none)."""
        tail = self._tail
        place, text, most = tail.place, tail.text, tail.most
        tail.drop()
        document = self._document
        if document is None or place is None or not text:
            return
        height = document.size().height()
        type_in(document, text)
        if document.size().height() != height:
            # They did not fit after all (a kerning the tail's measure did not see): the text
            # is measured again, and its row is told with the next words typed.
            self._heights.clear()
            self._resize_owed = True
        # The document draws them where the tail did; painted again all the same, so that a
        # difference in how the two round a glyph's position lasts no longer than a frame.
        self.update(place.area(0, most + place.any_overhang))

    def _tail_grown(self, area: QRect, owed: bool) -> None:
        """Words were drawn after the last line: the document, its height and rows are kept."""
        kept = self._heights.get(int(self._text_width))
        self._new_content()
        if kept is not None:
            self._heights[int(self._text_width)] = kept
        self.resized = owed
        self.typed += 1
        self.tailed += 1
        _keep(self)  # painted now: not the first to give its document up
        self.update(area)

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
                # Kept: copying a selection across thousands of rows reads it from each. The
                # tail's words are in the HTML the document is made again from.
                self._plain = as_plain(self._document.toPlainText()) + self._tail.text
            self._tail.drop()
            document, self._document = self._document, None
            document.setParent(None)  # freed with its last reference, now

    def _new_content(self) -> None:
        self._heights.clear()
        self._ideal = None
        self._length = None
        self._plain = None
        self.resized = True

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
        self._tail = Tail()
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

    def set_html(self, html: str, *, style_sheet: str = "", typed: str | None = None) -> None:
        """Show rich text (safe HTML made by :mod:`app.markdown.stream` or Pygments).

        Args:
            html: the text.
            style_sheet: CSS for it. Given here rather than in a ``<style>`` element of
                ``html``: the document keeps it parsed, where a ``<style>`` would be parsed
                again with every update of a streaming paragraph.
            typed: what ``html`` adds at the end of the current HTML's text, where the caller
                knows it (:meth:`~app.markdown.stream.MarkdownStream.type_words`); it is then
                typed without comparing the two. Else :func:`appended_text` finds it, if that
                is all that changed.
        """
        document = self._document
        if (
            document is None
            or self._format != Qt.TextFormat.RichText
            or style_sheet != self._style_sheet
        ):
            added = None
        elif typed is not None:
            added = typed
        else:
            added = appended_text(self._html, html)
        owed, self._resize_owed = self._resize_owed, False
        area = None  # what to paint where the words are drawn as the tail
        if document is not None and added is not None and self._wrap:
            area = self._tail.grow(document, added)
        self._format = Qt.TextFormat.RichText
        self._html = html
        self._laid = ""
        self._full = None
        if area is not None:
            self._tail_grown(area, owed)
            return
        self._new_content()
        if document is not None and added is not None:
            # The words a streaming paragraph grew by, typed at its end in the format of the
            # text before them: the document lays out only its last paragraph again. Lines
            # above the last one keep their breaks (Qt breaks lines greedily), so only the
            # last line down is painted again: a paragraph of ten lines repaints one.
            added = self._tail.text + added
            self._tail.drop()
            changed_from = _last_line_top(document)
            height = document.size().height()
            type_in(document, added)
            self.typed += 1
            # Most words fit on the paragraph's last line: its height is then the same, and
            # the rows need not be measured and placed again (about 0.07 ms of an update in a
            # window whose cores decode). The layout this asks for is the one the paint or the
            # measure would ask for next. Unwrapped text can grow wider at the same height.
            self.resized = owed or not self._wrap or document.size().height() != height
        else:
            changed_from = 0
            self._tail = Tail()  # in the HTML set whole
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
