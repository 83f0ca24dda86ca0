"""The window's floor: each kind of reply shows its text where it says, and only there."""

from __future__ import annotations

from pathlib import Path

from pytestqt.qtbot import QtBot

from app.bench.window_floor import LINE_CHARS, OneLine, shown_by
from app.flow.session import ChatSession, ModelState
from app.standins.scripted import ScriptedBackend, scripted_opener
from app.ui.window.main_window import MainWindow
from tests.support.loop import Loop, run_until

WORDS = [f" word{i}" for i in range(40)]


def test_each_kind_shows_the_reply_in_the_view_in_one_line_or_nowhere(
    qtbot: QtBot, loop: Loop, tmp_path: Path
) -> None:
    backend = ScriptedBackend(WORDS, path=tmp_path / "scripted.gguf")
    session = ChatSession(scripted_opener(backend))
    window = MainWindow(session)
    qtbot.addWidget(window)
    window.show()
    session.open_model(tmp_path / "scripted.gguf")
    run_until(loop, lambda: session.state is ModelState.READY)
    reply = "".join(WORDS)

    def ask(prompt: str) -> None:
        session.send(prompt)
        run_until(loop, lambda: not session.generating)

    with shown_by(window, "no_text"):
        ask("first")
        assert window.findChildren(OneLine) == []
    assert "first" in window.view.toPlainText()
    assert "word1" not in window.view.toPlainText()

    with shown_by(window, "one_line"):
        ask("second")
        (line,) = window.findChildren(OneLine)
        assert line.isVisible()
        assert line.text() == reply[-LINE_CHARS:]
        assert "word1" not in window.view.toPlainText()
        assert line.minimumSize() == line.maximumSize()  # fixed: a new text lays nothing out
    run_until(loop, lambda: window.findChildren(OneLine) == [])  # gone with its kind

    with shown_by(window, "app"):
        ask("third")
    assert window.view.toPlainText().count("word39") == 1  # the view shows replies again
    assert session.conversation.messages[-1].content == reply  # every kind kept the reply
