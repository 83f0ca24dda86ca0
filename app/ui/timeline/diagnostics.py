"""The flow diagnostics panel: what the flow is doing, live, for the curious user."""

from __future__ import annotations

import math
from typing import Final

import numpy as np
from PySide6.QtCore import QCoreApplication, QSize, Qt, Slot
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QGridLayout, QLabel, QSizePolicy, QVBoxLayout, QWidget

from app.flow.metrics import Distribution, FlowMetrics
from app.sentence import QT_TRANSLATE_NOOP, size_text
from app.ui.timeline.timeline import Timeline

ROWS = (
    ("tokens", QT_TRANSLATE_NOOP("DiagnosticsPanel", "Tokens/s")),
    ("first", QT_TRANSLATE_NOOP("DiagnosticsPanel", "First token")),
    ("queue", QT_TRANSLATE_NOOP("DiagnosticsPanel", "Queue (now / max / bound)")),
    ("backpressure", QT_TRANSLATE_NOOP("DiagnosticsPanel", "Backpressure waits")),
    ("frame", QT_TRANSLATE_NOOP("DiagnosticsPanel", "Frame cost (last / p95)")),
    ("lag", QT_TRANSLATE_NOOP("DiagnosticsPanel", "Loop lag (p99 / max)")),
    ("stop", QT_TRANSLATE_NOOP("DiagnosticsPanel", "Last stop latency")),
    ("prompt", QT_TRANSLATE_NOOP("DiagnosticsPanel", "Prompt processed")),
    ("prefill", QT_TRANSLATE_NOOP("DiagnosticsPanel", "Prompt processing")),
    ("python", QT_TRANSLATE_NOOP("DiagnosticsPanel", "Python per token")),
    ("guesses", QT_TRANSLATE_NOOP("DiagnosticsPanel", "Guessed ahead")),
    ("cache", QT_TRANSLATE_NOOP("DiagnosticsPanel", "Prompt cache")),
    ("threads", QT_TRANSLATE_NOOP("DiagnosticsPanel", "Threads")),
    ("device", QT_TRANSLATE_NOOP("DiagnosticsPanel", "Runs on")),
)

NO_VALUE = "–"  # noqa: RUF001 - an en dash reads as "no value yet"


def _ms(value: float | None) -> str:
    if value is None or math.isnan(value):
        return NO_VALUE
    return f"{value:.1f} ms"


KEPT: Final = 20_000
"""How many samples a :class:`Distribution` keeps by default (its summary's population)."""


class RecentPercentiles:
    """The percentiles of a :class:`Distribution`'s kept samples, caught up incrementally.

    ``Distribution.summary`` sorts every kept sample (up to 20,000 after a few minutes of
    frames: about 2 ms per figure, holding the GIL, four times a second). This copies only
    the samples added since the last reading into an array and selects the ranks it needs,
    with the same nearest-rank definition. A distribution is assumed to keep the default
    :data:`KEPT` samples unless it is already full when first read.
    """

    def __init__(self) -> None:
        self._source: Distribution | None = None
        self._seen = 0
        self._keep = KEPT
        self._values = np.empty(0)

    def read(self, source: Distribution) -> None:
        """Catch up with ``source`` (a new object, as the bench swaps in, starts over)."""
        if source is not self._source:
            self._source, self._seen = source, 0
            kept = source.since(0)
            # A distribution that has dropped samples is full: its length is its bound.
            self._keep = len(kept) if source.count > len(kept) else KEPT
            self._values = np.empty(0)
        new = source.since(self._seen)
        self._seen = source.count
        if new:
            added = np.fromiter(reversed(new), dtype=float, count=len(new))
            self._values = np.concatenate((self._values, added))[-self._keep :]

    def percentile(self, q: float) -> float:
        """The ``q``-th percentile (nearest rank) of the kept samples; NaN when none."""
        n = len(self._values)
        if not n:
            return math.nan
        rank = max(1, math.ceil(q / 100 * n)) - 1
        return float(np.partition(self._values, rank)[rank])

    @property
    def max(self) -> float:
        """The largest kept sample; NaN when none."""
        return float(self._values.max()) if len(self._values) else math.nan


