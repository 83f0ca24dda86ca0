"""The header above each message: who wrote it, and its buttons (Copy, Edit, Regenerate, ‹ ›).

The header is where keyboard navigation lands: Ctrl+Up/Down (or F6) moves between messages'
headers, and Tab goes on through that message's buttons. A screen reader hears the author as
the header's name and the message as its description.

Copy, Edit and Regenerate are drawn while the message is hovered or has the keyboard focus,
and always on the last reply (what people act on most), so a long conversation reads as text,
not as rows of buttons. The variant switcher (‹ 2/3 ›) and a prompt's attachments are what
the message is, so they always show.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QCoreApplication, Qt, Slot
from PySide6.QtGui import QAccessible, QFont, QGuiApplication
from PySide6.QtWidgets import QLabel, QToolButton, QWidget
from typing_extensions import override

from app.ui.chat.rows.action_button import ActionButton
from app.ui.chat.rows.base import MARGIN, Row
from app.ui.chat.rows.text_block import TextBlock
from app.ui.look.icons import icon

Words = Callable[[], tuple[str, str, str]]
"""Gives a button's label, tooltip and spoken name, in the current language."""

ORDER = ("copy", "regenerate", "edit", "next", "counter", "previous")
"""Right to left: Copy, then the other actions, with the variant counter between ‹ and ›."""

TAB_ORDER = ("previous", "next", "edit", "regenerate", "copy")
"""Left to right, the order Tab visits the buttons in (the chat view steps through them)."""

REVEALED = ("copy", "edit", "regenerate")
"""The actions drawn only while the message is hovered, focused or the last reply."""

ICONS = {
    "copy": "copy",
    "edit": "pencil",
    "regenerate": "refresh-cw",
    "previous": "chevron-left",
    "next": "chevron-right",
}
"""The icon each action is drawn as (its words are its tooltip and its spoken name)."""


def action_text(key: str, *, prompt: bool) -> tuple[str, str, str]:
    """The label, tooltip and spoken name of a message action, in the current language."""
    # Spelled out in full each time: lupdate only finds literal QCoreApplication.translate calls.
    if key == "copy":
        return (
            QCoreApplication.translate("ChatView", "Copy"),
            QCoreApplication.translate(
                "ChatView", "Copy the whole message (Markdown as the model wrote it)"
            ),
            QCoreApplication.translate("ChatView", "Copy prompt")
            if prompt
            else QCoreApplication.translate("ChatView", "Copy reply"),
        )
    if key == "edit":
        return (
            QCoreApplication.translate("ChatView", "Edit"),
            QCoreApplication.translate("ChatView", "Edit this message and send it again"),
            QCoreApplication.translate("ChatView", "Edit prompt"),
        )
    if key == "regenerate":
        return (
            QCoreApplication.translate("ChatView", "Regenerate"),
            QCoreApplication.translate(
                "ChatView", "Ask for this reply again; this one stays as a variant"
            ),
            QCoreApplication.translate("ChatView", "Regenerate"),
        )
    if key == "previous":
        return (
            "‹",
            QCoreApplication.translate("ChatView", "Previous variant"),
            QCoreApplication.translate("ChatView", "Previous version"),
        )
    return (
        "›",
        QCoreApplication.translate("ChatView", "Next variant"),
        QCoreApplication.translate("ChatView", "Next version"),
    )


