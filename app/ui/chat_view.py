"""The conversation view: prompts and replies, with replies rendered as Markdown as they stream."""

from __future__ import annotations

import time

from PySide6.QtCore import QCoreApplication, QEvent, Qt
from PySide6.QtGui import QPalette, QResizeEvent
from PySide6.QtWidgets import QFrame, QScrollArea, QWidget
from typing_extensions import override

from app.flow.pacing import Slicer
from app.store.thinking import ThinkSplitter, ThinkUpdate
from app.ui.markdown import Block, BlockUpdate, MarkdownStream
from app.ui.rows import (
    CodeRow,
    HeaderRow,
    Row,
    RowStack,
    TextRow,
    Theme,
    ThinkingRow,
    theme_for,
)

RELAYOUT_SLICE_S = 0.006
"""Work per event-loop turn when re-measuring rows for a new width (a third of a frame)."""

PIN_SLACK_PX = 4
"""How close to the bottom counts as 'at the bottom' (a partly shown last line still pins)."""


class _BlockRows:
    """The rows showing one Markdown stream: final rows above, the open tail's rows below.

    Final rows are never touched again. An update re-renders only the open rows, reusing a
    row when its kind still matches, so the common update (the last paragraph grew) changes
    one label.
    """

    def __init__(self, view: ChatView, style: str) -> None:
        self._view = view
        self._style = style
        self.stream = MarkdownStream()
        self.rows: list[Row] = []
        self._open: list[Row] = []
        self.hidden = False

    def feed(self, text: str) -> None:
        self._show(self.stream.feed(text))

    def finish(self) -> None:
        self._show(self.stream.finish())

    def _new_row(self, block: Block) -> Row:
        row: CodeRow | TextRow
        theme = self._view.theme
        row = CodeRow(theme) if block.kind == "code" else TextRow(theme, self._style)
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


class _Reply:
    """One reply being shown: its header, an optional thinking section, and its answer."""

    def __init__(self, view: ChatView, speaker: str) -> None:
        self._view = view
        self.text = ""
        self.header = HeaderRow(speaker, lambda: self.text)
        view.stack.append(self.header)
        self._splitter = ThinkSplitter()
        self._thinking: _BlockRows | None = None
        self.thinking_row: ThinkingRow | None = None
        self._thinking_began = 0.0
        self._timed = True
        self.answer = _BlockRows(view, "reply")

    def append(self, text: str) -> None:
        self.text += text
        self._apply(self._splitter.feed(text))

    def finish(self, *, timed: bool = True) -> None:
        if not timed:
            self._timed = False
        self._apply(self._splitter.finish())
        if self.thinking_row is not None and not self.thinking_row.done:
            self._end_thinking()  # stopped (or ended) while still thinking
        self.answer.finish()

    def _apply(self, update: ThinkUpdate) -> None:
        if update.thinking_started:
            self.thinking_row = ThinkingRow(self._toggle_thinking)
            self._view.stack.append(self.thinking_row)
            self._thinking = _BlockRows(self._view, "thinking")
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


