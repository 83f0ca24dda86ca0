"""Buttons that show an icon and say their action in a tooltip, on hover and on keyboard focus."""

from __future__ import annotations

from PySide6.QtCore import QPoint, QSize, Qt, QTimer
from PySide6.QtGui import QFocusEvent, QIcon
from PySide6.QtWidgets import QToolButton, QToolTip, QWidget
from typing_extensions import override

ICON_PX = 16
"""The side of an icon in a button, in logical pixels (the SVG is drawn for the screen's scale)."""

FOCUS_TIP_MS = 500
"""How long the keyboard focus rests on a button before its tooltip shows (about as long as a
pointer hovering; shown at once, the release of Tab would close it again)."""


def show_tooltip_below(widget: QWidget) -> None:
    """Show ``widget``'s tooltip under it, as hovering would (for a keyboard user)."""
    tip = widget.toolTip()
    if tip and widget.isVisible():
        QToolTip.showText(widget.mapToGlobal(QPoint(0, widget.height() + 2)), tip, widget)


class IconButton(QToolButton):
    """A flat button drawn as its icon; its words are its tooltip and its accessible name.

    The text is kept (a screen reader and tests read it) but not drawn. The tooltip shows on
    hover, as every tooltip does, and also when the keyboard brings the focus here.
    """

    def __init__(
        self, icon: QIcon | None = None, parent: QWidget | None = None, *, side: int = ICON_PX
    ) -> None:
        super().__init__(parent)
        self.setIconSize(QSize(side, side))
        self.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonIconOnly)  # words only without one
        self.setAutoRaise(True)
        if icon is not None:
            self.setIcon(icon)
        self._focus_tip: QTimer | None = None  # made on the first keyboard focus

    @override
    def focusInEvent(self, event: QFocusEvent) -> None:
        super().focusInEvent(event)
        if event.reason() == Qt.FocusReason.MouseFocusReason:
            return
        if self._focus_tip is None:
            self._focus_tip = QTimer(self)
            self._focus_tip.setSingleShot(True)
            self._focus_tip.setInterval(FOCUS_TIP_MS)
            self._focus_tip.timeout.connect(self._show_focus_tip)
        self._focus_tip.start()

    def _show_focus_tip(self) -> None:
        if self.hasFocus():
            show_tooltip_below(self)

    @override
    def focusOutEvent(self, event: QFocusEvent) -> None:
        super().focusOutEvent(event)
        if self._focus_tip is not None and self._focus_tip.isActive():
            self._focus_tip.stop()
        elif QToolTip.isVisible() and QToolTip.text() == self.toolTip():
            QToolTip.hideText()
