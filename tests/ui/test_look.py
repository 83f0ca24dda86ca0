"""The window's look in its main states, checked and kept as screenshots.

Each state is grabbed with ``QWidget.grab()`` into a folder kept after the run: the one named by
``FLOODGATE_SCREENSHOTS``, or ``screenshots/`` in pytest's temporary folder (its path is printed
with ``-s``). The states: an empty chat, a reply streaming (the send button is Stop), a long
reply with code, files attached, the model picker open, the dark theme, Chinese.

The replies come from the scripted backend: what is checked here is the window's look at a
chosen moment (mid-stream, for one), which a real model's timing cannot pin down. The model
picker lists the real bundled GGUF, described from its header.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import QPoint, QSize, Qt
from PySide6.QtGui import QColor, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication, QDialogButtonBox, QToolButton, QToolTip, QWidget
from pytestqt.qtbot import QtBot

from app.engine.model_card import read_model_card
from app.flow.session import ChatSession, ModelState
from app.standins.scripted import ScriptedBackend, scripted_opener
from app.store.paths import default_model_path
from app.store.settings import Settings
from app.ui.chat.rows.action_button import ActionButton
from app.ui.chat.rows.header import HeaderRow
from app.ui.chat.rows.text import TextRow
from app.ui.dialogs.settings_dialog import SettingsDialog
from app.ui.look import icons
from app.ui.look.language import Languages
from app.ui.look.style import dialog_style_sheet, style_sheet
from app.ui.look.theme import palette
from app.ui.window.main_window import MainWindow
from tests.support.loop import Loop, run_until

LONG_REPLY = [
    "Here is a small function that checks whether a word is a palindrome:\n\n",
    "```python\n",
    "def is_palindrome(word: str) -> bool:\n",
    '    """Whether ``word`` reads the same both ways (case ignored)."""\n',
    "    letters = [c.lower() for c in word if c.isalnum()]\n",
    "    return letters == letters[::-1]\n",
    "```\n\n",
    "It keeps only letters and digits, so *“Never odd or even”* counts too. ",
    "Some examples:\n\n",
    "- `is_palindrome('level')` is **True**\n",
    "- `is_palindrome('Floodgate')` is **False**\n\n",
    "The comparison walks the list once from each end, so it takes time in proportion ",
    "to the length of the word, and the list of letters takes as much memory again.",
]


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    """Where the screenshots go (kept as the run's artefacts)."""
    folder = Path(os.environ.get("FLOODGATE_SCREENSHOTS") or tmp_path / "screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def look_window(
    qtbot: QtBot, loop: Loop, qapp: QApplication
) -> Iterator[tuple[MainWindow, ScriptedBackend]]:
    backend = ScriptedBackend(LONG_REPLY, rate=400)
    session = ChatSession(scripted_opener(backend))
    original = QPalette(qapp.palette())
    qapp.setPalette(palette(False))
    window = MainWindow(session)
    qtbot.addWidget(window)
    window.resize(1200, 800)
    window.show()
    qtbot.waitExposed(window)
    session.open_model(Path("SmolLM2-135M-Instruct.gguf"))
    run_until(loop, lambda: session.state is ModelState.READY)
    yield window, backend
    loop.run_until_complete(session.close())
    qapp.setPalette(original)


def save(widget: QWidget, folder: Path, name: str) -> Path:
    for _ in range(3):  # pending layout requests (a composer that just grew) settle first
        QApplication.processEvents()
    path = folder / f"{name}.png"
    assert widget.grab().save(str(path))
    return path


def icon_buttons(window: MainWindow) -> list[QToolButton]:
    found = [b for b in window.findChildren(ActionButton) if b.isVisibleTo(window)]
    return [*found, window.send_button, window.attach_button]


def converse(window: MainWindow, loop: Loop, qtbot: QtBot, text: str) -> None:
    window.composer.setPlainText(text)  # keyClicks types ASCII only
    qtbot.keyClick(window.composer, Qt.Key.Key_Return)
    run_until(loop, lambda: not window.session.generating)
    run_until(loop, lambda: not window.rendering)


def test_empty_chat_offers_examples_and_names_the_model(
    look_window: tuple[MainWindow, ScriptedBackend], qtbot: QtBot, shots: Path
) -> None:
    window, _ = look_window
    empty = window.empty_chat
    assert empty.isVisible()
    assert empty.model_name.text() == "SmolLM2-135M-Instruct"
    assert window.header.picker.text() == "SmolLM2-135M-Instruct"
    assert "4,096 tokens of context" in window.header.facts.text()
    assert window.header.title.text() == "New chat"
    save(window, shots, "empty-chat")
    qtbot.mouseClick(empty.examples[1], Qt.MouseButton.LeftButton)
    assert window.composer.toPlainText() == empty.examples[1].text()
    assert window.composer.hasFocus()


def test_send_turns_into_stop_while_a_reply_streams(
    look_window: tuple[MainWindow, ScriptedBackend], qtbot: QtBot, loop: Loop, shots: Path
) -> None:
    window, backend = look_window
    backend.rate = 4  # slow enough to grab it mid-stream
    send = window.send_button
    assert (send.text(), send.accessibleName()) == ("Send", "Send")
    assert "Enter" in send.toolTip()
    before = send.icon().cacheKey()
    qtbot.keyClicks(window.composer, "Write a palindrome checker in Python.")
    qtbot.mouseClick(send, Qt.MouseButton.LeftButton)
    run_until(loop, lambda: "function" in window.view.toPlainText())
    assert (send.text(), send.accessibleName()) == ("Stop", "Stop")
    assert "Esc" in send.toolTip()
    assert send.icon().cacheKey() != before  # the square, not the arrow
    assert not window.empty_chat.isVisible()
    save(window, shots, "streaming-stop")
    qtbot.keyClick(window.composer, Qt.Key.Key_Escape)
    run_until(loop, lambda: not window.session.generating)
    assert send.text() == "Send"
    assert window.session.conversation.messages[-1].status == "stopped"


def test_a_long_reply_with_code_and_its_icon_buttons(
    look_window: tuple[MainWindow, ScriptedBackend], qtbot: QtBot, loop: Loop, shots: Path
) -> None:
    window, _ = look_window
    converse(window, loop, qtbot, "Write a palindrome checker in Python.")
    rendered = set(icons.cached())
    converse(window, loop, qtbot, "And once more, please.")
    # A second reply's buttons draw from the icons rendered for the first: none drawn again.
    assert set(icons.cached()) == rendered
    save(window, shots, "long-reply-code")
    headers = [r for r in window.view.stack.rows if isinstance(r, HeaderRow)]
    prompt, reply = headers[-2], headers[-1]
    # The prompt's card is on the right, the reply runs from the left margin.
    card = next(r for r in window.view.stack.rows if isinstance(r, TextRow) and r.role == "user")
    assert card.label.x() > card.width() // 5
    answer = next(r for r in window.view.stack.rows if isinstance(r, TextRow) and r.role == "reply")
    assert answer.label.x() < card.label.x()
    assert prompt.buttons["edit"].x() > reply.buttons["copy"].x() // 3
    # Every icon button says what it does: a name for a screen reader, a tooltip for the eye.
    for button in icon_buttons(window):
        assert button.accessibleName().strip(), button.objectName()
        assert button.toolTip().strip(), button.accessibleName()
    assert not reply.buttons["copy"].icon().isNull()
    assert reply.buttons["copy"].toolButtonStyle() == Qt.ToolButtonStyle.ToolButtonIconOnly
    # The actions share the line of the speaker's name: none takes a line of its own.
    for key in ("copy", "regenerate"):
        assert reply.buttons[key].geometry().bottom() <= reply.height()
    # Long lines stop at the reading width on a wide window (the rows are centred in it).
    assert window.view.stack.width() < window.view.viewport().width()
    # The keyboard brings up a button's tooltip as hovering does.
    window.view.focus_message(-1)
    qtbot.keyClick(reply, Qt.Key.Key_Tab)
    focused = QApplication.focusWidget()
    assert isinstance(focused, ActionButton)
    qtbot.waitUntil(QToolTip.isVisible)
    assert QToolTip.text() == focused.toolTip()
    # The title is the conversation's.
    assert window.header.title.text() == window.session.conversation.title != ""
    # Edit puts the prompt back into the composer, which grows to hold it, under its banner.
    one_line = window.composer.height()
    qtbot.mouseClick(prompt.buttons["edit"], Qt.MouseButton.LeftButton)
    window.composer.appendPlainText("\n".join(f"Line {i}" for i in range(3)))
    assert window.edit_banner.isVisible()
    qtbot.waitUntil(lambda: window.composer.height() > one_line)  # laid out on the next turn
    save(window, shots, "editing")


def drawn(header: HeaderRow) -> dict[str, bool]:
    """Which of a header's actions are drawn (all are there, and take clicks, either way)."""
    return {
        key: button.drawn
        for key, button in header.buttons.items()
        if isinstance(button, ActionButton) and key in ("copy", "edit", "regenerate")
    }


def test_message_actions_show_on_hover_on_keyboard_focus_and_on_the_last_reply(
    look_window: tuple[MainWindow, ScriptedBackend], qtbot: QtBot, loop: Loop, shots: Path
) -> None:
    window, _ = look_window
    converse(window, loop, qtbot, "Write a palindrome checker in Python.")
    converse(window, loop, qtbot, "And once more, please.")
    view = window.view
    rows = view.stack.rows
    headers = [r for r in rows if isinstance(r, HeaderRow)]
    prompt, reply, last_prompt, last_reply = headers
    qtbot.mouseMove(window.composer)  # the pointer away from the conversation
    QApplication.processEvents()
    # At rest, only the last reply's actions are drawn: the rest reads as text.
    assert drawn(last_reply) == {"copy": True, "regenerate": True}
    for header in (prompt, reply, last_prompt):
        assert not any(drawn(header).values()), header.speaker
    assert prompt.buttons["edit"].isVisible()  # there, for a screen reader, and clickable
    hidden = reply.grab().toImage()
    # The pointer on a reply's text draws that message's actions, and only that message's.
    view.ensureWidgetVisible(reply)
    body = rows[rows.index(reply) + 1]
    qtbot.mouseMove(body, body.rect().center())
    qtbot.waitUntil(lambda: drawn(reply)["copy"])
    assert not drawn(prompt)["copy"]
    assert reply.grab().toImage() != hidden  # the buttons are painted now
    save(window, shots, "hover-actions")
    card = rows[rows.index(prompt) + 1]
    view.ensureWidgetVisible(card)
    qtbot.mouseMove(card, card.rect().center())
    qtbot.waitUntil(lambda: drawn(prompt)["edit"])
    assert not drawn(reply)["copy"]
    qtbot.mouseMove(window.composer)  # out of the conversation: none again
    qtbot.waitUntil(lambda: not drawn(prompt)["edit"])
    # The keyboard focus on a message draws its actions, as hovering does.
    view.focus_message(0)
    assert drawn(prompt) == {"copy": True, "edit": True}
    qtbot.keyClick(prompt, Qt.Key.Key_Tab)
    assert QApplication.focusWidget() in prompt.buttons.values()
    assert drawn(prompt)["copy"]
    window.composer.setFocus()
    assert not drawn(prompt)["copy"]
    # A new reply takes the last reply's place.
    converse(window, loop, qtbot, "Thanks.")
    assert not drawn(last_reply)["copy"]
    newest = [r for r in view.stack.rows if isinstance(r, HeaderRow)][-1]
    assert drawn(newest)["copy"]


def test_files_attached_show_as_chips_in_the_composer(
    look_window: tuple[MainWindow, ScriptedBackend], tmp_path: Path, loop: Loop, shots: Path
) -> None:
    window, _ = look_window
    notes = tmp_path / "meeting notes.txt"
    notes.write_text("Agenda: the launch, the budget, the next steps.\n" * 40)
    window.attach([notes])
    run_until(loop, lambda: window.tray.attachment("meeting notes.txt") is not None)
    window.composer.setPlainText("Summarize these notes in three bullet points.")
    assert window.tray.isVisible()
    assert window.composer_box.isAncestorOf(window.tray)
    assert window.tray.y() < window.composer.y()  # the chips above the text
    save(window, shots, "attachments")


@pytest.mark.qt_log_ignore("^This plugin does not support grabbing the keyboard$")  # offscreen
def test_the_model_picker_lists_the_library_and_switches_mid_conversation(
    look_window: tuple[MainWindow, ScriptedBackend],
    qtbot: QtBot,
    loop: Loop,
    qapp: QApplication,
    shots: Path,
) -> None:
    window, _ = look_window
    converse(window, loop, qtbot, "Hello there.")
    header = window.header
    card = read_model_card(default_model_path())
    header.add_card(card)
    header.menu.popup(header.picker.mapToGlobal(QPoint(0, header.picker.height())))
    qtbot.waitUntil(header.menu.isVisible)
    texts = [a.text() for a in header.menu.actions()]
    assert any(t.startswith(card.name) for t in texts)
    assert "Open model…" in texts
    assert "Connect to a server…" in texts
    save(window, shots, "model-picker")
    save(header.menu, shots, "model-picker-menu")
    qapp.setPalette(palette(True))
    qtbot.waitUntil(lambda: window.header.styleSheet() == style_sheet(palette(True)))
    save(header.menu, shots, "model-picker-menu-dark")
    qapp.setPalette(palette(False))
    chosen = next(a for a in header.menu.actions() if a.text().startswith(card.name))
    conversation = window.session.conversation.id
    chosen.trigger()
    header.menu.hide()
    run_until(
        loop,
        lambda: (
            window.session.model is not None
            and window.session.model.path == card.path
            and window.session.state is ModelState.READY
        ),
    )
    assert window.session.conversation.id == conversation  # the chat goes on with it
    assert header.picker.text() == window.session.model.name
    assert "MB" in header.facts.text()


def test_dialogs_follow_the_theme_with_the_windows_fields_and_buttons(
    look_window: tuple[MainWindow, ScriptedBackend], qtbot: QtBot, qapp: QApplication, shots: Path
) -> None:
    window, _ = look_window
    dialog = SettingsDialog(Settings(), window)
    dialog.show()
    qtbot.waitExposed(dialog)
    assert dialog.styleSheet() == dialog_style_sheet(palette(False))
    assert "border-radius" in dialog.styleSheet()
    box = dialog.findChild(QDialogButtonBox)
    assert box is not None
    assert [b.icon().isNull() for b in box.buttons()] == [True] * len(box.buttons())
    ok = box.button(QDialogButtonBox.StandardButton.Ok)
    assert ok.isDefault()  # drawn in the accent colour, as the composer's send button
    save(dialog, shots, "settings")
    qapp.setPalette(palette(True))
    try:
        qtbot.waitUntil(lambda: dialog.styleSheet() == dialog_style_sheet(palette(True)))
        save(dialog, shots, "settings-dark")
    finally:
        qapp.setPalette(palette(False))
    qtbot.waitUntil(lambda: dialog.styleSheet() == dialog_style_sheet(palette(False)))
    dialog.close()


def test_icons_are_drawn_from_the_svg_at_the_screens_scale(qapp: QApplication) -> None:
    for scale in (1.0, 1.5, 2.0):
        pixmap = icons.icon("copy").pixmap(QSize(16, 16), scale)
        assert pixmap.devicePixelRatio() == scale
        assert pixmap.width() == round(16 * scale)  # as many pixels as the screen has
    # Two theme colours, two renderings; the same colour again, the same pixmap.
    dark = icons.render("copy", QSize(16, 16), 2.0, QColor("#e8eaed"))
    light = icons.render("copy", QSize(16, 16), 2.0, QColor("#1b1b1b"))
    assert dark.cacheKey() != light.cacheKey()
    assert icons.render("copy", QSize(16, 16), 2.0, QColor("#e8eaed")).cacheKey() == dark.cacheKey()


def test_dark_theme_styles_the_chrome_and_tints_the_icons(
    look_window: tuple[MainWindow, ScriptedBackend],
    qtbot: QtBot,
    loop: Loop,
    qapp: QApplication,
    shots: Path,
) -> None:
    window, _ = look_window
    converse(window, loop, qtbot, "Write a palindrome checker in Python.")
    dark = palette(True)
    qapp.setPalette(dark)
    qtbot.waitUntil(lambda: window.composer_box.styleSheet() == style_sheet(dark))
    save(window, shots, "dark")
    # The copy icon is drawn in the dark theme's light button text, not in black.
    copy = next(b for b in window.findChildren(ActionButton) if b.objectName() == "copyMessage")
    image = copy.icon().pixmap(16, 16).toImage()
    inked = [
        image.pixelColor(x, y)
        for x in range(image.width())
        for y in range(image.height())
        if image.pixelColor(x, y).alpha() > 200
    ]
    assert inked
    assert all(c.lightness() > 150 for c in inked)
    assert QColor(window.composer_box.palette().color(QPalette.ColorRole.Base)).lightness() < 100


def test_chinese_interface(
    look_window: tuple[MainWindow, ScriptedBackend],
    qtbot: QtBot,
    loop: Loop,
    qapp: QApplication,
    shots: Path,
) -> None:
    window, _ = look_window
    languages = Languages(qapp)
    try:
        assert languages.apply("zh_CN")
        qtbot.waitUntil(lambda: window.send_button.text() == "发送")
        assert window.header.title.text() == "新对话"
        assert (
            window.empty_chat.examples[0].text()
            != "Explain how a rainbow forms, in three sentences."
        )
        save(window, shots, "chinese-empty")
        converse(window, loop, qtbot, "写一个检查回文的 Python 函数。")
        save(window, shots, "chinese")
        reply = [r for r in window.view.stack.rows if isinstance(r, HeaderRow)][-1]
        assert reply.buttons["copy"].accessibleName() == "复制回复"
    finally:
        languages.apply("en")
    QGuiApplication.processEvents()
