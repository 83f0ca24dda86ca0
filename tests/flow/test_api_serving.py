"""The local API server as the window drives it: on, off, moved, refused, a request stopped."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
from PySide6.QtGui import QGuiApplication
from pytestqt.qtbot import QtBot

from app.engine import GenerationReport, GenerationSettings, StopSignal
from app.flow.piece_queue import PieceQueue
from app.flow.preferences import PreferencesKeeper
from app.flow.requests import RequestBoard, ServedRequest
from app.flow.serving import ApiServing
from app.flow.session import ChatSession, ModelState
from app.flow.worker import ReplyJob
from app.serve import api_starter
from app.standins.scripted import ScriptedBackend, scripted_opener
from app.store.preferences import (
    API_SERVER_KEY_NAME,
    ApiServerPreferences,
    Preferences,
    load_preferences,
)
from app.store.preferences import save_preferences as save
from app.store.secrets import SERVICE
from app.ui.dialogs.api_server_dialog import ApiServerDialog
from app.ui.window.api_server_panel import SIDE_BY_SIDE_COLUMN, STATUS_COLUMN, ApiServerFace
from app.ui.window.main_window import MainWindow
from tests.support.keyring import MemoryKeyring
from tests.support.loop import Loop, run_until
from tests.support.ports import free_port
from tests.support.serving import wait_until


def session_with_model(loop: Loop, tmp_path: Path, backend: ScriptedBackend) -> ChatSession:
    model = tmp_path / "scripted.gguf"
    model.write_bytes(b"GGUF")
    session = ChatSession(scripted_opener(backend))
    session.open_model(model)
    run_until(loop, lambda: session.state is ModelState.READY)
    return session


def serving_for(session: ChatSession) -> ApiServing:
    return ApiServing(
        api_starter(session.host, lambda: session.settings, lambda: session.queue_bound)
    )


def test_off_by_default_then_on_then_off(loop: Loop, tmp_path: Path) -> None:
    session = session_with_model(loop, tmp_path, ScriptedBackend())
    serving = serving_for(session)
    changes: list[None] = []
    serving.changed.connect(lambda: changes.append(None))
    assert not Preferences().api_server.enabled
    loop.run_until_complete(serving.apply(Preferences().api_server, None))
    assert serving.address is None
    assert serving.status() == ""
    loop.run_until_complete(serving.apply(ApiServerPreferences(enabled=True, port=0), None))
    address = serving.address
    assert address is not None
    assert address.startswith("http://127.0.0.1:")
    assert "0 running, 0 queued" in serving.status()
    reply = httpx.post(
        address + "/chat/completions", json={"messages": [{"role": "user", "content": "Hi"}]}
    )
    assert reply.json()["choices"][0]["message"]["content"] == "Hello, world."
    wait_until(lambda: serving.board.recent()[0].outcome == "done")
    loop.run_until_complete(serving.apply(ApiServerPreferences(enabled=False), None))
    assert serving.address is None
    with pytest.raises(httpx.ConnectError):
        httpx.get(address + "/models")
    assert changes


def test_beyond_loopback_without_a_key_is_a_problem_not_a_crash(loop: Loop, tmp_path: Path) -> None:
    session = session_with_model(loop, tmp_path, ScriptedBackend())
    serving = serving_for(session)
    loop.run_until_complete(
        serving.apply(ApiServerPreferences(enabled=True, host="0.0.0.0", port=0), None)
    )
    assert serving.address is None
    assert "API key" in serving.problem()


def test_the_window_stops_a_request(loop: Loop, tmp_path: Path) -> None:
    backend = ScriptedBackend([f"{i} " for i in range(2000)], rate=200)
    session = session_with_model(loop, tmp_path, backend)
    serving = serving_for(session)
    loop.run_until_complete(serving.apply(ApiServerPreferences(enabled=True, port=0), None))
    address = serving.address
    assert address is not None
    chunks: list[str] = []
    body = {"messages": [{"role": "user", "content": "Count"}], "stream": True, "max_tokens": 5000}
    with httpx.stream("POST", address + "/chat/completions", json=body, timeout=30) as reply:
        for line in reply.iter_lines():
            chunks.append(line)
            if len(chunks) == 10:
                request = serving.board.recent()[-1]
                assert "1 running" in serving.status()
                assert serving.stop_request(request.id)
    wait_until(lambda: request.outcome is not None)
    assert request.outcome == "stopped"
    assert '"finish_reason": "cancelled"' in "\n".join(chunks)
    assert chunks[-2] == "data: [DONE]"
    loop.run_until_complete(serving.close())


def test_the_server_preferences_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "preferences.json"
    chosen = ApiServerPreferences(
        enabled=True, host="::1", port=9999, cors_origins="http://a.test\n\nhttp://b.test"
    )
    save(Preferences(api_server=chosen), path)
    kept = load_preferences(path).api_server
    assert kept == chosen
    assert kept.origins() == ("http://a.test", "http://b.test")
    path.write_text('{"api_server": {"enabled": "yes", "port": 70000, "host": 5}}')
    assert load_preferences(path).api_server == ApiServerPreferences()


# -- the window's side ---------------------------------------------------------------------------


def window_with_server(
    loop: Loop, tmp_path: Path, qtbot: QtBot, backend: ScriptedBackend
) -> tuple[MainWindow, ApiServerFace, PreferencesKeeper]:
    session = session_with_model(loop, tmp_path, backend)
    window = MainWindow(session)
    qtbot.addWidget(window)
    keeper = PreferencesKeeper(Preferences())
    face = ApiServerFace(window, serving_for(session), keeper)
    window.show()
    return window, face, keeper


def test_the_window_shows_the_address_lists_requests_and_stops_one(
    loop: Loop,
    tmp_path: Path,
    qtbot: QtBot,
    memory_keyring: MemoryKeyring,
) -> None:
    backend = ScriptedBackend([f"{i} " for i in range(2000)], rate=200)
    window, face, keeper = window_with_server(loop, tmp_path, qtbot, backend)
    loop.run_until_complete(face.start())
    assert not face.address_button.isVisible()  # off by default
    dialog = ApiServerDialog(keeper.preferences.api_server, "", window)
    chosen: list[tuple[ApiServerPreferences, str]] = []
    dialog.chosen.connect(lambda p, k: chosen.append((p, k)))
    dialog.enabled.setChecked(True)
    dialog.port.setValue(free_port())
    dialog.key.setText("k-1")
    dialog._accept()
    preferences, key = chosen[0]
    assert preferences.enabled
    assert key == "k-1"
    preferences = replace(preferences, port=0)  # any free port (the dialog's range starts at 1)

    async def choose() -> None:  # as the dialog's OK does, on the running loop
        face._choose(preferences, key)

    loop.run_until_complete(choose())
    run_until(loop, lambda: face.address_button.isVisible())
    address = face._serving.address
    assert address is not None
    assert address in face.address_button.text()
    assert memory_keyring.kept[(SERVICE, API_SERVER_KEY_NAME)] == "k-1"
    assert keeper.preferences.api_server.enabled
    face.copy_address()
    assert QGuiApplication.clipboard().text() == address

    face.dock.show()
    body = {"messages": [{"role": "user", "content": "Count"}], "stream": True, "max_tokens": 5000}
    lines: list[str] = []

    def client() -> None:
        with httpx.stream(
            "POST",
            address + "/chat/completions",
            json=body,
            headers={"Authorization": "Bearer k-1"},
            timeout=30,
        ) as reply:
            lines.extend(reply.iter_lines())

    thread = threading.Thread(target=client)
    thread.start()
    run_until(
        loop, lambda: face.panel.table.rowCount() == 1 and "1 running" in face.address_button.text()
    )
    assert face.panel.table.item(0, 2).text() == "/v1/chat/completions"
    assert face.panel.table.item(0, 3).text() == "streaming"
    face.panel.table.selectRow(0)
    assert face.panel.stop_selected()
    run_until(loop, lambda: not thread.is_alive())
    thread.join()
    run_until(loop, lambda: face.panel.table.item(0, 3).text() == "stopped")
    assert '"finish_reason": "cancelled"' in "\n".join(lines)
    loop.run_until_complete(face._serving.close())


# -- replies side by side ------------------------------------------------------------------------


def running_request(board: RequestBoard, **report: object) -> ServedRequest:
    """A request the worker took, its report filled as the batch fills it."""
    request = board.receive("127.0.0.1:5000", "/v1/chat/completions")
    stop = StopSignal()
    job = ReplyJob([], GenerationSettings(), stop, PieceQueue(8, stop), origin="server")
    job.began_at = time.perf_counter()
    now = time.perf_counter()
    job.report = GenerationReport(
        prompt_tokens=12, prefill_done=12, prefill_started_at=now - 2, prefill_ended_at=now - 1
    )
    for name, value in report.items():
        setattr(job.report, name, value)
    assert board.admit(request, job)
    return request


def test_a_paused_request_says_so_and_the_batch_counts_places() -> None:
    board = RequestBoard()
    paused = running_request(board, paused=True, batch_size=2, batch_peak=3, reply_tokens=40)
    streaming = running_request(board, batch_size=2, batch_peak=3, reply_tokens=40)
    ended = running_request(board, batch_size=3, batch_peak=3, reply_tokens=9)
    ended.job.report.compute_ended_at = time.perf_counter()  # type: ignore[union-attr]
    board.end(ended, "done")
    board.receive("127.0.0.1:5001", "/v1/chat/completions")  # not admitted: holds no place
    assert paused.status() == "paused"
    assert streaming.status() == "streaming"
    assert (paused.side_by_side(), ended.side_by_side()) == (2, 3)  # live; the most, once over
    window_reply = GenerationReport(prefill_started_at=time.perf_counter(), batch_size=2)
    use = board.batch_use(4, [window_reply, None])
    assert (use.places, use.in_use, use.paused, use.decoding) == (4, 3, 1, 2)
    assert str(use.sentence()) == (
        "Batch: 3 of 4 places in use · 2 decoding side by side · 1 paused (slow reader)"
    )
    paused.job.report.paused = False  # type: ignore[union-attr]  # its reader caught up
    assert paused.status() == "streaming"
    assert board.batch_use(4).sentence().fields["paused"] == 0


def test_the_panel_shows_each_stream_its_batch_and_a_paused_one(
    loop: Loop, tmp_path: Path, qtbot: QtBot
) -> None:
    window, face, _ = window_with_server(loop, tmp_path, qtbot, ScriptedBackend(parallel=4))
    face.dock.show()
    face.refresh()
    assert face.panel.batch.text() == "Batch: 0 of 4 places in use · 0 decoding side by side"
    board = face._serving.board
    running_request(board, batch_size=2, reply_tokens=30)
    running_request(board, paused=True, batch_size=2, reply_tokens=50)
    face.refresh()
    table = face.panel.table
    assert table.rowCount() == 2
    header = table.horizontalHeaderItem(SIDE_BY_SIDE_COLUMN)
    assert header is not None
    assert header.text() == "Side by side"
    newest, older = (table.item(0, STATUS_COLUMN), table.item(1, STATUS_COLUMN))
    assert newest is not None
    assert older is not None
    assert (newest.text(), older.text()) == ("paused", "streaming")
    assert "reads slower" in newest.toolTip()
    assert older.toolTip() == ""
    assert table.item(0, SIDE_BY_SIDE_COLUMN).text() == "2"
    assert float(table.item(0, 6).text()) > 0  # its tokens/s
    assert face.panel.batch.isVisible()
    assert face.panel.batch.text() == (
        "Batch: 2 of 4 places in use · 1 decoding side by side · 1 paused (slow reader)"
    )
    window.session.host.model = None  # no local model: nothing to say about a batch
    face.refresh()
    assert not face.panel.batch.isVisible()
    loop.run_until_complete(window.session.close())