class FigureHolder(QWidget):
    """Holds a figure's label, so that a new value lays the window out again only when it must.

    A label asks its parent's layout again at every new text (``QWidget::updateGeometry``),
    and a word-wrapped one in the panel had its figures, the panel, the dock and the main
    window laid out again four times a second while a reply streamed: 2-3 ms a second of the
    UI thread on a two-core VM whose cores both decode, taken from the model. Here the label's
    parent has no layout (the holder places it); the holder asks its own layout again only
    when the label's height at its width, or its least width, changed.

    Args:
        label: the figure's label (word-wrapped); the holder becomes its parent.
    """

    def __init__(self, label: QLabel) -> None:
        super().__init__()
        self.label = label
        label.setParent(self)
        policy = QSizePolicy(label.sizePolicy())
        policy.setHeightForWidth(True)
        self.setSizePolicy(policy)
        self._shape = (-1, -1)
        self.relayouts = 0
        """How many new values asked the layout again (the tests count them)."""

    def hasHeightForWidth(self) -> bool:
        """The label wraps: its height follows its width."""
        return True

    def heightForWidth(self, width: int) -> int:
        """The label's height at ``width``."""
        return self.label.heightForWidth(width)

    def sizeHint(self) -> QSize:
        """The label's."""
        return self.label.sizeHint()

    def minimumSizeHint(self) -> QSize:
        """The label's."""
        return self.label.minimumSizeHint()

    def resizeEvent(self, event: QResizeEvent) -> None:
        """The label fills the holder."""
        self.label.setGeometry(self.rect())
        self._shape = self._measure()
        super().resizeEvent(event)

    def set_text(self, text: str) -> None:
        """Show ``text``; the layout is asked again only if the label now needs another size."""
        if text == self.label.text():
            return
        self.label.setText(text)
        shape = self._measure()
        if shape != self._shape:
            self._shape = shape
            self.relayouts += 1
            self.updateGeometry()

    def _measure(self) -> tuple[int, int]:
        return self.label.minimumSizeHint().width(), self.label.heightForWidth(self.width())


