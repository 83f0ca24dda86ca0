"""The main window: chat view, composer, Send/Stop, status line, File menu."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path

from PySide6.QtCore import QEvent, Qt, QTimer, Signal, SignalInstance, Slot
from PySide6.QtGui import QAction, QActionGroup, QCloseEvent, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QDockWidget,
    QFileDialog,
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QMainWindow,
    QMenu,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.engine import ModelInfo
from app.flow.pacing import Slicer
from app.flow.session import ChatSession, ModelState
from app.store.conversation import Message
from app.store.settings import SAMPLING, overrides
from app.ui.chat_view import ChatView
from app.ui.composer import Composer
from app.ui.diagnostics import DiagnosticsPanel
from app.ui.language import LANGUAGE_CHOICES
from app.ui.rows import HeaderRow
from app.ui.settings_dialog import SettingsDialog
from app.ui.sidebar import Sidebar
from app.ui.theme import THEME_CHOICES

APP_NAME = "Floodgate"
UNDO_SHOWN_MS = 10_000
"""How long the Undo button stays after a conversation is deleted."""


class MainWindow(QMainWindow):
    """Renders a :class:`ChatSession` and forwards what the user asks of it.

    Signals:
        closed(): the user closed the window; the application shuts down the session.
    """

    closed = Signal()
    theme_chosen = Signal(str)
    language_chosen = Signal(str)
    settings_requested = Signal()
    models_requested = Signal()
    server_requested = Signal()

    def __init__(self, session: ChatSession) -> None:
        super().__init__()
        self.session = session
        self.setWindowTitle(APP_NAME)
        self.resize(1080, 720)  # room for the conversation list beside the chat

        self.view = ChatView()
        self.composer = Composer()
        self.send_button = QPushButton()
        self.send_button.setObjectName("sendButton")
        self.send_button.setDefault(True)
        self.state_label = QLabel(session.describe_state())
        self.state_label.setObjectName("stateLabel")
        self.figures_label = QLabel("")
        self.figures_label.setObjectName("figuresLabel")

        self.edit_banner = QLabel()
        self.edit_banner.setObjectName("editBanner")
        self.edit_banner.hide()
        self._editing: Message | None = None
        self._last_reply_header: HeaderRow | None = None
        self._tasks: set[asyncio.Future[object]] = set()
        self._refresh_pending = False
        self._deleted: str | None = None
        self._to_render: deque[Message] = deque()
        self._renderer = Slicer(self._render_slice, parent=self)

        row = QHBoxLayout()
        row.addWidget(self.composer, 1)
        row.addWidget(self.send_button)
        column = QVBoxLayout()
        column.addWidget(self.view, 1)
        column.addWidget(self.edit_banner)
        column.addLayout(row)
        central = QWidget()
        central.setLayout(column)
        self.setCentralWidget(central)
        self.statusBar().addWidget(self.state_label, 1)
        self.undo_button = QPushButton()
        self.undo_button.setObjectName("undoDelete")
        self.undo_button.hide()
        self.undo_button.clicked.connect(self.undo_delete)
        self.statusBar().addPermanentWidget(self.undo_button)
        self.statusBar().addPermanentWidget(self.figures_label)

        self.sidebar = Sidebar()
        self.sidebar_dock = QDockWidget(self)
        self.sidebar_dock.setObjectName("sidebarDock")
        self.sidebar_dock.setWidget(self.sidebar)
        self.sidebar_dock.setFeatures(
            QDockWidget.DockWidgetFeature.DockWidgetClosable
            | QDockWidget.DockWidgetFeature.DockWidgetMovable
        )
        self.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, self.sidebar_dock)
        self.sidebar_dock.setVisible(session.archive is not None)
        self.sidebar.new_requested.connect(self.new_chat)
        self.sidebar.open_requested.connect(self.open_conversation)
        self.sidebar.rename_requested.connect(session.rename)
        self.sidebar.delete_requested.connect(self.delete_conversation)
        self.sidebar.search_changed.connect(lambda _: self.refresh_conversations())

        self.file_menu = self.menuBar().addMenu("")
        self.open_action = QAction(self)
        self.open_action.setShortcut(QKeySequence.StandardKey.Open)
        self.open_action.triggered.connect(self.choose_model_file)
        self.file_menu.addAction(self.open_action)
        self.models_action = self._action(self.file_menu, self.models_requested.emit, "Ctrl+M")
        self.server_action = self._action(self.file_menu, self.server_requested.emit)
        self.settings_action = self._action(self.file_menu, self.settings_requested.emit, "Ctrl+,")
        self.file_menu.addSeparator()
        self.quit_action = QAction(self)
        self.quit_action.setShortcut(QKeySequence.StandardKey.Quit)
        self.quit_action.triggered.connect(self.close)
        self.file_menu.addAction(self.quit_action)

        self.chat_menu = self.menuBar().addMenu("")
        self.new_action = self._action(self.chat_menu, self.new_chat, QKeySequence.StandardKey.New)
        self.regenerate_action = self._action(self.chat_menu, self.regenerate, "Ctrl+R")
        self.system_prompt_action = self._action(self.chat_menu, self.edit_system_prompt)
        self.conversation_settings_action = self._action(
            self.chat_menu, self.edit_conversation_settings
        )
        self.chat_menu.addSeparator()
        self.export_markdown_action = self._action(
            self.chat_menu, lambda: self.choose_export_file("markdown")
        )
        self.export_json_action = self._action(
            self.chat_menu, lambda: self.choose_export_file("json")
        )
        self.import_action = self._action(self.chat_menu, self.choose_import_file)

        self.diagnostics = DiagnosticsPanel(session.metrics)
        self.diagnostics_dock = QDockWidget(self)
        self.diagnostics_dock.setObjectName("diagnosticsDock")
        self.diagnostics_dock.setWidget(self.diagnostics)
        self.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.diagnostics_dock)
        self.diagnostics_dock.hide()
        self.diagnostics_dock.visibilityChanged.connect(lambda _: self.diagnostics.refresh())
        self.view_menu = self.menuBar().addMenu("")
        sidebar_toggle = self.sidebar_dock.toggleViewAction()
        sidebar_toggle.setShortcut(QKeySequence("Ctrl+B"))
        self.view_menu.addAction(sidebar_toggle)
        toggle = self.diagnostics_dock.toggleViewAction()
        toggle.setShortcut(QKeySequence("F12"))
        self.view_menu.addAction(toggle)
        self.view_menu.addSeparator()
        self.theme_menu = self.view_menu.addMenu("")
        self.theme_actions = self._choices(self.theme_menu, THEME_CHOICES, self.theme_chosen)
        self.language_menu = self.view_menu.addMenu("")
        self.language_actions = self._choices(
            self.language_menu, LANGUAGE_CHOICES, self.language_chosen
        )

        QShortcut(QKeySequence(QKeySequence.StandardKey.Cancel), self, self.stop)

        self.composer.submitted.connect(self.send)
        self.composer.stop_requested.connect(self.stop)
        self.send_button.clicked.connect(self._on_send_button)
        session.state_changed.connect(self._on_state_changed)
        session.model_changed.connect(self._on_model_changed)
        session.notice.connect(self._on_notice)
        session.reply_started.connect(self._on_reply_started)
        session.reply_text.connect(self.view.append_to_reply)
        session.reply_ended.connect(self._on_reply_ended)
        session.figures_changed.connect(self._on_figures_changed)
        session.conversation_loaded.connect(self.render_conversation)
        session.conversations_changed.connect(self.refresh_conversations)
        self.retranslate()
        self.refresh_conversations()
        self.composer.setFocus()

    def _action(
        self,
        menu: QMenu,
        slot: Callable[[], object],
        shortcut: QKeySequence.StandardKey | str | None = None,
    ) -> QAction:
        action = QAction(self)
        if shortcut is not None:
            action.setShortcut(QKeySequence(shortcut))
        action.triggered.connect(lambda _=False: slot())
        menu.addAction(action)
        return action

    def spawn(self, coroutine: Coroutine[object, object, object]) -> None:
        """Run ``coroutine`` on the loop, keeping it alive until it ends."""
        # Strong references: the loop keeps only weak ones to its tasks.
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _choices(
        self, menu: QMenu, choices: Sequence[str], chosen: SignalInstance
    ) -> dict[str, QAction]:
        group = QActionGroup(self)
        actions = {}
        for choice in choices:
            action = QAction(self)
            action.setCheckable(True)
            action.setData(choice)
            action.triggered.connect(lambda _=False, c=choice: chosen.emit(c))
            group.addAction(action)
            menu.addAction(action)
            actions[choice] = action
        return actions

    def show_choices(self, theme: str, language: str) -> None:
        """Tick the theme and language in effect in the View menu."""
        self.theme_actions[theme].setChecked(True)
        self.language_actions[language].setChecked(True)

    def retranslate(self) -> None:
        """Set every text of the window in the current language."""
        self.file_menu.setTitle(self.tr("&File"))
        self.open_action.setText(self.tr("&Open model…"))
        self.settings_action.setText(self.tr("&Settings…"))
        self.models_action.setText(self.tr("&Models…"))
        self.server_action.setText(self.tr("&Connect to a server…"))
        self.quit_action.setText(self.tr("&Quit"))
        self.view_menu.setTitle(self.tr("&View"))
        self.chat_menu.setTitle(self.tr("&Chat"))
        self.new_action.setText(self.tr("&New chat"))
        self.regenerate_action.setText(self.tr("&Regenerate the last reply"))
        self.system_prompt_action.setText(self.tr("&System prompt…"))
        self.conversation_settings_action.setText(self.tr("Sampling for this &conversation…"))
        self.export_markdown_action.setText(self.tr("Export as &Markdown…"))
        self.export_json_action.setText(self.tr("Export as &JSON…"))
        self.import_action.setText(self.tr("&Import a conversation…"))
        self.sidebar_dock.setWindowTitle(self.tr("Conversations"))
        self.sidebar.retranslate()
        self.undo_button.setText(self.tr("Undo delete"))
        self.edit_banner.setText(
            self.tr("Editing a message: Enter sends it as a new version, Esc cancels.")
        )
        self.diagnostics_dock.setWindowTitle(self.tr("Flow diagnostics"))
        self.theme_menu.setTitle(self.tr("&Theme"))
        self.theme_actions["system"].setText(self.tr("Follow the system"))
        self.theme_actions["light"].setText(self.tr("Light"))
        self.theme_actions["dark"].setText(self.tr("Dark"))
        self.language_menu.setTitle(self.tr("&Language"))
        self.language_actions["system"].setText(self.tr("Follow the system"))
        # Each language is named in itself, so it can be found whatever is shown now.
        self.language_actions["en"].setText("English")
        self.language_actions["zh_CN"].setText("中文（简体）")
        self._show_send_state()
        self.composer.retranslate()
        self.diagnostics.retranslate()
        self.state_label.setText(self.session.describe_state())

    def _show_send_state(self) -> None:
        if not self.session.generating:
            self.send_button.setText(self.tr("Send"))
        elif self.send_button.isEnabled():
            self.send_button.setText(self.tr("Stop"))
        else:
            self.send_button.setText(self.tr("Stopping…"))

    def changeEvent(self, event: QEvent) -> None:
        """Retranslate when the language changes."""
        super().changeEvent(event)
        if event.type() == QEvent.Type.LanguageChange:
            self.retranslate()

    # -- intent -------------------------------------------------------------------------------

    @Slot()
    def send(self) -> None:
        """Send what the composer holds; a blank prompt is not sent."""
        if self.session.generating:
            return
        text = self.composer.toPlainText()
        if not text.strip():
            self.statusBar().showMessage(self.tr("Type a message first."), 3000)
            return
        editing, self._editing = self._editing, None
        self.edit_banner.hide()
        sent = (
            self.session.edit_and_resend(editing, text)
            if editing is not None
            else self.session.send(text)
        )
        if sent:
            self.composer.clear()

    @Slot()
    def stop(self) -> None:
        """Stop the reply in progress (pressing it twice is harmless); Esc also ends editing."""
        if self._editing is not None:
            self._editing = None
            self.edit_banner.hide()
            self.composer.clear()
            return
        if self.session.stop():
            self.send_button.setEnabled(False)
            self._show_send_state()

    @Slot()
    def _on_send_button(self) -> None:
        if self.session.generating:
            self.stop()
        else:
            self.send()

    @Slot()
    def choose_model_file(self) -> None:
        """Ask for a .gguf file without blocking the event loop."""
        current = self.session.model.path.parent if self.session.model else Path.home()
        dialog = QFileDialog(
            self,
            self.tr("Open model"),
            str(current),
            self.tr("GGUF models (*.gguf);;All files (*)"),
        )
        dialog.setFileMode(QFileDialog.FileMode.ExistingFile)
        dialog.fileSelected.connect(lambda name: self.open_model(Path(name)))
        dialog.open()

    # -- conversations ------------------------------------------------------------------------

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

    @Slot(str)
    def delete_conversation(self, conversation_id: str) -> None:
        """Delete a conversation, with an Undo button for a while."""
        self._deleted = conversation_id
        self.spawn(self.session.delete(conversation_id))
        self.undo_button.show()
        QTimer.singleShot(UNDO_SHOWN_MS, self._forget_delete)

    @Slot()
    def undo_delete(self) -> None:
        """Bring back the conversation deleted last."""
        if self._deleted is not None:
            self.session.undelete(self._deleted)
            self.open_conversation(self._deleted)
        self._forget_delete()

    def _forget_delete(self) -> None:
        self._deleted = None
        self.undo_button.hide()

    @Slot()
    def refresh_conversations(self) -> None:
        """Read the conversation list again (coalesced: at most one read at a time)."""
        if self.session.archive is None or self._refresh_pending:
            return
        self._refresh_pending = True

        async def refresh() -> None:
            try:
                found = await self.session.list_conversations(self.sidebar.search.text())
            finally:
                self._refresh_pending = False
            self.sidebar.set_conversations(found, self.session.conversation.id)

        self.spawn(refresh())

    @Slot()
    def regenerate(self) -> None:
        """Ask for the last reply again."""
        self.session.regenerate()

    def begin_edit(self, message: Message) -> None:
        """Put a sent message back into the composer; sending it starts a new branch."""
        if self.session.generating:
            return
        self._editing = message
        self.composer.setPlainText(message.content)
        self.edit_banner.show()
        self.composer.setFocus()

    def show_variant(self, message: Message) -> None:
        """Show another variant of a message."""
        self.session.show_variant(message)

    @Slot()
    def edit_system_prompt(self) -> None:
        """Edit this conversation's system prompt (a non-blocking dialog)."""
        dialog = QInputDialog(self)
        dialog.setWindowTitle(self.tr("System prompt"))
        dialog.setLabelText(
            self.tr("Instructions the model gets before the conversation (empty: none):")
        )
        dialog.setOption(QInputDialog.InputDialogOption.UsePlainTextEditForTextInput)
        dialog.setTextValue(self.session.conversation.system_prompt)
        dialog.textValueSelected.connect(self.session.set_system_prompt)
        dialog.open()

    @Slot()
    def edit_conversation_settings(self) -> None:
        """This conversation's own sampling settings; values equal to the app's are not kept."""
        base, own = self.session.sampling()
        dialog = SettingsDialog(
            own, self, only=SAMPLING, title=self.tr("Sampling for this conversation")
        )
        dialog.settings_chosen.connect(
            lambda chosen: self.session.set_conversation_settings(overrides(chosen, base))
        )
        dialog.finished.connect(dialog.deleteLater)
        dialog.open()

    def choose_export_file(self, kind: str) -> None:
        """Ask where to export the conversation, then write it off the UI thread."""
        suffix = ".json" if kind == "json" else ".md"
        title = self.session.conversation.title or "conversation"
        name = "".join(c if c.isalnum() or c in " -_" else "_" for c in title).strip()
        dialog = QFileDialog(self, self.tr("Export conversation"), name + suffix)
        dialog.setAcceptMode(QFileDialog.AcceptMode.AcceptSave)
        dialog.setNameFilter(
            self.tr("JSON (*.json)") if kind == "json" else self.tr("Markdown (*.md)")
        )
        dialog.fileSelected.connect(
            lambda path: self.spawn(self.session.export_conversation(Path(path), kind))
        )
        dialog.open()

    def choose_import_file(self) -> None:
        """Ask for a conversation exported as JSON, then import it."""
        dialog = QFileDialog(self, self.tr("Import a conversation"), "", self.tr("JSON (*.json)"))
        dialog.setFileMode(QFileDialog.FileMode.ExistingFile)
        dialog.fileSelected.connect(
            lambda path: self.spawn(self.session.import_conversation(Path(path)))
        )
        dialog.open()

    def open_model(self, path: Path) -> None:
        """Load another model; the conversation carries on with it."""
        self.session.open_model(path)

    def closeEvent(self, event: QCloseEvent) -> None:
        """Hand shutdown to the application: it stops the reply and frees the model."""
        self._renderer.cancel()
        event.accept()
        self.closed.emit()

    # -- rendering the session ----------------------------------------------------------------

    @Slot(str, str)
    def _on_state_changed(self, state: str, detail: str) -> None:
        self.state_label.setText(detail)
        if state == ModelState.ERROR.value:
            self.view.add_note(detail, error=True)

    @Slot(object)
    def _on_model_changed(self, info: ModelInfo) -> None:
        self.setWindowTitle(f"{APP_NAME} — {info.name}")

    @Slot(str)
    def _on_notice(self, text: str) -> None:
        if self.session.generating:
            self.statusBar().showMessage(text, 6000)
        else:
            self.view.add_note(text)

    @Slot()
    def render_conversation(self) -> None:
        """Show the session's conversation from scratch (another one, or another branch).

        A long conversation is built a slice of messages at a time, half a frame's work per
        slice, so opening it never freezes the window; a short one is built at once.
        """
        self._renderer.cancel()
        self.view.clear()
        self._last_reply_header = None
        self._to_render = deque(self.session.conversation.messages)
        self._renderer.start()

    @property
    def rendering(self) -> bool:
        """Whether a conversation is still being built in the view."""
        return bool(self._to_render)

    def _render_slice(self, deadline: float) -> bool:
        """Build messages until ``deadline``; returns whether the conversation is complete."""
        while self._to_render:
            message = self._to_render.popleft()
            if message.role == "user":
                self._decorate(self.view.add_user_message(message.content), message)
            else:
                self._decorate(
                    self.view.add_reply(message.model or APP_NAME, message.content), message
                )
            if message.note:
                self.view.add_note(message.note, error=message.status == "error")
            if self._to_render and time.perf_counter() > deadline:
                return False
        if self._last_reply_header is not None:
            self._last_reply_header.set_action_visible("regenerate", True)
        self.sidebar.set_conversations_current(self.session.conversation.id)
        return True

    def _decorate(self, header: HeaderRow, message: Message) -> None:
        """Give a message's header its actions: variants, Edit or Regenerate."""
        variants = self.session.conversation.variants(message)
        if len(variants) > 1:
            index = variants.index(message)
            previous = header.add_action("previous", lambda: self.show_variant(variants[index - 1]))
            following = variants[index + 1] if index + 1 < len(variants) else message
            after = header.add_action("next", lambda: self.show_variant(following))
            previous.setEnabled(index > 0)
            after.setEnabled(index + 1 < len(variants))
            header.set_variant(index + 1, len(variants))
        if message.role == "user":
            header.add_action("edit", lambda: self.begin_edit(message))
        else:
            header.add_action("regenerate", self.regenerate)
            header.set_action_visible("regenerate", False)  # only the last reply shows it
            self._last_reply_header = header

    @Slot()
    def _on_reply_started(self) -> None:
        # The turns before the new prompt first, all of them, so the reply lands after them.
        self._renderer.finish()
        messages = self.session.conversation.messages
        prompt, reply = messages[-2], messages[-1]
        if self._last_reply_header is not None:
            self._last_reply_header.set_action_visible("regenerate", False)
        self._decorate(self.view.add_user_message(prompt.content), prompt)
        speaker = self.session.model.name if self.session.model else APP_NAME
        self._decorate(self.view.begin_reply(speaker), reply)
        self.send_button.setEnabled(True)
        self._show_send_state()

    @Slot(str, str)
    def _on_reply_ended(self, status: str, note: str) -> None:
        self.view.end_reply(note, error=status == "error")
        if self._last_reply_header is not None:
            self._last_reply_header.set_action_visible("regenerate", True)
        self.send_button.setEnabled(True)
        self._show_send_state()
        messages = self.session.conversation.messages
        prompt = messages[-2]
        if prompt.status == "error" and not self.composer.toPlainText():
            # The prompt got no answer at all: give it back so it can be sent again.
            self.composer.setPlainText(prompt.content)
        self.composer.setFocus()

    @Slot()
    def _on_figures_changed(self) -> None:
        m = self.session.metrics
        rate = m.reply.tokens_per_s
        shown_rate = f"{rate:.1f}" if rate is not None else "-"
        parts = [
            self.tr("{rate} tok/s").format(rate=shown_rate),
            self.tr("queue {depth}/{bound}").format(depth=m.queue_depth, bound=m.queue_bound),
        ]
        self.figures_label.setText(" · ".join(parts))
        self.diagnostics.refresh()
