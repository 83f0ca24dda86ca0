"""The main window: chat view, composer, Send/Stop, status line, docks and menus."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from pathlib import Path

from PySide6.QtCore import QEvent, Qt, Signal, Slot
from PySide6.QtGui import (
    QCloseEvent,
    QDragEnterEvent,
    QDragMoveEvent,
    QDropEvent,
    QKeySequence,
    QPalette,
    QShortcut,
)
from PySide6.QtWidgets import (
    QDockWidget,
    QHBoxLayout,
    QMainWindow,
    QVBoxLayout,
    QWidget,
)

from app.engine import ModelInfo
from app.flow.reply import ReplyEnd
from app.flow.session import ChatSession, ModelState
from app.ui.chat.chat_view import ChatView
from app.ui.chat.rows.base import MARGIN
from app.ui.chat.transcript import APP_NAME, Transcript
from app.ui.composer.attachments import ComposerAttachments
from app.ui.composer.composer import Composer
from app.ui.composer.composer_box import ComposerBox
from app.ui.composer.intent import ComposerIntent
from app.ui.dialogs import chat_dialogs
from app.ui.look.style import apply_style
from app.ui.timeline.diagnostics import DiagnosticsPanel
from app.ui.timeline.trace_recording import TraceRecording
from app.ui.window.conversations_dock import ConversationsDock
from app.ui.window.empty_chat import EmptyChat
from app.ui.window.menus import WindowMenus
from app.ui.window.model_header import ModelHeader
from app.ui.window.saving_banner import SavingBanner
from app.ui.window.status_line import StatusLine


class MainWindow(QMainWindow):
    """Renders a :class:`ChatSession` and forwards what the user asks of it.

    The menus are :attr:`menus` (:class:`~app.ui.window.menus.WindowMenus`), the conversation is
    drawn by :attr:`transcript` (:class:`~app.ui.chat.transcript.Transcript`), the composer's
    intent (send, stop, edit) is :attr:`intent` (:class:`~app.ui.composer.intent.ComposerIntent`);
    what remains here is the layout, the status line, and what the session says.

    Signals:
        closed(): the user closed the window; the application shuts down the session.
    """

    closed = Signal()

    composer_column: QWidget
    """The banners and the composer's box, as wide as the conversation's rows at most."""

    def __init__(self, session: ChatSession) -> None:
        super().__init__()
        self.session = session
        self.setWindowTitle(APP_NAME)
        self.resize(1080, 720)  # room for the conversation list beside the chat
        self._tasks: set[asyncio.Future[object]] = set()
        self._build_central()
        self._build_docks()
        self._restyle()
        self.transcript = Transcript(
            session, self.view, self.intent.begin_edit, self.conversations.show_current
        )
        self.menus = WindowMenus(
            self,
            _menu_actions(self),
            [(self.sidebar_dock, "Ctrl+B"), (self.diagnostics_dock, "F12")],
        )
        self.trace_recording = TraceRecording(self)
        self.menus.view_menu.addAction(self.trace_recording.action)
        self.statusBar().addPermanentWidget(self.trace_recording.indicator)
        self.trace_recording.finished.connect(lambda text: self.statusBar().showMessage(text, 8000))
        QShortcut(QKeySequence(QKeySequence.StandardKey.Cancel), self, self.intent.stop)
        self._connect_session()
        self.retranslate()
        self.conversations.refresh()
        self.composer.setFocus()

    def _build_central(self) -> None:
        self.header = ModelHeader()
        self.view = ChatView()
        self.empty_chat = EmptyChat(self.view.viewport())
        self.attachments = ComposerAttachments(self, self.session, self.spawn)
        self.attach_button = self.attachments.attach_button
        self.composer = Composer()
        self.intent = ComposerIntent(self, self.session, self.composer, self.attachments)
        self.send_button = self.intent.send_button
        self.tray = self.attachments.tray
        self.composer_box = ComposerBox(
            self.composer, self.attach_button, self.send_button, self.tray
        )
        self.reader = self.attachments.reader
        self.setAcceptDrops(True)
        self.status_line = StatusLine(self.session, self)
        self.state_label = self.status_line.state_label
        self.figures_label = self.status_line.figures_label
        self.edit_banner = self.intent.edit.banner
        self.saving_banner = SavingBanner(
            lambda: chat_dialogs.choose_export_file(self, self.session, "json", self.spawn)
        )
        self.setCentralWidget(_central_widget(self))
        self.statusBar().addWidget(self.state_label, 1)

    def _build_docks(self) -> None:
        session = self.session
        self.conversations = ConversationsDock(
            self, session, self.spawn, self.open_conversation, self.new_chat
        )
        self.sidebar = self.conversations.sidebar
        self.sidebar_dock = self.conversations.dock
        self.undo_button = self.conversations.undo_button
        self.statusBar().addPermanentWidget(self.status_line.downloads_label)
        self.statusBar().addPermanentWidget(self.figures_label)
        self.diagnostics = DiagnosticsPanel(session.metrics)
        self.diagnostics_dock = QDockWidget(self)
        self.diagnostics_dock.setObjectName("diagnosticsDock")
        self.diagnostics_dock.setWidget(self.diagnostics)
        self.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.diagnostics_dock)
        self.diagnostics_dock.hide()
        self.diagnostics_dock.visibilityChanged.connect(lambda _: self.diagnostics.refresh())

    def _connect_session(self) -> None:
        session = self.session
        self.intent.wire()
        self.composer.files_pasted.connect(self.attach)
        self.composer.picture_pasted.connect(self.attachments.paste_picture)
        self.attachments.wire()
        session.state_changed.connect(self._on_state_changed)
        session.model_changed.connect(self._on_model_changed)
        session.notice.connect(self._on_notice)
        session.reply_started.connect(self._on_reply_started)
        session.reply_text.connect(self.view.append_to_reply)
        session.prompt_progress.connect(self.status_line.show_progress)
        session.prompt_progress.connect(self.view.show_progress)
        session.reply_ended.connect(self._on_reply_ended)
        session.figures_changed.connect(self._on_figures_changed)
        session.saving_failed.connect(self.saving_banner.show_problem)
        session.saving_recovered.connect(self._on_saving_recovered)
        session.conversation_loaded.connect(self._show_title)
        session.conversations_changed.connect(self._show_title)
        self.view.emptied.connect(self._on_emptied)
        self.empty_chat.prompt_chosen.connect(self.intent.fill)
        self.empty_chat.library_requested.connect(self.menus.models_requested)
        header = self.header
        header.model_chosen.connect(self.open_model)
        header.open_requested.connect(lambda: chat_dialogs.choose_model_file(self, session))
        header.connect_requested.connect(self.menus.server_requested)
        header.library_requested.connect(self.menus.models_requested)

    def spawn(self, coroutine: Coroutine[object, object, object]) -> None:
        """Run ``coroutine`` on the loop, keeping it alive until it ends."""
        # Strong references: the loop keeps only weak ones to its tasks.
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @property
    def rendering(self) -> bool:
        """Whether a conversation is still being drawn in the view."""
        return self.transcript.rendering

    def retranslate(self) -> None:
        """Set every text of the window in the current language."""
        self.menus.retranslate()
        self.conversations.retranslate()
        self.trace_recording.retranslate()
        self.saving_banner.retranslate()
        self.diagnostics_dock.setWindowTitle(self.tr("Flow diagnostics"))
        self.attachments.retranslate()
        self.intent.retranslate()
        self.composer.retranslate()
        self.diagnostics.retranslate()
        self.status_line.retranslate()

    def changeEvent(self, event: QEvent) -> None:
        """Retranslate when the language changes; restyle when the theme does."""
        super().changeEvent(event)
        if event.type() == QEvent.Type.LanguageChange:
            self.retranslate()
        elif event.type() == QEvent.Type.PaletteChange:
            self._restyle()
        elif event.type() == QEvent.Type.FontChange:
            self.composer_column.setMaximumWidth(self.view.row_width_limit())

    def _restyle(self) -> None:
        """The window's chrome in the style of the theme (once per change of theme)."""
        chrome: list[QWidget] = [
            self.header,
            self.composer_box,
            self.edit_banner,
            self.saving_banner,
            self.empty_chat,
            self.sidebar_dock,  # its title bar too
            self.diagnostics_dock,  # its title bar and panel (not the conversation)
            self.view.verticalScrollBar(),  # the sheet's bar: it repaints on every update
        ]
        apply_style(chrome, self.palette())

    # -- intent ---------------------------------------------------------------------------------

    @Slot()
    def send(self) -> None:
        """Send what the composer holds, with the files attached; a blank prompt is not sent."""
        self.intent.send()

    # -- attachments ----------------------------------------------------------------------------

    @Slot()
    def choose_attachments(self) -> None:
        """Chat > Attach files…: a file dialog for several files, which does not block."""
        self.attachments.choose_attachments()

    @Slot(list)
    def attach(self, paths: list[Path]) -> None:
        """Read ``paths`` (off the UI thread) for the next prompt; a chip shows each."""
        self.attachments.attach(paths)

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        """Files dragged over the window can be dropped to attach them."""
        if self.attachments.carries_files(event.mimeData()):
            event.acceptProposedAction()
        else:
            super().dragEnterEvent(event)

    def dragMoveEvent(self, event: QDragMoveEvent) -> None:
        """Keep accepting files wherever they are over the window."""
        if self.attachments.carries_files(event.mimeData()):
            event.acceptProposedAction()
        else:
            super().dragMoveEvent(event)

    def dropEvent(self, event: QDropEvent) -> None:
        """Files dropped on the window are attached to the next prompt."""
        if self.attachments.drop(event.mimeData()):
            event.acceptProposedAction()
        else:
            super().dropEvent(event)

    @Slot()
    def stop(self) -> None:
        """Stop the reply in progress (pressing it twice is harmless); Esc also ends editing."""
        self.intent.stop()

    def clear_prompt_cache(self) -> None:
        """Forget every processed prompt; the next reply in each conversation reads it again."""
        self.session.clear_prompt_cache()
        self.statusBar().showMessage(
            self.tr("The prompt cache is cleared: conversations will be read again."), 4000
        )

    def open_model(self, path: Path) -> None:
        """Load another model; the conversation carries on with it."""
        self.session.open_model(path)

    def closeEvent(self, event: QCloseEvent) -> None:
        """Hand shutdown to the application: it stops the reply and frees the model."""
        self.transcript.renderer.cancel()
        self.attachments.close()
        if self.trace_recording.recording:
            self.trace_recording.stop_now()
        event.accept()
        self.closed.emit()

    # -- conversations --------------------------------------------------------------------------

    @Slot()
    def new_chat(self) -> None:
        """Start a new conversation (a reply in progress is stopped and saved)."""
        self.spawn(self.session.new_conversation())
        self.composer.setFocus()

    @Slot(str)
    def open_conversation(self, conversation_id: str) -> None:
        """Show a saved conversation; typing goes on in the composer."""
        self.spawn(self.session.open_conversation(conversation_id))
        self.composer.setFocus()

    def delete_conversation(self, conversation_id: str) -> None:
        """Delete a conversation, with an Undo button for a while."""
        self.conversations.delete_conversation(conversation_id)

    # -- what the session says ------------------------------------------------------------------

    @Slot(ModelState, str)
    def _on_state_changed(self, state: ModelState, detail: str) -> None:
        self.status_line.show_state(detail)
        if state is ModelState.LOADING:
            self.header.show_loading(detail)
        if state is ModelState.ERROR:
            self.view.add_note(detail, error=True)

    @Slot(ModelInfo)
    def _on_model_changed(self, info: ModelInfo) -> None:
        self.setWindowTitle(f"{APP_NAME} — {info.name}")
        self.header.show_model(info)
        self.empty_chat.show_model(info.name)
        self.attachments.refresh_room()

    @Slot()
    def _show_title(self) -> None:
        self.header.show_title(self.session.conversation.title)

    @Slot(bool)
    def _on_emptied(self, empty: bool) -> None:
        self.empty_chat.setVisible(empty)
        if empty:
            self.empty_chat.raise_()

    @Slot(str)
    def _on_notice(self, text: str) -> None:
        if self.session.generating:
            self.statusBar().showMessage(text, 6000)
        else:
            self.view.add_note(text)

    @Slot(str)
    def _on_saving_recovered(self, text: str) -> None:
        self.saving_banner.hide()
        self.statusBar().showMessage(text, 8000)

    @Slot()
    def _on_reply_started(self) -> None:
        self.transcript.reply_started()
        self._show_title()
        self.intent.reply_started()

    @Slot(ReplyEnd)
    def _on_reply_ended(self, end: ReplyEnd) -> None:
        self.transcript.reply_ended(end.status, end.note)
        self.intent.reply_ended()
        self.attachments.refresh_room()

    @Slot()
    def _on_figures_changed(self) -> None:
        self.status_line.show_figures()
        self.diagnostics.refresh()