class ChatView(QScrollArea):
    """The conversation, as a column of rows; a streaming reply grows at the bottom.

    Replies are Markdown, rendered as they stream: each update re-renders only the reply's
    last, still-open block (see :mod:`app.ui.markdown`), and the rows above it are final, so an
    update costs the same at the start of a long reply as at its end. Prompts and the app's
    own notes are plain text. While the user is at the bottom the view follows the reply;
    scrolling up detaches it, scrolling back to the bottom re-attaches it.
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("chatView")
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setWidgetResizable(False)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.viewport().setBackgroundRole(QPalette.ColorRole.Base)
        self.viewport().setAutoFillBackground(True)
        self.stack = RowStack()
        self.setWidget(self.stack)
        self.theme: Theme = theme_for(self.palette())
        self._reply: _Reply | None = None
        self._pinned = True
        bar = self.verticalScrollBar()
        bar.valueChanged.connect(self._on_scrolled)
        bar.rangeChanged.connect(self._on_range_changed)
        self.updates = 0
        """Appends applied to replies (the bench and tests count frames by it)."""
        self._relayout = Slicer(self._relayout_step, RELAYOUT_SLICE_S, self)

    # -- building the conversation ------------------------------------------------------------

    def add_user_message(self, text: str) -> HeaderRow:
        """Show a prompt the user sent (as plain text: it is never interpreted)."""
        header = HeaderRow(QCoreApplication.translate("ChatView", "You"), lambda: text)
        self.stack.append(header)
        row = TextRow(self.theme, "user")
        row.set_plain(text)
        self.stack.append(row)
        return header

    def begin_reply(self, speaker: str = "Floodgate") -> HeaderRow:
        """Start an empty reply that :meth:`append_to_reply` grows; returns its header."""
        self._reply = _Reply(self, speaker)
        return self._reply.header

    def add_reply(self, speaker: str, text: str) -> HeaderRow:
        """Show a whole reply at once (a saved conversation); returns its header."""
        reply = _Reply(self, speaker)
        reply.append(text)
        reply.finish(timed=False)
        return reply.header

    def append_to_reply(self, text: str) -> None:
        """Append streamed text to the reply in progress."""
        if self._reply is None:
            self.begin_reply()
            assert self._reply is not None
        self._reply.append(text)
        self.updates += 1

    def end_reply(self, note: str = "", *, error: bool = False) -> None:
        """Close the reply in progress, with a note under it (for example "Stopped.")."""
        if self._reply is not None:
            self._reply.finish()
        self._reply = None
        if note:
            self.add_note(note, error=error)

    def add_note(self, text: str, *, error: bool = False) -> None:
        """Show a line from the app itself (a notice or an error) in the conversation."""
        row = TextRow(self.theme, "error" if error else "note")
        row.set_plain(text)
        self.stack.append(row)

    def clear(self) -> None:
        """Remove everything shown."""
        self._reply = None
        self.stack.clear()

    def toPlainText(self) -> str:
        """Everything shown, as text (replies as the Markdown the model wrote)."""
        return "\n".join(row.plain_text() for row in self.stack.rows if row.isVisibleTo(self.stack))

    # -- layout and theme ---------------------------------------------------------------------

    @override
    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if self.viewport().width() != self.stack.width():
            self._lay_out_again()  # a taller or shorter window changes no row

    def _lay_out_again(self) -> None:
        # The rows on screen now; the rest a slice per event-loop turn, so that resizing a
        # window over a long conversation stays smooth.
        top = self.verticalScrollBar().value()
        stale = self.stack.set_width(self.viewport().width(), top, top + self.viewport().height())
        if stale:
            self._relayout.schedule()

    def _relayout_step(self, deadline: float) -> bool:
        bar = self.verticalScrollBar()
        # Keep the row the reader is looking at where it is, while rows above it change height.
        anchor = None if self._pinned else self.stack.row_at(bar.value())
        offset = bar.value() - self.stack.tops[anchor] if anchor is not None else 0
        left = self.stack.measure_stale(max(0.0, deadline - time.perf_counter()))
        if anchor is not None:
            bar.setValue(self.stack.tops[anchor] + offset)
        return not left

    @override
    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange:
            self.theme = theme_for(self.palette())
            for row in self.stack.rows:
                row.restyle(self.theme)
            self._lay_out_again()

    # -- following the reply ------------------------------------------------------------------

    @property
    def pinned(self) -> bool:
        """Whether the view follows new text to the bottom."""
        return self._pinned

    def _on_scrolled(self, value: int) -> None:
        self._pinned = value >= self.verticalScrollBar().maximum() - PIN_SLACK_PX

    def _on_range_changed(self, _minimum: int, maximum: int) -> None:
        if self._pinned:
            self.verticalScrollBar().setValue(maximum)
