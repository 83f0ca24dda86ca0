"""The banner that stays while the chat history cannot be written, with a way out: Export."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt, Slot
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QWidget


class SavingBanner(QWidget):
    """Says that saving fails, until it works again; Export… writes what is on screen.

    Args:
        export: opens the export dialog for the conversation on screen.
        parent: the Qt parent.
    """

    def __init__(self, export: Callable[[], None], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("savingBanner")
        self.label = QLabel()
        self.label.setObjectName("savingProblem")
        self.label.setWordWrap(True)
        # The sentence carries the system's own words (a path, an error): never markup.
        self.label.setTextFormat(Qt.TextFormat.PlainText)
        self.export_button = QPushButton()
        self.export_button.clicked.connect(lambda: export())
        row = QHBoxLayout(self)
        row.setContentsMargins(8, 4, 8, 4)
        row.addWidget(self.label, 1)
        row.addWidget(self.export_button)
        self.setAutoFillBackground(True)
        self.setBackgroundRole(QPalette.ColorRole.AlternateBase)
        self.retranslate()
        self.hide()

    def retranslate(self) -> None:
        """Set the words in the current language."""
        self.export_button.setText(self.tr("Export…"))
        self.export_button.setAccessibleName(self.tr("Export the conversation on screen"))

    @Slot(str)
    def show_problem(self, text: str) -> None:
        """Show why saving fails; the banner stays until :meth:`hide`."""
        self.label.setText(text)
        self.show()
