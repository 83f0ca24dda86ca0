"""Measurements of the app itself: the real window, session, worker, queue, pump and view.

Throughput against the llama-cpp-python references (run in a bare child process, at the
app's decode threads and at the native loop's best count), the UI loop's lag while a reply
streams, the cost of the diagnostics panel, and the fire hose (a scripted model far faster
than any real one, through the same queue, pump and view).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import math
import os
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from app.bench.bare import BareLoops
from app.bench.plan import FIREHOSE_RATE, FRAME, STORY, Setup
from app.bench.stats import Pairs, Rate, faster_count, interleaved_pairs, summary
from app.bench.thread_times import read_threads
from app.engine import BackendOpener, ChatMessage, GenerationSettings
from app.flow.decode_threads import ThreadReport
from app.flow.metrics import Distribution, watch_loop_lag
from app.flow.reply import ReplyEnd
from app.flow.session import ChatSession, ModelState
from app.standins.scripted import ScriptedBackend, scripted_opener
from app.store.conversation import Conversation
from app.store.thread_choices import ThreadChoices
from app.trace import TRACE, check_trace
from app.ui.window.main_window import MainWindow


async def until(predicate: Callable[[], bool], timeout: float = 120.0) -> None:
    """Wait on the event loop until ``predicate`` holds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("the bench waited too long for the app")
        await asyncio.sleep(0.002)


@contextlib.asynccontextmanager
async def heartbeat() -> AsyncIterator[Distribution]:
    """A 5 ms heartbeat on the UI loop for the duration of the block; yields its lateness."""
    lag = Distribution()
    task = asyncio.ensure_future(watch_loop_lag(lag))
    try:
        yield lag
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def open_app(
    setup: Setup,
    opener: BackendOpener,
    settings: GenerationSettings,
    thread_choices: ThreadChoices | None = None,
) -> MainWindow:
    """The main window over a new session, shown offscreen, with the model open.

    With ``thread_choices`` (a place to keep measurements, as the app has), the worker
    measures the decode threads once the model is open, as it does for a user; this waits
    until it has chosen.
    """
    session = ChatSession(
        opener,
        options=setup.options,
        settings=settings,
        frame_interval=FRAME,
        thread_choices=thread_choices,
    )
    window = MainWindow(session)
    window.show()
    gc.freeze()  # as the app does once its window is shown (app/main.py)
    session.open_model(setup.model)
    await until(lambda: session.state in (ModelState.READY, ModelState.ERROR))
    if session.state is ModelState.ERROR:
        raise SystemExit(window.state_label.text())
    if thread_choices is not None:
        await until(lambda: session.host.threads is not None)
    return window


def app_threads(window: MainWindow) -> ThreadReport:
    """The thread counts the app's worker computes with, and how they were chosen."""
    report = window.session.host.threads
    assert report is not None, "the worker has not chosen its threads"
    return report


async def close_app(window: MainWindow) -> None:
    """Close the session (and its worker) and the window."""
    await window.session.close()
    window.deleteLater()


async def ask(window: MainWindow, prompt: str) -> None:
    """Send ``prompt`` in a new conversation and wait until the reply has ended on screen.

    The wait is woken by the session's ``reply_ended`` signal, not by polling: a poll every
    few milliseconds wakes the UI thread hundreds of times a second, which a user's app does
    not do, and on a machine whose cores all decode, each wake-up takes time from decoding.
    """
    session = window.session
    session.conversation = Conversation()  # each measurement starts a new chat
    ended = asyncio.get_running_loop().create_future()

    def on_ended(_end: ReplyEnd) -> None:
        if not ended.done():
            ended.set_result(None)

    session.reply_ended.connect(on_ended)
    try:
        assert session.send(prompt)
        await asyncio.wait_for(ended, timeout=120.0)
    finally:
        session.reply_ended.disconnect(on_ended)
    await until(lambda: not session.generating)


def shown_per_s(window: MainWindow) -> float:
    """The last reply's pieces per second on screen, first to last (what the user sees)."""
    rate = window.session.metrics.reply.shown_per_s
    assert rate is not None, "the reply was too short to have a rate"
    return rate


async def app_rate(window: MainWindow) -> float:
    """One reply to the story prompt through the whole app: pieces per second on screen."""
    await ask(window, STORY)
    return shown_per_s(window)


