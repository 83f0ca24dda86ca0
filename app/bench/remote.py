"""A model on a server: Floodgate's remote engine against a plain client of the same server.

llama-cpp-python's own server (``llama_cpp.server``) runs on loopback with the bench's model.
Floodgate (remote engine, queue, pump, view) and a plain client reading the same stream are
measured in interleaved pairs; then Stop is pressed at random moments of streaming replies.
"""

from __future__ import annotations

import asyncio
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import httpx

from app.bench.measure import app_rate, until
from app.bench.plan import FRAME, STORY, Setup
from app.bench.stats import interleaved_pairs, summary
from app.engine import ChatMessage, GenerationReport
from app.engine.remote import RemoteEndpoint, stream_chat
from app.flow.metrics import Distribution
from app.flow.session import ChatSession
from app.standins.scripted import ScriptedBackend, scripted_opener
from app.store.conversation import Conversation
from app.ui.window.main_window import MainWindow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_server(setup: Setup, port: int, extra: Sequence[str] = ()) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable, "-m", "llama_cpp.server", "--model", str(setup.model),
            "--model_alias", "bench", "--host", "127.0.0.1", "--port", str(port),
            "--n_ctx", str(setup.options.n_ctx), "--n_threads", str(setup.options.n_threads),
            "--n_threads_batch", str(setup.options.n_threads_batch), *extra,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip


async def _until_serving(client: httpx.AsyncClient, endpoint: RemoteEndpoint) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if (await client.get(endpoint.url("models"))).is_success:
                return
        except httpx.HTTPError:
            pass
        await asyncio.sleep(0.2)
    raise TimeoutError("llama_cpp.server did not start")


async def _plain_run(setup: Setup, client: httpx.AsyncClient, endpoint: RemoteEndpoint) -> float:
    """A plain client reading the server's stream, nothing else: pieces per second."""
    messages = [ChatMessage(role="user", content=STORY)]
    times = []
    report = GenerationReport()
    async for _ in stream_chat(client, endpoint, messages, setup.greedy, report):
        times.append(time.perf_counter())
    assert report.error is None, str(report.error)
    return (len(times) - 1) / (times[-1] - times[0])


async def _stops(setup: Setup, window: MainWindow) -> Distribution:
    """Stop at random moments of long replies: from Stop to the reply ended on screen."""
    session = window.session
    stop_ms = Distribution()
    # Long replies, so that every Stop lands in the middle of one.
    session.settings = replace(setup.greedy, max_tokens=2048)
    for _ in range(max(3, setup.plan.decode_stops // 2)):
        session.conversation = Conversation()
        assert session.send(STORY)
        await until(lambda: session.metrics.reply.pieces_shown > 0)
        await asyncio.sleep(setup.rng.uniform(0.1, 1.0))
        pressed = time.perf_counter()
        assert session.stop(), "the reply ended before Stop"
        await until(lambda: not session.generating)
        stop_ms.add((time.perf_counter() - pressed) * 1000)
    return stop_ms


async def remote(setup: Setup) -> dict[str, Any]:
    """Throughput pairs and Stop through llama_cpp.server on loopback."""
    port = _free_port()
    server = _start_server(setup, port)
    endpoint = RemoteEndpoint(f"http://127.0.0.1:{port}/v1", model="bench")
    session = ChatSession(
        scripted_opener(ScriptedBackend()), settings=setup.greedy, frame_interval=FRAME
    )
    window = MainWindow(session)
    window.show()
    try:
        async with httpx.AsyncClient() as client:
            await _until_serving(client, endpoint)
            if not await session.connect_remote(endpoint):
                raise SystemExit(window.state_label.text())
            await _plain_run(setup, client, endpoint)  # warm-up
            pairs = await interleaved_pairs(
                setup.plan.remote_pairs,
                {"plain": lambda: _plain_run(setup, client, endpoint)},
                lambda: app_rate(window),
                setup.log,
            )
            stop_ms = await _stops(setup, window)
    finally:
        await session.close()
        window.deleteLater()
        server.terminate()
        server.wait(10)
    throughput = {
        **pairs["plain"].figures("plain"),
        "app_tok_s": round(statistics.median(pairs["plain"].app), 2),
    }
    return {"throughput": throughput, "stop_ms": summary(stop_ms)}
