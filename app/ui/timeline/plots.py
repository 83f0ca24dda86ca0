"""The timeline's plots: the events lane, tokens/s, the queue, and frame cost with loop lag.

Built once and then only fed: every curve is a :class:`pyqtgraph.PlotCurveItem` given new
arrays (no item is created per redraw), the time axis is fixed at the last
:data:`WINDOW_SECONDS` (so its labels are drawn once, not on every tick), and each plot's
height moves in round steps only when its data outgrows or falls well under it.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Sequence
from typing import Any, Final

# pyqtgraph takes the Qt binding named here, else the first one already imported; naming it
# keeps it on PySide6 even if another binding is installed and imported first somewhere.
os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")

import pyqtgraph as pg  # type: ignore[import-untyped]
from pyqtgraph.graphicsItems.LegendItem import ItemSample  # type: ignore[import-untyped]
from PySide6.QtCore import QCoreApplication, QRectF, Qt
from PySide6.QtGui import QColor, QFont, QFontMetricsF, QPaintEvent, QPalette
from PySide6.QtWidgets import QGraphicsItem, QGraphicsTextItem, QSizePolicy

from app.ui.timeline.marks import LANES, EventsLane, MarkerLines, view_rect
from app.ui.timeline.style import colors_for

WINDOW_SECONDS: Final = 30.0
"""How much of the past the timeline shows."""

FRAME_BUDGET_MS: Final = 1000 / 60
"""A frame at 60 Hz: frame cost or loop lag above this line is a frame the user saw late."""

_STEPS: Final = (1.0, 2.0, 2.5, 5.0, 10.0)


def round_top(value: float) -> float:
    """The smallest 1, 2, 2.5 or 5 times a power of ten at or above ``value`` (> 0)."""
    scale = 10.0 ** math.floor(math.log10(value))
    return next(step * scale for step in _STEPS if step * scale >= value * (1 - 1e-9))


def fitted_top(current: float, needed: float) -> float:
    """A plot's new top: rounded up when ``needed`` outgrows it, down when far under it.

    In between it stays, so the axis (and its labels) is redrawn a few times a reply, not
    at every reading.
    """
    if needed > current or needed < current / 4:
        return round_top(needed)
    return current


class _Curve(pg.PlotCurveItem):  # type: ignore[misc]
    """A curve whose bounds are its view's: every curve of the timeline spans the time axis.

    pyqtgraph bounds a curve by its data, measured again (minimum and maximum of each array,
    the pen's width in pixels) each time the scene asks after new data: four times per
    curve per reading, a tenth of the timeline's cost.
    """

    def boundingRect(self) -> QRectF:
        """The view's rectangle (the curve's own bounds are never looked for)."""
        return view_rect(self)


class _Graphics(pg.GraphicsLayoutWidget):  # type: ignore[misc]
    """The plots' view, which measures the UI thread's CPU time its paint takes.

    A redraw only feeds the items; the plots are painted later, in the window's next paint,
    and that is most of what a redraw costs (the timeline paces its redraws by the sum).
    """

    def __init__(self) -> None:
        super().__init__()
        self.paint_s: float | None = None
        """The thread's CPU seconds of the first paint since this was last set to None (the
        timeline does at each redraw: the pointer's moves repaint too, and are not counted)."""

    def paintEvent(self, event: QPaintEvent) -> None:
        """Paint as pyqtgraph does, measuring the time."""
        began = time.thread_time()
        super().paintEvent(event)
        if self.paint_s is None:
            self.paint_s = time.thread_time() - began


