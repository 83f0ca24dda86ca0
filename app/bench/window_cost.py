"""What the window's threads cost the model while a reply streams, from the kernel's accounts.

The threads' CPU time by kind (UI, decode, other) is read by :mod:`app.bench.thread_times`.
From two readings around a reply:

- ``cpu_share``: the CPU time of the threads that do not decode, over that of the decode
  threads (the issue's "what the window costs the model": 8.0 / 146.6 = 5.5 % on a 2-core EPYC);
- ``ui_ms_per_token`` and ``other_ms_per_token``;
- ``decode_busy``: the decode threads' CPU time over the time the reply decoded, times their
  count (how busy they keep the cores they were given; barriers where one waits for the other
  and the time the worker's Python holds the second idle show here);
- ``decode_waited_ms_per_token``: how long the decode threads were ready to run but waited
  for a core (taken by the window's threads, or by other programs);
- ``wakes_per_update``: how many times the frame pump woke the UI thread per update shown;
- ``updates_per_s``: the updates shown per second of the reply (at most the screen's 60: each
  costs the UI thread its time, so fewer cost the model less);
- ``token_to_screen_ms_p95``: over every piece of the replies, from the worker producing it to
  the end of the update that shows it (what the updates' pace costs the reader; the paint
  that follows in the event loop's next turn, about a quarter of a millisecond, is not in it);
- ``least_wait_ms_p95``: the least 95th percentile of the pieces' waits that any pump could
  reach on these replies' real arrivals with one update per frame, even knowing every arrival
  in advance, and with updates that cost no time (:func:`least_p95_wait`): the floor under
  ``token_to_screen_ms_p95`` on this machine at this rate, for a pump that keeps updates a
  whole frame apart. The app's pump shows a piece that comes up to an eighth of a frame early
  as its frame's (:data:`~app.flow.pump.EARLY`), so its updates are at least 7/8 of a frame
  apart and it can beat that floor (pieces 8 ms apart then show two to a frame);
  ``least_wait_ms_p95_pump_spacing`` is the floor for updates that far apart, the one under
  the app's own rule.
- ``tok_s``: the reply's pieces shown per second, from Send to its end on screen (what the
  cost above is paid against: a change that lowers the share by slowing decoding is no gain).
- ``update_cost``: the UI thread's CPU time per update of the last reply's text, replayed in a
  chat view of its own with the model idle, back to back and a frame apart
  (:func:`~app.bench.long_reply.update_cost`): how much of an update's cost is the memory it
  finds evicted when it runs once a frame.

Each figure is also given for two baselines, alternating with the app's replies:

- ``frames_on_clock``: replies whose frames come by the clock (the frame pump's design until
  2026-12-04);
- ``same_priority``: replies whose decode threads run at the UI thread's priority (the app's
  until 2026-12-05), set back to it for each of those replies. Setting a thread's priority
  back up needs a privilege (root, ``CAP_SYS_NICE``, or a ``RLIMIT_NICE`` that allows it):
  without one the section says so in ``same_priority_skipped`` and leaves it out.

Each set also has ``loop_lag_ms_p95``: how long the UI thread took to run a frame once a piece
woke it (or its clock).
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import os
import statistics
import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from app.bench.long_reply import update_cost
from app.bench.measure import app_threads, ask
from app.bench.plan import STORY, Setup
from app.bench.thread_times import ThreadTimes, read_threads, set_decode_priority
from app.engine import Backend
from app.flow.decode_threads import BELOW_WINDOW
from app.flow.metrics import Distribution
from app.flow.pump import EARLY
from app.ui.window.main_window import MainWindow

UPDATE_COST_ROUNDS = 3
"""Rounds of :func:`~app.bench.long_reply.update_cost` (each: the reply both ways)."""


def window_cost(
    before: ThreadTimes, after: ThreadTimes, seconds: float, tokens: int, threads: int
) -> dict[str, float]:
    """The section's figures from readings ``before`` and ``after`` a reply.

    Args:
        before: the reading as the reply began decoding.
        after: the reading as it ended.
        seconds: the time it decoded.
        tokens: the tokens it decoded.
        threads: the decode threads llama.cpp used.
    """
    ui = after.ui - before.ui
    decode = after.decode - before.decode
    other = after.other - before.other
    waited = after.decode_waited - before.decode_waited
    nan = float("nan")
    return {
        "cpu_share": round((ui + other) / decode, 4) if decode > 0 else nan,
        "ui_share": round(ui / decode, 4) if decode > 0 else nan,
        "ui_ms_per_token": round(ui * 1000 / tokens, 3) if tokens else nan,
        "other_ms_per_token": round(other * 1000 / tokens, 3) if tokens else nan,
        "decode_busy": round(decode / (seconds * threads), 4) if seconds > 0 else nan,
        "decode_waited_ms_per_token": round(waited * 1000 / tokens, 3) if tokens else nan,
        "tok_s": round(tokens / seconds, 2) if seconds > 0 else nan,
    }


@dataclasses.dataclass
class _Kind:
    """One kind of reply the section alternates: its replies' figures and distributions."""

    runs: list[dict[str, float]] = dataclasses.field(default_factory=list)
    to_screen: Distribution = dataclasses.field(default_factory=Distribution)
    lag: Distribution = dataclasses.field(default_factory=Distribution)

    def figures(self) -> dict[str, float]:
        """Each figure's median over the replies, and the p95s over every piece and frame."""
        replies = self.runs
        return {
            key: round(statistics.median(run[key] for run in replies), 4) for key in replies[0]
        } | {
            "token_to_screen_ms_p95": round(self.to_screen.percentile(95), 3),
            "loop_lag_ms_p95": round(self.lag.percentile(95), 3),
        }


