"""The flow timeline: the last half minute of tokens/s, queue, frame cost and loop lag, live.

Drawn with pyqtgraph (made for live data in Qt). It reads :class:`FlowMetrics` through a
:class:`FlowSampler` on a timer that runs only while the timeline is shown, so a closed
diagnostics panel costs the flow nothing and an open one a few cheap redraws a second.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

# pyqtgraph takes the Qt binding named here, else the first one already imported; naming it
# keeps it on PySide6 even if another binding is installed and imported first somewhere.
os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")

import numpy as np
import pyqtgraph as pg  # type: ignore[import-untyped]
from PySide6.QtCore import QCoreApplication, QEvent, QObject, QPointF, Qt, QTimer, Slot
from PySide6.QtGui import QColor, QFont, QFontMetricsF, QHideEvent, QPalette, QShowEvent
from PySide6.QtWidgets import QLabel, QSizePolicy, QVBoxLayout, QWidget

from app.flow.metrics import (
    COMPUTATION_ENDED,
    FIRST_TOKEN,
    PROMPT_PROCESSED,
    PROMPT_PROCESSING,
    REPLY_END,
    REPLY_START,
    STOP_PRESSED,
    FlowEvent,
    FlowMetrics,
    FlowSample,
    FlowSampler,
)
from app.flow.words import say_sentence
from app.sentence import CONTEXT

WINDOW_SECONDS: Final = 30.0
"""How much of the past the timeline shows."""

SAMPLE_INTERVAL_MS: Final = 200
"""5 readings a second: smooth enough to watch a half-minute scroll by, and few enough that
the redraws (a few milliseconds each, holding the GIL) cost the flow nothing measurable."""

FRAME_BUDGET_MS: Final = 1000 / 60
"""A frame at 60 Hz: frame cost or loop lag above this line is a frame the user saw late."""

HOVER_REACH_S: Final = 0.4
"""How near (seconds) the pointer must be to a marker for the hover text to name it."""

LANES: Final = 4
"""Rows of the events lane: moments close in time get their names on different rows."""

_PRIORITY: Final = {
    STOP_PRESSED: 0,
    COMPUTATION_ENDED: 1,
    FIRST_TOKEN: 2,
    REPLY_START: 3,
    REPLY_END: 4,
    PROMPT_PROCESSING: 5,
    PROMPT_PROCESSED: 6,
}
"""Whose name is written first when the lane has no room for all: Stop's story first."""


@dataclass(frozen=True)
class _Colors:
    tokens: str
    queue: str
    bound: str
    frame: str
    lag: str
    stop: str
    marker: str


# Picked per theme for contrast with the plot's background (the palette's Base): the light
# set is dark enough on white, the dark set light enough on near-black.
_LIGHT: Final = _Colors(
    tokens="#1a5fd0",
    queue="#137333",
    bound="#c5221f",
    frame="#b05a00",
    lag="#8430ce",
    stop="#c5221f",
    marker="#5f6368",
)
_DARK: Final = _Colors(
    tokens="#8ab4f8",
    queue="#81c995",
    bound="#f28b82",
    frame="#fdd663",
    lag="#d7aefb",
    stop="#f28b82",
    marker="#bdc1c6",
)


def _is_dark(palette: QPalette) -> bool:
    return palette.color(QPalette.ColorRole.Base).lightness() < 128