async def throughput(
    setup: Setup, window: MainWindow, loops: BareLoops, best_native_threads: int
) -> dict[str, Any]:
    """The app against llama-cpp-python's stream (raw) and the lean C-API loop (native).

    Both references run at the app's decode threads; the native loop also at the count the
    ``threads`` rows found fastest (``rows_best_native_threads``), unless that is the app's.
    Each reference gets its own interleaved pairs; the ratios are medians with intervals.
    ``best_native_*`` are the pairs of whichever of the native loop's two counts ran faster
    in them (``best_native_threads``).
    """
    messages: list[ChatMessage] = [{"role": "user", "content": STORY}]
    tokens = loops.prompt_tokens(messages)
    metrics = window.session.metrics
    threads = app_threads(window).n_threads
    # Warm all of them (first runs pay for allocations and page faults); the warm-up's pieces
    # are the real token stream the per-piece designs replay.
    _, setup.real_pieces = loops.raw_run(messages, threads)
    loops.native_run(tokens, threads)
    await ask(window, STORY)
    metrics.token_to_screen_ms, metrics.frame_cost_ms = Distribution(), Distribution()

    async def raw() -> float:
        return loops.raw_run(messages, threads)[0]

    async def native() -> float:
        return loops.native_run(tokens, threads)

    async def best_native() -> float:
        return loops.native_run(tokens, best_native_threads)

    references: dict[str, Rate] = {"raw": raw, "native": native}
    if best_native_threads != threads:
        references["best_native"] = best_native
    pairs = await interleaved_pairs(
        setup.plan.pairs, references, lambda: app_rate(window), setup.log
    )
    # Where the rows' best count is not the app's, both ran in every round: the faster there
    # is the best (faster_count).
    best_name = faster_count(pairs, "native", "best_native")
    best = pairs[best_name]
    every_app_run = [rate for p in pairs.values() for rate in p.app]
    return {
        **pairs["raw"].figures("raw"),
        **pairs["native"].figures("native", prefix="native_"),
        **best.figures("best_native", prefix="best_native_"),
        "app_threads": threads,
        "best_native_threads": best_native_threads if best_name == "best_native" else threads,
        "rows_best_native_threads": best_native_threads,
        "app_tok_s": round(statistics.median(every_app_run), 2),
        "token_to_screen_ms": summary(metrics.token_to_screen_ms),
        "frame_cost_ms": summary(metrics.frame_cost_ms),
    }


async def loop_lag(setup: Setup, window: MainWindow) -> dict[str, float]:
    """A 5 ms heartbeat on the UI loop while the app streams at full speed.

    Run apart from the throughput pairs: the heartbeat is the bench's instrument (200
    wake-ups a second), not something the app runs while a user chats.
    """
    async with heartbeat() as lag:
        for _ in range(setup.plan.lag_replies):
            await ask(window, STORY)
    return summary(lag)


