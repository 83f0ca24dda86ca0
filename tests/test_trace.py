"""Flow traces: the Chrome Trace Event Format file, what it records, and what it costs when off."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.engine import GenerationReport, GenerationSettings, StopSignal
from app.flow.metrics import (
    COMPUTATION_ENDED,
    PROMPT_PROCESSING,
    REPLY_START,
    STOP_PRESSED,
    FlowMetrics,
    FlowSampler,
)
from app.flow.session import ChatSession, ModelState
from app.standins.scripted import ScriptedBackend, scripted_opener
from app.trace import TRACE, Tracer, check_trace
from tests.support.loop import Loop, run_until

MODEL = Path("scripted.gguf")


@pytest.fixture
def tracer() -> Iterator[Tracer]:
    """The process's tracer, never left recording by a test."""
    yield TRACE
    if TRACE.recording:
        TRACE.stop()


def load(path: Path) -> dict[str, Any]:
    document = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(document, dict)
    return document


def events(document: dict[str, Any], phase: str | None = None) -> list[dict[str, Any]]:
    return [e for e in document["traceEvents"] if phase is None or e["ph"] == phase]


def thread_names(document: dict[str, Any]) -> dict[int, str]:
    return {
        e["tid"]: e["args"]["name"] for e in events(document, "M") if e["name"] == "thread_name"
    }


REQUIRED = {
    "X": {"name", "cat", "ph", "ts", "dur", "pid", "tid"},
    "i": {"name", "cat", "ph", "ts", "pid", "tid", "s"},
    "C": {"name", "ph", "ts", "pid", "args"},
    "M": {"name", "ph", "pid", "tid", "args"},
}


def assert_valid(document: dict[str, Any]) -> None:
    """The format's rules, checked here independently of :func:`check_trace` as well."""
    assert document["displayTimeUnit"] == "ms"
    assert isinstance(document["traceEvents"], list)
    last: dict[int, float] = {}
    for event in document["traceEvents"]:
        assert REQUIRED[event["ph"]] <= event.keys(), event
        if event["ph"] == "X":
            assert event["dur"] >= 0, event
        if event["ph"] in ("X", "i"):
            # In file order, a thread's events never go back in time (spans by their start).
            assert event["ts"] >= last.get(event["tid"], 0.0), event
            last[event["tid"]] = event["ts"]
    named = thread_names(document)
    for event in events(document):
        if event["ph"] in ("X", "i"):
            assert event["tid"] in named, f"thread {event['tid']} has no name"
    assert check_trace(document) == []


# -- the tracer itself ------------------------------------------------------------------------


def test_a_recording_is_a_valid_chrome_trace_with_named_threads(
    tracer: Tracer, tmp_path: Path
) -> None:
    path = tmp_path / "flow.json"
    tracer.name_thread("UI")
    tracer.start(path)

    def worker() -> None:
        tracer.name_thread("worker")
        for token in range(50):
            with tracer.span("decode token", cat="engine", token=token):
                time.sleep(0.0002)
        tracer.instant("computation ended")

    thread = threading.Thread(target=worker)
    thread.start()
    for depth in range(30):
        with tracer.span("frame"):
            with tracer.span("drain"):
                pass
            with tracer.span("apply", pieces=depth):
                time.sleep(0.0002)
        tracer.counter("queue", depth=depth, bound=64)
    tracer.instant("stop pressed")
    thread.join()
    assert tracer.stop() == path
    assert not tracer.recording

    document = load(path)
    assert_valid(document)
    names = thread_names(document)
    assert names[threading.get_native_id()] == "UI"
    assert names[thread.native_id or 0] == "worker"
    spans = events(document, "X")
    assert sum(e["name"] == "decode token" for e in spans) == 50
    assert all(e["tid"] == thread.native_id for e in spans if e["name"] == "decode token")
    assert [e["args"]["token"] for e in spans if e["name"] == "decode token"] == list(range(50))
    frames = [e for e in spans if e["name"] == "frame"]
    applies = [e for e in spans if e["name"] == "apply"]
    assert len(frames) == len(applies) == 30
    for frame, apply in zip(frames, applies, strict=True):  # nested: apply inside its frame
        assert frame["ts"] <= apply["ts"]
        assert apply["ts"] + apply["dur"] <= frame["ts"] + frame["dur"] + 0.002
    counters = events(document, "C")
    assert [c["args"]["depth"] for c in counters] == list(range(30))
    assert {e["name"] for e in events(document, "i")} == {"stop pressed", "computation ended"}
    assert all(e["s"] == "t" for e in events(document, "i"))
    assert {e["pid"] for e in events(document)} == {events(document, "X")[0]["pid"]}


