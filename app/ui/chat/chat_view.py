"""The conversation view: prompts and replies, with replies rendered as Markdown as they stream.

Besides showing the conversation, the view lets the user select across it as in a browser
(:mod:`app.ui.chat.selection`), move between messages with the keyboard (Ctrl+Up/Down or F6 and
Shift+F6; Tab then goes through that message's buttons), and exposes it to screen readers
(:mod:`app.ui.chat.accessibility`), announcing each finished reply once.
"""

from __future__ import annotations

import time

from PySide6.QtCore import QCoreApplication, QEvent, Qt, Signal
from PySide6.QtGui import QGuiApplication, QKeyEvent, QKeySequence, QPalette, QResizeEvent
from PySide6.QtWidgets import QApplication, QFrame, QScrollArea, QWidget
from typing_extensions import override

from app.flow.pacing import HALF_A_FRAME_S
from app.ui.chat import accessibility
from app.ui.chat.build_queue import BUILD_ROWS as BUILD_ROWS
from app.ui.chat.build_queue import FEED_CHARS as FEED_CHARS
from app.ui.chat.build_queue import SLICE_CHARS as SLICE_CHARS
from app.ui.chat.build_queue import BuildQueue
from app.ui.chat.message_keys import MessageKeys
from app.ui.chat.prompt_progress import PromptProgress
from app.ui.chat.reply_rows import ReplyRows
from app.ui.chat.revealed_actions import RevealedActions
from app.ui.chat.row_sweeper import RowSweeper
from app.ui.chat.rows.action_button import ActionButton, FocusRing
from app.ui.chat.rows.base import MARGIN, Row
from app.ui.chat.rows.header import HeaderRow
from app.ui.chat.rows.lexers import shelf
from app.ui.chat.rows.stack import RowStack
from app.ui.chat.rows.text import TextRow
from app.ui.chat.scroll_place import ScrollPlace
from app.ui.chat.selection import MouseSelection, Selection
from app.ui.look.colors import Theme, theme_for

ANNOUNCED_CHARS = 2000
"""A finished reply is announced up to this many characters (the rest is read in the view)."""

BULK_CHARS = 8000
"""A message or piece longer than this is built over event-loop turns, not in the call."""

READING_CHARS = 96
"""On a wide window the conversation is at most this many characters wide (of Latin text; a
Chinese font's wide average is not counted), centred: longer lines are hard to read (the
rows' margins come on top)."""


