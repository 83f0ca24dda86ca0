"""The bench's comparison as a picture: the frame pump against the per-piece designs.

Three panels, one bar per design: how late the UI loop ran while a real reply streamed (loop
lag p99), how long a token took to reach the screen (p95), and how late the loop ran under the
fire hose (p99). The scale is logarithmic: the designs differ by factors of a thousand.
Drawn with pyqtgraph, exported offscreen with its ``ImageExporter``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

# pyqtgraph takes the Qt binding named here, else the first one already imported.
os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")

import pyqtgraph as pg  # type: ignore[import-untyped]
from pyqtgraph.exporters import ImageExporter  # type: ignore[import-untyped]
from PySide6.QtWidgets import QApplication

FRAME_MS = 1000 / 60
FLOOR_MS = 0.1
"""The bottom of the log scale; smaller figures are drawn at it."""

COLOURS = ("#2e7d32", "#c62828", "#ef6c00")
SHORT = {
    "Floodgate (frame pump)": "frame pump",
    "per_piece_set_text": "set text per piece",
    "per_piece_insert": "insert per piece",
}
PANELS: tuple[tuple[str, Callable[[dict[str, Any]], float]], ...] = (
    ("loop lag p99, real reply", lambda d: d["loop_lag_ms"]["p99"]),
    ("token to screen p95", lambda d: d["token_to_screen_ms"]["p95"]),
    ("fire hose loop lag p99", lambda d: d["firehose"]["loop_lag_ms"]["p99"]),
)


def _log(value: float) -> float:
    return math.log10(max(FLOOR_MS, value))


def _panel(plot: Any, title: str, values: list[float], names: list[str], notes: list[str]) -> None:
    plot.setTitle(title)
    floor = _log(FLOOR_MS)
    tops = [_log(v) for v in values]
    xs = list(range(len(values)))
    bars = pg.BarGraphItem(
        x=xs,
        y0=[floor] * len(values),
        height=[t - floor for t in tops],
        width=0.6,
        brushes=[pg.mkBrush(c) for c in COLOURS[: len(values)]],
    )
    plot.addItem(bars)
    budget = pg.InfiniteLine(
        pos=_log(FRAME_MS), angle=0, pen=pg.mkPen("#555", style=pg.QtCore.Qt.PenStyle.DashLine)
    )
    plot.addItem(budget)
    for x, top, value, note in zip(xs, tops, values, notes, strict=True):
        label = pg.TextItem(f"{value:.1f} ms{note}", color="#000", anchor=(0.5, 1.0))
        label.setPos(x, top)
        plot.addItem(label)
    decades = range(int(floor), 6)
    plot.getAxis("left").setTicks([[(d, f"{10.0**d:g}") for d in decades]])
    plot.getAxis("bottom").setTicks([[(x, SHORT.get(n, n)) for x, n in enumerate(names)]])
    plot.setYRange(floor, max(max(tops) + 0.5, _log(FRAME_MS) + 0.5))
    plot.setLabel("left", "ms (log scale; dashed: one 60 Hz frame)")


def _not_shown(lost: int) -> str:
    return f"\n{lost} pieces never shown" if lost else ""


def draw(doc: dict[str, Any], path: Path) -> None:
    """Write the comparison chart of ``doc`` (the bench's JSON) as a PNG to ``path``."""
    designs = {"Floodgate (frame pump)": doc, **doc["baselines"]}
    names = list(designs)
    pg.setConfigOptions(background="w", foreground="k", antialias=True)
    layout = pg.GraphicsLayoutWidget()
    layout.resize(1500, 560)
    layout.addLabel(
        "The same stream through three designs: Floodgate's frame pump against one Qt signal "
        "per piece (lower is better)",
        colspan=len(PANELS),
    )
    layout.nextRow()
    for title, pick in PANELS:
        plot = layout.addPlot()
        notes = [""] * len(names)
        if title.startswith("fire hose"):
            notes = [_not_shown(d["firehose"]["lost"]) for d in designs.values()]
        _panel(plot, title, [float(pick(d)) for d in designs.values()], names, notes)
    layout.show()  # offscreen: lays the plots out at the widget's size
    QApplication.processEvents()
    path.parent.mkdir(parents=True, exist_ok=True)
    exporter = ImageExporter(layout.scene())
    exporter.parameters()["width"] = 1500
    exporter.export(str(path))
    layout.close()
    layout.deleteLater()