async def window_cost_section(setup: Setup, window: MainWindow) -> dict[str, Any]:
    """The window's threads' cost over the plan's story replies (medians of each figure).

    Each reply is read from Send to its end on screen (its short prompt's processing is on the
    same threads as its decoding); the readings are taken in the session's own signals, so
    the measurement adds no wake-up of the UI thread. Each reply alternates with one whose
    frames come by the clock and one whose decode threads run at the UI thread's priority
    (the baselines), with the same figures.
    """
    ui_nice = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    app_nice = min(19, ui_nice + BELOW_WINDOW)  # the decode threads' as the app sets it
    kinds = {"app": _Kind(), "frames_on_clock": _Kind()}
    if set_decode_priority(ui_nice):  # allowed here: the baseline runs
        kinds["same_priority"] = _Kind()
        set_decode_priority(app_nice)
    arrivals: list[list[float]] = []
    counts: list[int] = []
    session = window.session
    try:
        for _ in range(setup.plan.window_cost_replies):
            for name, kind in kinds.items():
                session.runner.frames_on_clock = name == "frames_on_clock"
                session.metrics.token_to_screen_ms = kind.to_screen
                session.metrics.loop_lag_ms = kind.lag
                # What llama.cpp decodes with now, asked on the worker's thread: the worker's
                # report can lag a count set by other means (a run read 1 while two decoded).
                threads = await decode_threads(window)
                session.metrics.arrivals = [] if name == "app" else None
                if name == "same_priority":
                    set_decode_priority(ui_nice)
                try:
                    kind.runs.append(await _one_reply(window, threads))
                finally:
                    if name == "same_priority":
                        set_decode_priority(app_nice)
                if session.metrics.arrivals is not None:
                    counts.append(threads)
                    arrivals.append(session.metrics.arrivals)
    finally:
        session.runner.frames_on_clock = False
        session.metrics.token_to_screen_ms = Distribution()
        session.metrics.loop_lag_ms = Distribution()
        session.metrics.arrivals = None
    same = kinds.get("same_priority")
    frame = session.frame_interval
    reply = session.conversation.messages[-1].content  # the last story reply, as shown
    rounds = min(UPDATE_COST_ROUNDS, setup.plan.window_cost_replies)
    return (
        kinds["app"].figures()
        | {
            "update_cost": await update_cost(reply, frame, rounds),
            "least_wait_ms_p95": round(least_p95_wait(arrivals, frame), 2),
            "least_wait_ms_p95_pump_spacing": round(
                least_p95_wait(arrivals, frame * (1 - EARLY)), 2
            ),
            "replies": len(kinds["app"].runs),
            "decode_threads": statistics.median_low(counts),
            # How the worker chose its count (its calibration's and its replies' rates).
            "threads": dataclasses.asdict(app_threads(window)),
            "frames_on_clock": kinds["frames_on_clock"].figures(),
        }
        | (
            {"same_priority": same.figures()}
            if same is not None
            else {"same_priority_skipped": "no privilege to set a thread's priority back up"}
        )
    )


