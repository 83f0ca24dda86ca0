"""The small buttons in the conversation (Copy, Edit, Show all…), with a focus ring you can see.

Fusion draws no focus indication on flat tool buttons, so a keyboard user could not tell which
one Enter or Space would press. These draw a ring in the palette's highlight colour, which
stands out from the conversation's background in the light and the dark theme alike.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QPainter, QPaintEvent, QPalette, QPen
from PySide6.QtWidgets import QToolButton, QWidget
from typing_extensions import override

FOCUS_RING_PX = 2


def paint_focus_ring(widget: QWidget, painter: QPainter) -> None:
    """Draw the focus ring along the inside of ``widget``'s rectangle."""
    pen = QPen(widget.palette().color(QPalette.ColorRole.Highlight))
    pen.setWidth(FOCUS_RING_PX)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setPen(pen)
    painter.setBrush(Qt.BrushStyle.NoBrush)
    half = FOCUS_RING_PX // 2
    painter.drawRoundedRect(widget.rect().adjusted(half, half, -half, -half), 4, 4)


class ActionButton(QToolButton):
    """A flat button of a message.

    It is not in Qt's Tab chain: the chat view steps Tab through the current message's buttons
    itself, so Tab never walks through every button of a long conversation.
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAutoRaise(True)
        self.setFocusPolicy(Qt.FocusPolicy.NoFocus)

    @override
    def paintEvent(self, event: QPaintEvent) -> None:
        super().paintEvent(event)
        if self.hasFocus():
            paint_focus_ring(self, QPainter(self))
