"""Selecting across the conversation as in a browser: real mouse and key events, offscreen."""

from __future__ import annotations

from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QGuiApplication, QWindow
from PySide6.QtTest import QTest
from pytestqt.qtbot import QtBot

from app.ui.chat.chat_view import ChatView
from app.ui.chat.rows.base import Row
from app.ui.chat.rows.code import CodeRow
from app.ui.chat.rows.header import HeaderRow
from app.ui.chat.rows.text import TextRow
from app.ui.chat.rows.text_block import TextBlock

PROMPT = "Hello there, model."
REPLY = (
    "First paragraph of the answer.\n\n"
    "Second paragraph, with **bold** words.\n\n"
    "```python\nprint('hi')\nprint('bye')\n```\n\n"
    "Last paragraph."
)


def window(view: ChatView) -> QWindow:
    handle = view.window().windowHandle()
    assert handle is not None
    return handle


def char_point(block: TextBlock, position: int) -> QPoint:
    """Where character ``position`` of a text block is drawn, in the block's coordinates."""
    found = block.document.findBlock(position)
    layout = found.layout()
    inside = position - found.position()
    line = layout.lineForTextPosition(inside)
    x = line.cursorToX(inside)
    x = x[0] if isinstance(x, tuple) else x
    origin = layout.position()
    rect = block.contentsRect()
    return QPoint(
        round(rect.left() + origin.x() + x), round(rect.top() + origin.y() + line.y() + 3)
    )


def point(view: ChatView, row: Row, position: int) -> QPoint:
    """Where character ``position`` of a row's text is, in the window's coordinates."""
    block = row.text_block()
    assert block is not None
    view.ensureWidgetVisible(block, 0, 0)
    return block.mapTo(view.window(), char_point(block, position))


