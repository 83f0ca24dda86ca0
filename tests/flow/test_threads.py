"""Threads: prompts on every physical core, decode threads measured once per model and machine,
and llama.cpp called from the worker's thread only."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import openai
import psutil
import pytest

from app.bench.thread_times import DECODE_COMM
from app.engine import EngineOptions, StopSignal
from app.engine.llama import LlamaBackend, open_llama
from app.engine.threads import (
    CALIBRATION,
    STREAMED_CONTEXT,
    STREAMED_TOKENS,
    calibrate,
    machine_fingerprint,
    next_decode_threads,
    physical_cores,
)
from app.flow.decode_threads import BELOW_WINDOW, ThreadReport
from app.flow.session import ChatSession
from app.server.api import ServerConfig
from app.server.local import LocalServer
from app.standins.scripted import ScriptedBackend
from app.store.thread_choices import Measured, ThreadChoices
from tests.support.loop import Loop, run_until


def test_physical_cores_are_cores_not_logical_cpus() -> None:
    cores = physical_cores()
    assert 1 <= cores <= (os.cpu_count() or 1)
    assert cores <= (psutil.cpu_count(logical=False) or cores)
    assert cores <= len(os.sched_getaffinity(0))


def test_measurements_are_kept_per_model_file_and_machine(tmp_path: Path) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"x" * 10)
    choices = ThreadChoices(tmp_path / "data")
    key = ThreadChoices.key(model, "cpu A; 2 cores", "AVX2 = 1")
    assert choices.get(key) is None
    choices.put(key, Measured(2, {1: 50.0, 2: 95.5}))
    assert ThreadChoices(tmp_path / "data").get(key) == Measured(2, {1: 50.0, 2: 95.5})
    # Another machine, another build, or a changed file is measured again.
    assert choices.get(ThreadChoices.key(model, "cpu B; 8 cores", "AVX2 = 1")) is None
    assert choices.get(ThreadChoices.key(model, "cpu A; 2 cores", "AVX512 = 1")) is None
    model.write_bytes(b"y" * 11)
    assert choices.get(ThreadChoices.key(model, "cpu A; 2 cores", "AVX2 = 1")) is None
    choices.forget(key)
    assert choices.get(key) is None


def test_a_damaged_measurement_file_measures_again(tmp_path: Path) -> None:
    choices = ThreadChoices(tmp_path)
    choices.path.write_text("{not json")
    assert choices.get("any") is None
    choices.put("k", Measured(1, {1: 10.0}))
    assert choices.get("k") == Measured(1, {1: 10.0})


@pytest.mark.model
def test_prompts_use_every_physical_core_by_default(model_path: Path) -> None:
    backend = open_llama(model_path, EngineOptions(cache_ram_mb=0))
    try:
        assert backend.threads == (physical_cores(), physical_cores())
        backend.set_threads(1, physical_cores())
        assert backend.threads == (1, physical_cores())
    finally:
        backend.close()
    set_here = open_llama(model_path, EngineOptions(n_threads=1, n_threads_batch=1))
    try:
        assert set_here.threads == (1, 1)
    finally:
        set_here.close()


@pytest.mark.model
def test_calibration_measures_each_count_and_keeps_the_fastest(model_path: Path) -> None:
    backend = open_llama(model_path, EngineOptions(cache_ram_mb=0))
    tried: list[tuple[int, float | None]] = []
    try:
        choice = calibrate(
            backend,
            [1, 2],
            1,
            StopSignal(),
            on_progress=lambda n, rate: tried.append((n, rate)),
            try_seconds=0.3,
        )
        assert choice is not None
        assert set(choice.rates) == {1, 2}
        assert all(rate > 0 for rate in choice.rates.values())
        best = max(choice.rates.values())
        assert choice.rates[choice.n_threads] >= best * 0.97
        # The fewest threads among the near-best: more would only take CPU from the window.
        assert all(choice.rates[n] < best * 0.97 for n in choice.rates if n < choice.n_threads)
        assert backend.threads == (choice.n_threads, 1)
        assert [n for n, rate in tried if rate is None] == [1, 2, 1, 2]
        # What it decoded is not kept as a conversation.
        assert backend.sequence.conversation != CALIBRATION
    finally:
        backend.close()


@pytest.mark.model
def test_stop_ends_a_calibration_at_once(model_path: Path) -> None:
    backend = open_llama(model_path, EngineOptions(cache_ram_mb=0))
    stop = StopSignal()
    started = threading.Event()
    result: list[object] = []

    def run() -> None:
        result.append(
            calibrate(backend, [1, 2], 1, stop, lambda n, r: started.set(), try_seconds=30.0)
        )

    thread = threading.Thread(target=run)
    thread.start()
    try:
        assert started.wait(30)
        time.sleep(0.2)  # decoding now, in its 30-second try
        stop.set()
        thread.join(10)  # a hang guard, not a speed target: it returns within a token
        assert not thread.is_alive()
        assert result == [None]
    finally:
        thread.join()
        backend.close()


def _session(choices: ThreadChoices) -> ChatSession:
    return ChatSession(open_llama, options=EngineOptions(cache_ram_mb=0), thread_choices=choices)


@pytest.mark.model
def test_the_first_open_measures_and_the_next_one_reuses_it(
    loop: Loop, model_path: Path, tmp_path: Path
) -> None:
    choices = ThreadChoices(tmp_path)
    reports: list[ThreadReport] = []
    measuring: list[int] = []
    session = _session(choices)
    session.host.threads_changed.connect(reports.append)
    session.host._worker.threads_measuring.connect(lambda n, rate: measuring.append(n))
    session.open_model(model_path)
    run_until(loop, lambda: len(reports) == 1, timeout=60)
    (first,) = reports
    assert first.source == "measured"
    assert set(first.rates) == set(range(1, physical_cores() + 1))
    assert measuring
    assert f"Decode threads: {first.n_threads} (measured now" in session.metrics.threads
    # Opened again: the kept measurement is used, nothing is measured.
    measuring.clear()
    session.open_model(model_path)
    run_until(loop, lambda: len(reports) == 2, timeout=60)
    assert reports[1].source == "kept"
    assert reports[1].n_threads == first.n_threads
    assert measuring == []
    # Measure again, on demand (Settings).
    session.measure_threads()
    run_until(loop, lambda: len(reports) == 3, timeout=60)
    assert reports[2].source == "measured"
    loop.run_until_complete(session.close())


def _measuring_session(
    loop: Loop, model_path: Path, tmp_path: Path
) -> tuple[ChatSession, list[ThreadReport]]:
    """A session whose worker is measuring its decode threads (the model's first open), and
    the list its thread reports arrive in."""
    reports: list[ThreadReport] = []
    session = _session(ThreadChoices(tmp_path))
    session.host.threads_changed.connect(reports.append)
    measuring = threading.Event()
    session.host._worker.threads_measuring.connect(lambda n, rate: measuring.set())
    session.open_model(model_path)
    run_until(loop, measuring.is_set, timeout=60)
    return session, reports


@pytest.mark.model
def test_a_prompt_sent_during_the_measurement_ends_it_and_is_answered(
    loop: Loop, model_path: Path, tmp_path: Path
) -> None:
    session, reports = _measuring_session(loop, model_path, tmp_path)
    session.send("Say hello.")
    run_until(loop, lambda: bool(reports), timeout=60)
    assert reports[0].source == "default"  # not kept: measured again next time
    assert reports[0].n_threads == physical_cores()
    run_until(loop, lambda: not session.generating, timeout=60)
    assert session.conversation.messages[-1].content
    assert not ThreadChoices(tmp_path).path.exists()
    loop.run_until_complete(session.close())


@pytest.mark.model
def test_an_api_request_during_the_measurement_ends_it_and_is_answered(
    loop: Loop, model_path: Path, tmp_path: Path
) -> None:
    session, reports = _measuring_session(loop, model_path, tmp_path)
    server = LocalServer(ServerConfig(port=0), session.host)
    server.start()
    answers: list[str] = []

    def ask() -> None:  # the official client, from another thread, as another program would
        client = openai.OpenAI(base_url=server.base_url, api_key="none", max_retries=0)
        reply = client.chat.completions.create(
            model="any", messages=[{"role": "user", "content": "Say hello."}], max_tokens=16
        )
        answers.append(reply.choices[0].message.content or "")

    asker = threading.Thread(target=ask)
    asker.start()
    try:
        run_until(loop, lambda: bool(answers), timeout=60)
    finally:
        asker.join(timeout=60)
        server.stop()
    assert answers[0]
    assert reports[0].source == "default"  # the measurement ended: measured again next time
    assert not ThreadChoices(tmp_path).path.exists()
    loop.run_until_complete(session.close())


@pytest.mark.model
def test_a_prompt_sent_while_the_model_loads_does_not_wait_for_a_measurement(
    loop: Loop, model_path: Path, tmp_path: Path
) -> None:
    reports: list[ThreadReport] = []
    measured: list[int] = []
    session = _session(ThreadChoices(tmp_path))
    session.host.threads_changed.connect(reports.append)
    session.host._worker.threads_measuring.connect(lambda n, rate: measured.append(n))
    session.open_model(model_path)
    session.send("Say hello.")  # queued behind the model's loading
    run_until(loop, lambda: bool(reports) and not session.generating, timeout=60)
    assert reports[0].source == "default"  # skipped: measured the next time it opens
    assert measured == []
    assert session.conversation.messages[-1].content
    assert not ThreadChoices(tmp_path).path.exists()
    loop.run_until_complete(session.close())


@pytest.mark.model
def test_llama_cpp_is_called_from_the_worker_thread_only(
    loop: Loop, model_path: Path, tmp_path: Path
) -> None:
    opened: list[LlamaBackend] = []

    def opener(path: Path, options: EngineOptions) -> LlamaBackend:
        backend = open_llama(path, options)
        opened.append(backend)
        return backend

    session = ChatSession(
        opener, options=EngineOptions(cache_ram_mb=0), thread_choices=ThreadChoices(tmp_path)
    )
    session.open_model(model_path)
    run_until(loop, lambda: session.metrics.threads != "", timeout=60)
    for prompt in ("Hello.", "And again?"):
        session.send(prompt)
        run_until(loop, lambda: not session.generating, timeout=60)
    # Counting tokens (for attachments) is asked from a reader thread, computed on the worker.
    counted: list[int | None] = []
    reader = threading.Thread(target=lambda: counted.append(session.count_tokens("a few words")))
    reader.start()
    reader.join(30)
    (count,) = counted
    assert count is not None
    assert count > 0
    loop.run_until_complete(session.new_conversation())
    loop.run_until_complete(session.close())
    (backend,) = opened
    # Load, measurement, replies, counting, forgetting and freeing: all on one thread.
    assert len(backend.calling_threads) == 1


def _nice_by_thread() -> dict[int, tuple[str, int]]:
    """This process's threads: their names and ``nice`` values, by thread id (Linux)."""
    threads = {}
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
            # The fields after the name (which may hold spaces): nice is the 19th of the line.
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        threads[int(task.name)] = (name, int(fields[16]))
    return threads


@pytest.mark.model
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="threads' nice is Linux's")
def test_the_windows_decode_threads_run_below_its_ui_thread(
    loop: Loop, model_path: Path, tmp_path: Path
) -> None:
    ui_nice = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    session = ChatSession(
        open_llama, options=EngineOptions(n_threads=2), thread_choices=ThreadChoices(tmp_path)
    )
    try:
        session.open_model(model_path)
        run_until(loop, lambda: session.metrics.threads != "", timeout=60)
        session.send("Hello.")
        run_until(loop, lambda: not session.generating, timeout=60)
        decode = [n for name, n in _nice_by_thread().values() if name == DECODE_COMM]
        # The worker and llama.cpp's OpenMP team, which inherits the worker's priority.
        assert len(decode) >= 2
        assert set(decode) == {min(19, ui_nice + BELOW_WINDOW)}
        assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == ui_nice
    finally:
        loop.run_until_complete(session.close())


