"""The rows of one reply: its header, an optional thinking section, and its Markdown answer.

:class:`ReplyRows` turns a reply's streamed text into rows of the chat view; :class:`BlockRows`
keeps the rows of one Markdown stream, re-rendering only the still-open tail on each update.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Protocol

from app.markdown.stream import Block, BlockUpdate, MarkdownStream
from app.store.thinking import ThinkSplitter, ThinkUpdate
from app.ui.chat.rows.base import Row
from app.ui.chat.rows.code import CodeRow
from app.ui.chat.rows.header import HeaderRow
from app.ui.chat.rows.stack import RowStack
from app.ui.chat.rows.text import TextRow, ThinkingRow
from app.ui.look.colors import Theme

PACK_CHARS = 4000
"""A row built in bulk (a saved reply, a huge piece) holds final text blocks up to this much
Markdown: one widget per short paragraph would cost a 1 MB reply over 600 MB."""


TAIL_STEP = 4
"""Open blocks shown per step while draining (the clock is checked between steps)."""


class ReplyView(Protocol):
    """What a reply's rows need of the view that shows them (the chat view)."""

    @property
    def stack(self) -> RowStack:
        """The stack the rows are placed in."""
        ...

    @property
    def theme(self) -> Theme:
        """The colours the rows render with now."""
        ...


def _packable(block: Block) -> bool:
    return block.kind == "text" and block.part == 0 and not block.continued


def _packed(first: Block, then: Block) -> Block:
    return Block(
        "text",
        html=first.html + then.html,
        source=first.source + then.source,
        continued=then.continued,
    )


