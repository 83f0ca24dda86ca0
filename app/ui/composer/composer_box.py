"""The composer's rounded box: the paperclip, the text, and the round Send (or Stop) button.

The chips of attached files sit above the text, inside the box.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtWidgets import QFrame, QHBoxLayout, QVBoxLayout, QWidget
from typing_extensions import override

from app.ui.composer.composer import Composer


class ComposerBox(QFrame):
    """Holds the composer, the paperclip, the send button and the tray, framed as one field.

    The box only lays them out and shows where the focus is (its border takes the accent
    colour while the composer has the focus); each keeps its own behaviour and names.
    """

    def __init__(
        self,
        composer: Composer,
        attach_button: QWidget,
        send_button: QWidget,
        tray: QWidget,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("composerBox")
        self.setProperty("focused", False)
        self._composer = composer
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(4)
        bottom = Qt.AlignmentFlag.AlignBottom
        row.addWidget(attach_button, 0, bottom)
        row.addWidget(composer, 1, bottom)
        row.addWidget(send_button, 0, bottom)
        column = QVBoxLayout(self)
        column.setContentsMargins(8, 6, 6, 6)
        column.setSpacing(4)
        column.addWidget(tray)
        column.addLayout(row)
        composer.installEventFilter(self)

    @override
    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        kind = event.type()
        if watched is self._composer and kind in (QEvent.Type.FocusIn, QEvent.Type.FocusOut):
            self.setProperty("focused", kind == QEvent.Type.FocusIn)
            self.style().unpolish(self)
            self.style().polish(self)
        return False
