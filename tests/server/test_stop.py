"""Stop through the socket: clients that leave, wait, read slowly, or share the model.

Every client here is real: a separate process with the official ``openai`` client that is
killed (its socket closes as the kernel tears it down), or a raw socket that stops reading.
"""

from __future__ import annotations

import itertools
import json
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from app.engine.llama import open_llama
from app.flow.requests import ServedRequest
from app.server.api import ServerConfig
from tests.support.loop import Loop, run_until
from tests.support.serving import STORY, Served, client_process, long_prompt, serve, wait_until

pytestmark = pytest.mark.model


@pytest.fixture
def served(loop: Loop, model_path: Path) -> Iterator[Served]:
    # Small buffers, so that a slow reader's backpressure reaches the worker within a reply.
    config = ServerConfig(port=0, max_waiting=2, queue_bound=8, send_buffer_bytes=4096)
    served = serve(loop, open_llama, model_path, config)
    try:
        yield served
    finally:
        served.server.stop()


def greedy_hello(url: str) -> str:
    with openai.OpenAI(base_url=url, api_key="unused", max_retries=0) as client:
        reply = client.chat.completions.create(
            model="any",
            messages=[{"role": "user", "content": "Say hello to the keeper."}],
            temperature=0,
            max_tokens=24,
        )
    return reply.choices[0].message.content or ""


def only_request(served: Served) -> ServedRequest:
    wait_until(lambda: len(served.requests()) > 0 and served.requests()[-1].job is not None)
    return served.requests()[-1]


@pytest.mark.parametrize("stream", [False, True])
def test_a_client_killed_mid_prompt_stops_the_prompt(served: Served, stream: bool) -> None:
    before = greedy_hello(served.url)
    client = client_process(served.url, long_prompt(), stream=stream)
    try:
        wait_until(lambda: len(served.requests()) == 2 and served.requests()[1].job is not None)
        request = served.requests()[1]
        assert request.job is not None
        report = request.job.report
        wait_until(lambda: report.prefill_done > report.cached_tokens + 32)
        client.send_signal(signal.SIGKILL)
    finally:
        client.wait(10)
    wait_until(lambda: request.outcome is not None)
    assert request.outcome == "client left"
    assert report.finish == "stopped"
    assert report.compute_ended_at is not None
    # The prompt was not read to its end, and nothing was generated.
    assert report.prefill_ended_at is None
    assert report.prefill_done < report.prompt_tokens
    assert report.reply_tokens == 0
    # The model answers the next request as it did before.
    assert greedy_hello(served.url) == before


@pytest.mark.parametrize("stream", [False, True])
def test_a_client_killed_mid_reply_stops_the_reply(served: Served, stream: bool) -> None:
    client = client_process(served.url, STORY, stream=stream)
    try:
        request = only_request(served)
        assert request.job is not None
        report = request.job.report
        wait_until(lambda: report.reply_tokens >= 20)
        client.send_signal(signal.SIGKILL)
    finally:
        client.wait(10)
    wait_until(lambda: request.outcome is not None)
    assert request.outcome == "client left"
    assert report.finish == "stopped"
    assert 20 <= report.reply_tokens < 1500
    produced = report.reply_tokens
    time.sleep(0.2)
    assert report.reply_tokens == produced  # the worker is not computing for nobody


def test_a_queued_client_that_leaves_is_dropped_without_computing(served: Served) -> None:
    first = client_process(served.url, STORY, stream=True)
    wait_until(lambda: len(served.requests()) == 1 and served.requests()[0].running)
    second = client_process(served.url, long_prompt(), stream=False)
    try:
        wait_until(lambda: len(served.requests()) == 2)
        running, queued = sorted(served.requests(), key=lambda r: r.id)
        wait_until(lambda: running.running and queued.waiting)
        assert queued.status() == "queued"
        second.send_signal(signal.SIGKILL)
        second.wait(10)
        wait_until(lambda: queued.outcome is not None)
        assert queued.outcome == "client left"
        assert served.server.board.counts() == (0, 1)
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        wait_until(lambda: running.outcome is not None)
        # The worker reached the queued job after the first and dropped it at once.
        job = queued.job
        assert job is not None
        wait_until(lambda: job.pieces.finished)
        assert job.report.prefill_started_at is None
        assert job.report.prompt_tokens == 0
        assert job.report.reply_tokens == 0
    finally:
        for process in (first, second):
            process.kill()
            process.wait(10)


