"""Replies side by side: the window and the API server's clients decoded in one batch.

Everything here is real: the bundled model through llama.cpp, a context opened for several
sequences, the worker's thread stepping the batch, the API server with the official
``openai`` client, and readers that read (or do not) on threads of their own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import openai
import pytest

from app.engine import (
    ChatMessage,
    EngineOptions,
    GenerationReport,
    GenerationSettings,
    StopSignal,
)
from app.engine.batch import BatchedReply
from app.engine.llama import open_llama
from app.flow.piece_queue import PieceQueue
from app.flow.worker import ReplyJob
from app.server.api import ServerConfig
from tests.support.batches import note_keeping
from tests.support.loop import Loop
from tests.support.serving import Served, long_prompt, serve, wait_until

pytestmark = pytest.mark.model

GREEDY = GenerationSettings(temperature=0.0, max_tokens=40)
QUESTIONS = (
    "Name three colours.",
    "What is the capital of France?",
    "Write a haiku about rain.",
    "Count to ten.",
)


@pytest.fixture
def served(loop: Loop, model_path: Path) -> Iterator[Served]:
    served = serve(
        loop,
        open_llama,
        model_path,
        ServerConfig(port=0, max_waiting=8),
        options=EngineOptions(n_ctx=2048, parallel=4),
    )
    try:
        yield served
    finally:
        served.server.stop()


@dataclass
class Stream:
    """A reply asked of the worker directly, and a reader for it on a thread of its own."""

    job: ReplyJob
    text: list[str] = field(default_factory=list)
    reading: threading.Event = field(default_factory=threading.Event)
    piece_times: list[float] = field(default_factory=list)

    def read(self) -> None:
        pieces = self.job.pieces
        while not pieces.finished:
            self.reading.wait()
            for piece in pieces.drain():
                self.text.append(piece.text)
                self.piece_times.append(time.perf_counter())
            time.sleep(0.001)

    @property
    def reply(self) -> str:
        return "".join(self.text)

    @property
    def ended(self) -> bool:
        return self.job.report.compute_ended_at is not None and self.job.pieces.finished


def ask(
    served: Served,
    question: str,
    *,
    settings: GenerationSettings = GREEDY,
    bound: int = 64,
    reading: bool = True,
    origin: str = "server",
    conversation: str = "",
    before: list[ChatMessage] | None = None,
) -> Stream:
    """Queue one reply for the worker, with a reader that reads unless told not to."""
    stop = StopSignal()
    job = ReplyJob(
        [*(before or []), {"role": "user", "content": question}],
        settings,
        stop,
        PieceQueue(bound, stop),
        conversation=conversation or f"test-{question[:40]}-{time.perf_counter()}",
        origin="window" if origin == "window" else "server",
    )
    stream = Stream(job)
    if reading:
        stream.reading.set()
    threading.Thread(target=stream.read, daemon=True).start()
    served.session.host.produce_local(job)
    return stream


def alone(served: Served, question: str, settings: GenerationSettings = GREEDY) -> str:
    stream = ask(served, question, settings=settings)
    wait_until(lambda: stream.ended, 60)
    assert stream.job.report.batch_peak == 1
    return stream.reply


def test_the_window_and_three_clients_at_once_each_get_their_reply_alone(served: Served) -> None:
    solo = {q: alone(served, q) for q in QUESTIONS[1:]}
    session = served.session
    session.settings = GREEDY
    assert session.send(QUESTIONS[0])
    served.wait_for(lambda: not session.generating, 60)
    solo[QUESTIONS[0]] = session.conversation.messages[-1].content
    replies: dict[str, str] = {}

    def client(question: str) -> None:
        with openai.OpenAI(base_url=served.url, api_key="unused", max_retries=0) as api:
            reply = api.chat.completions.create(
                model="any",
                messages=[{"role": "user", "content": question}],
                temperature=0,
                max_tokens=GREEDY.max_tokens,
                stream=True,
            )
            replies[question] = "".join(chunk.choices[0].delta.content or "" for chunk in reply)

    clients = [threading.Thread(target=client, args=(q,)) for q in QUESTIONS[1:]]
    for thread in clients:
        thread.start()
    wait_until(lambda: sum(r.job is not None for r in served.requests()) == len(clients))
    assert session.regenerate()  # the same prompt, now beside three clients
    served.wait_for(lambda: not session.generating, 60)
    for thread in clients:
        thread.join(60)
    assert session.conversation.messages[-1].content == solo[QUESTIONS[0]]
    for question in QUESTIONS[1:]:
        assert replies[question] == solo[question], question
    # They were decoded side by side, not one after another.
    jobs = [r.job for r in served.requests()[-3:] if r.job is not None]
    assert max(job.report.batch_peak for job in jobs) >= 3
    spans = [(job.began_at or 0.0, job.report.compute_ended_at or 0.0) for job in jobs]
    assert max(start for start, _ in spans) < min(end for _, end in spans)


def test_stopped_mid_prompt_and_mid_reply_while_the_others_go_on(served: Served) -> None:
    solo = {
        q: alone(served, q, GenerationSettings(temperature=0.0, max_tokens=120))
        for q in QUESTIONS[2:]
    }
    long_settings = GenerationSettings(temperature=0.0, max_tokens=120)
    others = [ask(served, q, settings=long_settings) for q in QUESTIONS[2:]]
    in_reply = ask(served, "Tell me a long story about a lighthouse.", settings=long_settings)
    wait_until(lambda: in_reply.job.report.reply_tokens >= 5, 60)
    in_prompt = ask(served, long_prompt(), settings=long_settings)
    report = in_prompt.job.report
    wait_until(lambda: report.prefill_done > report.cached_tokens + 16, 60)
    others_then = [s.job.report.reply_tokens for s in others]

    in_prompt.job.stop.set()
    in_reply.job.stop.set()
    wait_until(lambda: in_prompt.ended and in_reply.ended, 30)
    assert report.finish == "stopped"
    assert report.prefill_ended_at is None
    assert report.reply_tokens == 0
    assert in_reply.job.report.finish == "stopped"
    assert in_reply.job.report.reply_tokens < long_settings.max_tokens

    wait_until(lambda: all(s.ended for s in others), 60)
    for stream, question, before in zip(others, QUESTIONS[2:], others_then, strict=True):
        assert stream.job.report.finish in ("done", "length")
        assert stream.job.report.reply_tokens > before or stream.job.report.finish == "done"
        assert stream.reply == solo[question]


def test_a_slow_reader_waits_alone_while_the_others_keep_going(served: Served) -> None:
    settings = GenerationSettings(temperature=0.0, max_tokens=80)
    solo = alone(served, QUESTIONS[3], settings)
    slow = ask(served, QUESTIONS[3], settings=settings, bound=4, reading=False)
    wait_until(lambda: slow.job.report.paused, 60)
    held = slow.job.report.reply_tokens
    others = [ask(served, q, settings=settings) for q in QUESTIONS[:2]]
    wait_until(lambda: all(s.ended for s in others), 60)
    # Paused alone: its tokens did not move while the others were decoded to their end.
    assert slow.job.report.paused
    assert slow.job.report.reply_tokens == held
    assert slow.job.pieces.max_depth <= slow.job.pieces.bound
    assert slow.job.report.compute_ended_at is None
    assert all(s.job.report.reply_tokens > 10 for s in others)
    slow.reading.set()
    wait_until(lambda: slow.ended, 60)
    assert slow.reply == solo
    assert slow.job.pieces.backpressure_waits >= 1
    assert slow.job.report.paused_seconds > 0
    assert not slow.job.report.paused


def test_a_long_prompt_is_read_while_two_streams_keep_their_pace(served: Served) -> None:
    settings = GenerationSettings(temperature=0.0, max_tokens=200)
    running = [ask(served, q, settings=settings) for q in QUESTIONS[:2]]
    wait_until(lambda: all(s.job.report.reply_tokens >= 3 for s in running), 60)
    newcomer = ask(
        served, long_prompt(600), settings=GenerationSettings(temperature=0.0, max_tokens=8)
    )
    report = newcomer.job.report
    wait_until(lambda: report.prefill_ended_at is not None or newcomer.ended, 120)
    assert report.prefill_started_at is not None
    assert report.prefill_ended_at is not None
    began, read = report.prefill_started_at, report.prefill_ended_at
    assert report.prompt_tokens - report.cached_tokens > 400
    for stream in running:
        during = [t for t in stream.piece_times if began < t < read]
        if stream.job.report.compute_ended_at is None or stream.job.report.compute_ended_at > read:
            # Still going while it was read: it went on getting pieces all along.
            assert len(during) >= 5
    wait_until(lambda: newcomer.ended and all(s.ended for s in running), 120)
    assert newcomer.reply
    assert report.batch_peak >= 2


def test_the_window_goes_first_when_every_place_is_taken(loop: Loop, model_path: Path) -> None:
    served = serve(
        loop,
        open_llama,
        model_path,
        ServerConfig(port=0, max_waiting=8),
        options=EngineOptions(n_ctx=2048, parallel=2),
    )
    try:
        settings = GenerationSettings(temperature=0.0, max_tokens=60)
        taking = [ask(served, q, settings=settings) for q in QUESTIONS[:2]]
        wait_until(lambda: all(s.job.began_at is not None for s in taking), 60)
        waiting_client = ask(served, QUESTIONS[2], settings=settings)
        window = ask(served, QUESTIONS[3], settings=settings, origin="window")
        wait_until(lambda: window.ended and waiting_client.ended, 120)
        assert window.job.began_at is not None
        assert waiting_client.job.began_at is not None
        assert window.job.began_at < waiting_client.job.began_at
        # It took the first place that came free.
        first_end = min(s.job.report.compute_ended_at or 0.0 for s in taking)
        assert window.job.began_at >= first_end
    finally:
        served.server.stop()


def test_a_conversation_comes_back_to_the_sequence_that_holds_it(served: Served) -> None:
    first = ask(served, QUESTIONS[0], conversation="colours")
    wait_until(lambda: first.ended, 60)
    # Others meanwhile, in other sequences.
    others = [ask(served, q) for q in QUESTIONS[1:]]
    wait_until(lambda: all(s.ended for s in others), 60)
    follow_up = ask(
        served,
        "And three more.",
        conversation="colours",
        before=[
            {"role": "user", "content": QUESTIONS[0]},
            {"role": "assistant", "content": first.reply},
        ],
    )
    wait_until(lambda: follow_up.ended, 60)
    report = follow_up.job.report
    assert follow_up.reply
    assert report.prefix_source == "kept"
    assert report.cached_tokens >= first.job.report.prompt_tokens


@pytest.mark.parametrize("how", ["stop", "complete"])
def test_a_reply_beside_others_ends_before_its_kv_state_is_kept(
    model_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    # As alone (tests/engine/test_llama_engine.py): keeping the KV state for the prompt cache
    # copies tens of MB; the reply's end, which Stop's latency is measured to and which ends
    # its reader's queue (the report's on_end), comes first. The window's replies take this
    # path whenever the context is opened for several.
    backend = open_llama(model_path, EngineOptions(n_threads=2, n_ctx=1024, parallel=2))
    try:
        batch = backend.batch
        assert batch is not None
        moments: list[str] = []
        note_keeping(backend, moments, monkeypatch)
        stop = StopSignal()
        report = GenerationReport(on_end=lambda: moments.append("end"))
        pieces: list[str] = []

        def offer(text: str) -> bool:
            pieces.append(text)
            if len(pieces) == 5 and how == "stop":
                stop.set()
            return True

        settings = GenerationSettings(temperature=0.0, max_tokens=40 if how == "complete" else 400)
        reply = BatchedReply(
            [{"role": "user", "content": "Write a long story about a dragon."}],
            settings,
            stop,
            report,
            offer,
            lambda: moments.append("ended"),
            conversation="dragon",
        )
        assert batch.place(reply)
        while batch.busy:
            batch.step()
        assert moments == ["end", "keep the state", "ended"]
        assert report.finish == ("length" if how == "complete" else "stopped")
        assert report.compute_ended_at is not None
        assert report.batch_peak == 1
    finally:
        backend.close()


def test_replies_beside_others_report_their_python_per_token_without_what_the_engine_keeps(
    model_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The panel's "Python per token" for the window's replies, decoded in the batch as the
    # app's Auto opens it: each step's Python outside llama_decode, the sampler and the
    # reader, shared by the replies it decoded. Keeping an ended reply's KV state (a copy of
    # tens of MB, made slow here) is not the others' Python.
    backend = open_llama(model_path, EngineOptions(n_threads=2, n_ctx=1024, parallel=2))
    try:
        batch = backend.batch
        assert batch is not None
        settle = backend._kv.settle

        def slow_settle(*args: object, **kwargs: object) -> None:
            time.sleep(0.3)
            settle(*args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(backend._kv, "settle", slow_settle)
        reports = []
        for question, tokens in (("Name three colours.", 6), ("Write a long story.", 60)):
            report = GenerationReport()
            reports.append(report)
            settings = GenerationSettings(temperature=0.0, max_tokens=tokens)
            messages: list[ChatMessage] = [{"role": "user", "content": question}]
            reply = BatchedReply(
                messages, settings, StopSignal(), report, lambda _t: True, lambda: None
            )
            assert batch.place(reply)
        while batch.busy:
            batch.step()
        short, long = reports
        assert short.finish == long.finish == "length"
        assert long.reply_tokens == 60
        assert short.batch_peak == long.batch_peak == 2
        assert short.python_ms_per_token > 0
        # Counted, the 0.3 s after the short reply ended would be 5 ms a token of the long one.
        assert 0 < long.python_ms_per_token < 2
    finally:
        backend.close()
