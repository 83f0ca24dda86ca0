"""A sent message being edited in the composer, and the banner that says so."""

from __future__ import annotations

from PySide6.QtCore import QCoreApplication
from PySide6.QtWidgets import QLabel

from app.store.conversation import Message


class PromptEdit:
    """The sent message the composer holds for editing, shown by a banner while it lasts."""

    def __init__(self) -> None:
        self.message: Message | None = None
        self.banner = QLabel()
        self.banner.setObjectName("editBanner")
        self.banner.hide()

    def retranslate(self) -> None:
        """Word the banner in the current language."""
        self.banner.setText(
            QCoreApplication.translate(
                "MainWindow", "Editing a message: Enter sends it as a new version, Esc cancels."
            )
        )

    def begin(self, message: Message) -> None:
        """Edit ``message``: the banner shows."""
        self.message = message
        self.banner.show()

    def end(self) -> None:
        """No message is edited any more: the banner hides."""
        self.message = None
        self.banner.hide()