def test_nothing_is_recorded_while_not_recording(tracer: Tracer, tmp_path: Path) -> None:
    assert not tracer.recording
    with tracer.span("frame"):
        tracer.instant("stop pressed")
        tracer.counter("queue", depth=1)
        tracer.instant_at("computation ended", time.perf_counter())
        tracer.complete("prefill", 1.0, 2.0)
    assert tracer.stop() is None  # nothing to write

    path = tmp_path / "empty.json"
    tracer.start(path)
    tracer.stop()
    document = load(path)
    assert [e for e in events(document) if e["ph"] != "M"] == []
    # What a call site costs when off: one shared do-nothing context, nothing allocated.
    assert tracer.span("a") is tracer.span("b", cat="engine", x=1)


def test_a_span_that_outlives_its_recording_is_not_in_the_next_one(
    tracer: Tracer, tmp_path: Path
) -> None:
    tracer.name_thread("UI")
    tracer.start(tmp_path / "first.json")
    with tracer.span("long"):
        tracer.stop()
        tracer.start(tmp_path / "second.json")
    tracer.stop()
    assert events(load(tmp_path / "second.json"), "X") == []
    assert events(load(tmp_path / "first.json"), "X") == []  # it ended after the file was taken


def test_stop_async_writes_on_another_thread(tracer: Tracer, tmp_path: Path) -> None:
    path = tmp_path / "async.json"
    tracer.name_thread("UI")
    tracer.start(path)
    for n in range(1000):
        tracer.counter("queue", depth=n)
    writers: list[str] = []
    future = tracer.stop_async(lambda _: writers.append(threading.current_thread().name))
    assert not tracer.recording  # recording stops at once, before the file is written
    tracer.counter("queue", depth=-1)  # not in the file
    assert future.result(timeout=10) == path
    assert writers == ["trace writer"]
    counters = events(load(path), "C")
    assert [c["args"]["depth"] for c in counters] == list(range(1000))


def test_a_long_recording_keeps_the_newest_events_and_says_it_was_cut(tmp_path: Path) -> None:
    tracer = Tracer(limit=100)
    tracer.name_thread("UI")
    tracer.start(tmp_path / "cut.json")
    for n in range(1000):
        tracer.counter("queue", depth=n)
    tracer.stop()
    document = load(tmp_path / "cut.json")
    assert document["otherData"]["truncated"] is True
    assert [c["args"]["depth"] for c in events(document, "C")] == list(range(900, 1000))
    assert_valid(document)


def test_a_file_that_cannot_be_written_raises_and_leaves_nothing(
    tracer: Tracer, tmp_path: Path
) -> None:
    missing = tmp_path / "no such folder" / "flow.json"
    tracer.start(missing)
    tracer.instant("x")
    with pytest.raises(OSError, match="No such file"):
        tracer.stop()
    tracer.start(missing)
    future = tracer.stop_async()
    assert isinstance(future.exception(timeout=10), OSError)
    assert not missing.parent.exists()


@pytest.mark.parametrize(
    ("event", "problem"),
    [
        ({"name": "a", "cat": "c", "ph": "X", "ts": 1, "pid": 1, "tid": 1}, "missing dur"),
        ({"name": "a", "cat": "c", "ph": "X", "ts": 1, "dur": -1, "pid": 1, "tid": 1}, "dur < 0"),
        ({"name": "a", "ph": "B", "ts": 1, "pid": 1, "tid": 1}, "has no end"),
        ({"ph": "E", "ts": 1, "pid": 1, "tid": 1}, "an end with no begin"),
        ({"name": "a", "ph": "Q", "ts": 1, "pid": 1, "tid": 1}, "unknown phase"),
        ({"name": "a", "cat": "c", "ph": "i", "ts": 1, "pid": 1, "tid": 2, "s": "t"}, "no thread"),
        ({"name": "q", "ph": "C", "ts": 1, "pid": 1, "args": {"depth": "3"}}, "not a number"),
    ],
)
def test_the_validator_finds_what_viewers_would_trip_on(
    event: dict[str, Any], problem: str
) -> None:
    named = {"name": "thread_name", "ph": "M", "pid": 1, "tid": 1, "args": {"name": "UI"}}
    problems = check_trace({"traceEvents": [named, event]})
    assert any(problem in p for p in problems), problems


