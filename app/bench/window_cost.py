"""What the window's threads cost the model while a reply streams, from the kernel's accounts.

Linux keeps each thread's time on a CPU, and its time ready to run but waiting for one, in
``/proc/self/task/<tid>/schedstat`` (nanoseconds). While the app streams a reply, the threads
that decode are the worker (its thread is named after the ``InferenceWorker`` QThread) and
llama.cpp's OpenMP team, which the worker's thread creates and which inherit its name; the UI
thread is the process's first thread; every other thread (Qt's, the archive's) is counted as
"other". From two readings around a reply:

- ``cpu_share``: the CPU time of the threads that do not decode, over that of the decode
  threads (the issue's "what the window costs the model": 8.0 / 146.6 = 5.5 % on a 2-core EPYC);
- ``ui_ms_per_token`` and ``other_ms_per_token``;
- ``decode_busy``: the decode threads' CPU time over the time the reply decoded, times their
  count (how busy they keep the cores they were given; barriers where one waits for the other
  and the time the worker's Python holds the second idle show here);
- ``decode_waited_ms_per_token``: how long the decode threads were ready to run but waited
  for a core (taken by the window's threads, or by other programs);
- ``wakes_per_update``: how many times the frame pump woke the UI thread per update shown;
- ``tok_s``: the reply's pieces shown per second, from Send to its end on screen (what the
  cost above is paid against: a change that lowers the share by slowing decoding is no gain).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.bench.measure import ask
from app.bench.plan import STORY, Setup
from app.engine import Backend
from app.ui.window.main_window import MainWindow

WORKER_NAME = "InferenceWorker"
"""The worker QThread's object name, which Qt gives its native thread (``/proc/.../comm``)."""


@dataclass(frozen=True)
class ThreadTimes:
    """Seconds on a CPU by kind of thread at one moment, and the decode threads' waits."""

    ui: float
    decode: float
    other: float
    decode_waited: float


def read_threads(pid: int | None = None) -> ThreadTimes:
    """The CPU time each kind of thread of process ``pid`` (this one) has used so far."""
    pid = pid or os.getpid()
    ui = decode = other = waited = 0.0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            ran, waits, _ = (task / "schedstat").read_text().split()
            name = (task / "comm").read_text().strip()
        except (OSError, ValueError):  # the thread ended meanwhile
            continue
        seconds = int(ran) / 1e9
        if int(task.name) == pid:
            ui += seconds
        elif name == WORKER_NAME[:15]:  # the kernel keeps 15 characters of a name
            decode += seconds
            waited += int(waits) / 1e9
        else:
            other += seconds
    return ThreadTimes(ui, decode, other, waited)


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


async def window_cost_section(setup: Setup, window: MainWindow) -> dict[str, Any]:
    """The window's threads' cost over the plan's story replies (medians of each figure).

    Each reply is read from Send to its end on screen (its short prompt's processing is on the
    same threads as its decoding); the readings are taken in the session's own signals, so
    the measurement adds no wake-up of the UI thread.
    """
    runs: list[dict[str, float]] = []
    session = window.session
    counts: list[int] = []
    for _ in range(setup.plan.window_cost_replies):
        # What llama.cpp decodes with now, asked on the worker's thread: the worker's report
        # can lag a count set by other means (a bench run read 1 while two decoded).
        threads = await decode_threads(window)
        counts.append(threads)
        before = read_threads()
        began = time.perf_counter()
        await ask(window, STORY)
        after = read_threads()
        seconds = time.perf_counter() - began
        reply = session.metrics.reply
        runs.append(
            window_cost(before, after, seconds, reply.pieces_shown, threads)
            # How many times the frame pump woke the UI thread per update it showed (1 is
            # the least: each wake-up showed something).
            | {"wakes_per_update": round(reply.wakes / reply.frames, 3) if reply.frames else 0.0}
        )
    return {key: round(statistics.median(run[key] for run in runs), 4) for key in runs[0]} | {
        "replies": len(runs),
        "decode_threads": statistics.median_low(counts),
    }


async def decode_threads(window: MainWindow) -> int:
    """How many threads llama.cpp decodes with now (read on the worker's thread, in turn)."""
    loop = asyncio.get_running_loop()
    answer: asyncio.Future[int] = loop.create_future()

    def read(backend: Backend) -> None:
        loop.call_soon_threadsafe(answer.set_result, backend.threads[0])

    window.session.host.with_backend(read)
    return await asyncio.wait_for(answer, timeout=60.0)  # the model is open throughout
