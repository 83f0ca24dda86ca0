"""Floodgate as a local server: its API measured beside the window, and beside a peer server.

The window is open (offscreen) with the model; the API server runs over the same session, as
the app runs it. Streaming clients are processes of their own, as real clients are (a thread
here would take turns with the worker for the GIL); the disconnecting ones are raw sockets.
So what the window's loop shows is the server's cost, not the clients'.

- ``throughput``: one streaming client against the in-window rate, in interleaved pairs.
- ``stop_on_disconnect_ms``: a client's socket closed during prompt processing and during
  decoding, to the moment the computation ended (``compute_ended_at``).
- ``peer``: llama-cpp-python's server on the same model: the same disconnects. Its compute
  end cannot be seen from outside, so both servers are also timed by a probe: a one-token
  request sent right after the close, minus what it takes on an idle server (the peer
  answers it only once the abandoned request has let go of the model).
- ``loop_lag_ms``: the window loop's 5 ms heartbeat while four clients stream.
- ``ttft_second_turn_ratio``: the second turn of an API conversation over a follow-up of the
  same length in the window (time to the first piece).
- ``slow_reader_rss_mb``: the process's RSS growth while a client reads 100 bytes a second,
  measured once the backpressure has reached the worker (before that, the reply's own KV
  cache is what grows).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import statistics
import subprocess
import time
from typing import Any

import httpx

from app.bench.api_client import stream_in_process
from app.bench.measure import _rss_mb, app_rate, close_app, heartbeat, open_app, until
from app.bench.plan import LONG_PROMPT, STORY, Setup
from app.bench.remote import _free_port, _start_server, _until_serving
from app.bench.stats import interleaved_pairs, median_with_ci, summary
from app.engine.llama import open_llama
from app.engine.remote import RemoteEndpoint
from app.flow.metrics import Distribution
from app.flow.requests import ServedRequest
from app.flow.worker import ReplyJob
from app.server.api import ServerConfig
from app.server.local import LocalServer
from app.store.conversation import Conversation
from app.ui.window.main_window import MainWindow

PROBE = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1, "temperature": 0}
SLOW_READ_BYTES = 100
"""What the slow reader takes each second."""

COUNTING = {
    "prompt": "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,",
    "max_tokens": 3000,
    "temperature": 0,
    "frequency_penalty": 0,  # (no repeat penalty either: the count goes on to the limit)
}
"""A reply that does not end early: a plain prompt the model continues counting (a chat
reply may end after a few hundred tokens, before the buffers between it and the reader
are full)."""


def _open_stream(
    port: int,
    body: dict[str, Any],
    receive_buffer: int = 0,
    path: str = "/v1/chat/completions",
) -> socket.socket:
    """A streaming request on a raw socket, read only by the caller (or never)."""
    payload = json.dumps({**body, "stream": True}).encode()
    sock = socket.socket()
    if receive_buffer:  # before connecting, so the window the kernel offers is small too
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.connect(("127.0.0.1", port))
    sock.sendall(
        b"POST " + path.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/json\r\nContent-Length: "
        + str(len(payload)).encode()
        + b"\r\n\r\n"
        + payload
    )
    return sock


def _probe_ms(url: str) -> float:
    began = time.perf_counter()
    reply = httpx.post(url + "/chat/completions", json={**PROBE, "model": "bench"}, timeout=300)
    reply.raise_for_status()
    return (time.perf_counter() - began) * 1000


def _body(kind: str, n: int) -> dict[str, Any]:
    # A different opening every time: neither server may answer from a cached prompt.
    text = f"Note {n}. " + (STORY if kind == "decode" else LONG_PROMPT)
    return {
        "model": "bench",
        "messages": [{"role": "user", "content": text}],
        "max_tokens": 1024,
        "temperature": 0,
    }


class _Bench:
    def __init__(self, setup: Setup, window: MainWindow, server: LocalServer) -> None:
        self.setup = setup
        self.window = window
        self.server = server
        self.url = server.base_url
        self.count = 0

    def _newest(self) -> ServedRequest | None:
        recent = self.server.board.recent()
        return recent[-1] if recent else None

    def _last_id(self) -> int:
        newest = self._newest()
        return newest.id if newest is not None else 0

    async def throughput(self) -> dict[str, Any]:
        body = {"messages": [{"role": "user", "content": STORY}], **self._greedy()}
        await stream_in_process(self.url, body)  # warm-up
        await app_rate(self.window)

        async def client() -> float:
            # Another process, as a real client is: a thread here would take turns with the
            # worker for the GIL, which no outside program does.
            return (await stream_in_process(self.url, body)).rate

        pairs = await interleaved_pairs(
            self.setup.plan.remote_pairs,
            {"client": client},
            lambda: app_rate(self.window),
            self.setup.log,
        )
        # The figures are the server's over the window's: invert the pairs' ratio.
        client_rates, window_rates = pairs["client"].reference, pairs["client"].app
        ratios = [c / w for c, w in zip(client_rates, window_rates, strict=True)]
        ratio, interval = median_with_ci(ratios)
        return {
            "client_tok_s": round(statistics.median(client_rates), 2),
            "window_tok_s": round(statistics.median(window_rates), 2),
            "ratio": ratio,
            "ratio_ci": interval,
            "pairs": [round(r, 4) for r in ratios],
        }

    def _greedy(self) -> dict[str, Any]:
        return {"max_tokens": self.setup.plan.max_tokens, "temperature": 0}

    async def _admitted(self, after: int) -> tuple[ServedRequest, ReplyJob]:
        """The first request after the one numbered ``after``, once it is queued."""

        def admitted() -> bool:
            newest = self._newest()
            return newest is not None and newest.id > after and newest.job is not None

        await until(admitted)
        request = self._newest()
        assert request is not None
        assert request.job is not None
        return request, request.job

    async def disconnects(self, kind: str, count: int) -> Distribution:
        """Close a client's socket at a random moment of ``kind``: to the compute's end."""
        found = Distribution()
        for _ in range(count):
            latency = await self._disconnect_once(kind)
            if latency is not None:
                found.add(latency)
        return found

    async def _disconnect_once(self, kind: str) -> float | None:
        """One close; None when the reply ended before it or left its phase (draw again)."""
        rng = self.setup.rng
        self.count += 1
        after = self._last_id()
        sock = _open_stream(self.server.port, _body(kind, self.count))
        try:
            request, job = await self._admitted(after)
            report = job.report
            if kind == "decode":
                await until(lambda: report.reply_tokens > 0)
                await asyncio.sleep(rng.uniform(0.0, 1.0))
            else:
                await until(lambda: report.prefill_done > report.cached_tokens)
                await asyncio.sleep(rng.uniform(0.05, 2.0))
            closed_at = time.perf_counter()
        finally:
            sock.close()
        await until(lambda: request.outcome is not None)
        ended = report.compute_ended_at
        in_phase = (report.prefill_ended_at is None) == (kind == "prefill")
        if ended is None or ended < closed_at or not in_phase or report.finish != "stopped":
            return None
        return (ended - closed_at) * 1000

    async def probed(self, url: str, port: int, kind: str, count: int) -> Distribution:
        """Close a client's socket, then time a one-token request: the busy time left."""
        idle = statistics.median([await asyncio.to_thread(_probe_ms, url) for _ in range(3)])
        found = Distribution()
        rng = self.setup.rng
        for _ in range(count):
            self.count += 1
            sock = _open_stream(port, _body(kind, self.count))
            try:
                if kind == "decode":
                    sock.settimeout(120)
                    await asyncio.to_thread(sock.recv, 1)  # the first chunk is there
                    await asyncio.sleep(rng.uniform(0.1, 1.0))
                else:
                    await asyncio.sleep(rng.uniform(0.5, 2.0))
            finally:
                sock.close()
            found.add(max(0.0, await asyncio.to_thread(_probe_ms, url) - idle))
        return found

    async def loop_lag(self) -> dict[str, float]:
        """The heartbeat from the moment all four requests are in, to their end.

        (Starting four client processes costs the machine a second of CPU that is not the
        server's; the heartbeat begins once they have connected.)
        """
        body = {"messages": [{"role": "user", "content": STORY}], **self._greedy()}
        after = self._last_id()
        clients = asyncio.gather(*(stream_in_process(self.url, body) for _ in range(4)))
        try:
            await until(
                lambda: (
                    sum(r.id > after and r.job is not None for r in self.server.board.recent()) == 4
                )
            )
            async with heartbeat() as lag:
                await clients
        finally:
            await asyncio.gather(clients, return_exceptions=True)
        return summary(lag)

    async def second_turns(self, runs: int) -> dict[str, Any]:
        session = self.window.session
        api_ms: list[float] = []
        window_ms: list[float] = []
        first_q, second_q = STORY, "Tell me what happened next."
        for n in range(runs):
            self.count += 1
            system = f"You tell stories. Session {self.count}."
            settings = self._greedy()
            messages = [
                {"role": "system", "content": system},
                {"role": "user", "content": first_q},
            ]
            first = await stream_in_process(self.url, {"messages": messages, **settings})
            messages += [
                {"role": "assistant", "content": first.text},
                {"role": "user", "content": second_q},
            ]
            second = await stream_in_process(self.url, {"messages": messages, **settings})
            api_ms.append(second.ttft_ms)
            self.count += 1
            session.conversation = Conversation(
                system_prompt=f"You tell stories. Session {self.count}."
            )
            for question in (first_q, second_q):
                assert session.send(question)
                await until(lambda: not session.generating)
            ttft = session.metrics.reply.time_to_first_piece_ms
            assert ttft is not None
            window_ms.append(ttft)
            self.setup.log(f"  second turn {n + 1}: API {api_ms[-1]:.0f} ms, window {ttft:.0f} ms")
        api, window = statistics.median(api_ms), statistics.median(window_ms)
        return {
            "api_ms": round(api, 1),
            "window_ms": round(window, 1),
            "ratio": round(api / window, 3),
        }

    async def slow_reader(self, seconds: float) -> dict[str, Any]:
        after = self._last_id()
        sock = _open_stream(self.server.port, COUNTING, receive_buffer=4096, path="/v1/completions")
        try:
            _, job = await self._admitted(after)
            await until(lambda: job.pieces.backpressure_waits > 0 or job.pieces.finished, 300)
            paused = job.pieces.backpressure_waits > 0
            before = _rss_mb()
            peak = before
            sock.setblocking(False)
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                with contextlib.suppress(BlockingIOError):  # nothing came this second
                    sock.recv(SLOW_READ_BYTES)
                await asyncio.sleep(1.0)
                peak = max(peak, _rss_mb())
            tokens = job.report.reply_tokens
        finally:
            sock.close()
        return {
            "rss_growth_mb": round(peak - before, 2),
            "worker_paused": paused,
            "reply_tokens": tokens,
            "seconds": seconds,
        }