class BlockRows:
    """The rows showing one Markdown stream: final rows above, the open tail's rows below.

    Final rows are never touched again. An update re-renders only the open rows, reusing a
    row when its kind still matches, so the common update (the last paragraph grew) changes
    one label.
    """

    def __init__(self, view: ReplyView, style: str, author: str) -> None:
        self._view = view
        self._style = style
        self._author = author
        self.stream = MarkdownStream()
        self.rows: list[Row] = []
        self._open: list[Row] = []
        self.hidden = False
        self.pack = False
        """Put final text blocks together in rows of up to :data:`PACK_CHARS` (bulk building:
        nothing is streaming, so there is no open block to keep apart)."""
        self._backlog: deque[Block] = deque()
        self._tail: list[Block] | None = None
        self._tail_shown = 0

    @property
    def pending(self) -> bool:
        """Whether blocks wait for :meth:`drain` to become rows."""
        return bool(self._backlog) or self._tail is not None

    def feed(self, text: str, *, bulk: bool = False, show_open: bool = True) -> None:
        """Show more of the stream's text.

        ``bulk`` (a large text fed in pieces): the blocks wait for :meth:`drain`, which makes
        their rows a few at a time. The open blocks, which the stream gives again on every
        update (up to a few hundred held ones), are shown only by a feed with ``show_open``
        (the last piece).
        """
        if not bulk and show_open and not self.pending and self._open:
            # The common update, a word or two onto the open paragraph: straight from the
            # stream to its row. In a window whose cores all decode, an update costs about the
            # memory it touches (code and objects evicted between frames), so the general
            # path's blocks, lists and comparisons are left out, not made cheaper.
            row = self._open[-1]
            if isinstance(row, TextRow) and row.block is not None:
                typed = self.stream.type_words(text, row.block)
                if typed is not None:
                    if row.type_words(*typed):
                        self._view.stack.refresh(row)
                    return
        self._take(self.stream.feed(text), bulk=bulk, show_open=show_open)

    def finish(self, *, bulk: bool = False) -> None:
        """The stream ended: its last blocks become final."""
        self._take(self.stream.finish(), bulk=bulk)

    def _take(self, update: BlockUpdate, *, bulk: bool, show_open: bool = True) -> None:
        if not bulk and not self.pending:
            self._show(update)
            return
        for block in update.closed:
            last = self._backlog[-1] if self._backlog else None
            if (
                self.pack
                and last is not None
                and _packable(last)
                and _packable(block)
                and len(last.source) + len(block.source) <= PACK_CHARS
            ):
                self._backlog[-1] = _packed(last, block)
            else:
                self._backlog.append(block)
        self._tail = list(update.open) if show_open else None
        self._tail_shown = 0

    def drain(self, deadline: float, most: int) -> int:
        """Make rows for waiting blocks until ``deadline`` or ``most`` rows; returns rows made."""
        made = 0
        while self._backlog and made < most:
            before = len(self.rows)
            self._show(BlockUpdate(closed=[self._backlog.popleft()]), show_open=False)
            made += max(1, len(self.rows) - before)
            if time.perf_counter() > deadline:
                return made
        while not self._backlog and self._tail is not None and made < most:
            # The open blocks a few at a time too: rows already shown for them are kept.
            # A few per step, the clock checked between: a tail of 4000-character plain blocks
            # (a 1 MB line) took 30 ms for one step of 24.
            shown = min(len(self._tail), self._tail_shown + min(TAIL_STEP, most - made))
            self._show(BlockUpdate(open=self._tail[:shown]))
            made += max(1, shown - self._tail_shown)
            self._tail_shown = shown
            if shown >= len(self._tail):
                self._tail = None
            if time.perf_counter() > deadline:
                break
        return made

    def _new_row(self, block: Block) -> Row:
        row: CodeRow | TextRow
        theme = self._view.theme
        row = CodeRow(theme) if block.kind == "code" else TextRow(theme, self._style)
        row.author = self._author
        row.set_block(block)
        if not self.pack:
            row.realize()  # streamed or small: shown now; built in bulk, when painted
        return row

    def _pack(self, closed: list[Block]) -> list[Block]:
        """Closed blocks put together: into the last final row, then with each other."""
        final = len(self.rows) - len(self._open)
        last = self.rows[final - 1] if final > 0 else None
        if (
            closed
            and isinstance(last, TextRow)
            and last.block is not None
            and _packable(last.block)
            and _packable(closed[0])
            and len(last.block.source) + len(closed[0].source) <= PACK_CHARS
        ):
            if last.set_block(_packed(last.block, closed[0])):
                self._view.stack.refresh(last)
            closed = closed[1:]
        packed: list[Block] = []
        for block in closed:
            if (
                packed
                and _packable(packed[-1])
                and _packable(block)
                and len(packed[-1].source) + len(block.source) <= PACK_CHARS
            ):
                packed[-1] = _packed(packed[-1], block)
            else:
                packed.append(block)
        return packed

    def _show(self, update: BlockUpdate, *, show_open: bool = True) -> None:
        stack = self._view.stack
        closed = self._pack(update.closed) if self.pack else update.closed
        blocks = closed + update.open if show_open else closed
        # Held blocks (up to HELD_LIMIT, waiting for a link definition) come again unchanged,
        # the same objects, on every update: passed by identity, not compared field by field
        # (comparing 240 of them per update made a late update twice as dear as an early one).
        same = 0
        for row, block in zip(self._open, blocks, strict=False):
            if not isinstance(row, CodeRow | TextRow) or row.block is not block:
                break
            same += 1
        kept: list[Row] = self._open[:same]
        for row, block in zip(self._open[same:], blocks[same:], strict=False):
            if row.kind != block.kind:
                break
            assert isinstance(row, CodeRow | TextRow)
            if row.set_block(block):
                stack.refresh(row)
            kept.append(row)
        stale = self._open[len(kept) :]
        for row in stale:
            if isinstance(row, CodeRow):
                row.segments.remove(row)
        stack.remove_tail(stale)
        del self.rows[len(self.rows) - len(stale) :]
        for block in blocks[len(kept) :]:
            row = self._new_row(block)
            previous = self.rows[-1] if self.rows else None
            if isinstance(row, CodeRow) and block.part and isinstance(previous, CodeRow):
                # The next segment of a long code block: one Copy copies all of them.
                row.segments = previous.segments
                row.segments.append(row)
            stack.append(row)
            self.rows.append(row)
            kept.append(row)
            if self.hidden:
                stack.set_visible([row], False)
        self._open = kept[len(closed) :]