def _menu_actions(window: MainWindow) -> dict[str, Callable[[], object]]:
    """What each menu action of the window does, by the name :class:`WindowMenus` knows it."""
    session = window.session
    return {
        "open": lambda: chat_dialogs.choose_model_file(window, session),
        "clear_cache": window.clear_prompt_cache,
        "quit": window.close,
        "new": window.new_chat,
        "attach": window.choose_attachments,
        "regenerate": session.regenerate,
        "system_prompt": lambda: chat_dialogs.edit_system_prompt(window, session),
        "conversation_settings": lambda: chat_dialogs.edit_conversation_settings(window, session),
        "export_markdown": lambda: chat_dialogs.choose_export_file(
            window, session, "markdown", window.spawn
        ),
        "export_json": lambda: chat_dialogs.choose_export_file(
            window, session, "json", window.spawn
        ),
        "import": lambda: chat_dialogs.choose_import_file(window, session, window.spawn),
    }


def _central_widget(window: MainWindow) -> QWidget:
    """The header over the chat, the banners, and the composer's box (as wide as the rows)."""
    lower = QVBoxLayout()
    lower.setContentsMargins(MARGIN, 4, MARGIN, 10)
    lower.setSpacing(6)
    lower.addWidget(window.saving_banner)
    lower.addWidget(window.edit_banner)
    lower.addWidget(window.composer_box)
    bottom = window.composer_column = QWidget()
    bottom.setLayout(lower)
    # The composer lines up with the conversation's text on a wide window.
    bottom.setMaximumWidth(window.view.row_width_limit())
    area = QWidget()
    area.setObjectName("composerArea")
    area.setBackgroundRole(QPalette.ColorRole.Base)  # one surface with the conversation
    area.setAutoFillBackground(True)
    centred = QHBoxLayout(area)
    centred.setContentsMargins(0, 0, 0, 0)
    centred.addWidget(bottom)
    column = QVBoxLayout()
    column.setContentsMargins(0, 0, 0, 0)
    column.setSpacing(0)
    column.addWidget(window.header)
    column.addWidget(window.view, 1)
    column.addWidget(area)
    central = QWidget()
    central.setObjectName("chatPage")
    central.setLayout(column)
    return central
