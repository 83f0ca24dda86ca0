"""How fast the app decodes with less and less of the window's update: the floor under its cost.

The window's update costs the decode threads its UI time when they take every core (issue
30). How much of that any update a frame would cost, whatever the app drew, is measured here
by replies of four kinds in turn, at the app's own decode threads:

- ``native``: the lean C-API loop in the bench's bare child process (no window at all);
- ``no_text``: the app's reply with its text shown nowhere (the worker, the queue and the
  frame pump run as ever, and the status line's figures; the chat view gets no update);
- ``one_line``: the reply's last characters set a frame into a plain one-line label of fixed
  size instead of the chat view (the least a visible update a frame can be in Qt);
- ``app``: the app's reply as a user sees it.

Each app kind's rate over the native loop's of the same round gives ``<kind>_ratio`` (the
median of the rounds, with its interval); the rounds run the kinds forward and backward in
turn, so a machine that drifts weighs on every kind alike. Where ``one_line_ratio`` is under a
target for the app, no visible update a frame reaches it on this machine at this count.

The app's replies of every kind are window replies to its worker, which refines its decode
threads by their rates; a round in which the count moved is left out (``rounds_left_out``).
"""

from __future__ import annotations

import contextlib
import statistics
from collections.abc import Iterator
from typing import Any

from PySide6.QtCore import Qt, Slot
from PySide6.QtWidgets import QLabel

from app.bench.bare import BareLoops
from app.bench.measure import app_rate
from app.bench.plan import STORY, Setup
from app.bench.stats import median_with_ci
from app.bench.window_cost import decode_threads
from app.engine import ChatMessage
from app.ui.window.main_window import MainWindow

KINDS = ("native", "no_text", "one_line", "app")
"""The kinds of reply each round runs, in this order or its reverse."""

LINE_CHARS = 80
"""What the one-line label shows: the reply's last characters."""


class OneLine(QLabel):
    """A plain label of one line and fixed size showing the end of the text it is given.

    Its size never changes, so a new text asks no layout; it fills its own background, so its
    repaint paints nothing under it (the chat view's rows): only itself.
    """

    def __init__(self, window: MainWindow) -> None:
        super().__init__(window.view)
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setAutoFillBackground(True)
        self.setFixedSize(max(200, window.view.width() - 40), self.fontMetrics().height() + 4)
        self.move(20, 20)
        self._text = ""

    @Slot(str)
    def append(self, text: str) -> None:
        """Show ``text`` added to what came before (its end)."""
        self._text = (self._text + text)[-LINE_CHARS:]
        self.setText(self._text.replace("\n", " "))


@contextlib.contextmanager
def shown_by(window: MainWindow, kind: str) -> Iterator[None]:
    """The reply's text goes to the chat view (``app``), a one-line label, or nowhere."""
    if kind == "app":
        yield
        return
    session, view = window.session, window.view
    session.reply_text.disconnect(view.append_to_reply)
    line = OneLine(window) if kind == "one_line" else None
    if line is not None:
        line.show()
        line.raise_()
        session.reply_text.connect(line.append)
    try:
        yield
    finally:
        if line is not None:
            session.reply_text.disconnect(line.append)
            line.deleteLater()
        session.reply_text.connect(view.append_to_reply)


async def window_floor(setup: Setup, window: MainWindow, loops: BareLoops) -> dict[str, Any]:
    """The app's rate with its full update, a one-line update and none, over the native loop's.

    Args:
        setup: the plan (``window_floor_rounds``) and the log.
        window: the app, its model open.
        loops: the bare child process that runs the native loop.
    """
    messages: list[ChatMessage] = [{"role": "user", "content": STORY}]
    tokens = loops.prompt_tokens(messages)
    app_kinds = KINDS[1:]
    native: list[float] = []
    runs: dict[str, list[float]] = {kind: [] for kind in app_kinds}
    left_out = 0
    counts: set[int] = set()
    for round_ in range(setup.plan.window_floor_rounds):
        threads = await decode_threads(window)
        rates: dict[str, float] = {}
        moved = False
        for kind in KINDS if round_ % 2 == 0 else KINDS[::-1]:
            if kind == "native":
                rates[kind] = loops.native_run(tokens, threads)
                continue
            with shown_by(window, kind):
                rates[kind] = await app_rate(window)
            moved = moved or await decode_threads(window) != threads
        shown = ", ".join(f"{kind} {rate:.1f}" for kind, rate in rates.items())
        if moved:
            left_out += 1
            setup.log(f"  round {round_ + 1} (left out: the app's decode threads moved): {shown}")
            continue
        counts.add(threads)
        setup.log(f"  round {round_ + 1} at {threads} decode threads: {shown}")
        native.append(rates["native"])
        for kind in app_kinds:
            runs[kind].append(rates[kind])
    figures: dict[str, Any] = {"decode_threads": sorted(counts), "rounds_left_out": left_out}
    if not native:
        return figures
    figures["rounds"] = len(native)
    figures["native_tok_s"] = round(statistics.median(native), 2)
    for kind in app_kinds:
        # Each round's rate over the native loop's of the same round (the machine drifts).
        ratio, interval = median_with_ci([a / n for a, n in zip(runs[kind], native, strict=True)])
        figures[f"{kind}_tok_s"] = round(statistics.median(runs[kind]), 2)
        figures[f"{kind}_ratio"] = ratio
        figures[f"{kind}_ratio_ci"] = interval
    return figures
