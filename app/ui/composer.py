"""The multi-line prompt editor: Enter sends, Shift+Enter starts a new line."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QPlainTextEdit, QWidget


class Composer(QPlainTextEdit):
    """Where the user types. Emits :attr:`submitted` on Enter; never clears itself.

    Signals:
        submitted(): Enter (or keypad Enter) was pressed without Shift.
    """

    submitted = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("composer")
        self.setPlaceholderText("Message the model… (Enter sends, Shift+Enter for a new line)")
        self.setTabChangesFocus(True)
        line = self.fontMetrics().lineSpacing()
        self.setMinimumHeight(line * 3)
        self.setMaximumHeight(line * 8)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        """Send on Enter; keep Shift+Enter (and IME composition) as typing."""
        enter = event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter)
        if enter and not event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
            event.accept()
            self.submitted.emit()
            return
        super().keyPressEvent(event)