def test_past_the_bound_a_request_gets_503_with_retry_after(served: Served) -> None:
    clients = [client_process(served.url, STORY, stream=True) for _ in range(3)]
    try:
        wait_until(lambda: served.server.board.counts() == (2, 1))
        reply = httpx.post(
            served.url + "/chat/completions",
            json={"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4},
        )
        assert reply.status_code == 503
        assert reply.headers["retry-after"].isdigit()
        assert reply.json()["error"]["code"] == "queue_full"
    finally:
        for process in clients:
            process.kill()
            process.wait(10)
    # With the room back, the next request is answered.
    wait_until(lambda: served.server.board.counts() == (0, 0))
    assert greedy_hello(served.url)


def test_a_slow_reader_pauses_the_worker(served: Served) -> None:
    body = json.dumps(
        {
            "messages": [{"role": "user", "content": STORY}],
            "max_tokens": 1500,
            "temperature": 0,
            "stream": True,
        }
    ).encode()
    with socket.socket() as sock:
        # A small receive buffer (set before connecting, so the window the kernel offers is
        # small too): the kernel's share of the backpressure fills fast.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", served.server.port))
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nContent-Length: "
            + str(len(body)).encode()
            + b"\r\n\r\n"
            + body
        )
        request = only_request(served)
        assert request.job is not None
        job = request.job
        # Nothing is read: the socket's buffers fill, then the piece queue, then the worker waits.
        wait_until(lambda: job.pieces.backpressure_waits > 0, 60)
        paused_at = job.report.reply_tokens
        time.sleep(0.5)
        assert job.report.reply_tokens == paused_at
        assert job.pieces.max_depth <= job.pieces.bound
        assert job.report.compute_ended_at is None
        # Reading again lets it go on. How much must be read first depends on how much the
        # kernel buffered on both sides (it grows the server's send buffer as it likes), so
        # the client reads as a client would until the worker moves; each read must get data.
        sock.settimeout(5)
        deadline = time.monotonic() + 60
        while job.report.reply_tokens == paused_at:
            assert sock.recv(65536), "the server closed the stream while paused"
            assert time.monotonic() < deadline, "reading did not let the worker go on"
    wait_until(lambda: request.outcome is not None)
    assert request.outcome == "client left"


def test_the_window_and_three_clients_share_the_model(served: Served) -> None:
    session = served.session
    session.settings = served.server.config.sampling.__class__(temperature=0.0, max_tokens=60)
    replies: dict[int, str] = {}

    def ask(index: int) -> None:
        with openai.OpenAI(base_url=served.url, api_key="unused", max_retries=0) as client:
            reply = client.chat.completions.create(
                model="any",
                messages=[{"role": "user", "content": f"Count to {index + 3}."}],
                temperature=0,
                max_tokens=60,
            )
        replies[index] = reply.choices[0].message.content or ""

    clients = [threading.Thread(target=ask, args=(i,)) for i in range(3)]
    clients[0].start()

    def first_began() -> bool:
        requests = served.requests()
        job = requests[0].job if requests else None
        return job is not None and job.began_at is not None

    # Begun, not only queued: a window reply queued beside it would go first (the person
    # first), and the first client would then wait with the other two, one over the bound.
    wait_until(first_began)
    assert session.send("Count to ten.")
    for thread in clients[1:]:
        thread.start()
    run_until(served.loop, lambda: not session.generating, 60)
    for thread in clients:
        thread.join(60)
    assert session.conversation.messages[-1].status in ("complete", "length")
    assert session.conversation.messages[-1].content
    assert sorted(replies) == [0, 1, 2]
    assert all(replies.values())
    # One FIFO queue: each began after the one before it ended (the worker is the only one).
    jobs = [r.job for r in served.requests() if r.job is not None]
    assert len(jobs) == 3
    spans = sorted((j.began_at or 0.0, j.report.compute_ended_at or 0.0) for j in jobs)
    assert all(end <= next_began for (_, end), (next_began, _) in itertools.pairwise(spans))
