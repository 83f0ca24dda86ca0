"""Settings for Floodgate's own API server: on or off, address, port, key, web origins."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.store.preferences import ApiServerPreferences
from app.ui.look.style import follow_theme


class ApiServerDialog(QDialog):
    """Local API server settings; OK emits :attr:`chosen`.

    Signals:
        chosen(ApiServerPreferences, str): the preferences and the API key (empty: none).
    """

    chosen = Signal(ApiServerPreferences, str)

    def __init__(
        self, preferences: ApiServerPreferences, api_key: str, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.setObjectName("apiServerDialog")
        follow_theme(self)
        self.setWindowTitle(self.tr("Local API server"))
        self.enabled = QCheckBox(self.tr("Serve the open model to other programs"))
        self.enabled.setChecked(preferences.enabled)
        self.host = QLineEdit(preferences.host)
        self.port = QSpinBox()
        self.port.setRange(1, 65535)
        self.port.setValue(preferences.port)
        self.key = QLineEdit(api_key)
        self.key.setEchoMode(QLineEdit.EchoMode.Password)
        self.key.setPlaceholderText(self.tr("none (only this machine may connect)"))
        self.origins = QPlainTextEdit(preferences.cors_origins)
        self.origins.setPlaceholderText(self.tr("one per line; none: no browser page may call it"))
        self.origins.setFixedHeight(64)
        self.problem = QLabel("")
        self.problem.setWordWrap(True)
        self.problem.setObjectName("apiServerProblem")
        form = QFormLayout()
        form.addRow(self.enabled)
        form.addRow(self.tr("Address"), self.host)
        form.addRow(self.tr("Port"), self.port)
        form.addRow(self.tr("API key"), self.key)
        form.addRow(self.tr("Web origins (CORS)"), self.origins)
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        buttons.accepted.connect(self._accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.problem)
        layout.addWidget(buttons)

    def set_problem(self, text: str) -> None:
        """Say why the server does not serve."""
        self.problem.setText(text)

    def _accept(self) -> None:
        host = self.host.text().strip()
        if not host:
            self.problem.setText(self.tr("Enter an address, such as 127.0.0.1."))
            return
        chosen = ApiServerPreferences(
            enabled=self.enabled.isChecked(),
            host=host,
            port=self.port.value(),
            cors_origins=self.origins.toPlainText(),
        )
        self.chosen.emit(chosen, self.key.text().strip())
        self.accept()