def test_the_validator_finds_spans_that_overlap_and_time_going_back() -> None:
    named = {"name": "thread_name", "ph": "M", "pid": 1, "tid": 1, "args": {"name": "UI"}}

    def span(ts: float, dur: float) -> dict[str, Any]:
        return {"name": "s", "cat": "c", "ph": "X", "ts": ts, "dur": dur, "pid": 1, "tid": 1}

    assert check_trace({"traceEvents": [named, span(0, 10), span(2, 3), span(10, 1)]}) == []
    overlapping = check_trace({"traceEvents": [named, span(0, 10), span(5, 10)]})
    assert any("overlaps" in p for p in overlapping)
    backwards = check_trace({"traceEvents": [named, span(5, 1), span(0, 1)]})
    assert any("goes back in time" in p for p in backwards)
    assert check_trace([]) == ['not a trace: expected {"traceEvents": [...]}']


def test_the_frame_counters_for_the_pump(tracer: Tracer, tmp_path: Path) -> None:
    metrics = FlowMetrics(queue_bound=32)
    metrics.trace_frame(depth=5, lag_ms=1.0)  # not recording: nothing
    path = tmp_path / "frames.json"
    tracer.name_thread("UI")
    tracer.start(path)
    for frame in range(40):
        metrics.reply.pieces_shown += 4
        metrics.trace_frame(depth=frame % 8, lag_ms=0.5)
        time.sleep(0.005)
    tracer.stop()
    document = load(path)
    assert_valid(document)
    counters = events(document, "C")
    queue = [c["args"] for c in counters if c["name"] == "queue"]
    assert queue == [{"depth": frame % 8, "bound": 32} for frame in range(40)]
    assert all(c["args"] == {"ms": 0.5} for c in counters if c["name"] == "loop lag")
    rates = [c["args"]["rate"] for c in counters if c["name"] == "tokens/s"]
    assert len(rates) == 40
    assert rates[0] == 0.0  # nothing to measure a rate over yet
    assert all(rate > 0 for rate in rates[1:])  # pieces kept coming
    assert max(rates) <= 4 / 0.005 * 1.01  # never more than 4 pieces per (at least) 5 ms


# -- the flow's moments in a trace ------------------------------------------------------------


def instants(document: dict[str, Any]) -> list[tuple[str, float]]:
    return [(e["name"], e["ts"] / 1e6) for e in events(document, "i")]


def test_a_stop_during_prompt_processing_is_a_sequence_of_moments(
    tracer: Tracer, tmp_path: Path
) -> None:
    # The metrics read the moments from the reply's own report and stop signal, whatever
    # thread set them; here the scripted engine runs on a thread like the worker.
    backend = ScriptedBackend(["never"], prefill_seconds=5.0)
    metrics = FlowMetrics(queue_bound=8)
    report, stop = GenerationReport(), StopSignal()
    path = tmp_path / "stop.json"
    tracer.name_thread("UI")
    tracer.start(path)
    metrics.begin_reply(report, stop)
    produced: list[str] = []

    def worker() -> None:
        tracer.name_thread("worker")
        produced.extend(
            backend.stream_reply(
                [{"role": "user", "content": "a b c"}], GenerationSettings(), stop, report
            )
        )
        report.compute_ended_at = time.perf_counter()

    thread = threading.Thread(target=worker)
    thread.start()
    deadline = time.monotonic() + 10
    while report.prefill_started_at is None and time.monotonic() < deadline:
        time.sleep(0.005)
    time.sleep(0.1)  # into the prompt
    FlowSampler(metrics).sample()  # the timeline's reading, while the prompt is processed
    assert metrics.prefilling
    assert stop.set()
    thread.join(timeout=10)
    metrics.end_reply()
    tracer.stop()

    document = load(path)
    assert_valid(document)
    moments = instants(document)
    assert [name for name, _ in moments] == [
        REPLY_START,
        PROMPT_PROCESSING,
        STOP_PRESSED,
        COMPUTATION_ENDED,
        "reply shown ended",
    ]
    at = dict(moments)
    assert at[PROMPT_PROCESSING] - at[REPLY_START] < 1.0
    assert 0.05 < at[STOP_PRESSED] - at[PROMPT_PROCESSING] < 5.0  # Stop landed mid-prompt
    assert 0 <= at[COMPUTATION_ENDED] - at[STOP_PRESSED] < 0.5  # and stopped the computation
    assert 0 <= at["reply shown ended"] - at[COMPUTATION_ENDED] < 1.0
    assert produced == []
    prompt = next(e for e in events(document, "i") if e["name"] == PROMPT_PROCESSING)
    assert prompt["args"] == {"tokens": 3, "cached": 0}
    assert prompt["cat"] == "reply"


