"""Text from a model, a file, a server or a person is never shown as markup, anywhere."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QWidget
from pytestqt.qtbot import QtBot

from app.flow.session import ChatSession, ModelState
from app.standins.scripted import ScriptedBackend, scripted_opener
from app.ui.dialogs.remote_dialog import RemoteDialog
from app.ui.window.main_window import MainWindow
from tests.support.loop import Loop, run_until

HOSTILE = "<b>BOLD<img src=x><i>"
"""Markup without a slash, so it can be a file name too."""


def shows_markup(label: QLabel) -> bool:
    """Whether ``label`` would interpret its text as rich text."""
    if label.textFormat() == Qt.TextFormat.PlainText:
        return False
    # Rich or automatic format is fine only if the hostile text arrived escaped.
    return "<b>BOLD" in label.text()


def sweep(root: QWidget) -> list[str]:
    """Every label or tooltip under ``root`` that would render the hostile text as markup."""
    found = []
    for label in root.findChildren(QLabel):
        if shows_markup(label):
            found.append(f"{label.objectName() or type(label.parent()).__name__}: {label.text()}")
    for widget in [root, *root.findChildren(QWidget)]:
        tip = widget.toolTip()
        if "<b>BOLD" in tip:
            found.append(f"tooltip of {widget.objectName()}: {tip}")
    return found


def test_a_window_full_of_hostile_text_shows_none_of_it_as_markup(
    qtbot: QtBot, loop: Loop, tmp_path: Path
) -> None:
    reply = f"```{HOSTILE}\ncode\n```\n\n{HOSTILE} said the model\n"
    backend = ScriptedBackend([reply], path=tmp_path / f"{HOSTILE}.gguf")
    session = ChatSession(scripted_opener(backend))
    window = MainWindow(session)
    qtbot.addWidget(window)
    window.show()
    session.open_model(tmp_path / f"{HOSTILE}.gguf")  # the model's name comes from its file
    run_until(loop, lambda: session.state is ModelState.READY)
    session.send(f"{HOSTILE} from the user")
    run_until(loop, lambda: not session.generating)
    session.rename(session.conversation.id, f"{HOSTILE} title")
    window.view.add_note(f"server said: {HOSTILE}", error=True)
    dialog = RemoteDialog(parent=window)
    dialog.set_problem(f"The server answered 500: {HOSTILE}")
    qtbot.addWidget(dialog)
    assert HOSTILE in window.windowTitle()  # shown, as the text it is
    assert sweep(window) == []
    assert sweep(dialog) == []
    assert any(HOSTILE in label.text() for label in dialog.findChildren(QLabel))