# -- decode threads refined by the replies themselves -----------------------------------------


def test_a_count_is_tried_while_streaming_only_if_its_calibration_could_beat_the_current() -> None:
    idle = {1: 158.0, 2: 199.0}
    # Two threads streamed at 163: one thread decoded at 158 alone, so it cannot do better.
    assert next_decode_threads(idle, {2: 163.0}, 2) == 2
    # Streaming at 140, one thread's 158 alone might beat it: the next reply finds out.
    assert next_decode_threads(idle, {2: 140.0}, 2) == 1
    # Once both streamed, the calibration's choice (two) is kept unless the other streams
    # more than 3 % faster, whichever count the last reply used.
    for current in (1, 2):
        assert next_decode_threads(idle, {1: 150.0, 2: 140.0}, current) == 1
        assert next_decode_threads(idle, {1: 150.0, 2: 147.0}, current) == 2
        assert next_decode_threads(idle, {1: 140.0, 2: 150.0}, current) == 2
    # Nothing streamed at the current count yet: nothing to go on.
    assert next_decode_threads(idle, {}, 2) == 2


def test_counts_the_calibration_could_not_tell_apart_are_each_tried_while_streaming() -> None:
    # Within 3 % of each other alone: the calibration chose the fewer threads, and two
    # threads' 148 could not beat one's streaming 145 by the rule above; tied, it is tried.
    idle = {1: 152.0, 2: 148.0}
    assert next_decode_threads(idle, {1: 145.0}, 1) == 2
    # Two streamed more than 3 % faster: kept. Within 3 %: back to the calibration's one.
    assert next_decode_threads(idle, {1: 145.0, 2: 157.0}, 2) == 2
    assert next_decode_threads(idle, {1: 145.0, 2: 147.0}, 2) == 1
    # A count more than 3 % slower alone, which cannot beat the streaming rate either, is not.
    assert next_decode_threads({1: 152.0, 2: 140.0}, {1: 145.0}, 1) == 1