class _ValueAxis(pg.AxisItem):  # type: ignore[misc]
    """A plot's left axis whose value labels stay within its own height.

    pyqtgraph centres each label on its tick, so the top value of one plot and the 0 of the
    plot above it, stacked with no space between, were drawn over each other ("100" on "0").
    A label that would cross its axis's top or bottom edge is moved inside it instead.
    """

    def generateDrawSpecs(self, p: Any) -> Any:
        """The draw specs of pyqtgraph, with the value labels moved within the axis's height."""
        specs = super().generateDrawSpecs(p)
        if specs is None:
            return None
        axis, ticks, texts = specs
        edges = self.mapRectFromParent(self.geometry())
        inside = []
        for rect, flags, text in texts:
            # pyqtgraph draws the text centred in a rect 0.8 of its height: 0.15 of the
            # rect more is kept clear at either edge, so the glyphs stay inside too.
            clear = rect.height() * 0.15
            moved = QRectF(rect)
            if moved.top() - clear < edges.top():
                moved.moveTop(edges.top() + clear)
            elif moved.bottom() + clear > edges.bottom():
                moved.moveBottom(edges.bottom() - clear)
            inside.append((moved, flags, text))
        return axis, ticks, inside


class TimelinePlots:
    """The plots of the timeline in one :class:`pyqtgraph.GraphicsLayoutWidget`.

    The x of every plot is seconds before now (``-WINDOW_SECONDS`` to 0).

    Args:
        font: the widget's font (the lane's names are a little smaller).
    """

    def __init__(self, font: QFont) -> None:
        self.label_font = QFont(font)
        self.label_font.setPointSizeF(max(6.0, font.pointSizeF() * 0.85))
        self.graphics = _Graphics()
        self.graphics.setObjectName("timelinePlots")
        self.graphics.setMinimumHeight(300)
        self.graphics.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Expanding)
        self.graphics.ci.setContentsMargins(2, 2, 2, 2)
        self.graphics.ci.setSpacing(0)
        self.lane_plot = self._plot(0, (-0.5, LANES - 0.5))
        self.rate_plot = self._plot(1, (0.0, 10.0))
        self.queue_plot = self._plot(2, (0.0, 1.0))
        self.ms_plot = self._plot(3, (0.0, round_top(FRAME_BUDGET_MS * 1.5)))
        self.plots = (self.lane_plot, self.rate_plot, self.queue_plot, self.ms_plot)
        self._tops = {id(plot): float(plot.viewRange()[1][1]) for plot in self.plots}
        self._time_axis()
        self._lane_rows()

        self.tokens_curve = self._curve(self.rate_plot)
        # Of the tokens, those guessed ahead and kept (speculative decoding): hidden while
        # there are none, so a reply without guesses draws nothing more.
        self.kept_curve = self._curve(self.rate_plot)
        self.kept_curve.hide()
        self.queue_curve = self._curve(self.queue_plot)
        self.bound_curve = self._curve(self.queue_plot)
        # Frames and lags are NaN where there were none (during a prompt): a gap, not a line.
        self.frame_curve = self._curve(self.ms_plot, connect="finite")
        self.lag_curve = self._curve(self.ms_plot, connect="finite")
        self.curves = (
            self.tokens_curve,
            self.queue_curve,
            self.bound_curve,
            self.frame_curve,
            self.lag_curve,
        )
        self.budget_line = pg.InfiniteLine(pos=FRAME_BUDGET_MS, angle=0, movable=False)
        self.ms_plot.addItem(self.budget_line, ignoreBounds=True)
        self.marker_lines = [MarkerLines() for _ in self.plots]
        for plot, lines in zip(self.plots, self.marker_lines, strict=True):
            plot.addItem(lines, ignoreBounds=True)
        # The prompt's band is drawn in the events lane only: across every plot, the large
        # translucent fills made each redraw about a fifth dearer, and the prompt's two marker
        # lines already bound it there.
        self.lane = EventsLane(WINDOW_SECONDS)
        # Above the lines, so no line cuts through a name (the band is translucent).
        self.lane.setZValue(10)
        self.lane_plot.addItem(self.lane, ignoreBounds=True)
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

    def _plot(self, row: int, y_range: tuple[float, float]) -> Any:
        plot = self.graphics.addPlot(row=row, col=0, axisItems={"left": _ValueAxis("left")})
        plot.setMenuEnabled(False)
        plot.setMouseEnabled(x=False, y=False)
        plot.hideButtons()
        # Fixed ranges, set by the timeline only when they must change: recomputing the
        # data's bounds and re-laying out the axes on every reading was much of a redraw.
        plot.disableAutoRange()
        plot.setXRange(-WINDOW_SECONDS, 0, padding=0)
        plot.setYRange(*y_range, padding=0)
        plot.hideAxis("bottom")
        plot.getAxis("left").setWidth(44)
        for side in ("left", "bottom"):
            # The SI prefix would re-render the axis title whenever the range moves.
            plot.getAxis(side).enableAutoSIPrefix(False)
        return plot

    def _time_axis(self) -> None:
        self.ms_plot.showAxis("bottom")
        seconds = range(0, int(WINDOW_SECONDS) + 1)
        self.ms_plot.getAxis("bottom").setTicks(
            [[(-ago, f"{ago:g}") for ago in seconds[::5]], [(-ago, "") for ago in seconds[1:]]]
        )

    def _lane_rows(self) -> None:
        # Rows of names from the top down, each as high as a line of the lane's font.
        line_height = QFontMetricsF(self.label_font).height()
        self.graphics.ci.layout.setRowFixedHeight(0, math.ceil((line_height + 3) * LANES) + 4)
        self.lane_plot.invertY(True)
        self.lane_plot.getAxis("left").setStyle(showValues=False)
        self.lane_plot.getAxis("left").setTicks([[]])

    @staticmethod
    def _curve(plot: Any, connect: str = "all") -> Any:
        # No antialiasing. A curve with gaps (NaN: no frames during a prompt, or while
        # idle) is checked for them: pyqtgraph then builds its path in one pass from an
        # array of which point joins the next, where unchecked it splits the arrays at
        # every NaN and adds each piece alone (a 25 s idle stretch: 125 pieces, a fifth
        # of a reading's cost). The ranges are the timeline's to set (:meth:`set_top`):
        # the view does not follow the curve's bounds.
        curve = _Curve(connect=connect, antialias=False, skipFiniteCheck=connect != "finite")
        plot.addItem(curve, ignoreBounds=True)
        return curve

    def set_top(self, plot: Any, needed: float) -> None:
        """Let ``plot`` show values up to ``needed``, moving its range only in round steps."""
        current = self._tops[id(plot)]
        top = fitted_top(current, max(needed, 1e-9))
        if top != current:
            self._tops[id(plot)] = top
            plot.setYRange(0, top, padding=0)

    def top(self, plot: Any) -> float:
        """The top of ``plot``'s range."""
        return self._tops[id(plot)]

    def retranslate(self) -> None:
        """Set the plots' words in the current language.

        Their context is the widget's, ``Timeline``, where they always were (written out:
        lupdate reads only a literal).
        """
        self.lane_plot.setLabel("left", QCoreApplication.translate("Timeline", "events"))
        self.rate_plot.setLabel("left", QCoreApplication.translate("Timeline", "tokens/s"))
        self.queue_plot.setLabel("left", QCoreApplication.translate("Timeline", "queue"))
        self.ms_plot.setLabel("left", QCoreApplication.translate("Timeline", "ms"))
        self.ms_plot.setLabel("bottom", QCoreApplication.translate("Timeline", "seconds ago"))
        for legend, items in (
            (
                self.queue_legend,
                (
                    (self.queue_curve, QCoreApplication.translate("Timeline", "depth")),
                    (self.bound_curve, QCoreApplication.translate("Timeline", "bound")),
                ),
            ),
            (
                self.ms_legend,
                (
                    (self.frame_curve, QCoreApplication.translate("Timeline", "frame cost")),
                    (self.lag_curve, QCoreApplication.translate("Timeline", "loop lag")),
                ),
            ),
        ):
            legend.clear()
            for curve, name in items:
                legend.addItem(curve, name)
        self.lane.retranslate()
        self._cache_still_parts()

    def _cache_still_parts(self) -> None:
        # The axes, their titles and the legends change a few times a reply (a new range,
        # a language, a theme), while the curves move at every reading: each is painted once
        # into a pixmap of its own, which every repaint then copies (a change repaints it
        # again). Painted afresh, the axes alone were a sixth of the plots' repaint.
        still = (pg.AxisItem, pg.LegendItem, pg.LabelItem, ItemSample)
        for item in self.graphics.scene().items():
            parent = item.parentItem()
            if isinstance(item, still) or (
                isinstance(item, QGraphicsTextItem) and isinstance(parent, still)
            ):
                item.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)

    def apply_colors(self, palette: QPalette) -> None:
        """Colour everything for ``palette`` (the theme's)."""
        colors = colors_for(palette)
        text = palette.color(QPalette.ColorRole.WindowText)
        base = QColor(palette.color(QPalette.ColorRole.Base))
        self.graphics.setBackground(base)
        for plot in self.plots:
            for side in ("left", "bottom"):
                axis = plot.getAxis(side)
                axis.setPen(pg.mkPen(palette.color(QPalette.ColorRole.Mid)))
                axis.setTextPen(pg.mkPen(text))
                axis.label.setDefaultTextColor(text)
        # One-pixel lines but the headline rate's: wider pens are stroked as outlines, and
        # the frame and lag zigzags at 1.5 px made each repaint about a fifth dearer.
        self.tokens_curve.setPen(pg.mkPen(colors.tokens, width=2))
        self.kept_curve.setPen(pg.mkPen(colors.tokens, width=1, style=Qt.PenStyle.DashLine))
        self.queue_curve.setPen(pg.mkPen(colors.queue, width=1))
        self.bound_curve.setPen(pg.mkPen(colors.bound, width=1, style=Qt.PenStyle.DashLine))
        self.frame_curve.setPen(pg.mkPen(colors.frame, width=1))
        self.lag_curve.setPen(pg.mkPen(colors.lag, width=1))
        self.budget_line.setPen(pg.mkPen(colors.marker, width=1, style=Qt.PenStyle.DotLine))
        translucent = QColor(base)
        translucent.setAlpha(200)
        for legend in (self.queue_legend, self.ms_legend):
            legend.setLabelTextColor(text)
            # pyqtgraph keeps the colour for labels added later; those already there are
            # written again in it (else a theme changed while shown left the old theme's
            # words, dark on dark).
            for _sample, label in legend.items:
                label.setText(label.text, color=text)
            legend.setBrush(pg.mkBrush(translucent))
            legend.setPen(pg.mkPen(None))
        highlight = QColor(palette.color(QPalette.ColorRole.Highlight))
        highlight.setAlpha(70)
        # The name sits on the lane's background, so the lines it crosses do not cut it.
        backdrop = QColor(base)
        backdrop.setAlpha(220)
        self.lane.set_style(self.label_font, colors, backdrop, highlight)
        self.prefill_label.setColor(text)
        for line in self.hover_lines:
            line.setPen(pg.mkPen(text, width=1, style=Qt.PenStyle.DashLine))

    def show_hover_line(self, x: float | None) -> None:
        """The hover line at ``x`` (seconds before now) across every plot; None hides it."""
        for line in self.hover_lines:
            if x is None:
                line.hide()
            else:
                line.setValue(x)
                line.show()

    def set_markers(self, lines: Sequence[tuple[float, Any]]) -> None:
        """The moments' lines (time and pen) across every plot."""
        for item in self.marker_lines:
            item.set_lines(lines)

    def slide_to(self, now: float) -> None:
        """Move the moments' lines so that the plots end at ``now``."""
        for item in self.marker_lines:
            item.set_now(now)
