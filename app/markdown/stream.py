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

The parser and the blocks it makes are in :mod:`app.markdown.parser`; held blocks and segments in
:mod:`app.markdown.segments`.

Model output is untrusted. Raw HTML is escaped (markdown-it's ``html`` option is off), images
are shown as their description and address and never loaded, and a link shows its address
next to its text so the reader sees where it goes before clicking. Nothing is dropped: content
nested deeper than the parser's nesting limit is shown as plain text, and a run of more than
:data:`LONG_RUN` non-blank characters is shown as it is written.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from markdown_it import MarkdownIt
from markdown_it.token import Token
from markdown_it.utils import EnvType

from app.markdown.parser import (
    LABEL,
    PARSER,
    Block,
    blocks_of,
    group_ends,
    group_start,
    is_list,
    parse_cost,
    parse_text,
    plain_block,
    to_block,
    top_groups,
)
from app.markdown.parser import LONG_RUN as LONG_RUN
from app.markdown.parser import BlockKind as BlockKind
from app.markdown.parser import make_parser as make_parser
from app.markdown.segments import HeldBlocks, Segmenter, source_remake

__all__ = [
    "HELD_LIMIT",
    "LONG_RUN",
    "OVERFLOW_COST",
    "PLAIN_CHUNK",
    "SEGMENT_COST",
    "SEGMENT_LINES",
    "Block",
    "BlockKind",
    "BlockUpdate",
    "MarkdownStream",
    "join_segments",
    "make_parser",
    "render_blocks",
]

SEGMENT_LINES = 32
"""A growing paragraph, code block, list or table with this many finished lines is segmented."""

SEGMENT_CHARS = 3000
"""A growing block this long is segmented whatever its lines and parse cost: Qt lays a
paragraph out whole on every change, so one long line costs its length per update (about
0.07 ms per 1,000 characters on a 2-core EPYC; 14,000 characters, where its parse cost alone
would cut it, cost a millisecond per update)."""

SEGMENT_COST = 350.0
"""Estimated parse cost (µs, see :func:`~app.markdown.parser.parse_cost`) of the open tail at
which it is segmented."""

OVERFLOW_COST = 1000.0
"""Estimated parse cost (µs) past which an open block that cannot be segmented shows plain text."""

HELD_LIMIT = 300
"""At most this many complete blocks wait among the open ones for the end of the reply."""

PLAIN_CHUNK = 4000
"""Plain text shown for an overflowing block is split into blocks of about this many characters."""


def _due_for_segment(lines: int, cost: float, chars: int) -> bool:
    """Whether an open block this long (lines, parse cost, characters) is to be segmented."""
    return lines >= SEGMENT_LINES or cost >= SEGMENT_COST or chars >= SEGMENT_CHARS


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


_PARAGRAPH_END = "</p>\n"

_TYPABLE = frozenset(" ,.?!':-\"()/")
"""Besides letters, digits and characters beyond ASCII that print (:func:`_reads_as_itself`), the
characters typed onto a paragraph without a parse: none opens, closes or escapes anything."""

_NOT_AFTER = frozenset("*_~`\\[]<>&")
"""Characters after which no word is typed without a parse: a delimiter run (whether it can open
or close depends on the character after it), a code span's backticks, an escape, a link's
bracket, an autolink's or an entity's beginning."""


_PLAIN_ASCII = re.compile("[A-Za-z0-9" + re.escape("".join(sorted(_TYPABLE))) + "]*")
"""The ASCII text that :func:`_reads_as_itself` takes, in one match (the common piece)."""


def _reads_as_itself(text: str) -> bool:
    """Whether each character of ``text`` is one that Markdown reads as itself in a paragraph."""
    if text.isascii():
        return _PLAIN_ASCII.fullmatch(text) is not None
    return all(c.isalnum() or c in _TYPABLE or (c > "\x7f" and c.isprintable()) for c in text)


@dataclass
class _Typing:
    """The open blocks while words may be typed onto the last (a paragraph), and its figures.

    ``cost`` and ``lines`` are the open text's :func:`parse_cost` and line breaks, kept as
    words come (the cost of a text is the sum of its parts', and typed words hold no line
    break), so that a typed word costs the length of the word, not of the paragraph.
    """

    shown: list[Block]
    cost: float
    lines: int


_LIST_ITEM_LINE = re.compile(r" {0,3}(?:[-+*]|\d{1,9}[.)])(?:[ \t\n]|$)")
_BLOCK_END = re.compile(r"\n[ \t]*\n(?:[ \t]*\n)*(?=[^ \t\n])")


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

    def end(self, live: str) -> int | None:
        """Where the overflowing block has certainly ended, if it has (an offset in ``live``).

        After a blank line, a line that starts at the margin begins a new block, unless it is a
        list item (which may continue a list) or a bracket (perhaps a link reference definition,
        no block of its own). A code fence opened meanwhile is checked by the caller.
        """
        if self.stuck:
            return None
        pos = max(0, live.rfind("\n", 0, max(0, self.scanned - 1)))
        while True:
            match = _BLOCK_END.search(live, pos)
            if match is None:
                self.scanned = len(live)
                return None
            end = match.end()
            line_end = live.find("\n", end)
            if line_end < 0:
                self.scanned = end - 1
                return None
            if not live.startswith("[", end) and not _LIST_ITEM_LINE.match(live, end):
                self.scanned = line_end
                return end
            pos = line_end

    def blocks(self, live: str) -> list[Block]:
        """What is shown: the blocks before it, then ``live`` past them as plain text."""
        while len(live) - self.start - self.chunked > PLAIN_CHUNK:
            begin = self.start + self.chunked
            stop = live.rfind("\n", begin, begin + PLAIN_CHUNK)
            stop = stop + 1 if stop > begin else begin + PLAIN_CHUNK
            self.chunks.append(plain_block(live[begin:stop]))
            self.chunked = stop - self.start
        rest = live[self.start + self.chunked :]
        return self.shown + self.chunks + ([plain_block(rest)] if rest else [])


class MarkdownStream:
    """Turns a growing text into final blocks plus an open tail, re-parsing only the tail."""

    def __init__(self, md: MarkdownIt | None = None) -> None:
        self._md = md or PARSER
        self._live = ""
        self._held_cr = False
        self._held = HeldBlocks()
        self._segments = Segmenter(self._md, self._held)
        self._overflow: _Overflow | None = None
        self._retry_at = 0
        self._typing: _Typing | None = None
        """Set when the last open block is a paragraph that words typed onto its last line
        can be shown in without a parse."""
        self.closed_count = 0
        """How many blocks are final so far."""
        self.typed = 0
        """How many updates were words typed onto the open paragraph (no parse)."""

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
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        typed = self._type(text) if self._typing is not None else None
        if typed is not None:
            return typed
        self._live += text
        return self._update(final=False)

    def type_words(self, text: str, onto: Block) -> tuple[Block, str] | None:
        """Words typed onto the open paragraph, as a laid-out document can take them (or None).

        The fast lane of a streaming paragraph. Where :meth:`feed` would type ``text`` onto the
        open paragraph without a parse (:meth:`_type`), and ``onto`` is that paragraph as the
        stream last gave it out, the stream takes the text and returns the paragraph's new
        block and the text its HTML grew by at the end of its text (in the HTML, a quote is
        ``&quot;``). That is plain text which, typed at the end of a document laid out from
        the old HTML in the format of the text before it, shows what the new HTML shows: no
        double space (HTML folds it), and not after an inline element's end (a cursor there
        carries on its format). The other open blocks are as they were, and none is
        released: a typed word settles no held block.

        Returns:
            The paragraph's new block and the text added (as text: a quote is itself); None
            if nothing was taken (then :meth:`feed` the text).
        """
        typing = self._typing
        if typing is None or self._held_cr or typing.shown[-1] is not onto or "\r" in text:
            return None
        head = onto.html[: -len(_PARAGRAPH_END)]
        if not head or head[-1] in "> ":
            return None
        typed = self._typing_of(text)
        if typed is None:
            return None
        grown, added, after = typed
        if "  " in added:
            return None
        self._live, self._typing = grown, after
        self.typed += 1
        return after.shown[-1], added

    def _type(self, text: str) -> BlockUpdate | None:
        """Words added to the open paragraph's last line, shown without parsing (or None).

        Most updates of a streaming reply add a word or two to a paragraph. Parsing its whole
        text again was half of what a frame cost the window; where CommonMark cannot read the
        words as anything but text, the paragraph's HTML is the one it had, plus them. That is
        so when: the words are letters, digits, spaces, ``,.?!':-"()/`` and characters beyond
        ASCII that print (no character that opens, closes or escapes anything, no entity's
        ``;``, no line break), the text before them does not end in a delimiter, a backtick,
        a backslash, a bracket, ``<``, ``>``, ``&`` or a tab or line break (so nothing next to
        them changes what it can open or close), and the last line begins with a letter (so
        it is no list item, heading or other block in the making). Anything else, and any
        threshold the parse would act on (segmenting, overflow, a long run), goes the usual
        way.
        """
        typed = self._typing_of(text)
        if typed is None:
            return None
        grown, _added, after = typed
        self._live, self._typing = grown, after
        self.typed += 1
        return self._emit(self._typing.shown)

    def _typing_of(self, text: str) -> tuple[str, str, _Typing] | None:
        """Whether ``text`` can be typed (see :meth:`_type`); changes nothing.

        Returns:
            The text grown, the words the paragraph's HTML grows by, and the open blocks
            after; None if it cannot.
        """
        typing = self._typing
        live = self._live
        assert typing is not None
        if not text or not live or not _reads_as_itself(text):
            return None
        last = live[-1]
        if last in _NOT_AFTER or (last.isspace() and last != " "):
            return None
        grown = live + text
        if len(grown) - max(grown.rfind(" "), grown.rfind("\n")) > LONG_RUN:
            return None  # a run of non-blank characters this long is shown as written
        cost = typing.cost + parse_cost(text)
        if cost >= OVERFLOW_COST or (
            len(grown) >= self._retry_at and _due_for_segment(typing.lines, cost, len(grown))
        ):
            return None
        trailing = live[len(live.rstrip()) :]
        if trailing.strip(" "):
            return None  # a tab before the words: left to the parser
        added = (trailing + text).rstrip(" ")
        block = typing.shown[-1]
        # As the renderer writes text: of the typable characters, only the quote is escaped.
        html = block.html[: -len(_PARAGRAPH_END)] + added.replace('"', "&quot;") + _PARAGRAPH_END
        # A paragraph's block has no code, language or segment (see _typable): made directly,
        # not by dataclasses.replace, which costs ten calls of Python per typed word.
        grown_block = Block(kind=block.kind, html=html, source=block.source + text)
        shown = [*typing.shown[:-1], grown_block]
        return grown, added, _Typing(shown, cost, typing.lines)

    def finish(self) -> BlockUpdate:
        """The text is complete: every block is final."""
        self._typing = None
        if self._held_cr:
            self._live += "\n"
            self._held_cr = False
        return self._update(final=True)

    # -- one update -------------------------------------------------------------------------

    def _update(self, *, final: bool) -> BlockUpdate:
        over = self._overflow
        if over is not None and not self._end_overflow(over, final):
            return self._emit(over.blocks(self._live))
        live = self._live
        lines = live.splitlines(keepends=True)
        tokens, env = parse_text(self._md, live, self._held.refs)
        groups = top_groups(tokens)
        cut = self._complete_groups(groups, lines, final)
        if cut:
            groups, lines = self._close(groups, lines, env, cut)
        if final:
            self._held.remember_definitions(env, len(lines))
            return self._finish_reply()
        shown = self._show_open(groups, lines, env)
        self._typing = self._typable(groups, shown)
        return self._emit(shown)

    def _typable(self, groups: list[list[Token]], shown: list[Block]) -> _Typing | None:
        """The open blocks, if the last is a paragraph whose last line words may be typed onto.

        The blocks before it are still open only because its first line is not complete
        (see :meth:`_complete_groups`); words that keep that line a paragraph's change none
        of them.
        """
        if self._overflow is not None or self._segments.active is not None:
            return None
        if not groups or len(shown) != len(groups):
            return None
        if [token.type for token in groups[-1]] != ["paragraph_open", "inline", "paragraph_close"]:
            return None
        block = shown[-1]
        if block.part or block.continued or not block.html.endswith(_PARAGRAPH_END):
            return None
        line = self._live[self._live.rfind("\n") + 1 :]
        words = line.lstrip(" ")
        if not words or not words[0].isalpha() or len(line) - len(words) > 3:
            return None
        return _Typing(shown, parse_cost(self._live), self._live.count("\n"))

    def _end_overflow(self, over: _Overflow, final: bool) -> bool:
        """Close the overflowing block if it has ended; returns whether it did."""
        end = len(self._live) if final else over.end(self._live)
        if end is None:
            return False
        head = self._live[:end]
        tokens, env = parse_text(self._md, head, self._held.refs)
        lines = head.splitlines(keepends=True)
        groups = top_groups(tokens)
        if not final and groups and _open_fence(groups[-1], lines):
            # A code fence opened after the block and is still open: it ends nothing.
            start = group_start(groups[-1])
            if start == 0:
                over.stuck = True
                return False
            groups, lines = groups[:-1], lines[:start]
            end = len("".join(lines))
        self._complete(groups, lines, env, len(lines))
        self._live = self._live[end:]
        self._overflow = None
        self._retry_at = 0
        return True

    def _complete_groups(self, groups: list[list[Token]], lines: list[str], final: bool) -> int:
        """How many leading groups are complete (all of them once the text is)."""
        if final:
            return len(groups)
        complete = len(lines) if self._live.endswith("\n") else len(lines) - 1
        # The last group that starts on a complete line begins the open tail.
        for i in range(len(groups) - 1, 0, -1):
            start = group_start(groups[i])
            last = i == len(groups) - 1
            if start < complete and not (last and _maybe_definition(groups[i], lines)):
                return i
        return 0

    def _close(
        self, groups: list[list[Token]], lines: list[str], env: EnvType, cut: int
    ) -> tuple[list[list[Token]], list[str]]:
        """Hold the groups before ``cut``; returns the open groups and lines, renumbered."""
        self._retry_at = 0
        boundary = group_start(groups[cut]) if cut < len(groups) else len(lines)
        self._complete(groups[:cut], lines[:boundary], env, boundary)
        self._live = "".join(lines[boundary:])
        if cut < len(groups):
            shift = boundary
            for group in groups[cut:]:
                for token in group:
                    if token.map:
                        token.map = [token.map[0] - shift, token.map[1] - shift]
        return groups[cut:], lines[boundary:]

    def _show_open(self, groups: list[list[Token]], lines: list[str], env: EnvType) -> list[Block]:
        """The open blocks, after splitting a segment off a growing one if it is time to."""
        live = self._live
        cost = parse_cost(live)
        if len(groups) == 1 and len(live) >= self._retry_at:
            count = live.count("\n")
            if _due_for_segment(count, cost, len(live)):
                rest = self._segments.segment(groups[0], lines, env, live, SEGMENT_COST)
                if rest is not None:
                    self._live = live = rest
                    lines = live.splitlines(keepends=True)
                    tokens, env = parse_text(self._md, live, self._held.refs)
                    groups = top_groups(tokens)
                    cost = parse_cost(live)
                    self._retry_at = 0
                else:
                    self._retry_at = len(live) + len(live) // 4 + 200
        shown = self._open_blocks(groups, lines, env)
        if len(groups) == 1 and cost >= OVERFLOW_COST and groups[0][0].type != "fence":
            self._overflow = _Overflow(
                shown=shown,
                start=len(live),
                scanned=len(live),
                is_list=is_list(groups[0]),
            )
        return shown

    def _emit(self, shown: list[Block]) -> BlockUpdate:
        """Move the held blocks that can no longer change to the closed ones."""
        closed = self._held.release(HELD_LIMIT)
        self.closed_count += len(closed)
        return BlockUpdate(closed=closed, open=self._held.shown() + shown)

    def _finish_reply(self) -> BlockUpdate:
        """The reply is complete: render again what a later definition changed; all is final."""
        closed = self._held.finish()
        self.closed_count += len(closed)
        self._live = ""
        self._segments.active = None
        self._overflow = None
        return BlockUpdate(closed=closed, open=[])

    def _complete(
        self, groups: list[list[Token]], lines: list[str], env: EnvType, count: int
    ) -> None:
        """Hold complete groups (the first may finish the segmented block)."""
        self._held.remember_definitions(env, count)
        if not groups:
            return
        blocks = self._open_blocks(groups, lines, env, count)
        first = 0
        ends = group_ends(groups, count)
        if self._segments.active is not None:
            self._segments.finish(groups[0], blocks[0], lines[: ends[0]], env)
            first = 1
        for group, block, end in zip(groups[first:], blocks[first:], ends[first:], strict=True):
            source = "".join(lines[group_start(group) : end])
            self._held.hold(block, remake=source_remake(self._md, source))

    def _open_blocks(
        self, groups: list[list[Token]], lines: list[str], env: EnvType, count: int | None = None
    ) -> list[Block]:
        """Blocks for the open groups; the first continues the segmented block, if any."""
        md = self._md
        count = len(lines) if count is None else count
        ends = group_ends(groups, count)
        blocks = [to_block(g, lines, end, md, env) for g, end in zip(groups, ends, strict=True)]
        if self._segments.active is not None and groups:
            blocks[0] = self._segments.continue_block(groups[0], blocks[0], lines, ends[0], env)
        return blocks


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
    label = LABEL.match(text)
    return label is None or text[label.end() : label.end() + 1] in (":", "")


def _open_fence(group: list[Token], lines: list[str]) -> bool:
    """Whether ``group`` is a code fence without its closing fence yet."""
    fence = group[0]
    if fence.type != "fence" or fence.map is None:
        return False
    return fence.content.count("\n") == len(lines) - fence.map[0] - 1


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
    tokens = PARSER.parse(text)
    return blocks_of(top_groups(tokens), lines, PARSER, {})
