"""What a screen reader and a keyboard user get from the chat view (Qt's accessibility tree)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import (
    QAccessible,
    QAccessibleEvent,
    QAccessibleInterface,
    QColor,
    QGuiApplication,
)
from PySide6.QtWidgets import QVBoxLayout, QWidget
from pytestqt.qtbot import QtBot

from app.standins.scripted import ScriptedBackend
from app.ui.chat import accessibility
from app.ui.chat.chat_view import ChatView
from app.ui.chat.rows.code import CodeRow
from app.ui.chat.rows.header import HeaderRow
from app.ui.chat.rows.text import TextRow
from app.ui.composer.composer import Composer
from app.ui.look.theme import contrast, palette
from app.ui.window.main_window import MainWindow
from app.ui.window.sidebar import Sidebar
from tests.support.loop import Loop, run_until

Role = QAccessible.Role
Text = QAccessible.Text


class Window(QWidget):
    """A chat view with a composer under it, as in the main window."""

    def __init__(self) -> None:
        super().__init__()
        self.view = ChatView()
        self.composer = Composer()
        layout = QVBoxLayout(self)
        layout.addWidget(self.view, 1)
        layout.addWidget(self.composer)


@pytest.fixture
def window(qtbot: QtBot) -> Window:
    window = Window()
    qtbot.addWidget(window)
    window.resize(640, 700)
    window.show()
    qtbot.waitExposed(window)
    return window


def converse(view: ChatView) -> tuple[HeaderRow, HeaderRow]:
    prompt = view.add_user_message("What is 2+2?")
    prompt.add_action("edit", lambda: None)
    reply = view.add_reply("SmolLM2", "It is **4**.\n\n```python\nprint(4)\n```\n")
    reply.add_action("previous", lambda: None)
    reply.add_action("next", lambda: None)
    reply.set_variant(2, 2)
    reply.add_action("regenerate", lambda: None)
    return prompt, reply


def children(interface: QAccessibleInterface) -> Iterator[QAccessibleInterface]:
    for i in range(interface.childCount()):
        child = interface.child(i)
        assert child is not None
        assert child.isValid()
        assert interface.indexOfChild(child) == i  # the tree can be walked both ways
        yield child


def find(interface: QAccessibleInterface, name: str) -> QAccessibleInterface | None:
    """The first interface named ``name`` under ``interface``, depth first."""
    for child in children(interface):
        if child.text(Text.Name) == name:
            return child
        found = find(child, name)
        if found is not None:
            return found
    return None


def test_every_message_is_exposed_in_order_with_its_author_and_text(window: Window) -> None:
    converse(window.view)
    root = QAccessible.queryAccessibleInterface(window)
    conversation = find(root, "Conversation")  # reached from the window, through the view
    assert conversation is not None
    rows = [(c.role(), c.text(Text.Name), c.text(Text.Description)) for c in children(conversation)]
    assert rows == [
        (Role.Heading, "You", "What is 2+2?"),
        (Role.Paragraph, "What is 2+2?", "You"),
        (Role.Heading, "SmolLM2", "It is 4.\nprint(4)"),  # as shown, not the Markdown
        (Role.Paragraph, "It is 4.", "SmolLM2"),
        (Role.Paragraph, "print(4)", "SmolLM2, python"),
    ]
    for child in children(conversation):
        parent = child.parent()
        assert parent is not None
        assert parent.object() is window.view.stack


def test_every_button_has_a_name(window: Window) -> None:
    converse(window.view)
    window.view.add_user_message("\n".join(f"line {i}" for i in range(40)))
    conversation = QAccessible.queryAccessibleInterface(window.view.stack)
    heads = [c for c in children(conversation) if c.role() == Role.Heading]
    names = [[b.text(Text.Name) for b in children(h) if b.role() == Role.Button] for h in heads]
    assert names == [
        ["Edit prompt", "Copy prompt"],
        ["Previous version", "Next version", "Regenerate", "Copy reply"],
        ["Copy prompt"],
    ]
    code = [c for c in children(conversation) if c.text(Text.Description) == "SmolLM2, python"]
    assert [b.text(Text.Name) for b in children(code[0])] == ["python", "Copy the code"]
    folded = list(children(conversation))[-1]
    assert [b.text(Text.Name) for b in children(folded)] == ["Show all"]
    # Every button anywhere in the view has a name, never just a glyph or nothing.
    unnamed = []
    stack: list[QAccessibleInterface] = [conversation]
    while stack:
        node = stack.pop()
        kids = list(children(node))
        stack.extend(kids)
        if node.role() == Role.Button and not node.text(Text.Name).strip("‹› "):
            unnamed.append(node)
    assert not unnamed


def test_the_composer_and_the_conversation_list_have_names(qtbot: QtBot) -> None:
    composer = Composer()
    sidebar = Sidebar()
    qtbot.addWidget(composer)
    qtbot.addWidget(sidebar)
    assert QAccessible.queryAccessibleInterface(composer).text(Text.Name) == "Message"
    assert QAccessible.queryAccessibleInterface(sidebar.list).text(Text.Name) == "Conversations"
    search = QAccessible.queryAccessibleInterface(sidebar.search)
    assert search.text(Text.Name) == "Search conversations"


@pytest.fixture
def announced(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What the view announced (events sent by Qt's own widgets are not counted)."""
    assert accessibility.announcements_supported()  # PySide6 >= 6.8 is installed
    said: list[str] = []
    update = QAccessible.updateAccessibility

    def record(event: QAccessibleEvent) -> None:
        if event.type() == QAccessible.Event.Announcement:
            said.append(event.message())  # type: ignore[attr-defined]
        update(event)

    monkeypatch.setattr(QAccessible, "updateAccessibility", record)
    return said


