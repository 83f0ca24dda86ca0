"""What a screen reader finds in the conversation, and the one announcement a reply makes.

Qt exposes standard widgets by itself; the conversation's rows are custom widgets inside a
custom container, so an accessibility factory describes them: the row stack lists its rows in
reading order, a header row is a heading named by the message's author, a text or code row is
a paragraph named by its text and described by its author, and each row's buttons follow it.
Names are computed when a screen reader asks, so a streaming reply costs nothing here: no event
is sent per piece of text. A finished reply is announced once (:func:`announce`).
"""

from __future__ import annotations

from PySide6 import QtGui
from PySide6.QtCore import QCoreApplication, QObject
from PySide6.QtGui import QAccessible, QAccessibleInterface
from PySide6.QtWidgets import QAccessibleWidget, QWidget
from typing_extensions import override

from app.ui.chat.rows.base import Row
from app.ui.chat.rows.stack import RowStack

_installed = False


class RowAccessible(QAccessibleWidget):
    """A row: its role, its text as the name, its author as the description, its buttons."""

    def __init__(self, row: Row) -> None:
        super().__init__(row, row.accessible_role(), "")
        self._row = row

    def _children(self) -> list[QWidget]:
        return [w for w in self._row.accessible_children() if not w.isHidden()]

    @override
    def text(self, t: QAccessible.Text) -> str:
        if t == QAccessible.Text.Name:
            return self._row.accessible_name()
        if t == QAccessible.Text.Description:
            return self._row.accessible_description()
        return str(super().text(t))

    @override
    def childCount(self) -> int:
        return len(self._children())

    @override
    def child(self, index: int) -> QAccessibleInterface | None:  # type: ignore[override]  # Qt takes nullptr
        children = self._children()
        if 0 <= index < len(children):
            return QAccessible.queryAccessibleInterface(children[index])
        return None

    @override
    def indexOfChild(self, child: QAccessibleInterface) -> int:
        target = child.object()
        for i, widget in enumerate(self._children()):
            if widget is target:
                return i
        return -1


class StackAccessible(QAccessibleWidget):
    """The conversation: its shown rows, in reading order (rows folded away are left out)."""

    def __init__(self, stack: RowStack) -> None:
        super().__init__(stack, QAccessible.Role.Grouping, "")
        self._stack = stack

    def _shown(self) -> list[Row]:
        stack = self._stack
        return [row for i, row in enumerate(stack.rows) if stack.is_shown(i)]

    @override
    def text(self, t: QAccessible.Text) -> str:
        if t == QAccessible.Text.Name:
            return QCoreApplication.translate("ChatView", "Conversation")
        return str(super().text(t))

    @override
    def childCount(self) -> int:
        return len(self._shown())

    @override
    def child(self, index: int) -> QAccessibleInterface | None:  # type: ignore[override]  # Qt takes nullptr
        shown = self._shown()
        if 0 <= index < len(shown):
            return QAccessible.queryAccessibleInterface(shown[index])
        return None

    @override
    def indexOfChild(self, child: QAccessibleInterface) -> int:
        target = child.object()
        for i, row in enumerate(self._shown()):
            if row is target:
                return i
        return -1


def _factory(key: str, obj: QObject) -> QAccessibleInterface | None:
    if isinstance(obj, Row):
        return RowAccessible(obj)
    if isinstance(obj, RowStack):
        return StackAccessible(obj)
    return None


def install() -> None:
    """Describe the conversation's rows to assistive technology (once per process)."""
    global _installed
    if not _installed:
        QAccessible.installFactory(_factory)
        _installed = True


def announcements_supported() -> bool:
    """Whether this Qt can announce (QAccessibleAnnouncementEvent came with Qt 6.8)."""
    return hasattr(QtGui, "QAccessibleAnnouncementEvent")


def announce(widget: QObject, message: str) -> bool:
    """Have a screen reader say ``message`` once, politely; returns whether it was sent."""
    if not message or not announcements_supported():
        return False
    event = QtGui.QAccessibleAnnouncementEvent(widget, message)
    event.setPoliteness(QAccessible.AnnouncementPoliteness.Polite)
    QAccessible.updateAccessibility(event)
    return True
