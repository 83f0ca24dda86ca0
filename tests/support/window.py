"""The real main window, shown offscreen: opened over a session, or over a scripted model.

The ``scripted_window`` fixture is registered for every test in tests/conftest.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

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