def test_a_finished_reply_is_announced_once_not_piece_by_piece(
    window: Window, announced: list[str]
) -> None:
    view = window.view
    view.add_reply("SmolLM2", "An old reply, loaded from the history.")
    view.add_user_message("Count to fifty.")
    view.begin_reply("SmolLM2")
    for i in range(50):
        view.append_to_reply(f"**{i}** ")
    assert announced == []
    view.end_reply("Stopped.")
    (said,) = announced
    assert said.startswith("SmolLM2 replied: 0 1 2 3")  # the text as shown, not the Markdown
    assert said.endswith("49 Stopped.")


def focused() -> object:
    return QGuiApplication.focusObject()


def test_the_keyboard_moves_between_messages_and_through_their_buttons(
    window: Window, qtbot: QtBot
) -> None:
    view = window.view
    first_prompt, first_reply = converse(view)
    second_prompt = view.add_user_message("And 3+3?")
    second_reply = view.add_reply("SmolLM2", "6.")
    second_reply.add_action("regenerate", lambda: None)
    window.composer.setFocus()
    # F6 from inside the view and Ctrl+Up/Down step between messages' headers.
    view.stack.setFocus()
    qtbot.keyClick(view.stack, Qt.Key.Key_F6)
    assert focused() is second_reply  # entering the messages: the last one
    for key, modifier, expected in [
        (Qt.Key.Key_Up, Qt.KeyboardModifier.ControlModifier, second_prompt),
        (Qt.Key.Key_F6, Qt.KeyboardModifier.ShiftModifier, first_reply),
        (Qt.Key.Key_Up, Qt.KeyboardModifier.ControlModifier, first_prompt),
        (Qt.Key.Key_Up, Qt.KeyboardModifier.ControlModifier, first_prompt),  # the first: stays
        (Qt.Key.Key_Down, Qt.KeyboardModifier.ControlModifier, first_reply),
    ]:
        qtbot.keyClick(focused(), key, modifier)
        assert focused() is expected
    # Tab goes through this message's buttons, left to right, then on out of the view:
    # not through every button of every message.
    visited = []
    for _ in range(8):
        qtbot.keyClick(focused(), Qt.Key.Key_Tab)
        visited.append(focused())
        if focused() is window.composer:
            break
    (code,) = [
        r for r in view.stack.rows[: view.stack.index_of(second_prompt)] if isinstance(r, CodeRow)
    ]
    assert visited == [
        first_reply.buttons["previous"],
        first_reply.buttons["next"],
        first_reply.buttons["regenerate"],
        first_reply.buttons["copy"],
        code.copy_button,
        window.composer,
    ]
    # Shift+Tab comes back to the same message's header, and on back through its buttons.
    qtbot.keyClick(window.composer, Qt.Key.Key_Backtab)
    assert focused() is first_reply
    qtbot.keyClick(first_reply, Qt.Key.Key_Tab)
    assert focused() is first_reply.buttons["previous"]
    qtbot.keyClick(focused(), Qt.Key.Key_Backtab)
    assert focused() is first_reply


