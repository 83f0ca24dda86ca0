"""Streaming Markdown: a reply's text, cut into top-level blocks that are final once closed.

No Qt here: this module turns text into blocks (HTML for prose, raw source for code) and the
chat view turns blocks into widgets.

The approach is Textual's streaming Markdown. A reply grows only at its end, and in CommonMark
a new top-level block can only begin once the one before it has ended, so every block but the
last is complete: it is rendered once and never parsed again. Each update re-parses only the
open tail, which keeps the cost of an update independent of how long the reply already is.

A block is treated as complete only when the block after it starts on a complete line: a partial
line can still change what it is (``2`` becomes a list item once ``.`` arrives and would then
continue the list above it).

A complete block is not always final. Two kinds of text written later can still change it, and
the stream keeps such blocks among the open ones (rendered once, not parsed again) until they
cannot change any more, so that the finished reply shows exactly what :func:`render_blocks`
shows (segments joined with :func:`join_segments`):

- a link reference definition (``[foo]: /url``) turns ``[foo]`` anywhere in the reply, before
  or after it, into a link: a block with a bracketed label nobody has defined yet waits for the
  end of the reply, where it is rendered again if a definition for it came;
- a setext underline (``---``) turns a whole paragraph into a heading, and a blank line between
  two items turns a whole list loose: the segments of a long paragraph or list (below) wait for
  the end of their block;
- anything else is final. (At most :data:`HELD_LIMIT` blocks wait; past that the oldest are
  taken as final, which only an extreme reply could tell apart.)

A block that keeps growing (a long paragraph, code listing, list or table) would be parsed whole
every update. Its finished part is split off as a segment where the pieces render exactly as the
whole does: a paragraph at a line break or a space where no emphasis, link or code span can span
the cut, a fenced code block at any line, a list between two items, a table between two rows. A
block that still grows past the cost of a frame with no such place (a single line of ``[`` ten
thousand long, say) is shown as plain text past that point until it ends, and rendered once then.

Model output is untrusted. Raw HTML is escaped (markdown-it's ``html`` option is off), images
are shown as their description and address and never loaded, and a link shows its address
next to its text so the reader sees where it goes before clicking. Nothing is dropped: content
nested deeper than the parser's nesting limit is shown as plain text, and a run of more than
:data:`LONG_RUN` non-blank characters is shown as it is written.
"""

from __future__ import annotations

import bisect
import re
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import markdown_it.rules_block.list as _md_list
from markdown_it import MarkdownIt
from markdown_it.common.utils import MD_TRIM_CHARS, escapeHtml, normalizeReference
from markdown_it.parser_block import ParserBlock
from markdown_it.renderer import RendererHTML
from markdown_it.rules_block import StateBlock
from markdown_it.rules_block.table import escapedSplit
from markdown_it.rules_inline import StateInline
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict

BlockKind = Literal["text", "code"]

SEGMENT_LINES = 32
"""A growing paragraph, code block, list or table with this many finished lines is segmented."""

SEGMENT_COST = 350.0
"""Estimated parse cost (µs, see :func:`_cost`) of the open tail at which it is segmented."""

OVERFLOW_COST = 1000.0
"""Estimated parse cost (µs) past which an open block that cannot be segmented shows plain text."""

LONG_RUN = 1000
"""A run of more non-blank characters than this is shown as written (no Markdown inside it)."""

HELD_LIMIT = 300
"""At most this many complete blocks wait among the open ones for the end of the reply."""

PLAIN_CHUNK = 4000
"""Plain text shown for an overflowing block is split into blocks of about this many characters."""


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


# -- the parser -------------------------------------------------------------------------------


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


def _plain_lines(text: str) -> str:
    """Text shown as written: escaped, one line per line, leading spaces kept."""
    out = []
    for line in text.split("\n"):
        body = line.lstrip(" ")
        out.append("&nbsp;" * (len(line) - len(body)) + escapeHtml(body))
    return "<br />\n".join(out)


