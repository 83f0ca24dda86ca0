"""``floodgate serve``: started as a user starts it, asked, stopped with SIGTERM and SIGINT."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from app.engine.model_file import readable_name
from app.store.database import database_path

pytestmark = pytest.mark.model


def start(model_path: Path, *extra: str, key: str | None = None) -> subprocess.Popen[str]:
    env = dict(os.environ)
    env.pop("FLOODGATE_API_KEY", None)
    if key is not None:
        env["FLOODGATE_API_KEY"] = key
    return subprocess.Popen(
        [sys.executable, "-m", "app", "serve", "--model", str(model_path), "--threads", "1",
         "--ctx", "2048", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )  # fmt: skip


def address(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    line = process.stdout.readline()
    found = re.search(r"at (http://\S+)", line)
    assert found, (
        f"no address in {line!r}; stderr: {process.stderr.read() if process.stderr else ''}"
    )
    return found.group(1)


def close(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.kill()
    process.communicate(timeout=10)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_serve_answers_and_a_signal_stops_the_reply_and_exits(
    model_path: Path, sig: signal.Signals
) -> None:
    process = start(model_path, "--port", "0")
    try:
        url = address(process)
        models = httpx.get(url + "/models").json()
        assert [m["id"] for m in models["data"]] == [readable_name(model_path)]
        # A sampled story can end by itself before the signal; then the case is
        # not met yet, so ask again (another seed) until a reply is in flight.
        for seed in range(5):
            received: list[bytes] = []
            ended = threading.Event()

            def read(into: list[bytes], done: threading.Event, seed: int) -> None:
                body = {
                    "messages": [{"role": "user", "content": "Tell me a very long story."}],
                    "max_tokens": 1800,
                    "seed": seed,
                    "stream": True,
                }
                with httpx.stream("POST", url + "/chat/completions", json=body, timeout=60) as r:
                    for chunk in r.iter_bytes():
                        into.append(chunk)
                done.set()

            reader = threading.Thread(target=read, args=(received, ended, seed), daemon=True)
            reader.start()
            deadline = time.monotonic() + 30
            while (
                sum(len(c) for c in received) < 3000
                and not ended.is_set()
                and time.monotonic() < deadline
            ):
                time.sleep(0.01)
            if not ended.is_set():
                break
        sent = time.monotonic()
        process.send_signal(sig)
        assert process.wait(5) == 0
        exited = time.monotonic() - sent
        assert ended.wait(5)
        stream = b"".join(received).decode()
        # The reply was cut (not finished by itself), and said so before the end.
        assert '"finish_reason": "cancelled"' in stream
        assert stream.rstrip().endswith("data: [DONE]")
        assert exited < 5  # (the bench measures the real time; this only rules out a hang)
    finally:
        close(process)


@pytest.mark.parametrize("parallel", [1, 2])
def test_serve_parallel_decides_whether_two_replies_stream_side_by_side(
    model_path: Path, parallel: int
) -> None:
    process = start(model_path, "--port", "0", "--parallel", str(parallel))
    try:
        url = address(process)
        pieces: dict[str, list[float]] = {"long": [], "short": []}
        ended: dict[str, float] = {}

        def read(name: str, content: str, max_tokens: int) -> None:
            body = {
                "messages": [{"role": "user", "content": content}],
                "max_tokens": max_tokens,
                "temperature": 0,
                "stream": True,
            }
            with httpx.stream("POST", url + "/chat/completions", json=body, timeout=120) as r:
                for line in r.iter_lines():
                    if line.startswith("data: {"):
                        delta = json.loads(line[6:])["choices"][0]["delta"]
                        if delta.get("content"):  # text, not the first chunk's role
                            pieces[name].append(time.monotonic())
            ended[name] = time.monotonic()

        long = threading.Thread(
            target=read, args=("long", "Write a long essay about the history of Rome.", 200)
        )
        long.start()
        deadline = time.monotonic() + 60
        while not pieces["long"] and time.monotonic() < deadline:
            time.sleep(0.01)
        assert pieces["long"], "the first reply never began"
        short = threading.Thread(target=read, args=("short", "Say hello.", 8))
        short.start()
        long.join(120)
        short.join(120)
        assert pieces["short"]
        assert len(pieces["long"]) > 100  # greedy: this essay runs to its limit
        began = pieces["short"][0]
        if parallel == 1:
            # One place: the second reply waits until the first has ended.
            assert began > pieces["long"][-1]
        else:
            # Two places: the second streams while the first goes on.
            assert began < ended["long"]
            assert sum(t > began for t in pieces["long"]) >= 20
        process.send_signal(signal.SIGTERM)
        assert process.wait(10) == 0
    finally:
        close(process)


def test_serve_refuses_other_addresses_without_a_key(model_path: Path) -> None:
    process = start(model_path, "--host", "0.0.0.0", "--port", "0")
    try:
        assert process.wait(30) == 2
        assert process.stderr is not None
        assert "API key" in process.stderr.read()
    finally:
        close(process)


def test_serve_with_a_key_wants_it(model_path: Path) -> None:
    process = start(model_path, "--port", "0", key="k-123")
    try:
        url = address(process)
        assert httpx.get(url + "/models").status_code == 401
        authorised = httpx.get(url + "/models", headers={"Authorization": "Bearer k-123"})
        assert authorised.status_code == 200
        process.send_signal(signal.SIGTERM)
        assert process.wait(5) == 0
    finally:
        close(process)


def test_a_crashed_server_is_told_at_the_next_start_and_a_second_server_leaves_the_record(
    model_path: Path,
) -> None:
    home = Path(os.environ["FLOODGATE_HOME"])  # this test's own (conftest)
    record = home / "serve" / "session.crash"
    first = start(model_path, "--port", "0")
    try:
        address(first)
        assert record.exists()  # kept while it serves
        # A second server on the same data folder (another port) keeps no record of its own.
        second = start(model_path, "--port", "0")
        try:
            address(second)
        finally:
            second.send_signal(signal.SIGTERM)
            _, said = second.communicate(timeout=30)
        assert "ended unexpectedly" not in said
        assert record.exists()  # the first one's, untouched
        os.kill(first.pid, signal.SIGSEGV)  # what a llama.cpp built for another CPU does
        first.communicate(timeout=30)
    finally:
        close(first)
    third = start(model_path, "--port", "0")
    try:
        address(third)
        third.send_signal(signal.SIGTERM)
        _, said = third.communicate(timeout=30)
    finally:
        close(third)
    assert "The last floodgate serve ended unexpectedly (Segmentation fault)" in said
    assert f"with {model_path.name}" in said
    (kept,) = (home / "serve" / "crashes").iterdir()
    assert str(kept) in said
    assert "Segmentation fault" in kept.read_text()
    assert not record.exists()  # the third ended cleanly: nothing to tell next time


def test_serve_sweeps_the_pictures_and_sounds_no_conversation_refers_to(
    model_path: Path,
) -> None:
    home = Path(os.environ["FLOODGATE_HOME"])  # this test's own (conftest)
    assert not database_path().exists()  # only the server has run here
    hour_ago = time.time() - 2 * 3600
    old_picture = home / "pictures" / "ab" / ("ab" + "1" * 62)
    old_sound = home / "sounds" / "cd" / ("cd" + "2" * 62)
    young = home / "pictures" / "ef" / ("ef" + "3" * 62)  # a request's, still encoding
    for path in (old_picture, old_sound, young):
        path.parent.mkdir(parents=True)
        path.write_bytes(b"kept")
    for path in (old_picture, old_sound):
        os.utime(path, (hour_ago, hour_ago))
    process = start(model_path, "--port", "0")
    try:
        address(process)
        deadline = time.monotonic() + 20
        while (old_picture.exists() or old_sound.exists()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not old_picture.exists()
        assert not old_sound.exists()
        assert young.exists()
        process.send_signal(signal.SIGTERM)
        assert process.wait(10) == 0
    finally:
        close(process)