async def _one_reply(window: MainWindow, threads: int) -> dict[str, float]:
    """One story reply's figures (see :func:`window_cost`), and how its frames were paced."""
    before = read_threads()
    began = time.perf_counter()
    await ask(window, STORY)
    after = read_threads()
    seconds = time.perf_counter() - began
    reply = window.session.metrics.reply
    return window_cost(before, after, seconds, reply.pieces_shown, threads) | {
        # How many times the frame pump woke the UI thread per update it showed (1 is the
        # least: each wake-up showed something).
        "wakes_per_update": round(reply.wakes / reply.frames, 3) if reply.frames else 0.0,
        "updates_per_s": round(reply.frames / seconds, 2),
    }


async def decode_threads(window: MainWindow) -> int:
    """How many threads llama.cpp decodes with now (read on the worker's thread, in turn)."""
    loop = asyncio.get_running_loop()
    answer: asyncio.Future[int] = loop.create_future()

    def read(backend: Backend) -> None:
        loop.call_soon_threadsafe(answer.set_result, backend.threads[0])

    window.session.host.with_backend(read)
    return await asyncio.wait_for(answer, timeout=60.0)  # the model is open throughout


def least_p95_wait(replies: Sequence[Sequence[float]], frame: float, step: float = 1e-4) -> float:
    """The least 95th percentile of the pieces' waits (ms) under any one-update-a-frame pacing.

    A piece waits from its arrival to the first update at or after it; updates may come at
    any moment (to ``step`` seconds), at least ``frame`` apart, and cost nothing. The least
    threshold that at most 5 % of the pieces wait longer than is found by bisection, each
    threshold by dynamic programming over the moments of the last update: for a threshold
    ``T`` below ``frame``, the pieces an update at ``t`` shows late are those that arrived
    after the update before it and before ``t - T``, so the fewest late up to ``t`` is the
    fewest up to any update a frame or more before, less the pieces up to it, plus the
    pieces before ``t - T``: one pass with a running minimum.

    Args:
        replies: each reply's arrival moments (seconds, ascending); replies are paced apart.
        frame: seconds per frame.
        step: the time grid of the updates (seconds).
    """
    pieces = sum(len(reply) for reply in replies)
    if pieces == 0:
        return math.nan
    allowed = pieces - math.ceil(0.95 * pieces)  # nearest rank, as Distribution.percentile
    low, high = 0.0, frame
    while high - low > step:
        middle = (low + high) / 2
        if sum(_fewest_late(np.asarray(r), frame, middle, step) for r in replies) <= allowed:
            high = middle
        else:
            low = middle
    return high * 1000


def _fewest_late(arrived: np.ndarray[Any, Any], frame: float, wait: float, step: float) -> int:
    """The fewest pieces that wait longer than ``wait`` with updates ``frame`` or more apart."""
    if len(arrived) == 0:
        return 0
    origin = arrived[0] - frame - step  # an update here shows nothing: the start
    moments = origin + step * np.arange(int((arrived[-1] + frame - origin) / step) + 2)
    before = np.searchsorted(arrived, moments, side="left")  # pieces arrived before t
    up_to = np.searchsorted(arrived, moments, side="right")  # pieces arrived at or before t
    late_before = before[np.clip(np.arange(len(moments)) - round(wait / step), 0, None)]
    gap = round(frame / step)
    fewest = np.full(len(moments), np.inf)
    best = np.full(len(moments), np.inf)  # running minimum of fewest[i] - up_to[i]
    fewest[0], best[0] = 0, -up_to[0]
    for start in range(1, len(moments), gap):
        # Each moment here depends only on moments a frame or more before: a slice at a time.
        end = min(len(moments), start + gap)
        earlier = np.arange(start, end) - gap
        span = np.where(earlier >= 0, best[np.clip(earlier, 0, None)], np.inf)
        fewest[start:end] = span + late_before[start:end]
        running = np.minimum.accumulate(
            np.concatenate(([best[start - 1]], fewest[start:end] - up_to[start:end]))
        )
        best[start:end] = running[1:]
    last = int(np.searchsorted(moments, arrived[-1]))
    return int(fewest[last:].min())