async def diagnostics_cost(setup: Setup, window: MainWindow) -> dict[str, Any]:
    """The same generation with the diagnostics panel shown and hidden, in pairs.

    As the bench's other ratios (:mod:`app.bench.stats`): the order inside a pair alternates
    from round to round, so a machine that speeds up or slows down weighs on both sides
    alike, and ``ratio`` is the median of the pairs' ratios, with its interval. (Until
    2026-12-06 the hidden reply always came first and the ratio was of the two sides'
    medians; ``ratio_of_medians`` keeps that reading.)

    Besides the rates (noisy: the machine's own moves by a tenth between runs), what the UI
    thread spent per piece shown, from the kernel's account of its CPU time: the panel's cost
    itself, which the rates show only through what it takes from decoding. And the pace the
    timeline chose here: its redraws a second while shown, and what one cost (its redraw and
    paint, the UI thread's CPU time, as the timeline measures it).
    """
    metrics = window.session.metrics
    timeline = window.diagnostics.timeline
    rates: dict[bool, list[float]] = {False: [], True: []}
    ui_ms: dict[bool, list[float]] = {False: [], True: []}
    lags: dict[bool, Distribution] = {False: Distribution(), True: Distribution()}
    redraws, shown_s = 0, 0.0
    for round_ in range(setup.plan.panel_pairs):
        for shown in (False, True) if round_ % 2 == 0 else (True, False):
            window.diagnostics_dock.setVisible(shown)
            metrics.loop_lag_ms = lags[shown]  # the frame timer's lateness, as the app sees it
            before, drawn, began = read_threads().ui, timeline.redraws, time.perf_counter()
            rates[shown].append(await app_rate(window))
            if shown:
                redraws += timeline.redraws - drawn
                shown_s += time.perf_counter() - began
            pieces = max(1, metrics.reply.pieces_shown)
            ui_ms[shown].append((read_threads().ui - before) * 1000 / pieces)
    window.diagnostics_dock.hide()
    redraw_cost = timeline.pace.cost
    pairs = Pairs(reference=rates[False], app=rates[True])
    hidden_rate, shown_rate = statistics.median(rates[False]), statistics.median(rates[True])
    return {
        "tok_s_hidden": round(hidden_rate, 2),
        "tok_s_shown": round(shown_rate, 2),
        **{k: v for k, v in pairs.figures("hidden").items() if not k.endswith("_tok_s")},
        "ratio_of_medians": round(shown_rate / hidden_rate, 4),
        "ui_ms_per_token_hidden": round(statistics.median(ui_ms[False]), 3),
        "ui_ms_per_token_shown": round(statistics.median(ui_ms[True]), 3),
        "loop_lag_ms_hidden": summary(lags[False]),
        "loop_lag_ms_shown": summary(lags[True]),
        # The timeline's pace (:data:`~app.ui.timeline.timeline.REDRAW_SHARE`) on this machine.
        "timeline_redraws_per_s": round(redraws / shown_s, 2) if shown_s else None,
        "timeline_ms_per_redraw": round(redraw_cost * 1000, 3) if redraw_cost else None,
    }


async def trace_cost(setup: Setup, window: MainWindow) -> dict[str, Any]:
    """Tokens/s while recording a flow trace over not recording, in interleaved pairs.

    Each recording covers one reply and is written when it ends (outside the timed part);
    the last file is checked against the trace format's rules.
    """
    if TRACE.recording:
        return {"note": "not measured: the whole run is being recorded (--trace)"}
    with tempfile.TemporaryDirectory(prefix="floodgate-bench-trace-") as folder:
        path = Path(folder) / "reply.json"

        async def recording() -> float:
            TRACE.start(path)
            try:
                return await app_rate(window)
            finally:
                TRACE.stop()

        pairs = await interleaved_pairs(
            setup.plan.trace_pairs, {"quiet": lambda: app_rate(window)}, recording, setup.log
        )
        document = json.loads(path.read_text())
    problems = check_trace(document)
    return {
        **pairs["quiet"].figures("not_recording"),
        "recording_tok_s": round(statistics.median(pairs["quiet"].app), 2),
        "events": len(document["traceEvents"]),
        "problems": problems[:10],
    }


def firehose_pieces(seconds: float) -> list[str]:
    """The fire hose's stream, the same for Floodgate and the baselines: digits, lines."""
    return [f"{i % 10}" + (" " if i % 7 else "\n") for i in range(int(FIREHOSE_RATE * seconds))]


def _rss_mb() -> float:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:  # not Linux: growth is reported as NaN rather than guessed
        return math.nan


async def firehose(setup: Setup) -> dict[str, Any]:
    """The scripted backend at 5,000 pieces/s through the same queue, pump and view."""
    pieces = firehose_pieces(setup.plan.firehose_seconds)
    backend = ScriptedBackend(pieces, rate=FIREHOSE_RATE)
    window = await open_app(setup, scripted_opener(backend), setup.greedy)
    session = window.session
    rss_before = _rss_mb()
    began = time.perf_counter()
    # The same 5 ms heartbeat as the baselines' fire hose, so the two compare like for like.
    async with heartbeat() as lag:
        await ask(window, "fire")
    elapsed = time.perf_counter() - began
    shown = session.metrics.reply.pieces_shown
    result = {
        "pieces_sent": len(pieces),
        "pieces_shown": shown,
        "lost": len(pieces) - shown,
        "text_intact": session.conversation.messages[-1].content == "".join(pieces),
        "queue_max": session.metrics.queue_max,
        "queue_bound": session.queue_bound,
        "queue_headroom": session.queue_bound - session.metrics.queue_max,
        "updates_per_s": round(window.view.updates / elapsed, 1),
        "loop_lag_ms": summary(lag),
        "rss_growth_mb": round(_rss_mb() - rss_before, 2),
    }
    await close_app(window)
    return result
