"""Blocks that are complete but may still change, and growing blocks shown in segments.

No Qt here. Two parts of :class:`~app.markdown.stream.MarkdownStream`:

- :class:`HeldBlocks`: complete blocks shown among the open ones until nothing written later
  can change them (a link reference definition still to come, a segmented paragraph or list
  whose end decides what it is), with the definitions seen so far;
- :class:`Segmenter`: a block that keeps growing (a long paragraph, code listing, list or
  table) has its finished part split off as a segment where the pieces render exactly as the
  whole does, so an update never parses it whole; when the block ends, its segments are made
  to agree with it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Literal

from markdown_it import MarkdownIt
from markdown_it.common.utils import MD_TRIM_CHARS
from markdown_it.rules_block.table import escapedSplit
from markdown_it.token import Token
from markdown_it.utils import EnvType

from app.markdown.parser import (
    Block,
    References,
    blocks_of,
    fence_language,
    group_start,
    is_list,
    parse_cost,
    parse_text,
    render_tokens,
    to_block,
    top_groups,
    undefined_labels,
)

SegmentKind = Literal["paragraph", "code", "list", "table"]
Remake = Callable[[References, bool], Block]
"""Renders a held block again (with the given definitions; loose, for a list segment)."""


@dataclass
class SegmentedBlock:
    """The open block being shown in segments."""

    kind: SegmentKind
    parts: int = 0
    ordered: bool = False
    start: int = 1
    items: int = 0
    loose: bool = False


@dataclass
class HeldBlock:
    """A complete block shown among the open ones until nothing later can change it."""

    block: Block
    labels: frozenset[str] = frozenset()
    settled: bool = True
    segmented: SegmentedBlock | None = None
    remake: Remake | None = None
    loose: bool = False


class HeldBlocks:
    """The complete blocks still shown among the open ones, and the definitions seen so far."""

    def __init__(self) -> None:
        self.blocks: list[HeldBlock] = []
        self.refs: References = {}

    def hold(
        self,
        block: Block,
        *,
        settled: bool = True,
        segmented: SegmentedBlock | None = None,
        remake: Remake | None = None,
        loose: bool = False,
    ) -> None:
        """Keep ``block`` among the open ones, waiting for labels it uses that nobody defined."""
        labels = undefined_labels(block.source, self.refs) if block.kind == "text" else frozenset()
        self.blocks.append(HeldBlock(block, labels, settled, segmented, remake, loose))

    def remember_definitions(self, env: EnvType, before: int) -> None:
        """Keep the link reference definitions made on lines before ``before``."""
        for label, ref in env.get("references", {}).items():
            if label not in self.refs and ref.get("map", [0])[0] < before:
                self.refs[label] = ref

    def segments_of(self, seg: SegmentedBlock) -> list[HeldBlock]:
        """The held segments of the block ``seg``."""
        return [h for h in self.blocks if h.segmented is seg]

    def drop_segments_of(self, seg: SegmentedBlock) -> None:
        """Forget the held segments of ``seg`` (they are replaced by one block)."""
        self.blocks[:] = [h for h in self.blocks if h.segmented is not seg]

    def release(self, limit: int) -> list[Block]:
        """Take out the leading blocks that can no longer change (and any past ``limit``)."""
        closed: list[Block] = []
        i = 0
        held = self.blocks
        while i < len(held) and ((held[i].settled and not held[i].labels) or len(held) - i > limit):
            closed.append(held[i].block)
            i += 1
        if i:
            del held[:i]
        return closed

    def finish(self) -> list[Block]:
        """The reply is complete: render again what a later definition changed; take all out."""
        refs = self.refs
        for i, held in enumerate(self.blocks):
            if held.remake is not None and not held.labels.isdisjoint(refs):
                self.blocks[i] = replace(held, block=held.remake(refs, held.loose))
        closed = [h.block for h in self.blocks]
        self.blocks.clear()
        return closed

    def shown(self) -> list[Block]:
        """The held blocks, in order."""
        return [h.block for h in self.blocks]


# -- renderings again, for a held block ------------------------------------------------------


def source_remake(md: MarkdownIt, source: str) -> Remake:
    """Renders the complete block ``source`` again."""

    def remake(refs: References, loose: bool) -> Block:
        tokens, env = parse_text(md, source, refs)
        lines = source.splitlines(keepends=True)
        return to_block(top_groups(tokens)[0], lines, len(lines), md, env)

    return remake


def paragraph_remake(md: MarkdownIt, segment: Block) -> Remake:
    """Renders a paragraph segment again, keeping the space at a cut inside a line."""
    source = segment.source

    def remake(refs: References, loose: bool) -> Block:
        tokens, env = parse_text(md, source, refs)
        html = render_tokens(md, tokens, env)
        if segment.continued and not source.endswith("\n"):
            body = source.rstrip(MD_TRIM_CHARS)
            html = html.removesuffix("</p>\n") + source[len(body) :] + "</p>\n"
        return replace(segment, html=html)

    return remake


def list_remake(
    md: MarkdownIt, source: str, seg: SegmentedBlock, part: int, continued: bool
) -> Remake:
    """Renders a list segment again, numbered and as loose as the whole list."""
    ordered, number = seg.ordered, seg.start + seg.items

    def remake(refs: References, loose: bool) -> Block:
        tokens, env = parse_text(md, source, refs)
        group = top_groups(tokens)[0]
        if ordered and part:
            group[0].attrs.pop("start", None)
            if number != 1:
                group[0].attrs["start"] = number
        if loose:
            _tighten(group, True)
        html = render_tokens(md, group, env)
        return Block("text", html=html, source=source, part=part, continued=continued)

    return remake


def table_remake(md: MarkdownIt, head: str, segment: Block) -> Remake:
    """Renders a table segment again (a later one without the header row)."""

    def remake(refs: References, loose: bool) -> Block:
        tokens, env = parse_text(md, head, refs)
        group = top_groups(tokens)[0]
        body = group if segment.part == 0 else _without_head(group)
        return replace(segment, html=render_tokens(md, body, env))

    return remake


# -- segments -------------------------------------------------------------------------------

_RISKY_FIRST_LINE = re.compile(
    r"(?: {0,3}\t| {4}| {0,3}(?:\[|[-+*](?:[ \t\n]|$)|\d{1,9}[.)](?:[ \t\n]|$)))"
)
"""A paragraph line that would start something else (code, a definition, a list) on its own."""

_INLINE_CUT = re.compile(r"[ \t](?=[^\W\d_])")


class Segmenter:
    """Shows the open block in segments, and makes them agree with the block once it ends.

    Args:
        md: The parser.
        held: Where segments wait until their block has ended.
    """

    def __init__(self, md: MarkdownIt, held: HeldBlocks) -> None:
        self._md = md
        self._held = held
        self.active: SegmentedBlock | None = None
        """The open block being shown in segments, if any."""

    def segment(
        self, group: list[Token], lines: list[str], env: EnvType, live: str, cost: float
    ) -> str | None:
        """Split the finished part of the open block off as a segment.

        Args:
            group: The open block's tokens (the only group in ``live``).
            lines: ``live``'s lines.
            env: What parsing ``live`` left.
            live: The open text.
            cost: The parse cost (see :func:`parse_cost`) a paragraph's rest should stay under.

        Returns:
            The open text that is left, or None if no segment could be split off.
        """
        first = group[0]
        if group_start(group) != 0:
            return None
        complete = live.count("\n")
        if first.type == "fence" and lines[0][:1] in "`~":
            return self._segment_code(first, lines, complete)
        if first.type == "paragraph_open":
            if first.map is None or first.map[1] < len(lines):
                return None  # a blank line ended it: the next block will close it
            return self._segment_paragraph(lines, complete, cost)
        if is_list(group):
            return self._segment_list(group, lines, complete)
        if first.type == "table_open":
            return self._segment_table(group, lines, complete)
        return None

    def continue_block(
        self, group: list[Token], block: Block, lines: list[str], end: int, env: EnvType
    ) -> Block:
        """The first open block, rendered as the next segment of the active block if it is."""
        seg = self.active
        assert seg is not None
        first = group[0]
        if seg.kind == "code" and first.type == "fence":
            source = block.source.split("\n", 1)[1] if "\n" in block.source else ""
            return replace(block, source=source, part=seg.parts)
        if seg.kind == "table" and first.type == "table_open":
            source = "".join(block.source.splitlines(keepends=True)[2:])
            html = render_tokens(self._md, _without_head(group), env)
            return replace(block, html=html, source=source, part=seg.parts)
        if seg.kind == "list" and is_list(group):
            return self._list_block(group, lines, end, env, seg)
        if seg.kind == "paragraph" and first.type == "paragraph_open":
            return replace(block, part=seg.parts)
        return block

    # -- the block ended ----------------------------------------------------------------------

    def finish(self, group: list[Token], block: Block, lines: list[str], env: EnvType) -> None:
        """The block shown in segments is complete: make its segments agree with the whole."""
        seg = self.active
        assert seg is not None
        self.active = None
        mine = self._held.segments_of(seg)
        first = group[0]
        if seg.kind == "paragraph":
            self._finish_paragraph(seg, mine, group, block)
            return
        if seg.kind == "list" and is_list(group):
            loose = seg.loose or not first.meta.get("tight", False)
            if loose and not seg.loose:
                # A blank line between later items made the whole list loose.
                for h in mine:
                    if not h.loose and h.remake is not None:
                        h.block = h.remake(self._held.refs, True)
                        h.loose = True
                seg.loose = True
                block = self._list_block(group, lines, len(lines), env, seg)
            for h in mine:
                h.settled = True
            remake = list_remake(self._md, block.source, seg, seg.parts, False)
            self._held.hold(block, remake=remake, loose=loose)
            return
        for h in mine:
            h.settled = True
        remake_table: Remake | None = None
        if seg.kind == "table" and first.type == "table_open":
            remake_table = table_remake(self._md, "".join(lines[group_start(group) :]), block)
        self._held.hold(block, remake=remake_table)

    def _finish_paragraph(
        self, seg: SegmentedBlock, mine: list[HeldBlock], group: list[Token], block: Block
    ) -> None:
        md, held = self._md, self._held
        first = group[0]
        if first.type == "paragraph_open" and group_start(group) == 0:
            for h in mine:
                h.settled = True
            held.hold(block, remake=paragraph_remake(md, block))
            return
        if first.type == "heading_open" and first.markup[:1] in ("=", "-") and mine:
            # A setext underline makes the whole paragraph, every segment of it, a heading.
            merged = _merged_heading(first.tag, [h.block for h in mine] + [block])
            held.drop_segments_of(seg)
            held.hold(merged, remake=source_remake(md, merged.source))
            return
        if mine and not mine[-1].block.source.endswith("\n"):
            # Cut inside a line that then became a table's header: parse it all again.
            source = "".join(h.block.source for h in mine) + block.source
            held.drop_segments_of(seg)
            tokens, env = parse_text(md, source, held.refs)
            again = source.splitlines(keepends=True)
            for rebuilt in blocks_of(top_groups(tokens), again, md, env):
                held.hold(rebuilt, remake=source_remake(md, rebuilt.source))
            return
        # The rest started something else (a table took its first line): the paragraph
        # ended with the last segment.
        if mine:
            last = mine[-1]
            last.block = replace(last.block, continued=False)
        for h in mine:
            h.settled = True
        held.hold(replace(block, part=0), remake=source_remake(md, block.source))

    # -- segmenting a growing block ---------------------------------------------------------

    def _start_segments(self, kind: SegmentKind) -> SegmentedBlock:
        if self.active is None or self.active.kind != kind:
            self.active = SegmentedBlock(kind)
        return self.active

    def _list_block(
        self,
        group: list[Token],
        lines: list[str],
        end: int,
        env: EnvType,
        seg: SegmentedBlock,
        *,
        continued: bool = False,
    ) -> Block:
        """A list segment rendered as part of the whole list (its numbering, its looseness)."""
        first = group[0]
        if seg.ordered and seg.parts:
            number = seg.start + seg.items
            first.attrs.pop("start", None)
            if number != 1:
                first.attrs["start"] = number
        if seg.loose:
            _tighten(group, True)
        source = "".join(lines[group_start(group) : end])
        html = render_tokens(self._md, group, env)
        return Block("text", html=html, source=source, part=seg.parts, continued=continued)

    def _segment_code(self, fence: Token, lines: list[str], complete: int) -> str | None:
        if fence.content != "".join(lines[1:]):
            return None  # already closed: the next block will close it for good
        code_lines = complete - 2  # keep the last finished line with the open rest
        if code_lines < 1:
            return None
        seg = self._start_segments("code")
        code = "".join(lines[1 : 1 + code_lines])
        segment = Block(
            "code",
            code=code,
            language=fence_language(fence),
            source=(lines[0] if seg.parts == 0 else "") + code,
            part=seg.parts,
            continued=True,
        )
        self._held.hold(segment, segmented=seg)
        seg.parts += 1
        return lines[0] + "".join(lines[1 + code_lines :])

    def _paragraph_head(self, head: str) -> Block | None:
        """``head`` as a paragraph segment, if nothing written after it can change it."""
        md = self._md
        tokens, env = parse_text(md, head, self._held.refs)
        groups = top_groups(tokens)
        if len(groups) != 1 or groups[0][0].type != "paragraph_open":
            return None
        if env.get("fg_open_delimiters"):
            return None
        if _has_literal(_inline_children(groups[0]), "[`"):
            return None  # a link or code span could still close after the cut
        html = render_tokens(md, groups[0], env)
        trimmed = head.rstrip("\n")
        if not head.endswith("\n"):
            # Cut inside a line: the space at the cut belongs to the text.
            body = trimmed.rstrip(MD_TRIM_CHARS)
            html = html.removesuffix("</p>\n") + trimmed[len(body) :] + "</p>\n"
        self._held.remember_definitions(env, len(head.splitlines()))
        seg = self._start_segments("paragraph")
        return Block("text", html=html, source=head, part=seg.parts, continued=True)

    def _segment_paragraph(self, lines: list[str], complete: int, cost: float) -> str | None:
        # At a line break: the rest must read as the same paragraph's lines on its own.
        for cut in sorted({complete - 1, complete // 2}, reverse=True):
            if cut < 1 or _RISKY_FIRST_LINE.match(lines[cut]):
                continue
            end = lines[cut - 1].rstrip("\n")
            body = end.rstrip(" ")
            if (
                body.endswith("\\")
                or body != body.rstrip(MD_TRIM_CHARS)
                or len(end) == len(body) + 1
            ):
                continue  # the line's end (a break, a tab, a kept space) reads differently alone
            if parse_cost("".join(lines[cut:])) >= cost and cut == complete - 1:
                break  # the last line itself is long: cut inside it instead
            segment = self._paragraph_head("".join(lines[:cut]))
            if segment is not None:
                return self._take_paragraph_segment(segment, "".join(lines[cut:]))
        # Inside the last line, after a space and before a letter or digit.
        last = lines[-1]
        cut_at = -1
        for m in _INLINE_CUT.finditer(last):
            cut_at = m.end()
        if cut_at <= 0:
            return None
        rest = last[cut_at:]
        fragment = last[:cut_at]
        if not any(c.isalnum() for c in fragment) or "|" in fragment:
            return None  # the line alone could be an underline, or a table's header
        segment = self._paragraph_head("".join(lines[:-1]) + last[:cut_at])
        if segment is None:
            return None
        return self._take_paragraph_segment(segment, rest)

    def _take_paragraph_segment(self, segment: Block, rest: str) -> str:
        seg = self._start_segments("paragraph")
        remake = paragraph_remake(self._md, segment)
        self._held.hold(segment, settled=False, segmented=seg, remake=remake)
        seg.parts += 1
        return rest

    def _segment_list(self, group: list[Token], lines: list[str], complete: int) -> str | None:
        level = group[0].level + 1
        starts = [
            t.map[0]
            for t in group
            if t.type == "list_item_open" and t.level == level and t.map is not None
        ]
        cuts = [s for s in starts[1:] if s < complete]
        if not cuts:
            return None
        cut = cuts[-1]
        head = "".join(lines[:cut])
        tokens, env = parse_text(self._md, head, self._held.refs)
        groups = top_groups(tokens)
        if len(groups) != 1 or not is_list(groups[0]):
            return None
        head_group = groups[0]
        items = starts.index(cut)
        seg = self._start_segments("list")
        if seg.parts == 0:
            seg.ordered = group[0].type == "ordered_list_open"
            seg.start = _first_number(group)
        seam_blank = lines[cut - 1].strip() == ""
        seg.loose = seg.loose or not head_group[0].meta.get("tight", False) or seam_blank
        block = self._list_block(head_group, lines, cut, env, seg, continued=True)
        self._held.remember_definitions(env, cut)
        remake = list_remake(self._md, head, seg, seg.parts, True)
        self._held.hold(block, settled=False, segmented=seg, remake=remake, loose=seg.loose)
        seg.items += items
        seg.parts += 1
        return "".join(lines[cut:])

    def _segment_table(self, group: list[Token], lines: list[str], complete: int) -> str | None:
        rows = [t.map[0] for t in group if t.type == "tr_open" and t.map is not None][1:]
        cuts = [r for r in rows[1:] if r < complete]
        if not cuts or len(lines) < 3:
            return None
        cut = cuts[-1]
        columns = -_row_shortfall(lines[0], 0)
        # markdown-it ends a table once too many cells were missing, counted from its first
        # row: cut only where that count is zero, so the rest counts from zero as well.
        if any(_row_shortfall(line, columns) for line in lines[2:cut]):
            return None
        head = "".join(lines[:cut])
        md = self._md
        tokens, env = parse_text(md, head, self._held.refs)
        groups = top_groups(tokens)
        if len(groups) != 1 or groups[0][0].type != "table_open":
            return None
        seg = self._start_segments("table")
        body = groups[0] if seg.parts == 0 else _without_head(groups[0])
        source = head if seg.parts == 0 else "".join(lines[2:cut])
        block = Block(
            "text", html=render_tokens(md, body, env), source=source, part=seg.parts, continued=True
        )
        self._held.remember_definitions(env, cut)
        self._held.hold(block, segmented=seg, remake=table_remake(md, head, block))
        seg.parts += 1
        return "".join(lines[:2]) + "".join(lines[cut:])


def _merged_heading(tag: str, pieces: list[Block]) -> Block:
    """A paragraph's segments and its end, made one setext heading."""
    inner = ""
    for piece in pieces:
        html = piece.html
        html = html.removeprefix(f"<{tag}>").removesuffix(f"</{tag}>\n")
        html = html.removeprefix("<p>").removesuffix("</p>\n")
        inner += html
        if piece.continued and piece.source.endswith("\n"):
            inner += "<br />\n"
    source = "".join(p.source for p in pieces)
    return Block("text", html=f"<{tag}>{inner}</{tag}>\n", source=source)