def test_streaming_rates_are_kept_with_the_measurement(tmp_path: Path) -> None:
    choices = ThreadChoices(tmp_path)
    choices.put("k", Measured(2, {1: 50.0, 2: 95.5}, {2: 80.25}))
    assert ThreadChoices(tmp_path).get("k") == Measured(2, {1: 50.0, 2: 95.5}, {2: 80.25})


def test_window_replies_measure_their_count_while_streaming_and_may_change_it(
    loop: Loop, tmp_path: Path
) -> None:
    """A scripted model decoding at a set pace: the rule is the engine's, not llama.cpp's."""
    model = tmp_path / "tiny.gguf"
    model.write_bytes(b"GGUF")
    # 200 pieces, 0.2 s a reply: the two rates compared within 3 % below differ by a hiccup
    # of the machine's over the reply's time (one of 4 ms over 0.1 s read 982 against 1,019).
    story = [f" word{i}" for i in range(200)]
    opened: list[ScriptedBackend] = []

    def opener(path: Path, options: EngineOptions) -> ScriptedBackend:
        opened.append(ScriptedBackend(story, rate=1000.0, path=path))
        return opened[-1]

    choices = ThreadChoices(tmp_path / "data")
    key = ThreadChoices.key(model, machine_fingerprint(), "")
    # A calibration that found one thread far faster than two, yet chose two: one reply
    # streaming at two threads shows whether one does better while the window streams.
    choices.put(key, Measured(2, {1: 1e6, 2: 10.0}))
    reports: list[ThreadReport] = []
    session = ChatSession(opener, options=EngineOptions(), thread_choices=choices)
    session.host.threads_changed.connect(reports.append)
    session.open_model(model)
    run_until(loop, lambda: bool(reports), timeout=30)
    (backend,) = opened
    assert (reports[-1].source, backend.threads[0]) == ("kept", 2)

    def reply(pieces: list[str], prompt: str = "Tell me a story.") -> None:
        backend.enqueue(pieces)
        count = len(reports)
        session.send(prompt)
        run_until(loop, lambda: not session.generating, timeout=30)
        if len(pieces) >= STREAMED_TOKENS and len(prompt.split()) < STREAMED_CONTEXT:
            run_until(loop, lambda: len(reports) > count, timeout=30)

    reply(story[:10])  # too short to say anything of the rate
    assert choices.get(key) == Measured(2, {1: 1e6, 2: 10.0})
    # Long enough, but deep in a long conversation (the scripted model counts words).
    loop.run_until_complete(session.new_conversation())
    reply(story, "word " * STREAMED_CONTEXT)
    assert backend.received[-1][-1]["content"].count("word") == STREAMED_CONTEXT
    assert choices.get(key) == Measured(2, {1: 1e6, 2: 10.0})
    loop.run_until_complete(session.new_conversation())
    reply(story)
    first = choices.get(key)
    assert first is not None
    assert set(first.streaming) == {2}
    assert 300 < first.streaming[2] < 1100  # about the scripted pace, 1,000 a second
    assert first.n_threads == backend.threads[0] == 1  # one thread is tried next
    reply(story)
    second = choices.get(key)
    assert second is not None
    assert set(second.streaming) == {1, 2}
    assert second.n_threads == backend.threads[0]
    assert second.n_threads == next_decode_threads(second.rates, second.streaming, 1)
    # Both at the scripted pace: the calibration's choice, one thread, stays.
    assert second.n_threads == 1
    assert reports[-1].streaming == pytest.approx(second.streaming, abs=0.01)  # kept rounded
    assert "while replies streamed at" in str(reports[-1].sentence())
    loop.run_until_complete(session.close())
