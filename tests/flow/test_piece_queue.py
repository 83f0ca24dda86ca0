"""The bounded queue: backpressure without loss, and Stop waking a waiting producer."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import threading
import time

import pytest

from app.engine import StopSignal
from app.flow.metrics import FlowMetrics
from app.flow.piece_queue import PieceQueue
from app.flow.pump import FramePump
from tests.support.loop import Loop


def test_stalled_consumer_makes_producer_wait_and_loses_nothing() -> None:
    stop = StopSignal()
    queue = PieceQueue(8, stop)
    sent = [f"p{i} " for i in range(2000)]
    depths: list[int] = []

    def produce() -> None:
        for text in sent:
            assert queue.put(text)
        queue.end()

    producer = threading.Thread(target=produce)
    producer.start()
    received: list[str] = []
    rng = random.Random(7)
    while not queue.finished:
        depths.append(queue.depth)
        # A consumer that stalls now and then, longer than the producer needs to fill the queue.
        time.sleep(rng.choice([0.0, 0.0, 0.002, 0.01]))
        received.extend(piece.text for piece in queue.drain())
    producer.join(timeout=5)

    assert received == sent
    assert max(depths) <= queue.bound
    assert queue.max_depth <= queue.bound
    assert queue.max_depth == queue.bound  # it did fill up...
    assert queue.backpressure_waits > 0  # ...and the producer waited instead of dropping


def test_stop_wakes_a_blocked_producer() -> None:
    stop = StopSignal()
    queue = PieceQueue(1, stop)
    assert queue.put("first")
    result: list[bool] = []
    producer = threading.Thread(target=lambda: result.append(queue.put("second")))
    producer.start()
    producer.join(timeout=0.2)
    assert producer.is_alive(), "the producer should be waiting on the full queue"
    stop.set()
    producer.join(timeout=2)
    assert not producer.is_alive()
    assert result == [False]
    assert [p.text for p in queue.drain()] == ["first"]


def test_put_after_stop_is_refused_without_waiting() -> None:
    stop = StopSignal()
    queue = PieceQueue(1, stop)
    stop.set()
    assert queue.put("x") is False
    assert queue.depth == 0


def test_bound_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        PieceQueue(0, StopSignal())


def test_stop_signal_runs_late_listeners_and_ignores_second_set() -> None:
    stop = StopSignal()
    calls: list[str] = []
    stop.add_listener(lambda: calls.append("early"))
    assert stop.set() is True
    assert stop.set() is False  # Stop pressed twice: the second press changes nothing
    stop.add_listener(lambda: calls.append("late"))
    assert calls == ["early", "late"]
    assert stop.set_at is not None


def test_a_waiting_pump_is_woken_by_each_kind_of_producer(loop: Loop) -> None:
    """The pump waits for a piece from the loop (a remote stream), from a thread, and the end."""
    shown: list[str] = []
    metrics = FlowMetrics(queue_bound=8)

    async def scenario() -> None:
        queue = PieceQueue(8, StopSignal())
        pump = FramePump(1 / 60, shown.append, metrics)
        pumping = asyncio.ensure_future(pump.run(queue))
        await asyncio.sleep(0.05)
        await queue.put_async("a")
        await asyncio.sleep(0.1)
        threading.Timer(0.05, lambda: queue.put("b")).start()
        await asyncio.sleep(0.2)
        threading.Timer(0.05, queue.end).start()
        await asyncio.wait_for(pumping, timeout=5)  # a hang here fails the test

    loop.run_until_complete(scenario())
    assert shown == ["a", "b"]
    # Before the first piece it ticks for the prompt's progress; after it, only pieces and
    # the end wake it.
    assert metrics.reply.frames == 2


def test_a_pump_stopped_while_it_waits_leaves_no_wake_behind(loop: Loop) -> None:
    metrics = FlowMetrics(queue_bound=8)
    queue = PieceQueue(8, StopSignal())

    async def scenario() -> None:
        pump = FramePump(1 / 60, lambda text: None, metrics)
        pumping = asyncio.ensure_future(pump.run(queue))
        await asyncio.sleep(0.05)
        pumping.cancel()  # the window closed: the reply's task is cancelled
        with contextlib.suppress(asyncio.CancelledError):
            await pumping

    loop.run_until_complete(scenario())
    assert queue.put("late")  # the worker's next piece calls no pump that is gone
    queue.end()


def test_offer_refuses_a_full_queue_and_calls_back_once_the_reader_takes() -> None:
    stop = StopSignal()
    queue = PieceQueue(2, stop)
    woken: list[str] = []
    assert queue.offer("a", lambda: woken.append("room"))
    assert queue.offer("b", lambda: woken.append("room"))
    # Full: nothing added, one backpressure wait however often it is offered again.
    assert not queue.offer("c", lambda: woken.append("room"))
    assert not queue.offer("c", lambda: woken.append("room"))
    assert queue.depth == 2
    assert queue.backpressure_waits == 1
    assert woken == []
    time.sleep(0.01)
    assert [piece.text for piece in queue.drain()] == ["a", "b"]
    assert woken == ["room"]  # once, not once per refusal
    assert queue.backpressure_seconds >= 0.01
    assert queue.offer("c", lambda: woken.append("room"))
    assert queue.drain()[0].text == "c"
    assert woken == ["room"]
    stop.set()
    assert not queue.offer("d", lambda: woken.append("room"))
    assert queue.depth == 0


def test_offer_wakes_a_reader_waiting_on_another_loop() -> None:
    stop = StopSignal()
    queue = PieceQueue(1, stop)
    woken: list[str] = []

    async def read() -> list[str]:
        return [piece.text for piece in await queue.take_async()]

    async def main() -> list[str]:
        reader = asyncio.ensure_future(read())
        await asyncio.sleep(0.01)
        assert queue.offer("x", lambda: woken.append("room"))
        assert not queue.offer("y", lambda: woken.append("room"))
        return await reader

    assert asyncio.run(main()) == ["x"]
    assert woken == ["room"]


def test_a_wake_asked_for_pieces_from_a_moment_on_ignores_those_before_it() -> None:
    queue = PieceQueue(8, StopSignal())
    woken: list[str] = []
    queue.put("early")
    later = time.perf_counter() + 0.05
    assert queue.wake_on_arrival(lambda: woken.append("wake"), not_before=later)
    queue.put("still early")
    assert woken == []  # produced before the moment: wakes nothing
    time.sleep(0.06)
    queue.put("due")
    assert woken == ["wake"]
    queue.put("after")
    assert woken == ["wake"]  # once
    # A piece from the moment on already there: nothing to wait for.
    assert not queue.wake_on_arrival(lambda: woken.append("again"), not_before=later)
    assert queue.wake_on_arrival(lambda: woken.append("end"), not_before=time.perf_counter() + 60)
    queue.end()  # the end wakes whatever the moment
    assert woken == ["wake", "end"]


def test_pieces_faster_than_frames_are_shown_as_the_first_due_one_arrives(loop: Loop) -> None:
    """Pieces 11 ms apart: each update comes at a piece's arrival, every second piece or so.

    A clock ticking every frame would show the newest piece of an update a while after it was
    produced (half a gap, at the median) and update 60 times a second; at its arrival, the
    newest piece waits for nothing and the updates come at the pieces' pace (45 a second).
    """
    frame, gap, count = 1 / 60, 0.011, 120
    metrics = FlowMetrics(queue_bound=64)
    queue = PieceQueue(64, StopSignal())
    produced: list[float] = []
    updates: list[tuple[float, str]] = []

    def produce() -> None:
        began = time.perf_counter()
        for i in range(count):
            time.sleep(max(0.0, began + i * gap - time.perf_counter()))
            produced.append(time.perf_counter())
            queue.put(f"<{i}>")
        queue.end()

    async def scenario() -> None:
        pump = FramePump(frame, lambda text: updates.append((time.perf_counter(), text)), metrics)
        pumping = asyncio.ensure_future(pump.run(queue))
        threading.Thread(target=produce, daemon=True).start()
        await asyncio.wait_for(pumping, timeout=20)

    loop.run_until_complete(scenario())
    assert "".join(text for _, text in updates) == "".join(f"<{i}>" for i in range(count))
    times = [at for at, _ in updates]
    # One update per frame: none sooner than a frame after the last, less the eighth of a
    # frame a piece may be shown early, and the millisecond a clock may round off.
    assert min(b - a for a, b in itertools.pairwise(times)) >= frame * 7 / 8 - 0.001
    assert len(updates) <= count * 0.6  # fewer than the screen's 60 a second (73 here)
    assert len(updates) >= count / 4  # not a handful of large ones either
    newest_waits = sorted(
        at - produced[int(text.rsplit("<", 1)[1].rstrip(">"))] for at, text in updates[:-1]
    )
    assert newest_waits[len(newest_waits) // 2] < 0.003