class DiagnosticsPanel(QWidget):
    """Shows :class:`FlowMetrics`: the figures, and under them the live :class:`Timeline`.

    The figures are refreshed by :meth:`refresh` (the window calls it a few times a second
    while a reply streams) and the timeline samples on its own timer; both only while the
    panel is visible, so a closed panel costs nothing, and the timeline's timer only while
    something moves (a refresh wakes it), so an idle one wakes nothing.
    """

    def __init__(self, metrics: FlowMetrics, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("diagnostics")
        self._metrics = metrics
        self._lags = RecentPercentiles()
        self._frames = RecentPercentiles()
        figures = QWidget()
        # A grid, not a QFormLayout: a form lays a wrapped value out at a width other than the
        # one it gives it, so a figure of a few lines was cut to one or two (a long prompt
        # cache's, at a dock's usual width).
        grid = QGridLayout(figures)
        grid.setContentsMargins(0, 0, 0, 0)
        grid.setColumnStretch(1, 1)
        self.values: dict[str, QLabel] = {}
        self.holders: dict[str, FigureHolder] = {}
        self.titles: dict[str, QLabel] = {}
        for row, (key, _) in enumerate(ROWS):
            label = QLabel(NO_VALUE)
            label.setObjectName(f"diag_{key}")
            label.setWordWrap(True)
            self.values[key] = label
            self.holders[key] = FigureHolder(label)
            self.titles[key] = QLabel()
            self.titles[key].setBuddy(label)
            grid.addWidget(self.titles[key], row, 0, Qt.AlignmentFlag.AlignTop)
            grid.addWidget(self.holders[key], row, 1)
        self.timeline = Timeline(metrics)
        layout = QVBoxLayout(self)
        layout.addWidget(figures)
        layout.addWidget(self.timeline, 1)
        self.retranslate()

    def retranslate(self) -> None:
        """Set the titles in the current language."""
        for key, title in ROWS:
            self.titles[key].setText(QCoreApplication.translate("DiagnosticsPanel", title))
        self.timeline.retranslate()
        self.refresh()

    @Slot()
    def refresh(self) -> None:
        """Re-read the figures (skipped while hidden, so a closed panel costs nothing)."""
        if not self.isVisible():
            return
        m = self._metrics
        m.observe()
        rate = m.reply.tokens_per_s
        self._lags.read(m.loop_lag_ms)
        self._frames.read(m.frame_cost_ms)
        v = self.holders
        v["tokens"].set_text(f"{rate:.1f}" if rate is not None else NO_VALUE)
        v["first"].set_text(_ms(m.reply.time_to_first_piece_ms))
        v["queue"].set_text(f"{m.queue_depth} / {m.queue_max} / {m.queue_bound}")
        v["backpressure"].set_text(f"{m.backpressure_waits} ({m.backpressure_ms:.0f} ms)")
        v["frame"].set_text(f"{_ms(m.frame_cost_ms.last)} / {_ms(self._frames.percentile(95))}")
        v["lag"].set_text(f"{_ms(self._lags.percentile(99))} / {_ms(self._lags.max)}")
        v["stop"].set_text(_ms(m.stop_latency_ms.last))
        v["prompt"].set_text(self._prompt_text())
        v["prefill"].set_text(self._prefill_text())
        v["python"].set_text(_ms(m.python_ms_per_token) if m.python_ms_per_token else NO_VALUE)
        v["guesses"].set_text(self._guesses_text())
        v["cache"].set_text(self._cache_text())
        v["threads"].set_text(m.threads or NO_VALUE)
        v["device"].set_text(self._device_text())
        self.timeline.wake()  # it stops reading when nothing moves

    def _device_text(self) -> str:
        m = self._metrics
        if m.gpu_memory is None:
            return m.placement or NO_VALUE
        used, total = m.gpu_memory
        return self.tr("{where}; GPU memory: {used} of {total} in use").format(
            where=m.placement, used=size_text(used), total=size_text(total)
        )

    def _prompt_text(self) -> str:
        m = self._metrics
        if not m.prompt_tokens:
            return NO_VALUE
        fraction = m.prefill_fraction or 0.0
        return self.tr("{done} / {total} tokens ({percent} %), {cached} cached").format(
            done=m.prefill_done,
            total=m.prompt_tokens,
            percent=round(fraction * 100),
            cached=m.cached_tokens,
        )

    def _prefill_text(self) -> str:
        m = self._metrics
        seconds = m.prefill_seconds
        if seconds is None:
            return NO_VALUE
        rate = m.prefill_rate
        shown_rate = f"{rate:.0f}" if rate is not None else NO_VALUE
        return self.tr("{rate} tokens/s, {seconds} s").format(
            rate=shown_rate, seconds=f"{seconds:.2f}"
        )

    def _guesses_text(self) -> str:
        m = self._metrics
        rates = m.guesses_per_s
        if rates is None:
            return NO_VALUE
        guessed, kept = rates
        return self.tr(
            "{kept} of {guessed} tokens kept ({percent} %); {guessed_rate}/s guessed, "
            "{kept_rate}/s kept"
        ).format(
            kept=m.draft_kept,
            guessed=m.drafted,
            percent=round(100 * m.draft_kept / m.drafted),
            guessed_rate=f"{guessed:.0f}",
            kept_rate=f"{kept:.0f}",
        )

    def _cache_text(self) -> str:
        cache = self._metrics.cache
        if not (cache.entries or cache.hits or cache.misses):
            return NO_VALUE
        return self.tr(
            "{entries} entries, {megabytes} MB; {hits} hits, {misses} misses; {saved} s saved"
        ).format(
            entries=cache.entries,
            megabytes=f"{cache.megabytes:.0f}",
            hits=cache.hits,
            misses=cache.misses,
            saved=f"{cache.seconds_saved:.1f}",
        )
