"""The rows of one reply: its header, an optional thinking section, and its Markdown answer.

:class:`ReplyRows` turns a reply's streamed text into rows of the chat view; :class:`BlockRows`
keeps the rows of one Markdown stream, re-rendering only the still-open tail on each update.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from app.store.thinking import ThinkSplitter, ThinkUpdate
from app.ui.code_row import CodeRow
from app.ui.header_row import HeaderRow
from app.ui.markdown import Block, BlockUpdate, MarkdownStream
from app.ui.row_base import Row
from app.ui.rows import TextRow, ThinkingRow

if TYPE_CHECKING:
    from app.ui.chat_view import ChatView


class BlockRows:
    """The rows showing one Markdown stream: final rows above, the open tail's rows below.

    Final rows are never touched again. An update re-renders only the open rows, reusing a
    row when its kind still matches, so the common update (the last paragraph grew) changes
    one label.
    """

    def __init__(self, view: ChatView, style: str, author: str) -> None:
        self._view = view
        self._style = style
        self._author = author
        self.stream = MarkdownStream()
        self.rows: list[Row] = []
        self._open: list[Row] = []
        self.hidden = False

    def feed(self, text: str) -> None:
        """Show more of the stream's text."""
        self._show(self.stream.feed(text))

    def finish(self) -> None:
        """The stream ended: its last blocks become final."""
        self._show(self.stream.finish())

    def _new_row(self, block: Block) -> Row:
        row: CodeRow | TextRow
        theme = self._view.theme
        row = CodeRow(theme) if block.kind == "code" else TextRow(theme, self._style)
        row.author = self._author
        row.set_block(block)
        return row

    def _show(self, update: BlockUpdate) -> None:
        stack = self._view.stack
        blocks = update.closed + update.open
        kept: list[Row] = []
        for row, block in zip(self._open, blocks, strict=False):
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
        self._open = kept[len(update.closed) :]


class ReplyRows:
    """One reply being shown: its header, an optional thinking section, and its answer."""

    def __init__(self, view: ChatView, speaker: str) -> None:
        self._view = view
        self.text = ""
        self.speaker = speaker
        self.header = HeaderRow(speaker, lambda: self.text)
        self.header.spoken_text = self.answer_text
        view.stack.append(self.header)
        self._splitter = ThinkSplitter()
        self._thinking: BlockRows | None = None
        self.thinking_row: ThinkingRow | None = None
        self._thinking_began = 0.0
        self._timed = True
        self.answer = BlockRows(view, "reply", speaker)

    def append(self, text: str) -> None:
        """Show more of the reply."""
        self.text += text
        self._apply(self._splitter.feed(text))

    def finish(self, *, timed: bool = True) -> None:
        """The reply ended (``timed``: it streamed, so its thinking has a duration)."""
        if not timed:
            self._timed = False
        self._apply(self._splitter.finish())
        if self.thinking_row is not None and not self.thinking_row.done:
            self._end_thinking()  # stopped (or ended) while still thinking
        self.answer.finish()

    def _apply(self, update: ThinkUpdate) -> None:
        if update.thinking_started:
            self.thinking_row = ThinkingRow(self._toggle_thinking)
            self.thinking_row.author = self.speaker
            self._view.stack.append(self.thinking_row)
            self._thinking = BlockRows(self._view, "thinking", self.speaker)
            self._thinking_began = time.monotonic()
        if update.thinking and self._thinking is not None:
            self._thinking.feed(update.thinking)
        if update.thinking_ended:
            self._end_thinking()
        if update.answer:
            self.answer.feed(update.answer)

    def _end_thinking(self) -> None:
        assert self._thinking is not None
        assert self.thinking_row is not None
        self._thinking.finish()
        # A reply loaded from the history has no timing: its header just says "Thoughts".
        seconds = time.monotonic() - self._thinking_began if self._timed else None
        self.thinking_row.set_done(seconds)

    def _toggle_thinking(self, expanded: bool) -> None:
        if self._thinking is not None:
            self._thinking.hidden = not expanded
            self._view.stack.set_visible(self._thinking.rows, expanded)

    def answer_text(self) -> str:
        """The answer as shown (rendered, without Markdown), for a screen reader."""
        blocks = (row.text_block() for row in self.answer.rows)
        return "\n".join(block.plain_text() for block in blocks if block is not None)