def drag(view: ChatView, start: QPoint, end: QPoint) -> None:
    QTest.mousePress(window(view), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, start)
    middle = QPoint((start.x() + end.x()) // 2, (start.y() + end.y()) // 2)
    QTest.mouseMove(window(view), middle)
    QTest.mouseMove(window(view), end)
    QTest.mouseRelease(window(view), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, end)


def converse(view: ChatView) -> None:
    view.add_user_message(PROMPT)
    view.add_reply("Model", REPLY)


def rows_of(view: ChatView, kind: type[Row]) -> list[Row]:
    return [r for r in view.stack.rows if isinstance(r, kind)]


def shown(row: Row) -> str:
    block = row.text_block()
    assert block is not None
    return block.plain_text()


def copy(view: ChatView, qtbot: QtBot) -> str:
    QGuiApplication.clipboard().clear()
    qtbot.keyClick(view.stack, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier)
    return QGuiApplication.clipboard().text()


def test_a_drag_selects_across_messages_and_blocks_and_copies_in_reading_order(
    view: ChatView, qtbot: QtBot
) -> None:
    view.resize(600, 900)  # everything on screen: the drag needs no scrolling
    converse(view)
    prompt = rows_of(view, TextRow)[0]
    (code,) = rows_of(view, CodeRow)
    header = rows_of(view, HeaderRow)[1]
    paragraphs = [r for r in rows_of(view, TextRow) if r is not prompt]
    drag(view, point(view, prompt, 6), point(view, code, 5))
    expected = (
        PROMPT[6:]
        + "\n\n"
        + "Model\n"
        + "First paragraph of the answer.\n\n"
        + "Second paragraph, with bold words.\n\n"
        + "print"
    )
    assert view.selected_text() == expected
    # Each row in between paints its share; the rows after the selection paint none.
    assert prompt.label.selection == (6, len(PROMPT))
    assert header.text_block().selection == (0, len("Model"))
    assert paragraphs[0].label.selection == (0, len(shown(paragraphs[0])))
    assert code.text_block().selection == (0, 5)
    assert paragraphs[-1].label.selection == (0, 0)
    assert copy(view, qtbot) == expected


def test_shift_click_extends_and_a_double_click_selects_a_word(
    view: ChatView, qtbot: QtBot
) -> None:
    view.resize(600, 900)
    converse(view)
    first, second = rows_of(view, TextRow)[1:3]
    drag(view, point(view, first, 0), point(view, first, 5))
    assert view.selected_text() == "First"
    QTest.mouseClick(
        window(view),
        Qt.MouseButton.LeftButton,
        Qt.KeyboardModifier.ShiftModifier,
        point(view, second, 6),
    )
    assert view.selected_text() == "First paragraph of the answer.\n\nSecond"
    QTest.mouseDClick(
        window(view),
        Qt.MouseButton.LeftButton,
        Qt.KeyboardModifier.NoModifier,
        point(view, second, 9),
    )
    assert view.selected_text() == "paragraph"


def test_ctrl_a_selects_the_conversation_or_the_focused_message(
    view: ChatView, qtbot: QtBot
) -> None:
    converse(view)
    view.add_user_message("And a second question.")
    view.add_reply("Model", "A second answer.")
    QTest.mouseClick(
        window(view),
        Qt.MouseButton.LeftButton,
        Qt.KeyboardModifier.NoModifier,
        point(view, view.stack.rows[-1], 2),
    )
    assert view.stack.hasFocus()
    qtbot.keyClick(view.stack, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    whole = view.selected_text()
    assert whole.startswith("You\n" + PROMPT + "\n\nModel\nFirst paragraph")
    assert whole.endswith("And a second question.\n\nModel\nA second answer.")
    assert "print('hi')\nprint('bye')" in whole
    assert copy(view, qtbot) == whole
    # With a message focused (Ctrl+Up from the conversation), Ctrl+A selects that message.
    qtbot.keyClick(view.stack, Qt.Key.Key_Up, Qt.KeyboardModifier.ControlModifier)
    focused = QGuiApplication.focusObject()
    assert isinstance(focused, HeaderRow)
    qtbot.keyClick(focused, Qt.Key.Key_Up, Qt.KeyboardModifier.ControlModifier)
    assert QGuiApplication.focusObject() is rows_of(view, HeaderRow)[2]
    qtbot.keyClick(rows_of(view, HeaderRow)[2], Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    assert view.selected_text() == "You\nAnd a second question."


def test_selecting_while_a_reply_streams_neither_jumps_nor_loses_the_selection(
    view: ChatView, qtbot: QtBot
) -> None:
    view.add_user_message(PROMPT)
    view.begin_reply("Model")
    view.append_to_reply("The first paragraph streams in.\n\nThen a second one")
    bar = view.verticalScrollBar()
    prompt = rows_of(view, TextRow)[0]
    answer = rows_of(view, TextRow)[1]
    press = point(view, prompt, 6)
    QTest.mousePress(window(view), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, press)
    QTest.mouseMove(window(view), point(view, answer, 3))
    top = bar.value()
    # Text keeps arriving while the button is held: many screens of it, and a code block
    # that replaces the open paragraph row.
    for i in range(60):
        view.append_to_reply(f" word{i}")
    view.append_to_reply("\n\n```\ncode\n```\n\n" + "More text. " * 400 + "\n\n- a\n- b\n")
    assert bar.maximum() > top  # the reply grew past the screen
    assert bar.value() == top  # the view did not follow it while the user selects
    QTest.mouseMove(window(view), point(view, answer, 9))
    QTest.mouseRelease(
        window(view),
        Qt.MouseButton.LeftButton,
        Qt.KeyboardModifier.NoModifier,
        point(view, answer, 9),
    )
    selected = PROMPT[6:] + "\n\nModel\nThe first"
    assert view.selected_text() == selected
    for i in range(40):
        view.append_to_reply(f"\n\nparagraph {i}")
    view.end_reply()
    assert bar.value() == top
    assert view.selected_text() == selected
    assert answer.label.selection == (0, 9)
    assert copy(view, qtbot) == selected


def test_a_click_on_a_link_follows_it_but_a_drag_from_it_selects(
    view: ChatView, qtbot: QtBot
) -> None:
    view.add_reply("Model", "Read [the docs](https://example.com/docs) first.")
    (row,) = rows_of(view, TextRow)
    opened: list[str] = []
    row.label.link_activated.disconnect()
    row.label.link_activated.connect(opened.append)
    on_link = point(view, row, 7)
    QTest.mouseClick(
        window(view), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, on_link
    )
    assert opened == ["https://example.com/docs"]
    assert view.selected_text() == ""
    drag(view, on_link, point(view, row, 13))
    assert opened == ["https://example.com/docs"]  # not followed again
    assert view.selected_text() == "e docs"


def test_code_keeps_its_copy_button_and_sideways_scroll(view: ChatView, qtbot: QtBot) -> None:
    long_line = "x = '" + "a" * 300 + "'"
    view.add_reply("Model", f"```python\n{long_line}\n```\n")
    (code,) = rows_of(view, CodeRow)
    assert isinstance(code, CodeRow)
    bar = code.scroll_bar()
    assert bar.maximum() > 0
    bar.setValue(bar.maximum())
    assert bar.value() == bar.maximum()
    qtbot.mouseClick(code.copy_button, Qt.MouseButton.LeftButton)
    assert QGuiApplication.clipboard().text() == long_line + "\n"
    # Selecting inside scrolled code selects the characters under the pointer.
    block = code.text_block()
    start = block.mapTo(view.window(), char_point(block, 301))
    end = block.mapTo(view.window(), char_point(block, 306))
    drag(view, start, end)
    assert view.selected_text() == "aaaa'"


def test_a_selected_row_that_a_streaming_reply_replaces_stays_selected(
    view: ChatView, qtbot: QtBot
) -> None:
    view.add_user_message(PROMPT)
    view.begin_reply("Model")
    view.append_to_reply("Intro.\n\n~~")  # "~~" is a paragraph for now
    prompt = rows_of(view, TextRow)[0]
    tail = view.stack.rows[-1]
    assert isinstance(tail, TextRow)
    drag(view, point(view, prompt, 6), point(view, tail, 1))
    assert view.selected_text().endswith("Intro.\n\n~")
    view.append_to_reply("~\nprint(1)\n")  # now it opens a code block: another kind of row
    (code,) = rows_of(view, CodeRow)
    assert view.stack.index_of(tail) == -1  # the paragraph row is gone
    assert code.text_block().selection == (0, 1)  # the new row paints its share at once
    assert view.selected_text().endswith("Intro.\n\np")
