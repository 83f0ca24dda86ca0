"""The chat view's cost per update, early in a reply and late in it, through the real view.

``long_reply`` streams an ordinary reply (one Markdown section repeated); ``shapes`` streams
the hostile ones a model can produce (a long list, a long table, one endless line, runs of
delimiters, unmatched brackets). Each update is what the frame pump does once a frame:
``ChatView.append_to_reply`` with a few pieces' text, then a paint.
"""

from __future__ import annotations

import asyncio
import math
import re
import statistics
import time
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QCoreApplication, QEvent

from app.bench.plan import LONG_SECTION, SHAPES, Plan
from app.flow.metrics import Distribution
from app.ui.chat.chat_view import ChatView

PER_UPDATE = 4
"""Pieces joined into one frame's update at a typical rate."""

SHAPE_SAMPLES = 100
"""Updates timed at each end of a shape (the p99 of 100 is their second-highest)."""


def markdown_pieces(text: str) -> list[str]:
    """Text cut the way a tokenizer cuts it: words with their leading space, about 4 characters."""
    pieces: list[str] = []
    for word in re.findall(r"\s*\S+|\s+", text):
        while len(word) > 6:
            pieces.append(word[:4])
            word = word[4:]
        pieces.append(word)
    return pieces


def _new_view() -> ChatView:
    view = ChatView()
    view.resize(800, 600)
    view.show()
    view.begin_reply()
    return view


def _timed_update(view: ChatView, text: str) -> float:
    """One frame's update: append, then paint; its cost in milliseconds."""
    began = time.perf_counter()
    view.append_to_reply(text)
    view.viewport().repaint()
    return (time.perf_counter() - began) * 1000


