"""The real main window, shown offscreen: opened over a session, or over a scripted model.

The ``scripted_window`` fixture is registered for every test in tests/conftest.py.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtWidgets import QAbstractButton
from pytestqt.qtbot import QtBot

from app.documents import Attachment
from app.flow.archive import Archive
from app.flow.session import ChatSession, ModelState
from app.standins.scripted import ScriptedBackend, scripted_opener
from app.ui.window.main_window import MainWindow
from tests.support.loop import Loop, run_until


def open_window(qtbot: QtBot, session: ChatSession) -> MainWindow:
    """The main window over ``session``, shown and exposed."""
    window = MainWindow(session)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    return window


@pytest.fixture
def scripted_window(qtbot: QtBot, loop: Loop) -> Iterator[tuple[MainWindow, ScriptedBackend]]:
    """The window over a scripted model that answers "Hello from the script.", ready."""
    backend = ScriptedBackend(["Hello", " from", " the", " script", "."], rate=100)
    session = ChatSession(scripted_opener(backend))
    window = open_window(qtbot, session)
    session.open_model(Path("scripted.gguf"))
    run_until(loop, lambda: session.state is ModelState.READY)
    yield window, backend
    loop.run_until_complete(session.close())


def scripted_session(loop: Loop, archive: Archive | None = None) -> ChatSession:
    """A session over a scripted model that answers "ok" at once, ready."""
    session = ChatSession(scripted_opener(ScriptedBackend(["ok"], rate=1000)), archive=archive)
    session.open_model(Path("scripted.gguf"))
    run_until(loop, lambda: session.state is ModelState.READY)
    return session


@contextlib.contextmanager
def sent_and_reopened(
    qtbot: QtBot, loop: Loop, history: Path, attachment: Attachment
) -> Iterator[tuple[MainWindow, list[dict[str, object]]]]:
    """``attachment`` sent alone as a prompt (to a scripted model) and kept in ``history``,
    then that conversation opened again in a new window over the file: the window, and the
    prompt's attachments as kept. Everything is closed when the block ends."""
    archive, _ = loop.run_until_complete(Archive.open(history))
    session = scripted_session(loop, archive)
    assert session.send("", [attachment])  # a picture or a sound alone is a prompt
    run_until(loop, lambda: not session.generating)
    conversation_id = session.conversation.id
    loop.run_until_complete(session.close())
    loop.run_until_complete(archive.flush())
    loop.run_until_complete(archive.close())
    archive, _ = loop.run_until_complete(Archive.open(history))
    again = scripted_session(loop, archive)
    window = open_window(qtbot, again)
    try:
        assert loop.run_until_complete(again.open_conversation(conversation_id))
        yield window, again.conversation.messages[0].attachments
    finally:
        loop.run_until_complete(again.close())
        loop.run_until_complete(archive.close())


def card_chips(window: MainWindow) -> list[QAbstractButton]:
    """The attachment chips shown on the conversation's prompt cards."""
    found = window.findChildren(QAbstractButton, "attachmentChip")
    return [chip for chip in found if chip.isVisible()]
