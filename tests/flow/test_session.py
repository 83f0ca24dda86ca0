"""The session's flow with the scripted backend: exact pieces, exact rates, extreme cases."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from app.engine import EngineOptions, ModelLoadError
from app.engine.backend import Backend
from app.flow.session import ChatSession, ModelState
from app.standins.scripted import ScriptedBackend, scripted_opener
from app.ui.chat.chat_view import ChatView
from tests.support.loop import Loop, run_until

MODEL = Path("scripted.gguf")


def make_session(backend: ScriptedBackend, *, queue_bound: int = 64) -> ChatSession:
    return ChatSession(scripted_opener(backend), queue_bound=queue_bound)


def ready_session(loop: Loop, backend: ScriptedBackend, **kwargs: int) -> ChatSession:
    session = make_session(backend, **kwargs)
    session.open_model(MODEL)
    run_until(loop, lambda: session.state is ModelState.READY)
    return session


def test_reply_streams_into_the_conversation(loop: Loop) -> None:
    backend = ScriptedBackend(["Hel", "lo", " th", "ere"], rate=200)
    session = ready_session(loop, backend)
    shown: list[str] = []
    ended: list[tuple[str, str]] = []
    session.reply_text.connect(shown.append)
    session.reply_ended.connect(lambda end: ended.append((end.status, end.note)))

    assert session.send("Hi")
    run_until(loop, lambda: bool(ended))

    assert "".join(shown) == "Hello there"
    assert ended == [("complete", "")]
    assert [(m.role, m.content, m.status) for m in session.conversation.messages] == [
        ("user", "Hi", "complete"),
        ("assistant", "Hello there", "complete"),
    ]
    loop.run_until_complete(session.close())


def test_text_readers_get_each_frame_in_order_until_they_disconnect(loop: Loop) -> None:
    # The reply's text goes to its readers by plain calls (no Qt signal): every reader
    # connected gets every frame's text, in the order they connected; one that disconnects
    # gets nothing more, and the others go on.
    backend = ScriptedBackend(["one", " two", " three", " four"], rate=40)
    session = ready_session(loop, backend)
    calls: list[tuple[str, str]] = []
    late: list[str] = []

    def first(text: str) -> None:
        calls.append(("first", text))
        if len(calls) == 1:
            session.reply_text.disconnect(second)

    def second(text: str) -> None:
        calls.append(("second", text))

    session.reply_text.connect(first)
    session.reply_text.connect(second)
    session.reply_text.connect(late.append)
    assert session.send("Hi")
    run_until(loop, lambda: not session.generating)

    assert "".join(text for who, text in calls if who == "first") == "one two three four"
    assert [who for who, _ in calls].count("second") == 0  # disconnected within the first call
    assert "".join(late) == "one two three four"
    with pytest.raises(ValueError, match="not in list"):
        session.reply_text.disconnect(second)
    loop.run_until_complete(session.close())


def test_a_reply_that_ends_before_any_word_says_so(loop: Loop) -> None:
    backend = ScriptedBackend([])  # the end of text first, as a model may write
    session = ready_session(loop, backend)
    ended: list[tuple[str, str]] = []
    session.reply_ended.connect(lambda end: ended.append((end.status, end.note)))
    assert session.send("Hi")
    run_until(loop, lambda: bool(ended))
    assert ended == [("complete", "The model ended its reply without writing anything.")]
    reply = session.conversation.messages[-1]
    assert (reply.content, reply.status) == ("", "complete")
    assert reply.note == ended[0][1]  # kept with it: said again when reopened
    loop.run_until_complete(session.close())


def test_history_goes_with_every_prompt_including_a_stopped_reply(loop: Loop) -> None:
    backend = ScriptedBackend(rate=1000)
    session = ready_session(loop, backend)
    backend.enqueue(["One", " two"])
    session.send("first")
    run_until(loop, lambda: not session.generating)
    backend.enqueue(["Partial"] + [" more"] * 10_000)
    session.send("second")
    run_until(loop, lambda: "Partial" in session.conversation.messages[-1].content)
    assert session.stop()
    run_until(loop, lambda: not session.generating)
    partial = session.conversation.messages[-1]
    assert partial.status == "stopped"
    backend.enqueue(["ok"])
    session.send("third")
    run_until(loop, lambda: not session.generating)

    assert backend.received[-1] == [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "One two"},
        {"role": "user", "content": "second"},
        {"role": "assistant", "content": partial.content},
        {"role": "user", "content": "third"},
    ]
    loop.run_until_complete(session.close())


def test_blank_prompt_is_not_sent_and_one_reply_at_a_time(loop: Loop) -> None:
    backend = ScriptedBackend(["x"] * 1000, rate=100)
    session = ready_session(loop, backend)
    assert not session.send("   \n\t")
    assert session.send("go")
    assert not session.send("again")  # still streaming
    assert session.stop()
    assert not session.stop()  # Stop pressed twice
    run_until(loop, lambda: not session.generating)
    assert [m.content for m in session.conversation.messages if m.role == "user"] == ["go"]
    loop.run_until_complete(session.close())


def test_firehose_gets_about_one_update_per_frame_and_loses_nothing(loop: Loop) -> None:
    rate, seconds = 5000, 1.0
    pieces = [f"{i % 10}" for i in range(int(rate * seconds))]
    backend = ScriptedBackend(pieces, rate=rate)
    session = ready_session(loop, backend)
    view = ChatView()
    view.begin_reply()
    session.reply_text.connect(view.append_to_reply)
    began = time.perf_counter()
    session.send("fire")
    run_until(loop, lambda: not session.generating, timeout=30)
    elapsed = time.perf_counter() - began

    assert session.conversation.messages[-1].content == "".join(pieces)
    assert session.metrics.reply.pieces_shown == len(pieces)
    frames = elapsed / session.frame_interval
    # One update per frame at most (plus the final drain), never one per piece.
    assert view.updates <= frames + 2
    assert view.updates < len(pieces) / 20
    # And the frames did not batch the whole reply into a handful of updates either.
    assert view.updates >= frames * 0.5
    loop.run_until_complete(session.close())


def test_a_blocked_window_makes_the_worker_wait_and_nothing_is_lost(loop: Loop) -> None:
    pieces = [f"<{i}>" for i in range(3000)]
    backend = ScriptedBackend(pieces, rate=0)  # as fast as the queue allows
    session = ready_session(loop, backend, queue_bound=16)
    stalls = 0

    def slow_view(_text: str) -> None:
        nonlocal stalls
        if stalls < 5:
            stalls += 1
            time.sleep(0.05)  # a window busy elsewhere

    session.reply_text.connect(slow_view)
    session.send("go")
    run_until(loop, lambda: not session.generating, timeout=30)

    assert session.conversation.messages[-1].content == "".join(pieces)
    assert session.metrics.queue_max <= 16
    assert session.metrics.backpressure_waits > 0
    loop.run_until_complete(session.close())


def test_stop_before_the_model_has_loaded_is_not_lost(loop: Loop) -> None:
    backend = ScriptedBackend(["never"], rate=10)

    def slow_open(path: Path, options: EngineOptions) -> Backend:
        time.sleep(0.3)
        return backend

    session = ChatSession(slow_open)
    session.open_model(MODEL)
    assert session.send("asked while loading")
    assert session.stop()
    run_until(loop, lambda: not session.generating)
    reply = session.conversation.messages[-1]
    assert (reply.status, reply.content) == ("stopped", "")
    assert backend.received == []  # the worker never started computing it
    run_until(loop, lambda: session.state is ModelState.READY)
    loop.run_until_complete(session.close())


def test_prompt_sent_while_loading_is_answered_after_the_load(loop: Loop) -> None:
    backend = ScriptedBackend(["after", " load"], rate=100)

    def slow_open(path: Path, options: EngineOptions) -> Backend:
        time.sleep(0.3)
        return backend

    session = ChatSession(slow_open)
    notices: list[str] = []
    session.notice.connect(notices.append)
    session.open_model(MODEL)
    assert session.send("early")
    run_until(loop, lambda: not session.generating)
    assert session.conversation.messages[-1].content == "after load"
    assert any("still loading" in n for n in notices)
    loop.run_until_complete(session.close())


def test_failed_load_reports_a_sentence_and_the_prompt_is_kept(loop: Loop) -> None:
    def failing_open(path: Path, options: EngineOptions) -> Backend:
        raise ModelLoadError(f"The model file {path} does not exist.")

    session = ChatSession(failing_open)
    states: list[tuple[ModelState, str]] = []
    session.state_changed.connect(lambda s, d: states.append((s, d)))
    session.open_model(Path("/nowhere/model.gguf"))
    session.send("hello?")
    run_until(loop, lambda: not session.generating)
    assert states[-1] == (ModelState.ERROR, "The model file /nowhere/model.gguf does not exist.")
    prompt, reply = session.conversation.messages
    assert (prompt.content, prompt.status) == ("hello?", "error")
    assert reply.status == "error"
    assert "No model is loaded" in reply.note
    assert session.conversation.history() == []
    loop.run_until_complete(session.close())


def test_close_mid_stream_stops_and_frees_the_model(loop: Loop) -> None:
    backend = ScriptedBackend(["word "] * 100_000, rate=2000)
    session = ready_session(loop, backend, queue_bound=8)
    session.send("long")
    run_until(loop, lambda: session.metrics.reply.pieces_shown > 20)
    began = time.perf_counter()
    loop.run_until_complete(session.close())
    assert time.perf_counter() - began < 2.0
    assert backend.closed
    assert session.conversation.messages[-1].status == "stopped"


@pytest.mark.parametrize("bound", [1, 3])
def test_tiny_bounds_still_deliver_everything(loop: Loop, bound: int) -> None:
    pieces = [chr(0x4E00 + i) for i in range(120)]
    backend = ScriptedBackend(pieces, rate=0)
    session = ready_session(loop, backend, queue_bound=bound)
    session.send("go")
    run_until(loop, lambda: not session.generating, timeout=30)
    assert session.conversation.messages[-1].content == "".join(pieces)
    assert session.metrics.queue_max <= bound
    loop.run_until_complete(session.close())


def test_every_wake_of_the_pump_records_the_loop_lag_at_most_once_a_frame(loop: Loop) -> None:
    backend = ScriptedBackend(["x"] * 400, rate=2000)
    session = ready_session(loop, backend)
    began = time.perf_counter()
    session.send("go")
    run_until(loop, lambda: not session.generating)
    elapsed = time.perf_counter() - began
    # The pump measures how late it woke, once per wake-up, and not once per piece: 400
    # pieces arrive in about 0.2 s, and it wakes at most once a frame to show them. Every
    # frame but the first comes after a wake-up (the first may show a piece that was already
    # waiting when the pump began).
    ticks = session.metrics.loop_lag_ms.count
    possible_frames = elapsed / session.frame_interval
    assert ticks >= 10
    assert ticks <= possible_frames + 2
    assert ticks >= session.metrics.reply.frames - 1


def test_the_pump_wakes_only_when_there_is_something_to_show(loop: Loop) -> None:
    # Five pieces, 0.3 s apart: a pump ticking every frame would wake about 90 times.
    backend = ScriptedBackend(["one ", "two ", "three ", "four ", "five"], rate=1 / 0.3)
    session = ready_session(loop, backend)
    session.send("go")
    run_until(loop, lambda: not session.generating)
    assert session.conversation.messages[-1].content == "one two three four five"
    assert session.metrics.reply.frames == 5  # each piece shown as it came
    assert session.metrics.loop_lag_ms.count <= 12  # a wake-up per piece, and a few more
    # Shown at once: a piece that comes more than a frame after the last waits for no tick
    # (a pump ticking every frame would make the median wait about half a frame, 8 ms).
    assert session.metrics.token_to_screen_ms.percentile(50) < 4.0


def test_a_reply_slower_than_the_screen_wakes_the_pump_once_a_piece(loop: Loop) -> None:
    # Pieces 25 ms apart, as a small model on a slow machine makes them: each is shown as it
    # comes, after one wake-up (its arrival), not two (a frame's clock, then the arrival).
    backend = ScriptedBackend(["word "] * 40, rate=40)
    session = ready_session(loop, backend)
    session.send("go")
    run_until(loop, lambda: not session.generating)
    assert session.conversation.messages[-1].content == "word " * 40
    assert session.metrics.reply.frames >= 30  # most pieces had a frame of their own
    assert session.metrics.reply.wakes <= 48  # one wake-up each, and a few more


def test_a_reply_faster_than_the_screen_wakes_the_pump_once_a_frame(loop: Loop) -> None:
    # Pieces 6 ms apart: the frame's clock wakes the pump, and the pieces that came meanwhile
    # are shown together; their arrivals wake nothing.
    backend = ScriptedBackend(["word "] * 150, rate=160)
    session = ready_session(loop, backend)
    session.send("go")
    run_until(loop, lambda: not session.generating)
    assert session.conversation.messages[-1].content == "word " * 150
    frames = session.metrics.reply.frames
    assert frames < 100  # pieces were shown several to a frame
    assert session.metrics.reply.wakes <= frames * 1.25 + 4  # one wake-up per frame


def test_text_that_cannot_be_stored_is_replaced_where_it_enters(loop: Loop) -> None:
    backend = ScriptedBackend(["fine ", "\ud83d\ude00", " and ", "\udc80"])  # a pair, a lone one
    session = ready_session(loop, backend)
    notices: list[str] = []
    session.notice.connect(notices.append)
    assert session.send("broken \ud800 text")
    run_until(loop, lambda: not session.generating)
    prompt, reply = session.conversation.messages
    assert prompt.content == "broken \ufffd text"
    assert any("replaced" in n for n in notices)
    assert reply.content == "fine 😀 and \ufffd"
    for message in (prompt, reply):
        message.content.encode("utf-8")  # what is kept can always be saved


def test_a_failure_after_the_engine_said_what_went_wrong_keeps_its_sentence() -> None:
    from app.engine import GenerationSettings, StopSignal
    from app.flow.piece_queue import PieceQueue
    from app.flow.worker import ReplyJob, producing
    from app.sentence import Sentence

    stop = StopSignal()
    job = ReplyJob([], GenerationSettings(), stop, PieceQueue(4, stop))
    said = Sentence("The server broke in the middle of the reply.")
    with producing(job):
        job.report.finish, job.report.error = "error", said
        raise RuntimeError("a tear-down that failed afterwards")
    assert job.report.error is said
    assert job.report.compute_ended_at is not None
    assert job.pieces.finished

    bare = ReplyJob([], GenerationSettings(), stop, PieceQueue(4, stop))
    with producing(bare):
        raise RuntimeError("a bug")
    assert bare.report.finish == "error"
    assert bare.report.error is not None
    assert "a bug" in str(bare.report.error)