def long_reply(plan: Plan) -> dict[str, Any]:
    """The cost of one update (Markdown render + paint) early in a reply and after many pieces.

    The reply repeats one Markdown section (heading, paragraphs, a list, a code block), so
    the late updates show the same kind of content as the early ones: only the position in
    the reply differs.
    """
    view = _new_view()
    section = markdown_pieces(LONG_SECTION)
    late_start = math.ceil(plan.long_pieces / len(section)) * len(section)
    pieces = section * (late_start // len(section) + 2)

    def measure(start: int, count: int) -> list[float]:
        return [
            _timed_update(view, "".join(pieces[i : i + PER_UPDATE]))
            for i in range(start, start + count * PER_UPDATE, PER_UPDATE)
        ]

    count = len(section) // PER_UPDATE
    early = measure(0, count)
    for i in range(count * PER_UPDATE, late_start, PER_UPDATE):
        view.append_to_reply("".join(pieces[i : i + PER_UPDATE]))
    late = measure(late_start, count)
    rows = len(view.stack.rows)
    view.deleteLater()
    early_ms, late_ms = statistics.median(early), statistics.median(late)
    return {
        "pieces": late_start,
        "rows": rows,
        "early_update_ms": round(early_ms, 4),
        "late_update_ms": round(late_ms, 4),
        "ratio": round(late_ms / early_ms, 3),
        "markdown": True,
    }


PIECES_PER_FRAME = 2
"""Pieces an update shows at 100-120 tokens a second, 60 frames a second."""


async def update_cost(text: str, frame: float, rounds: int) -> dict[str, float]:
    """The UI thread's CPU time per update of the same reply: back to back, and a frame apart.

    ``text`` is cut as a tokenizer cuts it and shown in a chat view of its own,
    :data:`PIECES_PER_FRAME` pieces an update, each an append and the paint of what it marked
    dirty (what the frame pump and Qt do once a frame at 100-120 tokens a second). The two
    ways alternate, ``rounds`` times each:

    - ``back_to_back_ms``: each update right after the one before; it finds the code and data
      that one used in the CPU's caches;
    - ``a_frame_apart_ms``: the same updates a frame apart, the UI thread idle between, as the
      window runs them; what ran meanwhile (the decode threads above all, other programs, the
      host of a virtual machine) has evicted them;
    - ``ratio``: a frame apart over back to back.

    Means over the reply's updates, medians over the rounds. The window's cost per update while
    the model decodes (``ui_ms_per_token`` times the pieces an update shows) is near the second:
    an update pays for the memory it touches more than for the work it does, and a cut that
    leaves the same memory to be touched by the next step saves little.
    """
    pieces = markdown_pieces(text)
    updates = [
        "".join(pieces[i : i + PIECES_PER_FRAME]) for i in range(0, len(pieces), PIECES_PER_FRAME)
    ]

    async def one_reply(pause: float) -> float:
        view = _new_view()
        await asyncio.sleep(0.05)  # shown: an update of a window not yet exposed paints nothing
        spent = 0
        try:
            for update in updates:
                await asyncio.sleep(pause)
                began = time.thread_time_ns()
                view.append_to_reply(update)
                QCoreApplication.sendPostedEvents(view, QEvent.Type.UpdateRequest)
                spent += time.thread_time_ns() - began
        finally:
            view.deleteLater()
        return spent / len(updates) / 1e6

    runs: dict[float, list[float]] = {0.0: [], frame: []}
    for _ in range(rounds):
        for pause, costs in runs.items():
            costs.append(await one_reply(pause))
    back_to_back, apart = statistics.median(runs[0.0]), statistics.median(runs[frame])
    return {
        "updates": len(updates),
        "back_to_back_ms": round(back_to_back, 4),
        "a_frame_apart_ms": round(apart, 4),
        "ratio": round(apart / back_to_back, 2),
    }


def shape_text(shape: str, scale: float) -> str:
    """The reply of one hostile shape, at ``scale`` of its full size."""

    def n(full: int) -> int:
        return max(20, int(full * scale))

    makers: dict[str, Callable[[], str]] = {
        "list_5000": lambda: "".join(f"- item {i}, a point\n" for i in range(n(5000))),
        "table_2000": lambda: (
            "| n | name | value |\n| --- | --- | --- |\n"
            + "".join(f"| {i} | row {i} | {i * 3} |\n" for i in range(n(2000)))
        ),
        "line_100000": lambda: "".join(f"word{i % 10} " for i in range(n(100_000) // 6)),
        "delimiters_20000": lambda: "*a" * n(20_000),
        "brackets_10000": lambda: "[" * n(10_000),
    }
    return makers[shape]()


def shape_costs(text: str, cap_s: float) -> dict[str, Any]:
    """Stream ``text`` through a new view; the cost of updates at its start and its end.

    A renderer whose cost grows with the reply could take minutes to reach the end, so after
    ``cap_s`` seconds the rest up to the last updates is appended in one update (not timed),
    and the late updates stop once they too took ``cap_s / 2``. Either is reported as
    ``over_cap``: the late figure is then measured at the end all the same.
    """
    view = _new_view()
    pieces = markdown_pieces(text)
    updates = ["".join(pieces[i : i + PER_UPDATE]) for i in range(0, len(pieces), PER_UPDATE)]
    # A tenth of the reply at most at either end: the early ones must be early.
    k = min(SHAPE_SAMPLES, max(5, len(updates) // 10))
    began = time.perf_counter()
    early = [_timed_update(view, u) for u in updates[:k]]
    over_cap, skipped = False, 0
    for i in range(k, len(updates) - k):
        if time.perf_counter() - began > cap_s:
            rest = "".join(updates[i : len(updates) - k])
            view.append_to_reply(rest)
            # A huge piece is built a slice at a time; the late updates must not queue
            # behind it, or they would time nothing.
            view.finish_building()
            over_cap, skipped = True, len(rest)
            break
        _timed_update(view, updates[i])
    late_began = time.perf_counter()
    late: list[float] = []
    for update in updates[len(updates) - k :]:
        late.append(_timed_update(view, update))
        if time.perf_counter() - late_began > cap_s / 2 and len(late) >= 5:
            over_cap = True
            break
    view.deleteLater()
    early_p99 = _p99(early)
    late_p99 = _p99(late)
    return {
        "chars": len(text),
        "early_update_ms": round(early_p99, 4),
        "late_update_ms": round(late_p99, 4),
        "ratio": round(late_p99 / early_p99, 3) if early_p99 > 0 else math.inf,
        "samples": [len(early), len(late)],
        "seconds": round(time.perf_counter() - began, 2),
        "over_cap": over_cap,
        "chars_skipped": skipped,
    }


def _p99(costs: list[float]) -> float:
    dist = Distribution()
    dist.extend(costs)
    return dist.percentile(99)


def shapes(plan: Plan, log: Callable[[str], None]) -> dict[str, Any]:
    """Every hostile shape, one after the other, each in a view of its own."""
    result: dict[str, Any] = {}
    for shape in SHAPES:
        result[shape] = shape_costs(shape_text(shape, plan.shape_scale), plan.shape_cap_s)
        figures = result[shape]
        log(
            f"  {shape}: late p99 {figures['late_update_ms']} ms, ratio {figures['ratio']}"
            + (" (over the cap)" if figures["over_cap"] else "")
        )
    return result
