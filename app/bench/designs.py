"""The designs other chat apps use, for comparison: one queued Qt signal per piece.

Both show the stream in one ``QTextDocument`` holding the whole reply, with no frame
batching: ``per_piece_set_text`` re-sets the whole text for every piece,
``per_piece_insert`` inserts each piece at the end.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from PySide6.QtCore import QCoreApplication, QObject, Signal, Slot
from PySide6.QtGui import QTextCursor
from PySide6.QtWidgets import QTextBrowser

from app.bench.measure import heartbeat, until
from app.bench.stats import summary
from app.flow.metrics import Distribution

DESIGNS = ("per_piece_set_text", "per_piece_insert")


class _PerPieceReceiver(QObject):
    """The baselines' design: one queued Qt signal per piece, applied as it arrives."""

    piece = Signal(str, float)

    def __init__(self, view: QTextBrowser, mode: str) -> None:
        super().__init__()
        self.view = view
        self.cursor = QTextCursor(view.document())
        self.mode = mode
        self.text = ""
        self.shown = 0
        self.deadline = math.inf
        self.to_screen = Distribution()
        self.piece.connect(self.on_piece)

    def produce(self, pieces: Sequence[str], rate: float) -> None:
        start = time.perf_counter()
        for i, text in enumerate(pieces):
            delay = start + i / rate - time.perf_counter()
            if delay > 0.001:
                time.sleep(delay)
            self.piece.emit(text, time.perf_counter())

    @Slot(str, float)
    def on_piece(self, text: str, produced_at: float) -> None:
        if time.perf_counter() > self.deadline:
            return  # past the grace period: counted as not shown, not rendered
        if self.mode == "per_piece_set_text":
            self.text += text
            self.view.setPlainText(self.text)
        else:
            self.cursor.movePosition(QTextCursor.MoveOperation.End)
            self.cursor.insertText(text)
        self.shown += 1
        self.to_screen.add((time.perf_counter() - produced_at) * 1000)

    def discard_pending(self) -> None:
        self.piece.disconnect(self.on_piece)
        QCoreApplication.removePostedEvents(self)


async def per_piece(mode: str, pieces: list[str], rate: float) -> dict[str, Any]:
    """Stream ``pieces`` at ``rate`` per second through one per-piece design."""
    view = QTextBrowser()
    view.resize(800, 600)
    view.show()
    receiver = _PerPieceReceiver(view, mode)
    async with heartbeat() as lag:
        producer = threading.Thread(target=receiver.produce, args=(pieces, rate), daemon=True)
        producer.start()
        # The stream's length plus two seconds' grace to show what is still queued; what
        # is not on screen by then counts as lost. Without a deadline the per-piece
        # designs take minutes to work through a ten-second fire hose.
        receiver.deadline = time.perf_counter() + len(pieces) / rate + 2.0
        await until(
            lambda: receiver.shown == len(pieces) or time.perf_counter() > receiver.deadline,
            timeout=600,
        )
        producer.join()
    shown = receiver.shown
    receiver.discard_pending()
    view.deleteLater()
    return {
        "loop_lag_ms": summary(lag),
        "token_to_screen_ms": summary(receiver.to_screen),
        "lost": len(pieces) - shown,
    }


async def designs(
    real_pieces: list[str],
    real_rate: float,
    hose: list[str],
    hose_rate: float,
    log: Callable[[str], None],
) -> dict[str, Any]:
    """Each design with the real model's pieces at the app's rate, then with the fire hose."""
    result: dict[str, Any] = {}
    for mode in DESIGNS:
        normal = await per_piece(mode, real_pieces, real_rate)
        fire = await per_piece(mode, hose, hose_rate)
        result[mode] = {
            "loop_lag_ms": normal["loop_lag_ms"],
            "token_to_screen_ms": normal["token_to_screen_ms"],
            "firehose": {"lost": fire["lost"], "loop_lag_ms": fire["loop_lag_ms"]},
        }
        log(f"  {mode}: fire hose loop lag p99 {fire['loop_lag_ms']['p99']} ms")
    return result
