"""Streaming Markdown: a reply's text, cut into top-level blocks that are final once closed.

No Qt here: this module turns text into blocks (HTML for prose, raw source for code) and the
chat view turns blocks into widgets.

The approach is Textual's streaming Markdown. A reply grows only at its end, and in CommonMark
a new top-level block can only begin once the one before it has ended, so every block but the
last is final: it is rendered once and never parsed again. Each update re-parses only the open
tail, which keeps the cost of an update independent of how long the reply already is.

A block is treated as closed only when the block after it starts on a complete line: a partial
line can still change what it is (``2`` becomes a list item once ``.`` arrives and would then
continue the list above it).

Model output is untrusted. Raw HTML is escaped (markdown-it's ``html`` option is off), images
are shown as their description and address and never loaded, and a link shows its address
next to its text so the reader sees where it goes before clicking.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict

BlockKind = Literal["text", "code"]

SEGMENT_LINES = 48
"""A growing paragraph or code block with this many finished lines is shown in segments."""


@dataclass(frozen=True)
class Block:
    """One top-level Markdown block, ready to show.

    Attributes:
        kind: ``"code"`` for a fenced or indented code block, ``"text"`` for everything else.
        html: the block as (safe) HTML, for ``"text"`` blocks.
        code: the code, for ``"code"`` blocks (the fence's content, without the fences).
        language: the fence's info word (``python``), or ``""``.
        source: the Markdown the block was made from.
        part: for a long block shown in segments, which segment this is (0: the first).
        continued: more segments of the same block follow this one.
    """

    kind: BlockKind
    html: str = ""
    code: str = ""
    language: str = ""
    source: str = ""
    part: int = 0
    continued: bool = False


@dataclass
class BlockUpdate:
    """What changed after :meth:`MarkdownStream.feed`.

    Attributes:
        closed: blocks that became final with this update, in order. They follow the blocks
            closed by earlier updates and take the place of the first open blocks shown so far.
        open: the blocks at the end that may still change, in full (re-render these).
    """

    closed: list[Block] = field(default_factory=list)
    open: list[Block] = field(default_factory=list)


def _link_close(
    renderer: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    # Show where a link goes: "text (https://…)" unless the text already is the address.
    depth = 0
    for i in range(idx - 1, -1, -1):
        token = tokens[i]
        if token.type == "link_close":
            depth += 1
        elif token.type == "link_open":
            if depth:
                depth -= 1
                continue
            href = str(token.attrGet("href") or "")
            label = "".join(
                t.content for t in tokens[i + 1 : idx] if t.type in ("text", "code_inline")
            )
            shown = href.removeprefix("mailto:")
            if label.strip() in (href, shown):
                return "</a>"
            return f'</a> <span class="address">({escapeHtml(href)})</span>'
    return "</a>"


def _image(
    renderer: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    # Never fetched: an image is shown as its description and its address.
    token = tokens[idx]
    alt = "".join(t.content for t in (token.children or []))
    src = str(token.attrGet("src") or "")
    return (
        f'<span class="image">[{escapeHtml(alt) or "image"}]</span> '
        f'<span class="address">({escapeHtml(src)})</span>'
    )


def _table_open(
    renderer: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    # Qt's rich text draws no cell borders unless the table asks for them.
    return '<table class="md" border="1" cellspacing="0" cellpadding="4">\n'


def make_parser() -> MarkdownIt:
    """CommonMark plus GFM tables, strikethrough and hard line breaks; raw HTML off."""
    # ``breaks``: models write poems, addresses and steps one per line and expect them to stay
    # on their own lines, as chat apps show them; CommonMark alone would join them.
    md = MarkdownIt("commonmark", {"html": False, "breaks": True})
    md.enable(["table", "strikethrough"])

    md.add_render_rule("link_close", _link_close)
    md.add_render_rule("image", _image)
    md.add_render_rule("table_open", _table_open)
    return md


_PARSER = make_parser()


def _groups(tokens: list[Token]) -> list[list[Token]]:
    """Split a token stream into its top-level blocks."""
    groups: list[list[Token]] = []
    depth = 0
    for token in tokens:
        if depth == 0:
            groups.append([])
        groups[-1].append(token)
        depth += token.nesting
    return groups


def _to_block(group: list[Token], lines: list[str], end_line: int, md: MarkdownIt) -> Block:
    first = group[0]
    start = first.map[0] if first.map else 0
    source = "".join(lines[start:end_line])
    if first.type in ("fence", "code_block"):
        return Block("code", code=first.content, language=_language(first), source=source)
    return Block("text", html=md.renderer.render(group, md.options, {}), source=source)


def _blocks(groups: list[list[Token]], lines: list[str], md: MarkdownIt) -> list[Block]:
    blocks = []
    for i, group in enumerate(groups):
        nxt = groups[i + 1][0].map if i + 1 < len(groups) else None
        end = nxt[0] if nxt else len(lines)
        blocks.append(_to_block(group, lines, end, md))
    return blocks


class MarkdownStream:
    """Turns a growing text into final blocks plus an open tail, re-parsing only the tail."""

    def __init__(self, md: MarkdownIt | None = None) -> None:
        self._md = md or _PARSER
        self._tail = ""
        self._held_cr = False
        self._part = 0
        self.closed_count = 0
        """How many blocks are final so far."""

    @property
    def tail(self) -> str:
        """The text not yet part of a final block."""
        return self._tail

    def feed(self, text: str) -> BlockUpdate:
        """Add text at the end; returns the blocks that closed and the open ones."""
        if self._held_cr:
            text = "\r" + text
            self._held_cr = False
        if text.endswith("\r"):
            # It may be the first half of "\r\n": decide when the next piece comes.
            text, self._held_cr = text[:-1], True
        self._tail += text.replace("\r\n", "\n").replace("\r", "\n")
        return self._update(final=False)

    def finish(self) -> BlockUpdate:
        """The text is complete: every block is final."""
        if self._held_cr:
            self._tail += "\n"
            self._held_cr = False
        return self._update(final=True)

    def _update(self, *, final: bool) -> BlockUpdate:
        md = self._md
        tail = self._tail
        lines = tail.splitlines(keepends=True)
        groups = _groups(md.parse(tail))
        complete = len(lines) if (final or tail.endswith("\n")) else len(lines) - 1
        # The last group that starts on a complete line begins the open tail.
        cut = 0
        if final:
            cut = len(groups)
        else:
            for i in range(len(groups) - 1, 0, -1):
                start = groups[i][0].map
                if start is not None and start[0] < complete:
                    cut = i
                    break
        blocks = _stamp(_blocks(groups, lines, md), self._part)
        update = BlockUpdate(closed=blocks[:cut], open=blocks[cut:])
        if cut:
            if cut < len(groups):
                start_map = groups[cut][0].map
                assert start_map is not None
                self._tail = "".join(lines[start_map[0] :])
            else:
                self._tail = ""
            self.closed_count += cut
            self._part = 0
        if not final and self._tail.count("\n") >= SEGMENT_LINES:
            segment = self._segment()
            if segment is not None:
                update.closed.append(segment)
                self.closed_count += 1
                rest = self._tail.splitlines(keepends=True)
                update.open = _stamp(_blocks(_groups(md.parse(self._tail)), rest, md), self._part)
        return update

    def _segment(self) -> Block | None:
        """Make the finished lines of a long open paragraph or code block final.

        A block that keeps growing (a long code listing, a paragraph of many short lines)
        would otherwise be re-rendered whole every frame. Its finished lines are split off as a
        final segment when the result reads the same: a paragraph only where its lines render
        identically on their own (no emphasis or link spans the cut), a fenced code block at
        any line (the rest keeps the opening fence, so it stays code).
        """
        md = self._md
        lines = self._tail.splitlines(keepends=True)
        complete = self._tail.count("\n")
        groups = _groups(md.parse(self._tail))
        if len(groups) != 1:
            return None
        group = groups[0]
        first = group[0]
        if first.type == "fence" and lines[0][:1] in "`~":
            closing = lines[complete - 1].strip()
            if closing and set(closing) == {first.markup[0]} and complete > 1:
                return None  # already closed: the next block will close it for good
            code_lines = complete - 2  # keep the last finished line with the open rest
            code = "".join(lines[1 : 1 + code_lines])
            segment = Block(
                "code",
                code=code,
                language=_language(first),
                source=(lines[0] if self._part == 0 else "") + code,
                part=self._part,
                continued=True,
            )
            self._tail = lines[0] + "".join(lines[1 + code_lines :])
            self._part += 1
            return segment
        if first.type == "paragraph_open":
            whole = md.renderer.render(group, md.options, {})
            for cut in range(complete - 1, max(0, complete - 9), -1):
                head, rest = "".join(lines[:cut]), "".join(lines[cut:])
                head_groups, rest_groups = _groups(md.parse(head)), _groups(md.parse(rest))
                if len(head_groups) != 1 or len(rest_groups) != 1:
                    continue
                if rest_groups[0][0].type != "paragraph_open":
                    continue
                head_html = md.renderer.render(head_groups[0], md.options, {})
                rest_html = md.renderer.render(rest_groups[0], md.options, {})
                joined = (
                    head_html.removesuffix("</p>\n") + "<br />\n" + rest_html.removeprefix("<p>")
                )
                if joined != whole:
                    continue
                segment = Block(
                    "text", html=head_html, source=head, part=self._part, continued=True
                )
                self._tail = rest
                self._part += 1
                return segment
        return None


def _stamp(blocks: list[Block], part: int) -> list[Block]:
    """Mark the first block as the continuation of ``part`` earlier segments."""
    if part and blocks:
        first = blocks[0]
        source = first.source
        if first.kind == "code":
            # The rest of a segmented fence is parsed with its opening line, which the first
            # segment already showed.
            source = source.split("\n", 1)[1] if "\n" in source else ""
        blocks[0] = replace(first, part=part, source=source)
    return blocks


def _language(fence: Token) -> str:
    info = fence.info.strip()
    return info.split(maxsplit=1)[0] if info else ""


def render_blocks(text: str) -> list[Block]:
    """The blocks of a complete text rendered at once (what streaming must end up equal to)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = text.splitlines(keepends=True)
    return _blocks(_groups(_PARSER.parse(text)), lines, _PARSER)