def _inline_children(tokens: list[Token]) -> list[Token]:
    return [child for t in tokens if t.type == "inline" for child in (t.children or [])]


def _has_literal(tokens: list[Token], chars: str) -> bool:
    for token in tokens:
        if token.type == "text" and any(c in token.content for c in chars):
            return True
        if token.children and _has_literal(token.children, chars):
            return True
    return False


def _tighten(group: list[Token], loose: bool) -> None:
    """Render a list segment as tight or loose as the whole list is."""
    level = group[0].level + 2
    for token in group:
        if token.level == level and token.type in ("paragraph_open", "paragraph_close"):
            token.hidden = not loose


def _row_shortfall(line: str, columns: int) -> int:
    cells = escapedSplit(line.strip(" \t\n"))
    if cells and cells[0] == "":
        cells.pop(0)
    if cells and cells[-1] == "":
        cells.pop()
    return columns - len(cells)


def _without_head(group: list[Token]) -> list[Token]:
    """A table's tokens without its header row (a later segment shows only more rows)."""
    out: list[Token] = []
    skipping = False
    for token in group:
        if token.type == "thead_open":
            skipping = True
        if not skipping:
            out.append(token)
        if token.type == "thead_close":
            skipping = False
    return out


def _first_number(group: list[Token]) -> int:
    first = group[0]
    start = first.attrGet("start")
    return int(start) if start is not None else 1