class Timeline(QWidget):
    """The last :data:`WINDOW_SECONDS` of the flow, with the reply's moments marked.

    An events lane over three plots, on one time axis (seconds before now): tokens per
    second; the queue's depth with its bound as a line (backpressure shows as the depth
    reaching it); frame cost and loop lag in milliseconds with the 60 Hz frame budget. The
    moments of each reply (start, prompt processing, prompt processed, first token, Stop
    pressed, computation ended, end) are vertical lines across all of them, named in the
    lane; a prompt being processed is a band in the lane with its progress. Hovering shows the
    values (and the moments) under the pointer in the line below the plots.

    Args:
        metrics: the figures to follow.
        parent: the owning widget.
    """

    def __init__(self, metrics: FlowMetrics, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("timeline")
        self.metrics = metrics
        self.sampler = FlowSampler(metrics, keep_seconds=WINDOW_SECONDS + 5)
        self._timer = QTimer(self)
        self._timer.setInterval(SAMPLE_INTERVAL_MS)
        self._timer.timeout.connect(self.tick)
        self._now = 0.0
        self._active_at = -math.inf
        self._drawn_idle = False
        self.redraws = 0
        """How many times the plots were redrawn (a quiet, idle timeline stops redrawing)."""
        self._hover_x: float | None = None
        self._markers: dict[tuple[float, str], list[Any]] = {}
        self._marker_events: dict[tuple[float, str], FlowEvent] = {}
        self._marker_labels: dict[tuple[float, str], Any] = {}
        self._label_font = QFont(self.font())
        self._label_font.setPointSizeF(max(6.0, self._label_font.pointSizeF() * 0.85))

        self.graphics = pg.GraphicsLayoutWidget()
        self.graphics.setObjectName("timelinePlots")
        self.graphics.setMinimumHeight(300)
        self.graphics.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Expanding)
        self.graphics.ci.setContentsMargins(2, 2, 2, 2)
        self.graphics.ci.setSpacing(0)
        self.lane_plot = self._plot(0)
        self.rate_plot = self._plot(1)
        self.queue_plot = self._plot(2)
        self.ms_plot = self._plot(3)
        self.plots = (self.lane_plot, self.rate_plot, self.queue_plot, self.ms_plot)
        for plot in self.plots[1:]:
            plot.setXLink(self.lane_plot)
        self.ms_plot.showAxis("bottom")
        line_height = QFontMetricsF(self._label_font).height()
        self.graphics.ci.layout.setRowFixedHeight(0, math.ceil((line_height + 3) * LANES) + 4)
        self.lane_plot.enableAutoRange(axis="y", enable=False)
        self.lane_plot.setLimits(yMin=None)
        self.lane_plot.setYRange(-0.5, LANES - 0.5, padding=0)
        self.lane_plot.invertY(True)
        self.lane_plot.getAxis("left").setStyle(showValues=False)
        self.lane_plot.getAxis("left").setTicks([[]])

        self.tokens_curve = self.rate_plot.plot()
        self.queue_curve = self.queue_plot.plot()
        self.bound_curve = self.queue_plot.plot()
        self.frame_curve = self.ms_plot.plot(connect="finite")
        self.lag_curve = self.ms_plot.plot(connect="finite")
        self.budget_line = pg.InfiniteLine(pos=FRAME_BUDGET_MS, angle=0, movable=False)
        self.ms_plot.addItem(self.budget_line, ignoreBounds=True)
        # The prompt's band is drawn in the events lane only: across every plot, the large
        # translucent fills made each redraw about a fifth dearer, and the prompt's two marker
        # lines already bound it there.
        self.prefill_band = pg.LinearRegionItem(movable=False, orientation="vertical")
        self.prefill_band.setZValue(-10)
        self.prefill_band.hide()
        self.lane_plot.addItem(self.prefill_band, ignoreBounds=True)
        self.prefill_label = pg.TextItem(anchor=(0, 0))
        self.prefill_label.hide()
        self.rate_plot.addItem(self.prefill_label, ignoreBounds=True)
        self.hover_lines = [pg.InfiniteLine(angle=90, movable=False) for _ in self.plots]
        for plot, line in zip(self.plots, self.hover_lines, strict=True):
            line.hide()
            plot.addItem(line, ignoreBounds=True)
        # Top left: the newest data is on the right, where a legend would hide it.
        self.ms_legend = self.ms_plot.addLegend(offset=(4, 2), labelTextSize="8pt", colCount=2)
        self.queue_legend = self.queue_plot.addLegend(
            offset=(4, 2), labelTextSize="8pt", colCount=2
        )

        self.hover_label = QLabel()
        self.hover_label.setObjectName("timelineHover")
        self.hover_label.setWordWrap(True)
        self.graphics.scene().sigMouseMoved.connect(self._on_mouse_moved)
        self.graphics.viewport().installEventFilter(self)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.graphics, 1)
        layout.addWidget(self.hover_label)
        self._apply_colors()
        self.retranslate()

    def _plot(self, row: int) -> Any:
        plot = self.graphics.addPlot(row=row, col=0)
        plot.setMenuEnabled(False)
        plot.setMouseEnabled(x=False, y=False)
        plot.hideButtons()
        plot.enableAutoRange(axis="y", enable=True)
        plot.setLimits(yMin=0)
        plot.hideAxis("bottom")
        plot.getAxis("left").setWidth(44)
        for side in ("left", "bottom"):
            # The SI prefix would re-render the axis title on every scroll of the view.
            plot.getAxis(side).enableAutoSIPrefix(False)
        return plot

    # -- language and colours -----------------------------------------------------------------

    def retranslate(self) -> None:
        """Set every word in the current language."""
        self.lane_plot.setLabel("left", self.tr("events"))
        self.rate_plot.setLabel("left", self.tr("tokens/s"))
        self.queue_plot.setLabel("left", self.tr("queue"))
        self.ms_plot.setLabel("left", self.tr("ms"))
        self.ms_plot.setLabel("bottom", self.tr("seconds ago"))
        for legend, items in (
            (
                self.queue_legend,
                ((self.queue_curve, self.tr("depth")), (self.bound_curve, self.tr("bound"))),
            ),
            (
                self.ms_legend,
                ((self.frame_curve, self.tr("frame cost")), (self.lag_curve, self.tr("loop lag"))),
            ),
        ):
            legend.clear()
            for curve, name in items:
                legend.addItem(curve, name)
        self._apply_colors()
        for key, label in self._marker_labels.items():
            label.setText(self._marker_name(self._marker_events[key]))
        self._show_hover()

    def changeEvent(self, event: QEvent) -> None:
        """Follow the application's palette (theme) and language."""
        if event.type() == QEvent.Type.PaletteChange:
            self._apply_colors()
        elif event.type() == QEvent.Type.LanguageChange:
            self.retranslate()
        super().changeEvent(event)

    @property
    def colors(self) -> _Colors:
        """The series colours for the current palette."""
        return _DARK if _is_dark(self.palette()) else _LIGHT

    def _apply_colors(self) -> None:
        palette = self.palette()
        colors = self.colors
        text = palette.color(QPalette.ColorRole.WindowText)
        self.graphics.setBackground(palette.color(QPalette.ColorRole.Base))
        for plot in self.plots:
            for side in ("left", "bottom"):
                axis = plot.getAxis(side)
                axis.setPen(pg.mkPen(palette.color(QPalette.ColorRole.Mid)))
                axis.setTextPen(pg.mkPen(text))
                axis.label.setDefaultTextColor(text)
        self.tokens_curve.setPen(pg.mkPen(colors.tokens, width=2))
        self.queue_curve.setPen(pg.mkPen(colors.queue, width=2))
        self.bound_curve.setPen(pg.mkPen(colors.bound, width=1, style=Qt.PenStyle.DashLine))
        self.frame_curve.setPen(pg.mkPen(colors.frame, width=1.5))
        self.lag_curve.setPen(pg.mkPen(colors.lag, width=1.5))
        self.budget_line.setPen(pg.mkPen(colors.marker, width=1, style=Qt.PenStyle.DotLine))
        base = QColor(palette.color(QPalette.ColorRole.Base))
        base.setAlpha(200)
        for legend in (self.queue_legend, self.ms_legend):
            legend.setLabelTextColor(text)
            legend.setBrush(pg.mkBrush(base))
            legend.setPen(pg.mkPen(None))
        highlight = QColor(palette.color(QPalette.ColorRole.Highlight))
        highlight.setAlpha(70)
        self.prefill_band.setBrush(pg.mkBrush(highlight))
        for line in self.prefill_band.lines:
            line.setPen(pg.mkPen(None))
        self.prefill_label.setColor(text)
        for line in self.hover_lines:
            line.setPen(pg.mkPen(text, width=1, style=Qt.PenStyle.DashLine))
        for key, lines in self._markers.items():
            self._color_marker(lines, self._marker_events[key].name)

    def _color_marker(self, lines: Sequence[Any], name: str) -> None:
        color = self._marker_color(name)
        style = Qt.PenStyle.SolidLine if name in (REPLY_START, REPLY_END) else Qt.PenStyle.DashLine
        for line in lines:
            line.setPen(pg.mkPen(color, width=1, style=style))
        # The name sits on the lane's background, so the lines it crosses do not cut it.
        backdrop = QColor(self.palette().color(QPalette.ColorRole.Base))
        backdrop.setAlpha(220)
        for key, label in self._marker_labels.items():
            if key[1] == name:
                label.setColor(color)
                label.fill = pg.mkBrush(backdrop)
                label.update()

    def _marker_color(self, name: str) -> str:
        colors = self.colors
        if name in (STOP_PRESSED, COMPUTATION_ENDED):
            return colors.stop
        if name == FIRST_TOKEN:
            return colors.tokens
        return colors.marker

    # -- sampling, only while shown -----------------------------------------------------------

    def showEvent(self, event: QShowEvent) -> None:
        """Start sampling, at once."""
        super().showEvent(event)
        self.tick()
        self._timer.start()

    def hideEvent(self, event: QHideEvent) -> None:
        """Stop sampling: a hidden timeline costs nothing."""
        self._timer.stop()
        super().hideEvent(event)

    @property
    def sampling(self) -> bool:
        """Whether the timeline is reading the metrics (only while shown)."""
        return self._timer.isActive()

    @Slot()
    def tick(self, now: float | None = None) -> None:
        """Take a reading and redraw (the timer calls this while the timeline is shown)."""
        sample = self.sampler.sample(now)
        self._now = sample.at
        events = self.metrics.events
        if (
            sample.tokens_per_s > 0
            or sample.queue_depth > 0
            or not math.isnan(sample.frame_cost_ms)
            or not math.isnan(sample.loop_lag_ms)
            or self.metrics.prefilling
            or (events and events[-1].at > self._active_at)
        ):
            self._active_at = sample.at
            self._drawn_idle = False
        if sample.at - self._active_at > WINDOW_SECONDS + 1:
            # Nothing has moved for longer than the plots show: they are flat; stop
            # repainting them (what the hover line says cannot change either).
            if self._drawn_idle:
                return
            self._drawn_idle = True
        self.redraw()

    def redraw(self) -> None:
        """Draw the kept readings and markers against the time of the latest reading.

        Everything is placed at its own time (``perf_counter`` seconds) once, and the view
        slides: a reading moves only the visible range and the axis's labels, so markers and
        bands are not touched again every tick.
        """
        self.redraws += 1
        samples = list(self.sampler.samples)
        now = self._now
        self.lane_plot.setXRange(now - WINDOW_SECONDS, now, padding=0)
        ticks = [
            [(now - ago, f"{ago:g}") for ago in range(0, int(WINDOW_SECONDS) + 1, 5)],
            [(now - ago, "") for ago in range(1, int(WINDOW_SECONDS) + 1)],
        ]
        self.ms_plot.getAxis("bottom").setTicks(ticks)
        if samples:
            table = np.array(
                [
                    (
                        s.at,
                        s.tokens_per_s,
                        s.queue_depth,
                        s.queue_bound,
                        s.frame_cost_ms,
                        s.loop_lag_ms,
                    )
                    for s in samples
                ],
                dtype=float,
            )
            x = table[:, 0]
            self.tokens_curve.setData(x, table[:, 1])
            self.queue_curve.setData(x, table[:, 2])
            self.bound_curve.setData(x, table[:, 3])
            self.frame_curve.setData(x, table[:, 4])
            self.lag_curve.setData(x, table[:, 5])
            bound = float(np.nanmax(table[:, 3])) if len(table) else 0.0
            self.queue_plot.setYRange(0, max(1.0, bound) * 1.1, padding=0)
            top = np.nanmax(table[:, 4:6]) if not np.isnan(table[:, 4:6]).all() else 0.0
            self.ms_plot.setYRange(0, max(FRAME_BUDGET_MS * 1.5, float(top) * 1.1), padding=0)
        self._draw_markers(now)
        self._draw_prefill(now)
        self._show_hover()

    def _draw_markers(self, now: float) -> None:
        oldest = now - WINDOW_SECONDS
        seen: set[tuple[float, str]] = set()
        for event in list(self.metrics.events):
            if event.at < oldest:
                continue
            key = (event.at, event.name)
            seen.add(key)
            if key not in self._markers:
                self._add_marker(key, event)
        for key in [key for key in self._markers if key not in seen]:
            for plot, line in zip(self.plots, self._markers.pop(key), strict=True):
                plot.removeItem(line)
            self.lane_plot.removeItem(self._marker_labels.pop(key))
            del self._marker_events[key]
        self._place_labels(now)

    def _add_marker(self, key: tuple[float, str], event: FlowEvent) -> None:
        lines = []
        for plot in self.plots:
            line = pg.InfiniteLine(pos=event.at, angle=90, movable=False)
            plot.addItem(line, ignoreBounds=True)
            lines.append(line)
        label = pg.TextItem(self._marker_name(event), anchor=(0, 0.5))
        label.setFont(self._label_font)
        # No margin round the text, so the lane's rows hold it without overlapping; above
        # every marker line, so no line cuts through a name.
        label.textItem.document().setDocumentMargin(0)
        label.setZValue(10)
        self.lane_plot.addItem(label, ignoreBounds=True)
        self._markers[key] = lines
        self._marker_events[key] = event
        self._marker_labels[key] = label
        self._color_marker(lines, event.name)

    def _place_labels(self, now: float) -> None:
        """Write each marker's name on the first lane row where it overlaps no other name.

        Moments close together (start, prompt, first token within milliseconds) go on
        different rows; a name with no room is left out (its line stays, hovering names it).
        """
        width = float(self.lane_plot.vb.width())
        if width <= 0:
            return
        per_second = width / WINDOW_SECONDS
        metrics = QFontMetricsF(self._label_font)
        taken: list[list[tuple[float, float]]] = [[] for _ in range(LANES)]
        ordered = sorted(
            self._marker_labels.items(),
            key=lambda item: (_PRIORITY.get(item[0][1], 9), -item[0][0]),
        )
        for key, label in ordered:
            x = (key[0] - (now - WINDOW_SECONDS)) * per_second
            text_width = metrics.horizontalAdvance(label.toPlainText()) + 8
            right_aligned = x + text_width > width
            span = (x - text_width, x) if right_aligned else (x, x + text_width)
            for lane, spans in enumerate(taken):
                if all(span[1] <= a or span[0] >= b for a, b in spans):
                    spans.append(span)
                    label.setAnchor((1, 0.5) if right_aligned else (0, 0.5))
                    label.setPos(key[0], lane)
                    label.show()
                    break
            else:
                label.hide()

    @staticmethod
    def _marker_name(event: FlowEvent) -> str:
        return QCoreApplication.translate(CONTEXT, event.name)

    @classmethod
    def _marker_text(cls, event: FlowEvent) -> str:
        text = cls._marker_name(event)
        if event.detail is not None:
            text += f" ({say_sentence(event.detail)})"
        return text

    def _draw_prefill(self, now: float) -> None:
        m = self.metrics
        started = m.prefill_started_at
        ended = m.prefill_ended_at if m.prefill_ended_at is not None else now
        if started is None or ended < now - WINDOW_SECONDS or m.prompt_tokens == 0:
            self.prefill_band.hide()
            self.prefill_label.hide()
            return
        self.prefill_band.setRegion((started, ended))
        self.prefill_band.show()
        if m.prefilling:
            fraction = m.prefill_fraction or 0.0
            self.prefill_label.setText(
                self.tr("prompt {done} / {total} tokens ({percent} %)").format(
                    done=m.prefill_done, total=m.prompt_tokens, percent=round(fraction * 100)
                )
            )
            y_top = float(self.rate_plot.viewRange()[1][1])
            self.prefill_label.setPos(max(started, now - WINDOW_SECONDS), y_top)
            self.prefill_label.show()
        else:
            self.prefill_label.hide()

    # -- hover --------------------------------------------------------------------------------

    @Slot(object)
    def _on_mouse_moved(self, position: QPointF) -> None:
        for plot in self.plots:
            if plot.sceneBoundingRect().contains(position):
                self.hover_at(float(plot.vb.mapSceneToView(position).x()) - self._now)
                return
        self.hover_at(None)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        """Clear the hover text when the pointer leaves the plots."""
        if event.type() == QEvent.Type.Leave:
            self.hover_at(None)
        return super().eventFilter(watched, event)

    def hover_at(self, x: float | None) -> None:
        """Show the values ``x`` seconds from now (negative: the past); None clears it."""
        self._hover_x = x
        self._show_hover()

    @property
    def hover_text(self) -> str:
        """What the hover line says now (empty when the pointer is not over the plots)."""
        return self.hover_label.text()

    def _show_hover(self) -> None:
        x = self._hover_x
        sample = self._sample_near(x) if x is not None else None
        if x is None or sample is None:
            self.hover_label.setText("")
            for line in self.hover_lines:
                line.hide()
            return
        for line in self.hover_lines:
            line.setValue(sample.at)
            line.show()
        parts = [
            self.tr("{seconds} s ago").format(seconds=f"{self._now - sample.at:.1f}"),
            self.tr("{rate} tokens/s").format(rate=f"{sample.tokens_per_s:.1f}"),
            self.tr("queue {depth} / {bound}").format(
                depth=sample.queue_depth, bound=sample.queue_bound
            ),
        ]
        if not math.isnan(sample.frame_cost_ms):
            parts.append(self.tr("frame {ms} ms").format(ms=f"{sample.frame_cost_ms:.1f}"))
        if not math.isnan(sample.loop_lag_ms):
            parts.append(self.tr("lag {ms} ms").format(ms=f"{sample.loop_lag_ms:.1f}"))
        if not math.isnan(sample.prefill):
            parts.append(self.tr("prompt {percent} %").format(percent=round(sample.prefill * 100)))
        at = self._now + x
        near = [e for e in self._marker_events.values() if abs(e.at - at) <= HOVER_REACH_S]
        parts.extend(self._marker_text(e) for e in sorted(near, key=lambda e: e.at))
        self.hover_label.setText(" · ".join(parts))

    def _sample_near(self, x: float) -> FlowSample | None:
        at = self._now + x
        best: FlowSample | None = None
        for sample in self.sampler.samples:
            if best is None or abs(sample.at - at) < abs(best.at - at):
                best = sample
        return best
