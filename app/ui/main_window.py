"""The main window: chat view, composer, Send/Stop, status line, File menu."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from PySide6.QtCore import QEvent, Qt, Signal, SignalInstance, Slot
from PySide6.QtGui import QAction, QActionGroup, QCloseEvent, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QDockWidget,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QMenu,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.engine import ModelInfo
from app.flow.session import ChatSession, ModelState
from app.ui.chat_view import ChatView
from app.ui.composer import Composer
from app.ui.diagnostics import DiagnosticsPanel
from app.ui.language import LANGUAGE_CHOICES
from app.ui.theme import THEME_CHOICES

APP_NAME = "Floodgate"


class MainWindow(QMainWindow):
    """Renders a :class:`ChatSession` and forwards what the user asks of it.

    Signals:
        closed(): the user closed the window; the application shuts down the session.
    """

    closed = Signal()
    theme_chosen = Signal(str)
    language_chosen = Signal(str)

    def __init__(self, session: ChatSession) -> None:
        super().__init__()
        self.session = session
        self.setWindowTitle(APP_NAME)
        self.resize(860, 680)

        self.view = ChatView()
        self.composer = Composer()
        self.send_button = QPushButton()
        self.send_button.setObjectName("sendButton")
        self.send_button.setDefault(True)
        self.state_label = QLabel(session.describe_state())
        self.state_label.setObjectName("stateLabel")
        self.figures_label = QLabel("")
        self.figures_label.setObjectName("figuresLabel")

        row = QHBoxLayout()
        row.addWidget(self.composer, 1)
        row.addWidget(self.send_button)
        column = QVBoxLayout()
        column.addWidget(self.view, 1)
        column.addLayout(row)
        central = QWidget()
        central.setLayout(column)
        self.setCentralWidget(central)
        self.statusBar().addWidget(self.state_label, 1)
        self.statusBar().addPermanentWidget(self.figures_label)

        self.file_menu = self.menuBar().addMenu("")
        self.open_action = QAction(self)
        self.open_action.setShortcut(QKeySequence.StandardKey.Open)
        self.open_action.triggered.connect(self.choose_model_file)
        self.file_menu.addAction(self.open_action)
        self.file_menu.addSeparator()
        self.quit_action = QAction(self)
        self.quit_action.setShortcut(QKeySequence.StandardKey.Quit)
        self.quit_action.triggered.connect(self.close)
        self.file_menu.addAction(self.quit_action)

        self.diagnostics = DiagnosticsPanel(session.metrics)
        self.diagnostics_dock = QDockWidget(self)
        self.diagnostics_dock.setObjectName("diagnosticsDock")
        self.diagnostics_dock.setWidget(self.diagnostics)
        self.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.diagnostics_dock)
        self.diagnostics_dock.hide()
        self.diagnostics_dock.visibilityChanged.connect(lambda _: self.diagnostics.refresh())
        self.view_menu = self.menuBar().addMenu("")
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
        self.retranslate()
        self.composer.setFocus()

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
        self.quit_action.setText(self.tr("&Quit"))
        self.view_menu.setTitle(self.tr("&View"))
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
        if self.session.send(text):
            self.composer.clear()

    @Slot()
    def stop(self) -> None:
        """Stop the reply in progress (pressing it twice is harmless)."""
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

    def open_model(self, path: Path) -> None:
        """Load another model; the conversation carries on with it."""
        self.session.open_model(path)

    def closeEvent(self, event: QCloseEvent) -> None:
        """Hand shutdown to the application: it stops the reply and frees the model."""
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
    def _on_reply_started(self) -> None:
        prompt = self.session.conversation.messages[-2]
        self.view.add_user_message(prompt.content)
        speaker = self.session.model.name if self.session.model else APP_NAME
        self.view.begin_reply(speaker)
        self.send_button.setEnabled(True)
        self._show_send_state()

    @Slot(str, str)
    def _on_reply_ended(self, status: str, note: str) -> None:
        self.view.end_reply(note, error=status == "error")
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
