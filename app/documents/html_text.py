"""The visible text of an HTML page, as a browser would show it."""

from __future__ import annotations

import contextlib
import html.parser
import re
from typing import Final


class _VisibleText(html.parser.HTMLParser):
    """The text a browser shows for an HTML page: paragraphs apart, list items on lines."""

    # Not "head": pages often leave it open, and what it holds besides the title is hidden
    # anyway (scripts, styles) or has no text (meta, link).
    _HIDDEN: Final = frozenset({"script", "style", "template", "noscript"})
    _PARAGRAPHS: Final = frozenset(
        {
            "address", "article", "aside", "blockquote", "details", "dl", "figure", "footer",
            "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "main", "nav", "ol", "p",
            "pre", "section", "table", "ul",
        }
    )  # fmt: skip
    _LINES: Final = frozenset({"dd", "div", "dt", "figcaption", "li", "summary", "tr"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title = ""
        self._hidden = 0
        self._pre = 0
        self._in_title = False
        self._newlines = 2  # the start is the start of a paragraph

    def _break(self, newlines: int) -> None:
        """End the text so far with at least this many line feeds."""
        if self.parts and self._newlines == 0:
            self.parts[-1] = self.parts[-1].rstrip(" ")
        missing = max(0, newlines - self._newlines)
        self.parts.append("\n" * missing)
        self._newlines += missing

    def _block(self, tag: str) -> None:
        if tag in self._PARAGRAPHS:
            self._break(2)
        elif tag in self._LINES:
            self._break(1)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
        elif tag in self._HIDDEN:
            self._hidden += 1
        elif tag == "br":
            self._break(self._newlines + 1)
        elif tag in ("td", "th") and self._newlines == 0:
            self.parts.append("\t")
        else:
            self._block(tag)
        if tag == "pre":
            self._pre += 1

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "br":
            self._break(self._newlines + 1)
        else:
            self._block(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        elif tag in self._HIDDEN:
            self._hidden = max(0, self._hidden - 1)
        else:
            self._block(tag)
        if tag == "pre":
            self._pre = max(0, self._pre - 1)

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        elif self._hidden:
            return
        elif self._pre:
            if data:
                self.parts.append(data)
                self._newlines = len(data) - len(data.rstrip("\n"))
        else:
            # HTML's white space only: a no-break space is text.
            data = _HTML_SPACE.sub(" ", data)
            if self._newlines:
                data = data.lstrip(" ")
            if data:
                self.parts.append(data)
                self._newlines = 0


_HTML_SPACE: Final = re.compile(r"[ \t\n\r\f]+")


def visible_text(markup: str) -> str:
    """The visible text of an HTML page: no tags, scripts, styles or comments."""
    parser = _VisibleText()
    with contextlib.suppress(AssertionError):  # html.parser's own complaints on broken markup
        parser.feed(markup)
        parser.close()
    body = "".join(parser.parts).rstrip(" ")
    text = re.sub(r"\n{3,}", "\n\n", body).strip("\n")
    title = _HTML_SPACE.sub(" ", parser.title).strip()
    if title and not text.startswith(title):
        text = f"{title}\n\n{text}" if text else title
    return text
