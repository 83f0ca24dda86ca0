"""One very large message built, streamed, cleared and sent, through the real view (issue 16).

Each case runs in a fresh chat view on the running event loop while a 5 ms heartbeat (a
QTimer) records the gaps between its beats: the longest gap is the longest time the window
could not answer. Memory is the process's resident size after the case, over its size
before (after a collection), so it includes what the rows hold and what the heap keeps.

The bench runs the cases in a process of their own (:func:`large_messages_apart`): in the
bench's process, memory freed by earlier sections was reused and hid what the rows cost.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import qasync
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from app.bench.plan import LARGE_CASES
from app.ui.chat.chat_view import ChatView

TABLE_ROWS = 5000
"""Rows of the streamed table for a 1 MB message (fewer for a smaller one)."""
ROWS_PER_FRAME = 17
"""1,000 rows a second at 60 frames a second."""


def large_markdown(size: int) -> str:
    """Mixed Markdown of ``size`` characters: headings, links, lists, code, tables, quotes."""
    parts: list[str] = []
    n = i = 0
    while n < size:
        kind = i % 5
        if kind == 0:
            part = (
                f"## Section {i}\n\nSome *emphasis* and `code` and a [link](https://x.org/{i})"
                f" in paragraph {i}, with more words to make it wrap across the view.\n\n"
            )
        elif kind == 1:
            part = "".join(f"- item {i}.{j} with **bold** text\n" for j in range(5)) + "\n"
        elif kind == 2:
            part = f"```python\nfor x in range({i}):\n    print(x)\n```\n\n"
        elif kind == 3:
            part = "| a | b | c |\n|---|---|---|\n"
            part += "".join(f"| {j} | {j * 2} | {j * 3} |\n" for j in range(5)) + "\n"
        else:
            part = f"> a quote {i} with some text that goes on\n\n"
        parts.append(part)
        n += len(part)
        i += 1
    return "".join(parts)[:size]


def _rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


class _Heartbeat:
    """Gaps between the beats of a 5 ms timer on the UI loop."""

    def __init__(self) -> None:
        self.gaps: list[float] = []
        self._last = time.perf_counter()
        self._timer = QTimer()
        self._timer.setInterval(5)
        self._timer.timeout.connect(self._beat)

    def _beat(self) -> None:
        now = time.perf_counter()
        self.gaps.append((now - self._last) * 1000)
        self._last = now

    def start(self) -> None:
        self._last = time.perf_counter()
        self._timer.start()

    def stop(self) -> float:
        """Stop; returns the longest gap (ms), the time up to now included."""
        self._beat()
        self._timer.stop()
        return max(self.gaps)


async def _settled(view: ChatView, at_least: float = 0.2) -> None:
    """Until the view has built and deleted everything asked (and ``at_least`` seconds)."""
    end = time.perf_counter() + at_least
    while view.building or view.clearing or time.perf_counter() < end:
        await asyncio.sleep(0.002)


async def _stream_table(view: ChatView, size: int) -> None:
    rows = max(100, TABLE_ROWS * size // 1_000_000)
    lines = ["| a | b | c |\n", "|---|---|---|\n"]
    lines += [f"| {j} | {j * 2} | **{j * 3}** |\n" for j in range(rows)]
    view.begin_reply("Model")
    for i in range(0, len(lines), ROWS_PER_FRAME):
        view.append_to_reply("".join(lines[i : i + ROWS_PER_FRAME]))
        await asyncio.sleep(1 / 60)
    view.end_reply()


async def _case(name: str, size: int) -> dict[str, float]:
    markdown = large_markdown(size)
    line = ("word " * (size // 5 + 1))[:size]
    view = ChatView()
    view.resize(800, 600)
    view.show()
    try:
        await _settled(view, 0.3)
        if name == "new_chat":
            view.add_reply("Model", markdown)
            await _settled(view)
        gc.collect()
        before = _rss_mb()
        beat = _Heartbeat()
        beat.start()
        began = time.perf_counter()
        actions: dict[str, Callable[[], object]] = {
            "reopen_markdown": lambda: view.add_reply("Model", markdown),
            "reopen_line": lambda: view.add_reply("Model", line),
            "one_piece_markdown": lambda: _one_piece(view, markdown),
            "one_piece_line": lambda: _one_piece(view, line),
            "new_chat": view.clear,
            "send_paste": lambda: view.add_user_message(markdown),
        }
        if name == "table_streamed":
            await _stream_table(view, size)
        else:
            actions[name]()
        await _settled(view)
        stall = beat.stop()
        return {
            "stall_ms": round(stall, 1),
            "seconds": round(time.perf_counter() - began, 2),
            "rss_mb": round(_rss_mb() - before, 1),
        }
    finally:
        view.clear()
        await _settled(view, 0.0)
        view.deleteLater()


def _one_piece(view: ChatView, text: str) -> None:
    view.begin_reply("Model")
    view.append_to_reply(text)
    view.end_reply()


async def large_messages(size: int, log: Callable[[str], None]) -> dict[str, Any]:
    """Every case of :data:`LARGE_CASES` with messages of ``size`` characters."""
    figures: dict[str, Any] = {"chars": size}
    # As the app does once its window is shown (app/main.py): what was built at start is kept
    # out of the collector's scans, so a full collection does not walk it during a case.
    gc.freeze()
    for name in LARGE_CASES:
        figures[name] = await _case(name, size)
        log(f"  {name}: {figures[name]}")
    return figures


def large_messages_apart(size: int, log: Callable[[str], None]) -> dict[str, Any]:
    """:func:`large_messages` in a new process (offscreen); its figures."""
    done = subprocess.run(
        [sys.executable, "-m", "app.bench.large_messages", str(size)],
        capture_output=True,
        text=True,
        timeout=900,
        env=dict(os.environ, QT_QPA_PLATFORM="offscreen"),
        check=False,
    )
    for line in done.stderr.splitlines():
        if line.startswith("  "):
            log(line)
    if done.returncode != 0:
        raise RuntimeError(f"the large-message cases failed: {done.stderr[-2000:]}")
    figures: dict[str, Any] = json.loads(done.stdout)
    return figures


def main() -> None:
    """``python -m app.bench.large_messages SIZE``: the figures as JSON on standard output."""
    app = QApplication.instance() or QApplication([sys.argv[0]])

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    with asyncio.Runner(loop_factory=lambda: qasync.QEventLoop(app)) as runner:
        figures = runner.run(large_messages(int(sys.argv[1]), log))
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
