"""The real window, offscreen, driven by keyboard and mouse as a user would."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import QCoreApplication, QEvent, QObject, Qt
from pytestqt.qtbot import QtBot
from typing_extensions import override

from app.engine import (
    ChatMessage,
    EngineOptions,
    GenerationReport,
    GenerationSettings,
    StopSignal,
)
from app.engine.llama import open_llama
from app.flow.session import ChatSession, ModelState
from app.standins.scripted import ScriptedBackend, scripted_opener
from app.ui.window.main_window import MainWindow
from tests.support.loop import Loop, run_for, run_until
from tests.support.window import open_window


@pytest.fixture
def llama_session(loop: Loop) -> Iterator[ChatSession]:
    session = ChatSession(
        open_llama,
        options=EngineOptions(n_threads=2),
        settings=GenerationSettings(temperature=0.0, max_tokens=400),
    )
    yield session
    loop.run_until_complete(session.close())


def test_window_starts_ready_to_type(
    scripted_window: tuple[MainWindow, ScriptedBackend], qtbot: QtBot
) -> None:
    window, _ = scripted_window
    assert window.windowTitle().startswith("Floodgate")
    qtbot.waitUntil(window.composer.hasFocus)
    assert window.send_button.text() == "Send"
    assert "ready" in window.state_label.text()


def test_enter_sends_and_shift_enter_adds_a_line(
    scripted_window: tuple[MainWindow, ScriptedBackend], qtbot: QtBot, loop: Loop
) -> None:
    window, backend = scripted_window
    qtbot.keyClicks(window.composer, "first line")
    qtbot.keyClick(window.composer, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    qtbot.keyClicks(window.composer, "second line")
    assert window.composer.toPlainText() == "first line\nsecond line"
    qtbot.keyClick(window.composer, Qt.Key.Key_Return)
    assert window.composer.toPlainText() == ""
    assert window.send_button.text() == "Stop"
    run_until(loop, lambda: not window.session.generating)
    assert backend.received[-1][-1]["content"] == "first line\nsecond line"
    text = window.view.toPlainText()
    assert "first line\nsecond line" in text
    assert "Hello from the script." in text
    assert window.send_button.text() == "Send"


def test_empty_prompt_is_not_sent(
    scripted_window: tuple[MainWindow, ScriptedBackend], qtbot: QtBot
) -> None:
    window, backend = scripted_window
    qtbot.keyClicks(window.composer, "   ")
    qtbot.keyClick(window.composer, Qt.Key.Key_Return)
    assert backend.received == []
    assert not window.session.generating
    assert window.composer.toPlainText() == "   "  # what the user typed stays


def test_view_follows_the_reply_until_the_user_scrolls_up(
    scripted_window: tuple[MainWindow, ScriptedBackend], qtbot: QtBot
) -> None:
    window, _ = scripted_window
    view = window.view
    bar = view.verticalScrollBar()
    view.begin_reply()
    for i in range(200):
        view.append_to_reply(f"line {i}\n")
    assert bar.maximum() > 0
    assert bar.value() == bar.maximum()  # pinned: followed the text down
    bar.setValue(0)  # the user scrolls up to read
    view.append_to_reply("more\n" * 20)
    assert bar.value() == 0
    assert not view.pinned
    bar.setValue(bar.maximum())  # and back down
    view.append_to_reply("even more\n" * 20)
    assert bar.value() == bar.maximum()
    assert view.pinned


@pytest.mark.parametrize(
    ("make_path", "expected"),
    [
        (lambda d: d / "missing.gguf", "does not exist"),
        (lambda d: d, "is a folder, not a model file"),
        (lambda d: _write(d / "notes.gguf", b"just some text, not a model"), "is not a GGUF model"),
    ],
    ids=["missing", "directory", "not-gguf"],
)
def test_bad_model_path_gets_a_sentence_in_the_window(
    qtbot: QtBot, loop: Loop, tmp_path: Path, make_path: object, expected: str
) -> None:
    session = ChatSession(open_llama)
    window = open_window(qtbot, session)
    path = make_path(tmp_path)  # type: ignore[operator]
    window.open_model(path)
    run_until(loop, lambda: session.state is ModelState.ERROR)
    assert expected in window.state_label.text()
    assert expected in window.view.toPlainText()
    loop.run_until_complete(session.close())


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


@pytest.mark.model
def test_truncated_model_then_a_good_one_and_the_user_carries_on(
    qtbot: QtBot, loop: Loop, tmp_path: Path, model_path: Path, llama_session: ChatSession
) -> None:
    truncated = tmp_path / "truncated.gguf"
    with model_path.open("rb") as src:
        truncated.write_bytes(src.read(4 << 20))
    window = open_window(qtbot, llama_session)
    window.open_model(truncated)
    run_until(loop, lambda: llama_session.state is ModelState.ERROR)
    assert "could not be loaded" in window.view.toPlainText()
    # A prompt sent now is not lost: it comes back to the composer.
    qtbot.keyClicks(window.composer, "Are you there?")
    qtbot.keyClick(window.composer, Qt.Key.Key_Return)
    run_until(loop, lambda: not llama_session.generating)
    assert window.composer.toPlainText() == "Are you there?"
    assert "No model is loaded" in window.view.toPlainText()
    # Open the real model; the same prompt now gets an answer.
    window.open_model(model_path)
    run_until(loop, lambda: llama_session.state is ModelState.READY)
    qtbot.keyClick(window.composer, Qt.Key.Key_Return)
    run_until(loop, lambda: not llama_session.generating, timeout=60)
    assert llama_session.conversation.messages[-1].status in ("complete", "length")
    assert llama_session.conversation.messages[-1].content


@pytest.fixture
def llama_window(
    qtbot: QtBot, loop: Loop, model_path: Path, llama_session: ChatSession
) -> MainWindow:
    """The window on the real bundled model, loaded and ready."""
    window = open_window(qtbot, llama_session)
    window.open_model(model_path)
    run_until(loop, lambda: llama_session.state is ModelState.READY)
    return window


@pytest.mark.model
def test_type_stream_and_stop_with_escape(
    qtbot: QtBot, loop: Loop, llama_window: MainWindow, llama_session: ChatSession
) -> None:
    window = llama_window
    qtbot.keyClicks(window.composer, "Write a long story about a dragon.")
    qtbot.keyClick(window.composer, Qt.Key.Key_Return)
    run_until(loop, lambda: window.view.updates >= 10, timeout=60)
    assert window.send_button.text() == "Stop"
    qtbot.keyClick(window.composer, Qt.Key.Key_Escape)  # where the focus is while it streams
    qtbot.keyClick(window.composer, Qt.Key.Key_Escape)  # pressed twice: harmless
    run_until(loop, lambda: not llama_session.generating)
    reply = llama_session.conversation.messages[-1]
    assert reply.status == "stopped"
    assert reply.content
    assert reply.content in window.view.toPlainText()
    assert "Stopped." in window.view.toPlainText()
    assert window.send_button.text() == "Send"
    assert llama_session.metrics.stop_latency_ms.count == 1

    # The stopped reply is part of the history of the next prompt, which completes.
    qtbot.keyClicks(window.composer, "Thank you.")
    qtbot.keyClick(window.composer, Qt.Key.Key_Return)
    run_until(loop, lambda: not llama_session.generating, timeout=60)
    history = [(m.role, m.status) for m in llama_session.conversation.messages]
    assert history == [
        ("user", "complete"),
        ("assistant", "stopped"),
        ("user", "complete"),
        ("assistant", history[-1][1]),
    ]
    assert history[-1][1] in ("complete", "length")


@pytest.mark.model
def test_stop_during_a_long_prompt_and_the_next_reply_is_right(
    qtbot: QtBot,
    loop: Loop,
    model_path: Path,
    llama_window: MainWindow,
    llama_session: ChatSession,
) -> None:
    window = llama_window
    window.composer.setPlainText("The quick brown fox jumps over the lazy dog. " * 150)
    window.send_button.click()
    run_until(loop, lambda: llama_session.state is ModelState.GENERATING)
    run_for(loop, 0.3)  # well inside the ~14 s of prompt processing
    assert window.send_button.text() == "Stop"
    window.send_button.click()
    run_until(loop, lambda: not llama_session.generating, timeout=3)
    assert llama_session.conversation.messages[-1].status == "stopped"
    assert llama_session.conversation.messages[-1].content == ""

    qtbot.keyClicks(window.composer, "What is the capital of France?")
    qtbot.keyClick(window.composer, Qt.Key.Key_Return)
    run_until(loop, lambda: not llama_session.generating, timeout=60)
    answer = llama_session.conversation.messages[-1].content
    sent = [ChatMessage(role=r, content=c) for r, c in llama_session.conversation.history()[:-1]]
    fresh = open_llama(model_path, EngineOptions(n_threads=2))
    try:
        report = GenerationReport()
        expected = "".join(fresh.stream_reply(sent, llama_session.settings, StopSignal(), report))
    finally:
        fresh.close()
    assert answer == expected


def test_escape_outside_the_composer_stops_too(
    scripted_window: tuple[MainWindow, ScriptedBackend], qtbot: QtBot, loop: Loop
) -> None:
    window, backend = scripted_window
    backend.enqueue(["word "] * 10_000)
    qtbot.keyClicks(window.composer, "go")
    qtbot.keyClick(window.composer, Qt.Key.Key_Return)
    run_until(loop, lambda: window.view.updates > 2)
    window.view.setFocus()
    qtbot.keyClick(window.view, Qt.Key.Key_Escape)
    run_until(loop, lambda: not window.session.generating)
    assert window.session.conversation.messages[-1].status == "stopped"


def test_diagnostics_panel_toggles_and_shows_the_flow(
    scripted_window: tuple[MainWindow, ScriptedBackend], qtbot: QtBot, loop: Loop
) -> None:
    window, backend = scripted_window
    assert not window.diagnostics_dock.isVisible()
    window.diagnostics_dock.toggleViewAction().trigger()
    assert window.diagnostics_dock.isVisible()
    backend.enqueue(["tok "] * 300)
    qtbot.keyClicks(window.composer, "go")
    qtbot.keyClick(window.composer, Qt.Key.Key_Return)
    run_until(loop, lambda: not window.session.generating)
    values = {k: label.text() for k, label in window.diagnostics.values.items()}
    assert values["queue"].endswith(f"/ {window.session.queue_bound}")
    assert values["tokens"] != "–"  # noqa: RUF001
    assert values["frame"].endswith("ms")


def test_prompt_processing_is_shown_in_the_reply_and_the_status_line(
    qtbot: QtBot, loop: Loop
) -> None:
    backend = ScriptedBackend(["Done", "."], rate=100, prefill_seconds=1.5)
    session = ChatSession(scripted_opener(backend))
    window = open_window(qtbot, session)
    session.open_model(Path("scripted.gguf"))
    run_until(loop, lambda: session.state is ModelState.READY)
    window.composer.setPlainText("one two three four five six seven eight")
    window.send()
    run_until(loop, lambda: "Reading the conversation" in window.view.toPlainText())
    assert "Reading the conversation" in window.state_label.text()
    assert "/ 8 tokens" in window.view.toPlainText()
    run_until(loop, lambda: not session.generating)
    text = window.view.toPlainText()
    assert "Reading the conversation" not in text  # gone once the reply came
    assert "Done." in text
    assert "Reading the conversation" not in window.state_label.text()


def test_a_prompt_processed_at_once_says_nothing_of_it(qtbot: QtBot, loop: Loop) -> None:
    backend = ScriptedBackend(["Quick", "."], rate=100, prefill_seconds=0.05)
    session = ChatSession(scripted_opener(backend))
    said: list[str] = []
    session.prompt_progress.connect(said.append)
    window = open_window(qtbot, session)
    session.open_model(Path("scripted.gguf"))
    run_until(loop, lambda: session.state is ModelState.READY)
    window.composer.setPlainText("hello there")
    window.send()
    run_until(loop, lambda: not session.generating)
    assert [text for text in said if text] == []


class _LayoutRequests(QObject):
    """Counts the layout requests an object receives."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    @override
    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.LayoutRequest:
            self.count += 1
        return False


def test_new_figures_do_not_lay_the_window_out_again(
    scripted_window: tuple[MainWindow, ScriptedBackend],
) -> None:
    # The figures change five times a second while a reply streams; each layout of the status
    # bar and the window was 0.2 ms of the UI thread, on a machine whose cores all decode.
    window, _ = scripted_window
    label, metrics = window.status_line.figures_label, window.session.metrics
    requests = _LayoutRequests()
    window.statusBar().installEventFilter(requests)
    metrics.queue_bound = 64

    def show(depth: int) -> None:
        metrics.queue_depth = depth
        window.status_line.show_figures()
        QCoreApplication.sendPostedEvents()
        assert label.width() >= label.sizeHint().width()  # the whole text is shown

    show(64)
    before = requests.count
    for depth in (1, 7, 0, 12, 3):  # narrower text than the first
        show(depth)
    assert requests.count == before
    metrics.queue_bound = 100_000
    show(99_999)  # wider: the label grows once
    assert requests.count == before + 1
