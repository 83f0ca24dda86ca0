"""The remote engine against real servers on loopback: llama-cpp-python's own, and broken ones."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from PySide6.QtCore import QPoint
from PySide6.QtWidgets import QLineEdit
from pytestqt.qtbot import QtBot

from app.engine import GenerationSettings
from app.engine.remote import RemoteEndpoint
from app.flow.session import ChatSession, ModelState
from app.standins.scripted import ScriptedBackend, scripted_opener
from app.store.preferences import KnownRemote, Preferences
from app.store.secrets import save_api_key
from app.ui.dialogs.remote_dialog import RemoteDialog
from app.ui.window.app_dialogs import AppDialogs
from app.ui.window.main_window import MainWindow
from tests.support.keyring import MemoryKeyring
from tests.support.loop import Loop, run_until
from tests.support.ports import free_port
from tests.support.preferences import Saved

KEY = "floodgate-test-key"
GREEDY = GenerationSettings(temperature=0.0, max_tokens=48, seed=1)


def start_server(model_path: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "llama_cpp.server",
            "--model", str(model_path), "--model_alias", "smol",
            "--host", "127.0.0.1", "--port", str(port),
            "--n_ctx", "2048", "--n_threads", "1", "--api_key", KEY,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/models", headers={"Authorization": f"Bearer {KEY}"}).is_success:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("llama_cpp.server did not start")


@pytest.fixture(scope="module")
def server(model_path: Path) -> Iterator[str]:
    proc, url = start_server(model_path)
    yield url
    proc.terminate()
    proc.wait(10)


def connected(loop: Loop, endpoint: RemoteEndpoint, **kw: object) -> ChatSession:
    # The local worker is there but never used: the scripted opener stands in for it.
    session = ChatSession(scripted_opener(ScriptedBackend()), **kw)  # type: ignore[arg-type]
    assert loop.run_until_complete(session.connect_remote(endpoint))
    assert session.state is ModelState.READY
    return session


def ask(loop: Loop, session: ChatSession, prompt: str, timeout: float = 60) -> None:
    assert session.send(prompt)
    run_until(loop, lambda: not session.generating, timeout=timeout)


@pytest.mark.model
def test_a_reply_streams_from_the_server_whole(loop: Loop, server: str) -> None:
    endpoint = RemoteEndpoint(server, model="smol", api_key=KEY)
    session = connected(loop, endpoint, settings=GREEDY)
    ask(loop, session, "What is the capital of France?")
    reply = session.conversation.messages[-1]
    assert reply.status in ("complete", "length")
    # The same request without streaming gives the same text: nothing was dropped or doubled.
    whole = httpx.post(
        server + "/chat/completions",
        headers={"Authorization": f"Bearer {KEY}"},
        json={
            "model": "smol",
            "messages": [{"role": "user", "content": "What is the capital of France?"}],
            "temperature": 0.0,
            "top_p": GREEDY.top_p,
            "max_tokens": GREEDY.max_tokens,
            "seed": 1,
        },
        timeout=60,
    ).json()["choices"][0]["message"]["content"]
    assert reply.content == whole
    assert session.metrics.reply.pieces_shown > 5
    loop.run_until_complete(session.close())


@pytest.mark.model
def test_stop_closes_the_stream_and_the_server_stops_generating(loop: Loop, server: str) -> None:
    endpoint = RemoteEndpoint(server, model="smol", api_key=KEY)
    session = connected(loop, endpoint, settings=GenerationSettings(max_tokens=1500, seed=3))
    session.send("Write a very long story about a lighthouse keeper.")
    run_until(loop, lambda: session.metrics.reply.pieces_shown >= 5, timeout=60)
    stopped_at = time.perf_counter()
    session.stop()
    run_until(loop, lambda: not session.generating, timeout=5)
    shown_after = time.perf_counter() - stopped_at
    reply = session.conversation.messages[-1]
    assert reply.status == "stopped"
    assert reply.content
    # The server handles one request at a time: had it gone on with the 1,500-token story,
    # this short question would wait for it (about 25 s). It is answered at once instead.
    session.settings = GenerationSettings(max_tokens=8, seed=3)
    began = time.perf_counter()
    ask(loop, session, "Say hi.", timeout=20)
    assert session.conversation.messages[-1].status in ("complete", "length")
    assert time.perf_counter() - began < 10
    print(f"stop shown after {shown_after * 1000:.1f} ms")
    loop.run_until_complete(session.close())


@pytest.mark.model
@pytest.mark.parametrize(
    ("endpoint", "says"),
    [
        (lambda url: RemoteEndpoint(url, model="smol", api_key="wrong"), "refused the API key"),
        (lambda url: RemoteEndpoint(url, model="nope", api_key=KEY), "does not offer “nope”"),
        (
            lambda url: RemoteEndpoint(f"http://127.0.0.1:{free_port()}/v1", model="smol"),
            "cannot be reached",
        ),
        (lambda url: RemoteEndpoint(url + "/wrong", model="smol", api_key=KEY), "HTTP 404"),
    ],
)
def test_connecting_wrongly_says_why(
    loop: Loop, server: str, endpoint: Callable[[str], RemoteEndpoint], says: str
) -> None:
    session = ChatSession(scripted_opener(ScriptedBackend()))
    details: list[str] = []
    session.state_changed.connect(lambda state, detail: details.append(detail))
    assert not loop.run_until_complete(session.connect_remote(endpoint(server)))
    assert session.state is ModelState.ERROR
    assert says in details[-1]
    loop.run_until_complete(session.close())


@pytest.mark.model
def test_a_server_killed_mid_reply_keeps_the_partial_reply(loop: Loop, model_path: Path) -> None:
    proc, url = start_server(model_path)
    try:
        session = connected(
            loop,
            RemoteEndpoint(url, model="smol", api_key=KEY),
            settings=GenerationSettings(max_tokens=1500),
        )
        endings: list[tuple[str, str]] = []
        session.reply_ended.connect(lambda end: endings.append((end.status, end.note)))
        session.send("Write a very long story about a lighthouse keeper.")
        run_until(loop, lambda: session.metrics.reply.pieces_shown >= 5, timeout=60)
        proc.kill()
        run_until(loop, lambda: not session.generating, timeout=20)
    finally:
        proc.kill()
        proc.wait(10)
    assert endings[0][0] == "error"
    assert "broke in the middle of the reply" in endings[0][1]
    assert session.conversation.messages[-1].content  # what came is kept
    loop.run_until_complete(session.close())


# -- servers that misbehave on purpose ----------------------------------------------------------


class Misbehaving:
    """A one-trick HTTP server on the test's loop: /v1/models lists "m"; the rest get ``reply``."""

    def __init__(self, loop: Loop, reply: bytes, hold: float = 0.0) -> None:
        self.loop = loop
        self.reply = reply
        self.hold = hold
        self.handlers: set[asyncio.Task[None]] = set()
        self.server = loop.run_until_complete(asyncio.start_server(self.handle, "127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/v1"

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.handlers.add(task)
        try:
            await self.answer(reader, writer)
        finally:
            writer.close()  # also when cancelled while holding the connection open

    async def answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in request.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        if length:
            await reader.readexactly(length)
        if request.startswith(b"GET /v1/models"):
            body = b'{"data": [{"id": "m"}]}'
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        else:
            writer.write(self.reply)
            await writer.drain()
            await asyncio.sleep(self.hold)
        await writer.drain()

    def close(self) -> None:
        """Stop serving; a handler still holding its connection is cancelled."""
        self.server.close()
        for task in self.handlers:
            task.cancel()
        self.loop.run_until_complete(asyncio.sleep(0.01))


@pytest.fixture
def misbehaving(loop: Loop) -> Iterator[Callable[..., Misbehaving]]:
    made: list[Misbehaving] = []

    def make(reply: bytes, hold: float = 0.0) -> Misbehaving:
        made.append(Misbehaving(loop, reply, hold))
        return made[-1]

    yield make
    for server in made:
        server.close()


SSE = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n"
CHUNK = b'data: {"choices": [{"delta": {"content": "partial "}}]}\n\n'


@pytest.mark.parametrize(
    ("reply", "says"),
    [
        (
            b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 27\r\n\r\n"
            b'{"error": "model exploded"}',
            "HTTP 500): model exploded",
        ),
        (SSE + CHUNK + b"data: this is not json\n\n", "not a chat stream"),
        (SSE + CHUNK, "broke in the middle of the reply"),
    ],
)
def test_server_failures_keep_the_partial_reply_and_say_why(
    loop: Loop, misbehaving: Callable[..., Misbehaving], reply: bytes, says: str
) -> None:
    session = connected(loop, RemoteEndpoint(misbehaving(reply).url, model="m"))
    endings: list[tuple[str, str]] = []
    session.reply_ended.connect(lambda end: endings.append((end.status, end.note)))
    ask(loop, session, "hello", timeout=10)
    assert endings[0][0] == "error"
    assert says in endings[0][1]
    if CHUNK in reply:
        assert session.conversation.messages[-1].content == "partial "
    loop.run_until_complete(session.close())


def test_a_silent_server_times_out_with_a_sentence(
    loop: Loop, misbehaving: Callable[..., Misbehaving]
) -> None:
    url = misbehaving(SSE + CHUNK, hold=5).url
    session = connected(loop, RemoteEndpoint(url, model="m", read_timeout=0.5))
    endings: list[tuple[str, str]] = []
    session.reply_ended.connect(lambda end: endings.append((end.status, end.note)))
    ask(loop, session, "hello", timeout=10)
    assert endings[0][0] == "error"
    assert "stopped answering for 0.5 seconds" in endings[0][1]
    assert session.conversation.messages[-1].content == "partial "
    loop.run_until_complete(session.close())


def test_a_full_queue_pauses_reading_from_the_socket(
    loop: Loop, misbehaving: Callable[..., Misbehaving]
) -> None:
    chunks = b"".join(
        b'data: {"choices": [{"delta": {"content": "p%d "}}]}\n\n' % i for i in range(300)
    )
    url = misbehaving(SSE + chunks + b"data: [DONE]\n\n").url
    session = connected(loop, RemoteEndpoint(url, model="m"), queue_bound=4)
    ask(loop, session, "hello", timeout=20)
    reply = session.conversation.messages[-1]
    assert reply.status == "complete"
    assert reply.content == "".join(f"p{i} " for i in range(300))  # nothing dropped
    assert session.metrics.queue_max <= 4
    assert session.metrics.backpressure_waits > 0  # the reader waited for the window
    loop.run_until_complete(session.close())


def test_the_connect_dialog_builds_the_endpoint_and_keeps_the_key_out_of_sight(
    qtbot: QtBot,
) -> None:
    dialog = RemoteDialog("http://example.test:8080/v1", "m1")
    qtbot.addWidget(dialog)
    dialog.show()
    dialog.key.setText("secret-key")
    assert dialog.key.echoMode() == QLineEdit.EchoMode.Password
    with qtbot.waitSignal(dialog.models_requested) as asked:
        dialog.list_button.click()
    assert asked.args[0] == RemoteEndpoint("http://example.test:8080/v1", "m1", "secret-key")
    assert "secret-key" not in repr(asked.args[0])
    dialog.set_models(["m0", "m1", "m2"])
    assert dialog.model.currentText() == "m1"
    dialog.set_problem("The server at … cannot be reached.")
    assert dialog.problem.isVisible()
    with qtbot.waitSignal(dialog.connect_requested) as chosen:
        dialog.connect_button.click()
    assert chosen.args[0].model == "m1"


@pytest.mark.model
@pytest.mark.qt_log_ignore("^This plugin does not support grabbing the keyboard$")  # offscreen
def test_the_model_picker_offers_the_servers_used_lately_and_connects_to_one(
    loop: Loop,
    server: str,
    qtbot: QtBot,
    memory_keyring: MemoryKeyring,
) -> None:
    gone = f"http://127.0.0.1:{free_port()}/v1"
    kept = Preferences()
    kept.remember_remote(server, "smol")
    kept.remember_remote(gone, "other")  # the most recent
    save_api_key(server, KEY)  # the keyring keeps each server's key, by its address
    session = ChatSession(scripted_opener(ScriptedBackend(["Hi"])))
    window = MainWindow(session)
    qtbot.addWidget(window)
    window.show()
    keeper = Saved(kept)
    AppDialogs(window, keeper)
    header = window.header
    header.menu.popup(header.picker.mapToGlobal(QPoint(0, header.picker.height())))
    qtbot.waitUntil(header.menu.isVisible)
    texts = [a.text() for a in header.menu.actions()]
    listed = [texts.index(f"{m} on {url}") for m, url in (("other", gone), ("smol", server))]
    assert listed == sorted(listed)  # both, the most recent first
    chosen = next(a for a in header.menu.actions() if a.text() == f"smol on {server}")
    chosen.trigger()
    header.menu.hide()
    run_until(loop, lambda: session.state is ModelState.READY and session.model is not None)
    assert session.model is not None
    assert session.model.chat_format == "remote"
    assert keeper.preferences.last_remote == KnownRemote(server, "smol")  # first now
    assert keeper.preferences.remotes[1] == KnownRemote(gone, "other")
    ask(loop, session, "Say hi.")  # with the key from the keyring
    assert session.conversation.messages[-1].status in ("complete", "length")
    assert session.conversation.messages[-1].content
    loop.run_until_complete(session.close())