def _plain(
    renderer: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    return _plain_lines(tokens[idx].content)


class _BlockParser(ParserBlock):
    """markdown-it's block tokenizer, except that nothing nested too deep is dropped.

    At its nesting limit markdown-it skips the rest of the container *and*, inside a list item,
    everything after it to the end of the text. Here the container's remaining lines are kept
    as one paragraph of plain text instead, and parsing goes on after them. (The limit stays:
    it bounds the parser's recursion.)
    """

    def tokenize(self, state: StateBlock, startLine: int, endLine: int) -> None:  # noqa: N803
        # The loop of ParserBlock.tokenize (markdown-it-py 4.x, MIT), but for the nesting limit.
        rules = self.ruler.getRules("")
        line = startLine
        max_nesting = state.md.options.maxNesting
        has_empty_lines = False
        while line < endLine:
            state.line = line = state.skipEmptyLines(line)
            if line >= endLine:
                break
            if state.sCount[line] < state.blkIndent:
                break
            if state.level >= max_nesting:
                _keep_as_plain_text(state, line, endLine)
                break
            ok = False
            for rule in rules:
                ok = rule(state, line, endLine, False)
                if ok:
                    if state.line <= line:
                        raise RuntimeError("block rule didn't increment state.line")
                    break
            if not ok:
                raise RuntimeError("none of the block rules matched")
            state.tight = not has_empty_lines
            line = state.line
            if (line - 1) < endLine and state.isEmpty(line - 1):
                has_empty_lines = True
            if line < endLine and state.isEmpty(line):
                has_empty_lines = True
                line += 1
                state.line = line


def _keep_as_plain_text(state: StateBlock, line: int, end_line: int) -> None:
    """Emit the rest of the current container (from ``line``) as one plain-text paragraph."""
    first = last = line
    while line < end_line:
        if not state.isEmpty(line):
            if state.sCount[line] < state.blkIndent:
                break
            last = line + 1
        line += 1
    texts = []
    for i in range(first, last):
        if state.isEmpty(i):
            texts.append("")
            continue
        extra = max(0, state.sCount[i] - state.blkIndent)
        texts.append(" " * extra + state.src[state.bMarks[i] + state.tShift[i] : state.eMarks[i]])
    token = state.push("paragraph_open", "p", 1)
    token.map = [first, last]
    token = state.push("fg_plain", "", 0)
    token.content = "\n".join(texts)
    token.map = [first, last]
    state.push("paragraph_close", "p", -1)
    state.line = last


_RUNS: weakref.WeakKeyDictionary[StateInline, list[tuple[int, int]]] = weakref.WeakKeyDictionary()
_LONG_RUN_RE = re.compile(rf"\S{{{LONG_RUN + 1},}}")


def _long_run(state: StateInline, silent: bool) -> bool:
    """Take a run of more than LONG_RUN non-blank characters as it is written.

    Parsing such a run costs markdown-it up to several microseconds a character (``*a*a*a…``,
    ``[[[[…``), and nothing a reader wants is written that way; shown as written, every
    character of it stays visible.
    """
    if len(state.src) <= LONG_RUN:
        return False
    runs = _RUNS.get(state)
    if runs is None:
        runs = [(m.start(), m.end()) for m in _LONG_RUN_RE.finditer(state.src)]
        _RUNS[state] = runs
    i = bisect.bisect_right(runs, (state.pos, len(state.src) + 1)) - 1
    if i < 0 or not runs[i][0] <= state.pos < runs[i][1]:
        return False
    end = min(runs[i][1], state.posMax)
    if not silent:
        state.pending += state.src[state.pos : end]
    state.pos = end
    return True


def _note_open_delimiters(state: StateInline) -> None:
    # A delimiter that could still open emphasis (``*``, ``_``, ``~~``) may pair with one
    # written later: text cut before it could render differently once the rest arrives.
    if any(d.open and d.end < 0 for d in state.delimiters):
        state.env["fg_open_delimiters"] = True


_mark_tight_paragraphs = _md_list.markTightParagraphs


def _mark_tight(state: StateBlock, idx: int) -> None:
    # markdown-it decides whether a list is tight but keeps the answer to itself; a list cut
    # into segments needs it to render every segment as the whole list would be.
    state.tokens[idx].meta["tight"] = True
    _mark_tight_paragraphs(state, idx)


_md_list.markTightParagraphs = _mark_tight


def make_parser() -> MarkdownIt:
    """CommonMark plus GFM tables, strikethrough and hard line breaks; raw HTML off."""
    # ``breaks``: models write poems, addresses and steps one per line and expect them to stay
    # on their own lines, as chat apps show them; CommonMark alone would join them.
    md = MarkdownIt("commonmark", {"html": False, "breaks": True})
    block = _BlockParser()
    block.ruler = md.block.ruler
    md.block = block
    md.enable(["table", "strikethrough"])
    md.inline.ruler.before("text", "fg_long_run", _long_run)
    md.inline.ruler2.push("fg_open_delimiters", _note_open_delimiters)

    md.add_render_rule("link_close", _link_close)
    md.add_render_rule("image", _image)
    md.add_render_rule("table_open", _table_open)
    md.add_render_rule("fg_plain", _plain)
    return md


_PARSER = make_parser()


# -- blocks -----------------------------------------------------------------------------------

References = dict[str, Any]


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


def _start(group: list[Token]) -> int:
    first = group[0].map
    return first[0] if first else 0


def _render(md: MarkdownIt, tokens: list[Token], env: EnvType) -> str:
    html: str = md.renderer.render(tokens, md.options, env)
    return html


def _to_block(
    group: list[Token], lines: list[str], end_line: int, md: MarkdownIt, env: EnvType
) -> Block:
    first = group[0]
    source = "".join(lines[_start(group) : end_line])
    if first.type in ("fence", "code_block"):
        return Block("code", code=first.content, language=_language(first), source=source)
    return Block("text", html=_render(md, group, env), source=source)


def _ends(groups: list[list[Token]], count: int) -> list[int]:
    return [_start(groups[i + 1]) if i + 1 < len(groups) else count for i in range(len(groups))]


def _blocks(
    groups: list[list[Token]], lines: list[str], md: MarkdownIt, env: EnvType
) -> list[Block]:
    ends = _ends(groups, len(lines))
    return [_to_block(g, lines, end, md, env) for g, end in zip(groups, ends, strict=True)]


def _parse(md: MarkdownIt, text: str, refs: References) -> tuple[list[Token], EnvType]:
    env: EnvType = {"references": dict(refs)}
    return md.parse(text, env), env


def _language(fence: Token) -> str:
    info = fence.info.strip()
    return info.split(maxsplit=1)[0] if info else ""


_LABEL = re.compile(r"\[((?:[^\[\]\\]|\\.){1,999})\]", re.DOTALL)


def _labels(source: str, refs: References) -> frozenset[str]:
    """Bracketed labels in ``source`` that would become links if defined later."""
    if "[" not in source:
        return frozenset()
    found = set()
    for match in _LABEL.finditer(source):
        label = normalizeReference(match.group(1))
        if label and label not in refs:
            found.add(label)
    return frozenset(found)


_SPECIAL = re.compile(r"[!#$%&*+\-:<=>@\\\]^_`{}~|]")


def _cost(text: str) -> float:
    """A rough estimate of what parsing ``text`` costs, in microseconds on a slow machine.

    markdown-it spends little on plain words and most on the characters where its inline rules
    fire (every one of ``[`` costs a link-label scan as deep as the nesting limit).
    """
    return (
        len(text) / 40
        + 2.5 * len(_SPECIAL.findall(text))
        + 2.5 * (text.count("*") + text.count("_") + text.count("~"))
        + 6.0 * text.count("[")
        + 10.0 * text.count("\n")
    )


# -- segments ---------------------------------------------------------------------------------


@dataclass
class _Segmented:
    """The open block being shown in segments."""

    kind: Literal["paragraph", "code", "list", "table"]
    parts: int = 0
    ordered: bool = False
    start: int = 1
    items: int = 0
    loose: bool = False


@dataclass
class _Held:
    """A complete block shown among the open ones until nothing later can change it."""

    block: Block
    labels: frozenset[str] = frozenset()
    settled: bool = True
    segmented: _Segmented | None = None
    remake: Callable[[References, bool], Block] | None = None
    """Renders the block again (with the given definitions; loose, for a list segment)."""
    loose: bool = False


@dataclass
class _Overflow:
    """An open block past :data:`OVERFLOW_COST`: shown as plain text until it ends."""

    shown: list[Block]
    start: int
    scanned: int
    is_list: bool
    chunks: list[Block] = field(default_factory=list)
    chunked: int = 0
    stuck: bool = False


_RISKY_FIRST_LINE = re.compile(
    r"(?: {0,3}\t| {4}| {0,3}(?:\[|[-+*](?:[ \t\n]|$)|\d{1,9}[.)](?:[ \t\n]|$)))"
)
"""A paragraph line that would start something else (code, a definition, a list) on its own."""

_INLINE_CUT = re.compile(r"[ \t](?=[^\W\d_])")
_LIST_ITEM_LINE = re.compile(r" {0,3}(?:[-+*]|\d{1,9}[.)])(?:[ \t\n]|$)")
_BLOCK_END = re.compile(r"\n[ \t]*\n(?:[ \t]*\n)*(?=[^ \t\n])")


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


def _is_list(group: list[Token]) -> bool:
    return group[0].type in ("bullet_list_open", "ordered_list_open")


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


class MarkdownStream:
    """Turns a growing text into final blocks plus an open tail, re-parsing only the tail."""

    def __init__(self, md: MarkdownIt | None = None) -> None:
        self._md = md or _PARSER
        self._live = ""
        self._held_cr = False
        self._held: list[_Held] = []
        self._refs: References = {}
        self._segmented: _Segmented | None = None
        self._overflow: _Overflow | None = None
        self._retry_at = 0
        self.closed_count = 0
        """How many blocks are final so far."""

    @property
    def tail(self) -> str:
        """The text parsed again on each update (the open block, and what follows it)."""
        return self._live

    def feed(self, text: str) -> BlockUpdate:
        """Add text at the end; returns the blocks that closed and the open ones."""
        if self._held_cr:
            text = "\r" + text
            self._held_cr = False
        if text.endswith("\r"):
            # It may be the first half of "\r\n": decide when the next piece comes.
            text, self._held_cr = text[:-1], True
        self._live += text.replace("\r\n", "\n").replace("\r", "\n")
        return self._update(final=False)

    def finish(self) -> BlockUpdate:
        """The text is complete: every block is final."""
        if self._held_cr:
            self._live += "\n"
            self._held_cr = False
        return self._update(final=True)

    # -- one update -------------------------------------------------------------------------

    def _update(self, *, final: bool) -> BlockUpdate:
        md = self._md
        if self._overflow is not None:
            end = len(self._live) if final else self._overflow_end()
            if end is None:
                return self._emit(self._overflow_blocks())
            head = self._live[:end]
            tokens, env = _parse(md, head, self._refs)
            lines = head.splitlines(keepends=True)
            groups = _groups(tokens)
            if not final and groups and _open_fence(groups[-1], lines):
                # A code fence opened after the block and is still open: it ends nothing.
                start = _start(groups[-1])
                if start == 0:
                    self._overflow.stuck = True
                    return self._emit(self._overflow_blocks())
                groups, lines = groups[:-1], lines[:start]
                end = len("".join(lines))
            self._complete(groups, lines, env, len(lines))
            self._live = self._live[end:]
            self._overflow = None
            self._retry_at = 0

        live = self._live
        lines = live.splitlines(keepends=True)
        tokens, env = _parse(md, live, self._refs)
        groups = _groups(tokens)
        complete = len(lines) if (final or live.endswith("\n")) else len(lines) - 1
        # The last group that starts on a complete line begins the open tail.
        cut = len(groups) if final else 0
        if not final:
            for i in range(len(groups) - 1, 0, -1):
                start = _start(groups[i])
                last = i == len(groups) - 1
                if start < complete and not (last and _maybe_definition(groups[i], lines)):
                    cut = i
                    break
        if cut:
            self._retry_at = 0
            boundary = _start(groups[cut]) if cut < len(groups) else len(lines)
            self._complete(groups[:cut], lines[:boundary], env, boundary)
            self._live = live = "".join(lines[boundary:])
            if cut < len(groups):
                shift = boundary
                for group in groups[cut:]:
                    for token in group:
                        if token.map:
                            token.map = [token.map[0] - shift, token.map[1] - shift]
            groups = groups[cut:]
            lines = lines[boundary:]
        if final:
            self._remember_definitions(env, len(lines))
            return self._finish_reply()

        cost = _cost(live)
        if len(groups) == 1 and len(live) >= self._retry_at:
            count = live.count("\n")
            if count >= SEGMENT_LINES or cost >= SEGMENT_COST:
                if self._segment(groups[0], lines, env):
                    live = self._live
                    lines = live.splitlines(keepends=True)
                    tokens, env = _parse(md, live, self._refs)
                    groups = _groups(tokens)
                    cost = _cost(live)
                    self._retry_at = 0
                else:
                    self._retry_at = len(live) + len(live) // 4 + 200
        shown = self._open_blocks(groups, lines, env)
        if len(groups) == 1 and cost >= OVERFLOW_COST and groups[0][0].type != "fence":
            self._overflow = _Overflow(
                shown=shown,
                start=len(live),
                scanned=len(live),
                is_list=_is_list(groups[0]),
            )
        return self._emit(shown)

    def _emit(self, shown: list[Block]) -> BlockUpdate:
        """Move the held blocks that can no longer change to the closed ones."""
        closed: list[Block] = []
        i = 0
        held = self._held
        while i < len(held) and (
            (held[i].settled and not held[i].labels) or len(held) - i > HELD_LIMIT
        ):
            closed.append(held[i].block)
            i += 1
        if i:
            del held[:i]
            self.closed_count += i
        return BlockUpdate(closed=closed, open=[h.block for h in held] + shown)

    def _finish_reply(self) -> BlockUpdate:
        """The reply is complete: render again what a later definition changed; all is final."""
        refs = self._refs
        for i, held in enumerate(self._held):
            if held.remake is not None and not held.labels.isdisjoint(refs):
                self._held[i] = replace(held, block=held.remake(refs, held.loose))
        closed = [h.block for h in self._held]
        self.closed_count += len(closed)
        self._held = []
        self._live = ""
        self._segmented = None
        self._overflow = None
        return BlockUpdate(closed=closed, open=[])

    # -- complete blocks ----------------------------------------------------------------------

    def _remember_definitions(self, env: EnvType, before: int) -> None:
        """Keep the link reference definitions made on lines before ``before``."""
        for label, ref in env.get("references", {}).items():
            if label not in self._refs and ref.get("map", [0])[0] < before:
                self._refs[label] = ref

    def _hold(
        self,
        block: Block,
        *,
        settled: bool = True,
        segmented: _Segmented | None = None,
        remake: Callable[[References, bool], Block] | None = None,
        loose: bool = False,
    ) -> None:
        labels = _labels(block.source, self._refs) if block.kind == "text" else frozenset()
        self._held.append(_Held(block, labels, settled, segmented, remake, loose))

    def _source_remake(self, source: str) -> Callable[[References, bool], Block]:
        md = self._md

        def remake(refs: References, loose: bool) -> Block:
            tokens, env = _parse(md, source, refs)
            lines = source.splitlines(keepends=True)
            return _to_block(_groups(tokens)[0], lines, len(lines), md, env)

        return remake

    def _complete(
        self, groups: list[list[Token]], lines: list[str], env: EnvType, count: int
    ) -> None:
        """Hold complete groups (the first may finish the segmented block)."""
        self._remember_definitions(env, count)
        if not groups:
            return
        blocks = self._open_blocks(groups, lines, env, count)
        first = 0
        ends = _ends(groups, count)
        if self._segmented is not None:
            self._finish_segmented(groups[0], blocks[0], lines[: ends[0]], env)
            first = 1
        for group, block, end in zip(groups[first:], blocks[first:], ends[first:], strict=True):
            source = "".join(lines[_start(group) : end])
            self._hold(block, remake=self._source_remake(source))

    def _finish_segmented(
        self, group: list[Token], block: Block, lines: list[str], env: EnvType
    ) -> None:
        """The block shown in segments is complete: make its segments agree with the whole."""
        seg = self._segmented
        assert seg is not None
        self._segmented = None
        mine = [h for h in self._held if h.segmented is seg]
        first = group[0]
        if seg.kind == "paragraph":
            if first.type == "paragraph_open" and _start(group) == 0:
                for h in mine:
                    h.settled = True
                self._hold(block, remake=self._paragraph_remake(block))
                return
            if first.type == "heading_open" and first.markup[:1] in ("=", "-") and mine:
                # A setext underline makes the whole paragraph, every segment of it, a heading.
                tag = first.tag
                pieces = [h.block for h in mine] + [block]
                inner = ""
                for piece in pieces:
                    html = piece.html
                    html = html.removeprefix(f"<{tag}>").removesuffix(f"</{tag}>\n")
                    html = html.removeprefix("<p>").removesuffix("</p>\n")
                    inner += html
                    if piece.continued and piece.source.endswith("\n"):
                        inner += "<br />\n"
                source = "".join(p.source for p in pieces)
                merged = Block("text", html=f"<{tag}>{inner}</{tag}>\n", source=source)
                self._held = [h for h in self._held if h.segmented is not seg]
                self._hold(merged, remake=self._source_remake(source))
                return
            if mine and not mine[-1].block.source.endswith("\n"):
                # Cut inside a line that then became a table's header: parse it all again.
                source = "".join(h.block.source for h in mine) + block.source
                self._held = [h for h in self._held if h.segmented is not seg]
                tokens, env = _parse(self._md, source, self._refs)
                again = source.splitlines(keepends=True)
                for rebuilt in _blocks(_groups(tokens), again, self._md, env):
                    self._hold(rebuilt, remake=self._source_remake(rebuilt.source))
                return
            # The rest started something else (a table took its first line): the paragraph
            # ended with the last segment.
            if mine:
                last = mine[-1]
                last.block = replace(last.block, continued=False)
            for h in mine:
                h.settled = True
            self._hold(replace(block, part=0), remake=self._source_remake(block.source))
            return
        if seg.kind == "list" and _is_list(group):
            loose = seg.loose or not first.meta.get("tight", False)
            if loose and not seg.loose:
                # A blank line between later items made the whole list loose.
                for h in mine:
                    if not h.loose and h.remake is not None:
                        h.block = h.remake(self._refs, True)
                        h.loose = True
                seg.loose = True
                block = self._list_block(group, lines, len(lines), env, seg)
            for h in mine:
                h.settled = True
            remake = self._list_remake(block.source, seg, seg.parts, False)
            self._hold(block, remake=remake, loose=loose)
            return
        for h in mine:
            h.settled = True
        remake_table: Callable[[References, bool], Block] | None = None
        if seg.kind == "table" and first.type == "table_open":
            remake_table = self._table_remake("".join(lines[_start(group) :]), block)
        self._hold(block, remake=remake_table)

    # -- the open blocks ----------------------------------------------------------------------

    def _open_blocks(
        self, groups: list[list[Token]], lines: list[str], env: EnvType, count: int | None = None
    ) -> list[Block]:
        """Blocks for the open groups; the first continues the segmented block, if any."""
        md = self._md
        count = len(lines) if count is None else count
        ends = _ends(groups, count)
        blocks = [_to_block(g, lines, end, md, env) for g, end in zip(groups, ends, strict=True)]
        seg = self._segmented
        if seg is None or not groups:
            return blocks
        group, block = groups[0], blocks[0]
        first = group[0]
        if seg.kind == "code" and first.type == "fence":
            source = block.source.split("\n", 1)[1] if "\n" in block.source else ""
            blocks[0] = replace(block, source=source, part=seg.parts)
        elif seg.kind == "table" and first.type == "table_open":
            source = "".join(block.source.splitlines(keepends=True)[2:])
            html = _render(md, _without_head(group), env)
            blocks[0] = replace(block, html=html, source=source, part=seg.parts)
        elif seg.kind == "list" and _is_list(group):
            blocks[0] = self._list_block(group, lines, ends[0], env, seg)
        elif seg.kind == "paragraph" and first.type == "paragraph_open":
            blocks[0] = replace(block, part=seg.parts)
        return blocks

    def _list_block(
        self,
        group: list[Token],
        lines: list[str],
        end: int,
        env: EnvType,
        seg: _Segmented,
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
        source = "".join(lines[_start(group) : end])
        html = _render(self._md, group, env)
        return Block("text", html=html, source=source, part=seg.parts, continued=continued)

    def _list_remake(
        self, source: str, seg: _Segmented, part: int, continued: bool
    ) -> Callable[[References, bool], Block]:
        md = self._md
        ordered, number = seg.ordered, seg.start + seg.items

        def remake(refs: References, loose: bool) -> Block:
            tokens, env = _parse(md, source, refs)
            group = _groups(tokens)[0]
            if ordered and part:
                group[0].attrs.pop("start", None)
                if number != 1:
                    group[0].attrs["start"] = number
            if loose:
                _tighten(group, True)
            html = _render(md, group, env)
            return Block("text", html=html, source=source, part=part, continued=continued)

        return remake

    # -- segmenting a growing block ---------------------------------------------------------

    def _segment(self, group: list[Token], lines: list[str], env: EnvType) -> bool:
        """Split the finished part of the open block off as a segment; returns whether it did."""
        first = group[0]
        if _start(group) != 0:
            return False
        complete = self._live.count("\n")
        if first.type == "fence" and lines[0][:1] in "`~":
            return self._segment_code(first, lines, complete)
        if first.type == "paragraph_open":
            if first.map is None or first.map[1] < len(lines):
                return False  # a blank line ended it: the next block will close it
            return self._segment_paragraph(lines, complete)
        if _is_list(group):
            return self._segment_list(group, lines, complete)
        if first.type == "table_open":
            return self._segment_table(group, lines, complete)
        return False

    def _start_segments(self, kind: Literal["paragraph", "code", "list", "table"]) -> _Segmented:
        if self._segmented is None or self._segmented.kind != kind:
            self._segmented = _Segmented(kind)
        return self._segmented

    def _segment_code(self, fence: Token, lines: list[str], complete: int) -> bool:
        if fence.content != "".join(lines[1:]):
            return False  # already closed: the next block will close it for good
        code_lines = complete - 2  # keep the last finished line with the open rest
        if code_lines < 1:
            return False
        seg = self._start_segments("code")
        code = "".join(lines[1 : 1 + code_lines])
        segment = Block(
            "code",
            code=code,
            language=_language(fence),
            source=(lines[0] if seg.parts == 0 else "") + code,
            part=seg.parts,
            continued=True,
        )
        self._hold(segment, segmented=seg)
        self._live = lines[0] + "".join(lines[1 + code_lines :])
        seg.parts += 1
        return True

    def _paragraph_head(self, head: str) -> Block | None:
        """``head`` as a paragraph segment, if nothing written after it can change it."""
        md = self._md
        tokens, env = _parse(md, head, self._refs)
        groups = _groups(tokens)
        if len(groups) != 1 or groups[0][0].type != "paragraph_open":
            return None
        if env.get("fg_open_delimiters"):
            return None
        if _has_literal(_inline_children(groups[0]), "[`"):
            return None  # a link or code span could still close after the cut
        html = _render(md, groups[0], env)
        trimmed = head.rstrip("\n")
        if not head.endswith("\n"):
            # Cut inside a line: the space at the cut belongs to the text.
            body = trimmed.rstrip(MD_TRIM_CHARS)
            html = html.removesuffix("</p>\n") + trimmed[len(body) :] + "</p>\n"
        self._remember_definitions(env, len(head.splitlines()))
        seg = self._start_segments("paragraph")
        return Block("text", html=html, source=head, part=seg.parts, continued=True)

    def _segment_paragraph(self, lines: list[str], complete: int) -> bool:
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
            if _cost("".join(lines[cut:])) >= SEGMENT_COST and cut == complete - 1:
                break  # the last line itself is long: cut inside it instead
            head = "".join(lines[:cut])
            segment = self._paragraph_head(head)
            if segment is not None:
                self._take_paragraph_segment(segment, "".join(lines[cut:]))
                return True
        # Inside the last line, after a space and before a letter or digit.
        last = lines[-1]
        cut_at = -1
        for m in _INLINE_CUT.finditer(last):
            cut_at = m.end()
        if cut_at <= 0:
            return False
        rest = last[cut_at:]
        fragment = last[:cut_at]
        if not any(c.isalnum() for c in fragment) or "|" in fragment:
            return False  # the line alone could be an underline, or a table's header
        head = "".join(lines[:-1]) + last[:cut_at]
        segment = self._paragraph_head(head)
        if segment is None:
            return False
        self._take_paragraph_segment(segment, rest)
        return True

    def _take_paragraph_segment(self, segment: Block, rest: str) -> None:
        seg = self._start_segments("paragraph")
        self._hold(segment, settled=False, segmented=seg, remake=self._paragraph_remake(segment))
        self._live = rest
        seg.parts += 1

    def _paragraph_remake(self, segment: Block) -> Callable[[References, bool], Block]:
        md = self._md
        source = segment.source

        def remake(refs: References, loose: bool) -> Block:
            tokens, env = _parse(md, source, refs)
            html = _render(md, tokens, env)
            if segment.continued and not source.endswith("\n"):
                body = source.rstrip(MD_TRIM_CHARS)
                html = html.removesuffix("</p>\n") + source[len(body) :] + "</p>\n"
            return replace(segment, html=html)

        return remake

    def _segment_list(self, group: list[Token], lines: list[str], complete: int) -> bool:
        level = group[0].level + 1
        starts = [
            t.map[0]
            for t in group
            if t.type == "list_item_open" and t.level == level and t.map is not None
        ]
        cuts = [s for s in starts[1:] if s < complete]
        if not cuts:
            return False
        cut = cuts[-1]
        head = "".join(lines[:cut])
        md = self._md
        tokens, env = _parse(md, head, self._refs)
        groups = _groups(tokens)
        if len(groups) != 1 or not _is_list(groups[0]):
            return False
        head_group = groups[0]
        items = starts.index(cut)
        seg = self._start_segments("list")
        if seg.parts == 0:
            seg.ordered = group[0].type == "ordered_list_open"
            seg.start = _first_number(group)
        seam_blank = lines[cut - 1].strip() == ""
        seg.loose = seg.loose or not head_group[0].meta.get("tight", False) or seam_blank
        block = self._list_block(head_group, lines, cut, env, seg, continued=True)
        self._remember_definitions(env, cut)
        remake = self._list_remake(head, seg, seg.parts, True)
        self._hold(block, settled=False, segmented=seg, remake=remake, loose=seg.loose)
        seg.items += items
        seg.parts += 1
        self._live = "".join(lines[cut:])
        return True

    def _segment_table(self, group: list[Token], lines: list[str], complete: int) -> bool:
        rows = [t.map[0] for t in group if t.type == "tr_open" and t.map is not None][1:]
        cuts = [r for r in rows[1:] if r < complete]
        if not cuts or len(lines) < 3:
            return False
        cut = cuts[-1]
        columns = -_row_shortfall(lines[0], 0)
        # markdown-it ends a table once too many cells were missing, counted from its first
        # row: cut only where that count is zero, so the rest counts from zero as well.
        if any(_row_shortfall(line, columns) for line in lines[2:cut]):
            return False
        head = "".join(lines[:cut])
        md = self._md
        tokens, env = _parse(md, head, self._refs)
        groups = _groups(tokens)
        if len(groups) != 1 or groups[0][0].type != "table_open":
            return False
        seg = self._start_segments("table")
        body = groups[0] if seg.parts == 0 else _without_head(groups[0])
        source = head if seg.parts == 0 else "".join(lines[2:cut])
        block = Block(
            "text", html=_render(md, body, env), source=source, part=seg.parts, continued=True
        )
        self._remember_definitions(env, cut)
        self._hold(block, segmented=seg, remake=self._table_remake(head, block))
        seg.parts += 1
        self._live = "".join(lines[:2]) + "".join(lines[cut:])
        return True

    def _table_remake(self, head: str, segment: Block) -> Callable[[References, bool], Block]:
        md = self._md

        def remake(refs: References, loose: bool) -> Block:
            tokens, env = _parse(md, head, refs)
            group = _groups(tokens)[0]
            body = group if segment.part == 0 else _without_head(group)
            return replace(segment, html=_render(md, body, env))

        return remake

    # -- overflow -----------------------------------------------------------------------------

    def _overflow_end(self) -> int | None:
        """Where the overflowing block has certainly ended, if it has (an offset in the tail).

        After a blank line, a line that starts at the margin begins a new block, unless it is a
        list item (which may continue a list) or a bracket (perhaps a link reference definition,
        no block of its own). A code fence opened meanwhile is checked by the caller.
        """
        over = self._overflow
        assert over is not None
        if over.stuck:
            return None
        live = self._live
        pos = max(0, live.rfind("\n", 0, max(0, over.scanned - 1)))
        while True:
            match = _BLOCK_END.search(live, pos)
            if match is None:
                over.scanned = len(live)
                return None
            end = match.end()
            line_end = live.find("\n", end)
            if line_end < 0:
                over.scanned = end - 1
                return None
            if not live.startswith("[", end) and not _LIST_ITEM_LINE.match(live, end):
                over.scanned = line_end
                return end
            pos = line_end

    def _overflow_blocks(self) -> list[Block]:
        over = self._overflow
        assert over is not None
        text = self._live
        while len(text) - over.start - over.chunked > PLAIN_CHUNK:
            begin = over.start + over.chunked
            stop = text.rfind("\n", begin, begin + PLAIN_CHUNK)
            stop = stop + 1 if stop > begin else begin + PLAIN_CHUNK
            over.chunks.append(_plain_block(text[begin:stop]))
            over.chunked = stop - over.start
        rest = text[over.start + over.chunked :]
        return over.shown + over.chunks + ([_plain_block(rest)] if rest else [])


def _plain_block(text: str) -> Block:
    return Block("text", html=f"<p>{_plain_lines(text.removesuffix(chr(10)))}</p>\n", source=text)


def _maybe_definition(group: list[Token], lines: list[str]) -> bool:
    """Whether the growing paragraph ``group`` may still turn into a link reference definition.

    A definition makes no block: its lines belong to the block before it, which therefore
    cannot be taken as complete yet. Only a short paragraph starting with a label not yet
    closed, or closed by ``]:``, may; past a few lines this stops waiting (it would only change
    which block's source the lines count in).
    """
    first = group[0]
    if first.type != "paragraph_open" or first.map is None:
        return False
    start, end = first.map
    if end - start > 4:
        return False
    text = "".join(lines[start:end]).lstrip(" ")
    if not text.startswith("["):
        return False
    label = _LABEL.match(text)
    return label is None or text[label.end() : label.end() + 1] in (":", "")


def _open_fence(group: list[Token], lines: list[str]) -> bool:
    """Whether ``group`` is a code fence without its closing fence yet."""
    fence = group[0]
    if fence.type != "fence" or fence.map is None:
        return False
    return fence.content.count("\n") == len(lines) - fence.map[0] - 1


def _first_number(group: list[Token]) -> int:
    first = group[0]
    start = first.attrGet("start")
    return int(start) if start is not None else 1


def join_segments(blocks: Sequence[Block]) -> list[Block]:
    """The blocks with every block shown in segments joined back into one.

    What :func:`render_blocks` gives for a text equals this applied to what a stream of that
    text ends up showing. Seams: a paragraph cut at a line break joins with ``<br />``; cut
    inside a line, directly; a list's or table's later segments continue its opening tag; a
    code block's segments concatenate.
    """
    out: list[Block] = []
    for block in blocks:
        if block.part == 0 or not out or not out[-1].continued:
            out.append(replace(block, part=0))
            continue
        prev = out[-1]
        if block.kind == "code":
            joined = replace(prev, code=prev.code + block.code, source=prev.source + block.source)
        else:
            joined = replace(prev, html=_join_html(prev, block), source=prev.source + block.source)
        out[-1] = replace(joined, continued=block.continued)
    return out


_OPENING = re.compile(r"<(ul|ol|table)\b[^>]*>\n(<tbody>\n)?")


def _join_html(prev: Block, block: Block) -> str:
    head, rest = prev.html, block.html
    if head.startswith("<p>") and rest.startswith("<p>"):
        seam = "<br />\n" if prev.source.endswith("\n") else ""
        return head.removesuffix("</p>\n") + seam + rest.removeprefix("<p>")
    match = _OPENING.match(rest)
    if match is None:
        return head + rest
    tag = match.group(1)
    close = "</tbody>\n</table>\n" if tag == "table" else f"</{tag}>\n"
    return head.removesuffix(close) + rest[match.end() :]


def render_blocks(text: str) -> list[Block]:
    """The blocks of a complete text rendered at once (what streaming must end up equal to)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = text.splitlines(keepends=True)
    tokens = _PARSER.parse(text)
    return _blocks(_groups(tokens), lines, _PARSER, {})