async def local_api(setup: Setup) -> dict[str, Any]:
    """The ``server`` section of the bench."""
    plan = setup.plan
    window = await open_app(setup, open_llama, setup.greedy)
    server = LocalServer(ServerConfig(port=0, sampling=setup.greedy), window.session.host)
    server.start()
    bench = _Bench(setup, window, server)
    try:
        setup.log("  one streaming client against the window, in pairs…")
        throughput = await bench.throughput()
        setup.log("  clients leaving during prompt processing and decoding…")
        prefill = await bench.disconnects("prefill", plan.prefill_stops)
        decode = await bench.disconnects("decode", plan.decode_stops)
        probe_count = max(2, plan.prefill_stops // 3)
        own_probe = {
            kind: summary(await bench.probed(bench.url, server.port, kind, probe_count))
            for kind in ("prefill", "decode")
        }
        setup.log("  the window's loop while four clients stream…")
        lag = await bench.loop_lag()
        setup.log("  the second turn of a conversation, API and window…")
        turns = await bench.second_turns(max(1, plan.ttft_runs))
        setup.log("  a client reading 100 bytes a second…")
        slow = await bench.slow_reader(plan.slow_reader_seconds)
        server.stop()
        setup.log("  the peer: llama_cpp.server, the same disconnects…")
        peer = await _peer(setup, bench, probe_count)
    finally:
        server.stop()
        await close_app(window)
    return {
        "throughput": throughput,
        "stop_on_disconnect_ms": {"prefill": summary(prefill), "decode": summary(decode)},
        "busy_after_disconnect_ms": own_probe,
        "peer": peer,
        "loop_lag_ms": lag,
        "ttft_second_turn": turns,
        "ttft_second_turn_ratio": turns["ratio"],
        "slow_reader": slow,
        "slow_reader_rss_mb": slow["rss_growth_mb"],
    }


async def _peer(setup: Setup, bench: _Bench, count: int) -> dict[str, Any]:
    port = _free_port()
    process: subprocess.Popen[bytes] = _start_server(setup, port)
    endpoint = RemoteEndpoint(f"http://127.0.0.1:{port}/v1", model="bench")
    try:
        async with httpx.AsyncClient() as client:
            await _until_serving(client, endpoint)
        found = {
            kind: summary(await bench.probed(endpoint.base_url, port, kind, count))
            for kind in ("prefill", "decode")
        }
    finally:
        process.terminate()
        process.wait(10)
    return {"server": "llama_cpp.server", "busy_after_disconnect_ms": found}