class ReplyRows:
    """One reply being shown: its header, an optional thinking section, and its answer."""

    def __init__(self, view: ReplyView, speaker: str, *, attach: bool = True) -> None:
        self._view = view
        self._parts: list[str] = []
        self.speaker = speaker
        self.header = HeaderRow(speaker, lambda: self.text)
        self.header.spoken_text = self.answer_text
        if attach:
            self.attach()
        self._splitter = ThinkSplitter()
        self._thinking: BlockRows | None = None
        self.thinking_row: ThinkingRow | None = None
        self._thinking_began = 0.0
        self._timed = True
        self.answer = BlockRows(view, "reply", speaker)

    def attach(self) -> None:
        """Put the reply's header at the bottom of the view (its text follows it)."""
        self._view.stack.append(self.header)

    @property
    def text(self) -> str:
        """The reply's whole text so far."""
        if len(self._parts) > 1:
            # Joined when asked, not per piece: a reply fed in 500 chunks is not copied 500 times.
            self._parts = ["".join(self._parts)]
        return self._parts[0] if self._parts else ""

    @property
    def pack(self) -> bool:
        """Whether final text blocks are put together in rows (see :attr:`BlockRows.pack`)."""
        return self.answer.pack

    @pack.setter
    def pack(self, pack: bool) -> None:
        self.answer.pack = pack
        if self._thinking is not None:
            self._thinking.pack = pack

    def append(self, text: str, *, bulk: bool = False, show_open: bool = True) -> None:
        """Show more of the reply (``bulk``, ``show_open``: see :meth:`BlockRows.feed`)."""
        self._parts.append(text)
        if self._splitter.answering:
            # The common update: any thinking is over, the piece is the answer's as it is.
            if text:
                self.answer.feed(text, bulk=bulk, show_open=show_open)
            return
        self._apply(self._splitter.feed(text), bulk=bulk, show_open=show_open)

    def finish(self, *, timed: bool = True, bulk: bool = False) -> None:
        """The reply ended (``timed``: it streamed, so its thinking has a duration)."""
        if not timed:
            self._timed = False
        self._apply(self._splitter.finish(), bulk=bulk)
        if self.thinking_row is not None and not self.thinking_row.done:
            self._end_thinking(bulk=bulk)  # stopped (or ended) while still thinking
        self.answer.finish(bulk=bulk)

    @property
    def pending(self) -> bool:
        """Whether blocks of the reply wait for :meth:`drain` to become rows."""
        return self.answer.pending or (self._thinking is not None and self._thinking.pending)

    def drain(self, deadline: float, most: int) -> int:
        """Make rows for waiting blocks, the thinking's first; returns rows made."""
        made = 0
        if self._thinking is not None and self._thinking.pending:
            made = self._thinking.drain(deadline, most)
            if self._thinking.pending:
                return made
        return made + self.answer.drain(deadline, most - made)

    def _apply(self, update: ThinkUpdate, *, bulk: bool = False, show_open: bool = True) -> None:
        if update.thinking_started:
            self.thinking_row = ThinkingRow(self._toggle_thinking)
            self.thinking_row.author = self.speaker
            self._view.stack.append(self.thinking_row)
            self._thinking = BlockRows(self._view, "thinking", self.speaker)
            self._thinking.pack = self.answer.pack
            self._thinking_began = time.monotonic()
        if update.thinking and self._thinking is not None:
            self._thinking.feed(update.thinking, bulk=bulk, show_open=show_open)
        if update.thinking_ended:
            self._end_thinking(bulk=bulk)
        if update.answer:
            self.answer.feed(update.answer, bulk=bulk, show_open=show_open)

    def _end_thinking(self, *, bulk: bool = False) -> None:
        assert self._thinking is not None
        assert self.thinking_row is not None
        self._thinking.finish(bulk=bulk)
        # A reply loaded from the history has no timing: its header just says "Thoughts".
        seconds = time.monotonic() - self._thinking_began if self._timed else None
        self.thinking_row.set_done(seconds)

    def _toggle_thinking(self, expanded: bool) -> None:
        if self._thinking is not None:
            self._thinking.hidden = not expanded
            self._view.stack.set_visible(self._thinking.rows, expanded)

    def answer_text(self, limit: int | None = None) -> str:
        """The answer as shown (rendered, without Markdown), for a screen reader.

        Args:
            limit: enough characters are gathered to have this many (an announcement reads
                the beginning of a reply, and a 1 MB reply's thousands of rows take long).
        """
        parts: list[str] = []
        gathered = 0
        for row in self.answer.rows:
            block = row.text_block()
            if block is None:
                continue
            parts.append(block.plain_text())
            gathered += len(parts[-1]) + 1
            if limit is not None and gathered > limit:
                break
        return "\n".join(parts)