def session_trace(loop: Loop, tracer: Tracer, path: Path, *, stop_in_prompt: bool) -> None:
    """Record a trace of one scripted reply through a real ChatSession."""
    backend = ScriptedBackend(["tok "] * 400, rate=400, prefill_seconds=3 if stop_in_prompt else 0)
    session = ChatSession(scripted_opener(backend), queue_bound=16)
    session.open_model(MODEL)
    run_until(loop, lambda: session.state is ModelState.READY)
    tracer.name_thread("UI")
    tracer.start(path)
    sampler = FlowSampler(session.metrics)
    try:
        assert session.send("one two three")
        # The predicates take the timeline's readings as the loop runs, as an open panel would.
        if stop_in_prompt:
            run_until(loop, lambda: bool(sampler.sample()) and session.metrics.prefill_done > 0)
        else:
            run_until(
                loop, lambda: bool(sampler.sample()) and session.metrics.reply.pieces_shown >= 100
            )
        assert session.stop()
        run_until(loop, lambda: bool(sampler.sample()) and not session.generating)
    finally:
        if tracer.recording:
            tracer.stop()
        loop.run_until_complete(session.close())


def test_a_reply_through_a_real_session_records_a_valid_trace(
    loop: Loop, tracer: Tracer, tmp_path: Path
) -> None:
    path = tmp_path / "session.json"
    session_trace(loop, tracer, path, stop_in_prompt=False)
    document = load(path)
    assert_valid(document)
    names = {e["name"] for e in events(document, "i")}
    assert {REPLY_START, "first token"} <= names  # read by the timeline's sampler


def test_the_flow_hooks_put_frames_counters_and_moments_in_the_trace(
    loop: Loop, tracer: Tracer, tmp_path: Path
) -> None:
    path = tmp_path / "session.json"
    session_trace(loop, tracer, path, stop_in_prompt=False)
    document = load(path)
    assert_valid(document)
    names = thread_names(document)
    assert {"UI", "worker"} <= set(names.values())
    ui = next(tid for tid, name in names.items() if name == "UI")
    spans = {(e["name"], e["tid"]) for e in events(document, "X")}
    assert {("drain", ui), ("apply", ui)} <= spans
    counters = {e["name"] for e in events(document, "C")}
    assert {"queue", "tokens/s", "loop lag"} <= counters
    moments = [name for name, _ in instants(document)]
    for before, after in [
        (REPLY_START, STOP_PRESSED),
        (STOP_PRESSED, COMPUTATION_ENDED),
        (COMPUTATION_ENDED, "reply shown ended"),
    ]:
        assert moments.index(before) < moments.index(after), moments


def test_a_stop_in_prompt_processing_through_a_real_session(
    loop: Loop, tracer: Tracer, tmp_path: Path
) -> None:
    path = tmp_path / "stop.json"
    session_trace(loop, tracer, path, stop_in_prompt=True)
    document = load(path)
    assert_valid(document)
    moments = instants(document)
    order = [name for name, _ in moments]
    assert order == [
        REPLY_START,
        PROMPT_PROCESSING,
        STOP_PRESSED,
        COMPUTATION_ENDED,
        "reply shown ended",
    ], order
    at = dict(moments)
    assert 0 <= at[COMPUTATION_ENDED] - at[STOP_PRESSED] < 0.5
    assert 0 <= at["reply shown ended"] - at[COMPUTATION_ENDED] < 1.0