class HeaderRow(Row):
    """The speaker's name above a message, with its actions: Copy, and any others given.

    Args:
        speaker: who wrote the message; shown as plain text (a model's name is not markup).
        copy_text: gives the whole message, for Copy.
        prompt: whether the message is the user's prompt (names the buttons "… prompt").
    """

    kind = "header"

    def __init__(
        self,
        speaker: str,
        copy_text: Callable[[], str],
        parent: QWidget | None = None,
        *,
        prompt: bool = False,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("messageHeader")
        self.setFocusPolicy(Qt.FocusPolicy.NoFocus)  # the view makes one message reachable
        self._copy_text = copy_text
        self.spoken_text: Callable[[], str] = copy_text
        """Gives the message as a screen reader reads it (a reply: as shown, not Markdown)."""
        self.prompt = prompt
        self._name = TextBlock(self, wrap=False)
        font = QFont(self._name.font())
        font.setBold(True)
        self._name.setFont(font)
        self._name.set_plain(speaker)
        self._counter = QLabel(self)
        self._counter.setTextFormat(Qt.TextFormat.PlainText)
        self._counter.hide()
        self.buttons: dict[str, QToolButton] = {}
        self._words: dict[str, Words] = {}
        self._revealed_by: set[str] = set()
        self.copy_button = self.add_action("copy", self._on_copy)
        self.copy_button.setObjectName("copyMessage")
        self.speaker = speaker
        self.author = speaker

    def add_action(
        self, key: str, callback: Callable[[], None], words: Words | None = None
    ) -> QToolButton:
        """Add a button (``"edit"``, ``"regenerate"``, ``"previous"``, ``"next"``).

        Any other key is a button of the caller's, such as a prompt's attachment chip, worded
        by ``words``; such buttons sit left of the actions, in the order they were added.
        """
        button = ActionButton(self)
        if key in REVEALED:
            button.drawn = self.actions_revealed
        if key in ICONS:
            button.setIcon(icon(ICONS[key]))
        button.clicked.connect(lambda _=False: callback())
        self.buttons[key] = button
        if words is not None:
            self._words[key] = words
        self._retranslate_button(key)
        button.show()
        self._place()
        return button

    def refit(self) -> None:
        """Lay the buttons out again: one took another icon (a chip's thumbnail)."""
        self._place()

    def set_variant(self, index: int, count: int) -> None:
        """Show which of ``count`` variants this message is (1-based ``index``)."""
        self._counter.setText(f"{index}/{count}")
        self._counter.setVisible(count > 1)
        self._place()

    def set_action_visible(self, key: str, visible: bool) -> None:
        """Show or hide one of the actions."""
        if key in self.buttons:
            self.buttons[key].setVisible(visible)
            self._place()

    @property
    def actions_revealed(self) -> bool:
        """Whether Copy, Edit and Regenerate are drawn (see the module's docstring)."""
        return bool(self._revealed_by)

    def reveal_actions(self, reason: str, revealed: bool) -> None:
        """Draw the actions for ``reason`` (``"hover"``, ``"focus"``, ``"last"``), or stop."""
        if revealed:
            self._revealed_by.add(reason)
        else:
            self._revealed_by.discard(reason)
        for key in REVEALED:
            button = self.buttons.get(key)
            if isinstance(button, ActionButton):
                button.drawn = self.actions_revealed

    def message_text(self) -> str:
        """The whole message (what Copy copies)."""
        return self._copy_text()

    def _retranslate_button(self, key: str) -> None:
        words = self._words.get(key)
        text, tip, name = words() if words is not None else action_text(key, prompt=self.prompt)
        self.buttons[key].setText(text)
        self.buttons[key].setToolTip(tip)
        self.buttons[key].setAccessibleName(name)

    @override
    def row_height(self, width: int) -> int:
        return max(self._name.sizeHint().height(), self.copy_button.sizeHint().height()) + 14

    @override
    def resizeEvent(self, event: object) -> None:
        self._place()

    def _place(self) -> None:
        if "copy" not in self.buttons:
            return  # still being built
        top = 12
        height = self.buttons["copy"].sizeHint().height()
        name = self._name.sizeHint()
        name_top = top + max(0, (height - name.height()) // 2)
        if self.prompt:
            # A prompt's card is on the right: its name too, with its buttons before it.
            width = min(name.width(), max(0, self.width() - 2 * MARGIN))
            left = self.width() - MARGIN - width
            self._name.setGeometry(left, name_top, width, name.height())
            self._place_buttons(left - 8, top, height)
            return
        right = self._place_buttons(self.width() - MARGIN, top, height)
        self._name.setGeometry(MARGIN, name_top, max(0, right - MARGIN), name.height())

    def _place_buttons(self, right: int, top: int, height: int) -> int:
        """Lay the buttons out leftward from ``right``; returns where the leftmost one starts."""
        extra = [key for key in self.buttons if key not in ORDER]
        for key in [*ORDER, *reversed(extra)]:
            widget: QWidget | None = self._counter if key == "counter" else self.buttons.get(key)
            if widget is None or widget.isHidden():
                continue
            width = widget.sizeHint().width()
            right -= width
            widget.setGeometry(right, top, width, height)
            right -= 2
        return right

    @override
    def retranslate(self) -> None:
        for key in self.buttons:
            self._retranslate_button(key)
        self._place()

    @override
    def dispose(self) -> None:
        super().dispose()
        # The message's text comes from its reply, which holds this header: a cycle.
        self._copy_text = self.spoken_text = str

    @Slot()
    def _on_copy(self) -> None:
        QGuiApplication.clipboard().setText(self._copy_text())

    @override
    def plain_text(self) -> str:
        return self.speaker

    @override
    def copy_separator(self) -> str:
        return "\n"

    @override
    def text_block(self) -> TextBlock:
        return self._name

    @override
    def controls(self) -> list[QWidget]:
        extra = [self.buttons[k] for k in self.buttons if k not in ORDER]
        return [*extra, *(self.buttons[k] for k in TAB_ORDER if k in self.buttons)]

    @override
    def accessible_children(self) -> list[QWidget]:
        return [*self.controls(), self._counter]

    @override
    def accessible_role(self) -> QAccessible.Role:
        return QAccessible.Role.Heading

    @override
    def accessible_name(self) -> str:
        return self.speaker

    @override
    def accessible_description(self) -> str:
        return self.spoken_text()
