"""Shared fixtures: a real qasync event loop, the bundled model, and helpers to wait on it."""

from __future__ import annotations

import asyncio
import gc
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from app.flow.event_loop import finalize_async_generators_on
from app.flow.session import ChatSession
from app.standins.fake_hub import FakeHub
from app.store.paths import DEFAULT_MODEL
from app.ui.chat.chat_view import ChatView
from tests.support import GPU_TESTS
from tests.support.loop import Loop, TestLoop

# tests/engine/gpu/ needs the Vulkan build first on the path: collected only in that process.
collect_ignore = [] if os.environ.get(GPU_TESTS) else ["engine/gpu"]

# Fixtures kept in tests/support/, for tests in every folder: memory_keyring (keyring.py) and
# scripted_window (window.py). tests/server/conftest.py adds the API client for its folder.
pytest_plugins = ["tests.support.keyring", "tests.support.window"]


@pytest.fixture(autouse=True)
def floodgate_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own data directory; nothing touches the user's real one."""
    home = tmp_path / "floodgate-home"
    monkeypatch.setenv("FLOODGATE_HOME", str(home))
    return home


@pytest.fixture(autouse=True)
def collect_on_the_main_thread() -> Iterator[None]:
    """Free a test's garbage here, on the main thread, when the test ends.

    Otherwise a Qt object a test left behind (a dialog, a timer) may be collected later by
    whichever thread happens to trigger the garbage collector, such as a test's worker
    thread, and Qt objects must be destroyed on their own thread.
    """
    yield
    gc.unfreeze()  # what the view kept out of the collector's scans (keep_built) too
    gc.collect()


@pytest.fixture
def loop(qapp: QApplication, monkeypatch: pytest.MonkeyPatch) -> Iterator[Loop]:
    """A qasync loop on the test's QApplication: Qt and asyncio in one loop, as in the app.

    Every :class:`ChatSession` made during the test is closed before the loop is, whether the
    test passed or failed half-way, so no worker thread outlives its test.
    """
    event_loop = TestLoop(qapp)
    asyncio.set_event_loop(event_loop)
    hooks = finalize_async_generators_on(event_loop)
    sessions: list[ChatSession] = []
    made = ChatSession.__init__

    def tracked(self: ChatSession, *args: Any, **kwargs: Any) -> None:
        made(self, *args, **kwargs)
        sessions.append(self)

    monkeypatch.setattr(ChatSession, "__init__", tracked)
    try:
        yield event_loop
    finally:
        for session in sessions:
            event_loop.run_until_complete(session.close())
        event_loop.run_until_complete(asyncio.sleep(0))
        event_loop.close()
        asyncio.set_event_loop(None)
        sys.set_asyncgen_hooks(*hooks)


@pytest.fixture
def view(qtbot: QtBot) -> ChatView:
    """A chat view shown offscreen at 600 x 500, as the view tests use it."""
    view = ChatView()
    qtbot.addWidget(view)
    view.resize(600, 500)
    view.show()
    qtbot.waitExposed(view)
    return view


@pytest.fixture(scope="session")
def model_path() -> Path:
    """The bundled default model (``make test`` puts it in models/)."""
    if not DEFAULT_MODEL.is_file():
        pytest.fail(f"{DEFAULT_MODEL} is missing: run `make test`, which fetches it")
    return DEFAULT_MODEL


@pytest.fixture
def fake_hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    """The fake Hugging Face Hub on 127.0.0.1 (pages of 3), named by ``HF_ENDPOINT``.

    No real Hub is ever asked: ``HF_ENDPOINT`` points at it, and no token of the machine's
    is sent (``HF_TOKEN`` is cleared).
    """
    with FakeHub(page_size=3) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        monkeypatch.delenv("HF_TOKEN", raising=False)
        yield hub
