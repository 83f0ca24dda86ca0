"""The small buttons in the conversation (Copy, Edit, Show all…), and the focus ring.

Fusion draws no focus indication on flat tool buttons, so a keyboard user could not tell which
one Enter or Space would press. :class:`FocusRing` is one overlay per view, drawn in the
palette's highlight colour around whatever has the focus in the conversation; it stands out
from the conversation's background in the light and the dark theme alike. One overlay, and
not a paint override in every button and header, keeps painting a frame of a streaming reply
as cheap as before.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtGui import QPainter, QPaintEvent, QPalette, QPen
from PySide6.QtWidgets import QWidget
from typing_extensions import override

from app.ui.look.icon_button import IconButton

FOCUS_RING_PX = 2


class ActionButton(IconButton):
    """A flat button of a message: an icon (its words in the tooltip), or words where it has none.

    It is not in Qt's Tab chain: the chat view steps Tab through the current message's buttons
    itself, so Tab never walks through every button of a long conversation.

    A message's actions are drawn only while the message is hovered or has the keyboard focus
    (:attr:`drawn`). They stay in place, enabled and in the accessibility tree meanwhile: a
    pointer that reaches one has revealed it on the way, and a screen reader finds them all.
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(None, parent)
        self.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self._drawn = True

    @property
    def drawn(self) -> bool:
        """Whether the button is drawn (it is still there, and takes clicks, when not)."""
        return self._drawn

    @drawn.setter
    def drawn(self, drawn: bool) -> None:
        if drawn != self._drawn:
            self._drawn = drawn
            self.update()

    @override
    def paintEvent(self, event: QPaintEvent) -> None:
        if self._drawn:
            super().paintEvent(event)


class FocusRing(QWidget):
    """A frame drawn over the widget that has the focus (it takes no clicks).

    Args:
        home: where the ring waits while it follows nothing (a widget that outlives the
            widgets it follows: the ring is their sibling, and must not be deleted with them).
    """

    def __init__(self, home: QWidget) -> None:
        super().__init__(home)
        self._home = home
        self.setObjectName("focusRing")
        self.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
        self.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self._target: QWidget | None = None
        self.hide()

    @property
    def target(self) -> QWidget | None:
        """The widget the ring is drawn around, if any."""
        return self._target

    def follow(self, widget: QWidget | None) -> None:
        """Draw the ring around ``widget`` (None: nowhere)."""
        if self._target is not None:
            self._target.removeEventFilter(self)
        self._target = widget
        if widget is None or widget.parentWidget() is None:
            self._target = None
            self.hide()
            self.setParent(self._home)
            return
        widget.installEventFilter(self)
        self.setParent(widget.parentWidget())
        self._place()

    def _place(self) -> None:
        target = self._target
        if target is None:
            return
        self.setGeometry(target.geometry())
        self.setVisible(target.isVisible())
        self.raise_()

    @override
    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        kind = event.type()
        if kind in (QEvent.Type.Move, QEvent.Type.Resize):
            self._place()
        elif kind in (QEvent.Type.Hide, QEvent.Type.ParentChange, QEvent.Type.DeferredDelete):
            self.follow(None)  # its row is going away, or folded: the ring goes home
        return False

    @override
    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        pen = QPen(self.palette().color(QPalette.ColorRole.Highlight))
        pen.setWidth(FOCUS_RING_PX)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(pen)
        painter.setBrush(Qt.BrushStyle.NoBrush)
        half = FOCUS_RING_PX // 2
        painter.drawRoundedRect(self.rect().adjusted(half, half, -half, -half), 4, 4)
