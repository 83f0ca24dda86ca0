"""Connect to a server: an OpenAI-compatible endpoint, its key, and one of its models."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.engine.remote import RemoteEndpoint
from app.ui.look.style import follow_theme

DEFAULT_URL = "http://localhost:8080/v1"
"""llama.cpp's llama-server on its default port."""


class RemoteDialog(QDialog):
    """Asks where the server is; lists its models on request; emits the endpoint to use.

    Signals:
        models_requested(RemoteEndpoint): List models was pressed (the caller fills the list
            with :meth:`set_models`, or says why not with :meth:`set_problem`).
        connect_requested(RemoteEndpoint): Connect was pressed.
    """

    models_requested = Signal(RemoteEndpoint)
    connect_requested = Signal(RemoteEndpoint)

    def __init__(self, url: str = "", model: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("serverDialog")
        follow_theme(self)
        self.setWindowTitle(self.tr("Connect to a server"))
        self.setMinimumWidth(560)
        self.url = QLineEdit(url or DEFAULT_URL)
        self.key = QLineEdit()
        self.key.setEchoMode(QLineEdit.EchoMode.Password)
        self.key.setPlaceholderText(self.tr("none"))
        self.model = QComboBox()
        self.model.setEditable(True)
        self.model.setCurrentText(model)
        self.list_button = QPushButton(self.tr("List models"))
        self.list_button.clicked.connect(self._on_list)
        model_row = QHBoxLayout()
        model_row.addWidget(self.model, 1)
        model_row.addWidget(self.list_button)
        form = QFormLayout()
        form.addRow(self.tr("Address (OpenAI-compatible API)"), self.url)
        form.addRow(self.tr("API key"), self.key)
        form.addRow(self.tr("Model"), model_row)
        self.problem = QLabel()
        self.problem.setTextFormat(Qt.TextFormat.PlainText)  # the server's own words
        self.problem.setWordWrap(True)
        self.problem.hide()
        hint = QLabel(
            self.tr(
                "llama-server, vLLM, Ollama and LM Studio all serve this API. The key goes to "
                "the system keyring when there is one, never to Floodgate's files or logs."
            )
        )
        hint.setWordWrap(True)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel)
        self.connect_button = self.buttons.addButton(
            self.tr("Connect"), QDialogButtonBox.ButtonRole.AcceptRole
        )
        self.buttons.accepted.connect(self._on_connect)
        self.buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.problem)
        layout.addWidget(hint)
        layout.addWidget(self.buttons)

    def endpoint(self) -> RemoteEndpoint:
        """What the fields say."""
        return RemoteEndpoint(
            base_url=self.url.text().strip(),
            model=self.model.currentText().strip(),
            api_key=self.key.text(),
        )

    def set_models(self, models: Sequence[str]) -> None:
        """Offer the server's models."""
        current = self.model.currentText()
        self.model.clear()
        self.model.addItems(list(models))
        if current in models:
            self.model.setCurrentText(current)
        self.problem.hide()
        self.list_button.setEnabled(True)

    def set_problem(self, sentence: str) -> None:
        """Say why the server could not be used."""
        self.problem.setText(sentence)
        self.problem.show()
        self.list_button.setEnabled(True)

    @Slot()
    def _on_list(self) -> None:
        self.list_button.setEnabled(False)
        self.models_requested.emit(self.endpoint())

    @Slot()
    def _on_connect(self) -> None:
        if not self.url.text().strip():
            self.set_problem(self.tr("Enter the server's address."))
            return
        self.connect_requested.emit(self.endpoint())
        self.accept()
