"""The flow diagnostics panel: what the flow is doing, live, for the curious user."""

from __future__ import annotations

import math

from PySide6.QtCore import QCoreApplication, Slot
from PySide6.QtWidgets import QFormLayout, QLabel, QWidget

from app.engine import QT_TRANSLATE_NOOP
from app.flow.metrics import FlowMetrics

ROWS = (
    ("tokens", QT_TRANSLATE_NOOP("DiagnosticsPanel", "Tokens/s")),
    ("first", QT_TRANSLATE_NOOP("DiagnosticsPanel", "First token")),
    ("queue", QT_TRANSLATE_NOOP("DiagnosticsPanel", "Queue (now / max / bound)")),
    ("backpressure", QT_TRANSLATE_NOOP("DiagnosticsPanel", "Backpressure waits")),
    ("frame", QT_TRANSLATE_NOOP("DiagnosticsPanel", "Frame cost (last / p95)")),
    ("lag", QT_TRANSLATE_NOOP("DiagnosticsPanel", "Loop lag (p99 / max)")),
    ("stop", QT_TRANSLATE_NOOP("DiagnosticsPanel", "Last stop latency")),
)


def _ms(value: float | None) -> str:
    if value is None or math.isnan(value):
        return "–"  # noqa: RUF001 - an en dash reads as "no value yet"
    return f"{value:.1f} ms"


class DiagnosticsPanel(QWidget):
    """Shows :class:`FlowMetrics`; refreshed only while visible, a few times a second."""

    def __init__(self, metrics: FlowMetrics, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("diagnostics")
        self._metrics = metrics
        layout = QFormLayout(self)
        self.values: dict[str, QLabel] = {}
        self.titles: dict[str, QLabel] = {}
        for key, _ in ROWS:
            label = QLabel("–")  # noqa: RUF001
            label.setObjectName(f"diag_{key}")
            self.values[key] = label
            self.titles[key] = QLabel()
            layout.addRow(self.titles[key], label)
        self.retranslate()

    def retranslate(self) -> None:
        """Set the titles in the current language."""
        for key, title in ROWS:
            self.titles[key].setText(QCoreApplication.translate("DiagnosticsPanel", title))

    @Slot()
    def refresh(self) -> None:
        """Re-read the figures (skipped while hidden, so a closed panel costs nothing)."""
        if not self.isVisible():
            return
        m = self._metrics
        rate = m.reply.tokens_per_s
        lag = m.loop_lag_ms.summary()
        v = self.values
        v["tokens"].setText(f"{rate:.1f}" if rate is not None else "–")  # noqa: RUF001
        v["first"].setText(_ms(m.reply.time_to_first_piece_ms))
        v["queue"].setText(f"{m.queue_depth} / {m.queue_max} / {m.queue_bound}")
        v["backpressure"].setText(f"{m.backpressure_waits} ({m.backpressure_ms:.0f} ms)")
        v["frame"].setText(f"{_ms(m.frame_cost_ms.last)} / {_ms(m.frame_cost_ms.percentile(95))}")
        v["lag"].setText(f"{_ms(lag['p99'])} / {_ms(lag['max'])}")
        v["stop"].setText(_ms(m.stop_latency_ms.last))