class ChatView(QScrollArea):
    """The conversation, as a column of rows; a streaming reply grows at the bottom.

    Replies are Markdown, rendered as they stream: each update re-renders only the reply's
    last, still-open block (see :mod:`app.markdown.stream`), and the rows above it are final, so an
    update costs the same at the start of a long reply as at its end. Prompts and the app's
    own notes are plain text. While the user is at the bottom the view follows the reply;
    scrolling up (or dragging out a selection) detaches it, scrolling back to the bottom
    re-attaches it.

    Signals:
        emptied(bool): the view became empty (True: cleared) or got its first row (False).
    """

    emptied = Signal(bool)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        accessibility.install()
        self.setObjectName("chatView")
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setWidgetResizable(False)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        # Narrower than a wide window (the reading width): centred in it.
        self.setAlignment(Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignTop)
        self.setFocusPolicy(Qt.FocusPolicy.NoFocus)  # Tab lands on the current message instead
        self.viewport().setBackgroundRole(QPalette.ColorRole.Base)
        self.viewport().setAutoFillBackground(True)
        self.stack = RowStack()
        self.stack.setObjectName("conversationRows")
        self.stack.setFocusPolicy(Qt.FocusPolicy.ClickFocus)  # Ctrl+C after selecting
        # Static contents: growing, the stack invalidates only the strip it adds (below the
        # view), not all of itself, so a view that follows the reply scrolls by a blit of
        # what is shown (see RowStack._place). QScrollArea already fills it with the
        # viewport's background, which a blit needs too.
        self.stack.setAttribute(Qt.WidgetAttribute.WA_StaticContents)
        self.setWidget(self.stack)
        self._progress = PromptProgress(self.stack, lambda: self.theme)
        self.theme: Theme = theme_for(self.palette())
        # Its code blocks' formatter: made off the UI thread before the first one is shown.
        shelf().formatter(self.theme.code_style)
        self._reply: ReplyRows | None = None
        # The bar is on the view's background (the window's sheet).
        self.verticalScrollBar().setObjectName("chatScrollBar")
        self._place = ScrollPlace(self, self.stack, self.row_width)
        self.updates = 0
        """Appends applied to replies (the bench and tests count frames by it)."""
        self.builder = BuildQueue(self)
        """Builds large messages a slice per event-loop turn, in order."""
        self._sweeper = RowSweeper(self.stack, self)
        self.selection = Selection(self.stack)
        self._mouse = MouseSelection(self, self.stack, self.selection)
        self._mouse.dragged.connect(self._place.detach)
        self.messages = MessageKeys(self, self.stack)
        self.stack.on_append = self._on_row_added
        self.focus_ring = FocusRing(self.stack)
        """The frame around the focused header or button (visible focus, in both themes)."""
        self._actions = RevealedActions(self.stack, self.messages)
        app = QApplication.instance()
        if isinstance(app, QApplication):
            app.focusChanged.connect(self._on_focus_changed)

    # -- building the conversation ------------------------------------------------------------
    #
    # Small messages are built in the call; large ones by the build queue (app.ui.chat.build_queue).

    @property
    def building(self) -> bool:
        """Whether rows asked for are still being built (a slice per event-loop turn)."""
        return self.builder.building

    @property
    def slices(self) -> int:
        """Slices of building done (tests and the bench count the work per slice by it)."""
        return self.builder.slices

    def finish_building(self) -> None:
        """Build everything still waiting, now."""
        self.builder.finish()

    def add_user_message(self, text: str) -> HeaderRow:
        """Show a prompt the user sent (as plain text: it is never interpreted).

        A long prompt is shown folded: only its first lines are laid out (see
        :meth:`TextRow.set_plain`), so a 1 MB paste costs what a page does.
        """
        you = QCoreApplication.translate("ChatView", "You")
        header = HeaderRow(you, lambda: text, prompt=True)

        def build() -> None:
            self.stack.append(header)
            row = TextRow(self.theme, "user")
            row.author = you
            row.set_plain(text)
            self.stack.append(row)

        self.builder.now_or_later(build)
        return header

    def begin_reply(self, speaker: str = "Floodgate") -> HeaderRow:
        """Start an empty reply that :meth:`append_to_reply` grows; returns its header."""
        self._reply = reply = ReplyRows(self, speaker, attach=False)
        self.builder.now_or_later(reply.attach)
        return reply.header

    def add_reply(self, speaker: str, text: str) -> HeaderRow:
        """Show a whole reply (a saved conversation); returns its header.

        A long reply is built a slice per event-loop turn (see :attr:`building`).
        """
        reply = ReplyRows(self, speaker, attach=False)
        if len(text) <= BULK_CHARS and not self.builder.building:
            reply.attach()
            reply.append(text)
            reply.finish(timed=False)
        else:
            reply.pack = True
            self.builder.now_or_later(reply.attach)
            self.builder.later(self.builder.feed_job(reply, text, then_open=False))
            self.builder.later(self.builder.finish_job(reply, timed=False))
        return reply.header

    def append_to_reply(self, text: str) -> None:
        """Append streamed text to the reply in progress.

        A huge piece (or one arriving while earlier pieces are still being built) is fed to
        the reply in small pieces, a slice per event-loop turn, in order.
        """
        if self._reply is None:
            self.begin_reply()
        reply = self._reply
        assert reply is not None
        self.updates += 1
        if len(text) <= BULK_CHARS and not self.builder.building:
            self._progress.show("")
            reply.append(text)
            return
        self.builder.now_or_later(lambda: self._progress.show(""))
        self.builder.later(self.builder.feed_job(reply, text))

    def show_progress(self, text: str) -> None:
        """Say, under the reply's header, how far the model is in reading the prompt.

        Updated in place (a few times a second); an empty ``text`` removes it, which happens
        before the reply's first text arrives, so it is always the bottom row.
        """
        self.builder.now_or_later(lambda: self._progress.show(text))

    def end_reply(self, note: str = "", *, error: bool = False) -> None:
        """Close the reply in progress, with a note under it (for example "Stopped.").

        A screen reader is told the reply once, here, never piece by piece.
        """
        reply = self._reply
        self._reply = None

        self.builder.now_or_later(lambda: self._progress.show(""))
        if reply is not None:
            finish = self.builder.finish_job(reply, timed=True)
            self.builder.slice_rows = 0
            # Done in the call when it is small (it nearly always is), or later, in order.
            if self.builder.building or not finish(time.perf_counter() + HALF_A_FRAME_S):
                self.builder.later(finish)

        def close() -> None:
            if note:
                self.add_note(note, error=error)
            if reply is not None:
                text = reply.answer_text(ANNOUNCED_CHARS + 1)
                self.announce_reply(reply.speaker, text, note)

        self.builder.now_or_later(close)

    def announce_reply(self, speaker: str, text: str, note: str = "") -> bool:
        """Have a screen reader say a finished reply; returns whether it could be announced."""
        if len(text) > ANNOUNCED_CHARS:
            text = text[:ANNOUNCED_CHARS] + "…"
        message = QCoreApplication.translate("ChatView", "{speaker} replied: {text}").format(
            speaker=speaker, text=text
        )
        return accessibility.announce(self, f"{message} {note}".strip())

    def add_note(self, text: str, *, error: bool = False) -> None:
        """Show a line from the app itself (a notice or an error) in the conversation."""

        def build() -> None:
            row = TextRow(self.theme, "error" if error else "note")
            row.set_plain(text)
            self.stack.append(row)

        self.builder.now_or_later(build)

    def clear(self) -> None:
        """Remove everything shown, at once; the rows are deleted a slice per event-loop turn."""
        self.builder.clear()
        self._reply = None
        self._progress.forget()
        self.focus_ring.follow(None)
        self.selection.forget()
        self.messages.forget()
        self._actions.forget()
        if self.stack.take_all():
            self._sweeper.sweep_cleared()
        self.emptied.emit(True)

    @property
    def clearing(self) -> bool:
        """Whether rows of a cleared conversation are still being deleted."""
        return self.stack.doomed > 0

    def toPlainText(self) -> str:
        """Everything shown, as text (replies as the Markdown the model wrote)."""
        return "\n".join(row.plain_text() for row in self.stack.rows if row.isVisibleTo(self.stack))

    # -- selecting and copying ----------------------------------------------------------------

    def selected_text(self) -> str:
        """What is selected, as plain text in reading order."""
        return self.selection.text()

    def select_all(self) -> None:
        """Select the whole conversation."""
        self.selection.select_rows(0, len(self.stack.rows) - 1)

    def copy_selection(self) -> bool:
        """Put the selection on the clipboard; returns whether there was one."""
        text = self.selected_text()
        if text:
            QGuiApplication.clipboard().setText(text)
        return bool(text)

    def _on_focus_changed(self, _old: QWidget | None, new: QWidget | None) -> None:
        ringed = isinstance(new, HeaderRow | ActionButton) and self.isAncestorOf(new)
        self.focus_ring.follow(new if ringed else None)
        inside = new is not None and self.isAncestorOf(new)
        self._actions.reveal("focus", self.messages.message_of(new) if inside else None)

    @override
    def leaveEvent(self, event: QEvent) -> None:
        super().leaveEvent(event)
        self._actions.reveal("hover", None)

    # -- the keyboard -------------------------------------------------------------------------

    def focus_message(self, index: int = -1) -> bool:
        """Put the keyboard focus on a message's header (by default the last message's)."""
        return self.messages.focus(index)

    @override
    def focusNextPrevChild(self, next: bool) -> bool:
        return self.messages.tab(next) or super().focusNextPrevChild(next)

    @override
    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.matches(QKeySequence.StandardKey.Copy) and self.copy_selection():
            event.accept()
            return
        if event.matches(QKeySequence.StandardKey.SelectAll):
            focused = QApplication.focusWidget()
            message = None if focused is self.stack else self.messages.message_of(focused)
            if message is None:
                self.select_all()
            else:
                self.selection.select_rows(message, self.messages.message_end(message) - 1)
            event.accept()
            return
        if self.messages.handle_key(event):
            event.accept()
            return
        super().keyPressEvent(event)

    def _on_row_added(self, i: int, row: Row) -> None:
        row.entered = self._actions.row_entered
        if i == 0:
            self.emptied.emit(False)
        self.selection.row_added(i, row)
        self.messages.row_added(i, row)

    # -- layout and theme ---------------------------------------------------------------------

    @override
    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if self.row_width() != self.stack.width():
            self._place.lay_out_again()  # a taller or shorter window changes no row

    def row_width_limit(self) -> int:
        """The reading width: :data:`READING_CHARS` average characters and the margins."""
        return self.fontMetrics().horizontalAdvance("n") * READING_CHARS + 2 * MARGIN

    def row_width(self) -> int:
        """The rows' width: the view's, up to the reading width."""
        return min(self.viewport().width(), self.row_width_limit())

    @override
    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange:
            self.theme = theme_for(self.palette())
            shelf().formatter(self.theme.code_style)
            for row in self.stack.rows:
                row.restyle(self.theme)
            self._place.lay_out_again()

    # -- following the reply ------------------------------------------------------------------

    @property
    def pinned(self) -> bool:
        """Whether the view follows new text to the bottom."""
        return self._place.pinned