def ring_pixels(widget: QWidget, color: QColor) -> int:
    """Pixels of ``color`` along the edges of ``widget``, as drawn on screen (overlays too)."""
    parent = widget.parentWidget()
    assert parent is not None
    image = parent.grab(widget.geometry()).toImage()
    return sum(
        1
        for x in range(image.width())
        for y in (0, 1, image.height() - 1, image.height() - 2)
        if image.pixelColor(x, y) == color
    )


@pytest.mark.parametrize("dark", [False, True], ids=["light", "dark"])
def test_focus_and_selection_are_visible_in_both_themes(
    window: Window, qtbot: QtBot, dark: bool
) -> None:
    colors = palette(dark)
    window.setPalette(colors)
    view = window.view
    _, reply = converse(view)
    highlight = colors.color(colors.ColorRole.Highlight)
    # Readable: selected text on the highlight, and the focus ring against the background.
    assert contrast(highlight, colors.color(colors.ColorRole.HighlightedText)) >= 4.5
    assert contrast(highlight, colors.color(colors.ColorRole.Base)) >= 3
    assert ring_pixels(reply, highlight) == 0
    view.focus_message(-1)
    assert reply.hasFocus()
    assert ring_pixels(reply, highlight) > reply.width()  # a frame drawn around it
    button = reply.buttons["copy"]
    qtbot.keyClick(reply, Qt.Key.Key_Tab)
    while not button.hasFocus():
        qtbot.keyClick(focused(), Qt.Key.Key_Tab)
    assert ring_pixels(button, highlight) > button.width()
    # The selection paints in the highlight colours.
    view.select_all()
    row = next(r for r in view.stack.rows if isinstance(r, TextRow))
    image = row.label.grab().toImage()
    assert any(
        image.pixelColor(x, y) == highlight
        for x in range(image.width())
        for y in range(image.height())
    )


def test_in_the_main_window_the_keyboard_reaches_the_messages_and_back(
    scripted_window: tuple[MainWindow, ScriptedBackend], qtbot: QtBot, loop: Loop
) -> None:
    window, _ = scripted_window
    qtbot.keyClicks(window.composer, "Hello?")
    qtbot.keyClick(window.composer, Qt.Key.Key_Return)
    run_until(loop, lambda: not window.session.generating)
    reply = [r for r in window.view.stack.rows if isinstance(r, HeaderRow)][-1]
    window.composer.setFocus()
    qtbot.waitUntil(window.composer.hasFocus)
    # From the composer, Shift+Tab goes back to the last message (past the window's buttons).
    for _ in range(6):
        qtbot.keyClick(focused(), Qt.Key.Key_Backtab)
        if focused() is reply:
            break
    assert focused() is reply
    qtbot.keyClick(reply, Qt.Key.Key_Up, Qt.KeyboardModifier.ControlModifier)
    prompt = next(r for r in window.view.stack.rows if isinstance(r, HeaderRow))
    assert focused() is prompt
    assert QAccessible.queryAccessibleInterface(prompt).text(Text.Name) == "You"
