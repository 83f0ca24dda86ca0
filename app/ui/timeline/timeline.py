"""The flow timeline: the last half minute of tokens/s, queue, frame cost and loop lag, live.

Drawn with pyqtgraph (made for live data in Qt). It reads :class:`FlowMetrics` through a
:class:`FlowSampler` on a timer that runs only while the timeline is shown, so a closed
diagnostics panel costs the flow nothing. While shown, a redraw and its repaint cost the UI
thread about 2.5 ms on a slow two-core machine (the GIL it holds meanwhile is time the
worker's Python waits): the plots are built once (:mod:`app.ui.timeline.plots`), the
readings kept in preallocated arrays (:mod:`app.ui.timeline.series`), and the reply's
moments painted by two items (:mod:`app.ui.timeline.marks`) on a time axis that does not
move. The readings come five times a second; the redraws as often as their measured cost
allows within :data:`REDRAW_SHARE` of the UI thread (:class:`~app.flow.pacing.SharePace`).
"""

from __future__ import annotations

import math
import time
from typing import Final

import numpy as np
from PySide6.QtCore import QEvent, QObject, QPointF, QTimer, Slot
from PySide6.QtGui import QHideEvent, QShowEvent
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from app.flow.metrics import FlowEvent, FlowMetrics, FlowSample, FlowSampler
from app.flow.pacing import SharePace
from app.flow.words import say_sentence
from app.ui.timeline.marks import LANES, marker_pens, moment_name
from app.ui.timeline.plots import FRAME_BUDGET_MS, WINDOW_SECONDS, TimelinePlots
from app.ui.timeline.series import AT, BOUND, DEPTH, FRAME, KEPT, LAG, TOKENS, SampleSeries
from app.ui.timeline.style import SeriesColors, colors_for

__all__ = [
    "FRAME_BUDGET_MS",
    "LANES",
    "REDRAW_SHARE",
    "SAMPLE_INTERVAL_MS",
    "WINDOW_SECONDS",
    "Timeline",
]

SAMPLE_INTERVAL_MS: Final = 200
"""5 readings a second: smooth enough to watch a half-minute scroll by, and the plots' and
the hover line's resolution. Redrawn at most as often."""

REDRAW_SHARE: Final = 0.005
"""The most of the UI thread's time the timeline's redraws and their paints may take: 5 ms
a second. Where a redraw costs more than a millisecond, the plots are redrawn less often than
they are read. Measured on a two-core AMD EPYC VM whose both cores decode (2026-12-06), a
redraw and its paint cost the UI thread 2.4-3.5 ms: redrawn five times a second, the shown
panel took 21-25 ms a second more of it than the hidden one (2-2.5 % of a core, which a
decode thread loses there); redrawn at most twice, 9-14 ms. On a machine where a redraw costs
a millisecond or less the plots move five times a second."""

REDRAW_MOST_S: Final = 1.0
"""The longest the plots wait for a redraw while something moves, whatever it costs."""

HOVER_REACH_S: Final = 0.4
"""How near (seconds) the pointer must be to a marker for the hover text to name it."""

_SERIES: Final = ((TOKENS, "tokens_curve"), (DEPTH, "queue_curve"), (BOUND, "bound_curve"))


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
        redraw_share: the most of the UI thread's time redraws may take
            (:data:`REDRAW_SHARE`; 1.0 redraws at every reading, as the tests that check
            what a reading draws ask).
    """

    def __init__(
        self,
        metrics: FlowMetrics,
        parent: QWidget | None = None,
        *,
        redraw_share: float = REDRAW_SHARE,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("timeline")
        self.metrics = metrics
        self.sampler = FlowSampler(metrics, keep_seconds=WINDOW_SECONDS + 5)
        self.series = SampleSeries(keep_seconds=WINDOW_SECONDS + 5)
        self._timer = QTimer(self)
        self._timer.setInterval(SAMPLE_INTERVAL_MS)
        self._timer.timeout.connect(self.tick)
        self._now = 0.0
        """The time of the reading the plots show (their x is seconds before it)."""
        self._active_at = -math.inf
        self._drawn_idle = False
        self.redraws = 0
        """How many times the plots were redrawn (a quiet, idle timeline stops redrawing)."""
        self.pace = SharePace(redraw_share, REDRAW_MOST_S, step=SAMPLE_INTERVAL_MS / 1000)
        """When the next redraw is due: its cost is the redraw's and its paint's CPU time."""
        self._redraw_s = 0.0
        self._hover_x: float | None = None
        self.events: list[FlowEvent] = []
        """The moments in view (marked with a line, named in the lane if it has room)."""

        self.view = TimelinePlots(self.font())
        self.graphics = self.view.graphics
        self.plots = self.view.plots
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

    # -- language and colours -----------------------------------------------------------------

    def retranslate(self) -> None:
        """Set every word in the current language."""
        self.view.retranslate()
        self._apply_colors()
        if self._now:
            self.view.lane.advance(self._now, self.view.lane.band)
        self._show_hover()

    def changeEvent(self, event: QEvent) -> None:
        """Follow the application's palette (theme) and language."""
        if event.type() == QEvent.Type.PaletteChange:
            self._apply_colors()
        elif event.type() == QEvent.Type.LanguageChange:
            self.retranslate()
        super().changeEvent(event)

    @property
    def colors(self) -> SeriesColors:
        """The series colours for the current palette."""
        return colors_for(self.palette())

    def _apply_colors(self) -> None:
        self.view.apply_colors(self.palette())
        self.view.set_markers(marker_pens(self.colors, self.events))

    # -- sampling, only while shown -----------------------------------------------------------

    def showEvent(self, event: QShowEvent) -> None:
        """Start sampling, at once, and draw what is there whatever the pace."""
        super().showEvent(event)
        self.tick(force=True)
        self._timer.start()

    def hideEvent(self, event: QHideEvent) -> None:
        """Stop sampling: a hidden timeline costs nothing."""
        self._timer.stop()
        super().hideEvent(event)

    @property
    def sampling(self) -> bool:
        """Whether the timeline is reading the metrics (while shown and something moves)."""
        return self._timer.isActive()

    def wake(self) -> None:
        """Something moved (a reply's figures): read again, if shown and gone quiet."""
        if self.isVisible() and not self._timer.isActive():
            self.tick()
            self._timer.start()

    @Slot()
    def tick(self, now: float | None = None, *, force: bool = False) -> None:
        """Take a reading and redraw when due (the timer calls this while shown).

        Args:
            now: the reading's time (``time.perf_counter()`` when None).
            force: redraw whatever the pace (the timeline was just shown).
        """
        sample = self.sampler.sample(now)
        self.series.append(sample)
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
        if not self.isVisible():
            return  # what a reading taken while hidden shows is drawn when shown
        if sample.at - self._active_at > WINDOW_SECONDS + 1:
            # Nothing has moved for longer than the plots show: they are flat. Once they show
            # it (whatever the pace), stop repainting them, and reading too: nothing wakes the
            # UI thread until something moves (:meth:`wake`). What the hover line says cannot
            # change either.
            if self._drawn_idle and not force:
                self._timer.stop()
                return
            self._drawn_idle = True
            force = True
        if force or self.pace.due(sample.at):
            self._draw(sample.at)

    def _draw(self, at: float) -> None:
        """Redraw at the reading of ``at``, measuring what the last redraw cost."""
        graphics = self.graphics
        # The last redraw's cost is known now: its own time, and its paint's (done since, in
        # the window's paint).
        cost = self._redraw_s + (graphics.paint_s or 0.0) if self.redraws else None
        self.pace.ran(at, cost)
        began = time.thread_time()
        self._now = at
        self.redraw()
        self._redraw_s = time.thread_time() - began
        graphics.paint_s = None

    def redraw(self) -> None:
        """Draw the kept readings and moments against the time of the latest reading.

        The plots' x is seconds before now, fixed: a reading gives each curve its arrays
        shifted by now, and the moments' items their new offset; no axis, range or item is
        touched unless what it shows changed.
        """
        self.redraws += 1
        now, view, series = self._now, self.view, self.series
        x = series.column(AT) - now
        for column, name in _SERIES:
            getattr(view, name).setData(x, series.column(column).copy())
        kept = series.column(KEPT)
        if kept.any():
            view.kept_curve.setData(x, kept.copy())
            view.kept_curve.show()
        elif view.kept_curve.isVisible():
            view.kept_curve.hide()
        frames, lags = series.column(FRAME).copy(), series.column(LAG).copy()
        view.frame_curve.setData(x, frames)
        view.lag_curve.setData(x, lags)
        if len(series):
            view.set_top(view.rate_plot, max(10.0, _top(series.column(TOKENS)) * 1.1))
            view.set_top(view.queue_plot, max(1.0, _top(series.column(BOUND))) * 1.1)
            worst = max(_top(frames), _top(lags))
            view.set_top(view.ms_plot, max(FRAME_BUDGET_MS * 1.5, worst * 1.1))
        self._draw_markers(now)
        view.lane.advance(now, self._prefill(now))
        self._show_hover()

    def _draw_markers(self, now: float) -> None:
        oldest = now - WINDOW_SECONDS
        events = [event for event in self.metrics.events if event.at >= oldest]
        if events != self.events:
            self.events = events
            self.view.set_markers(marker_pens(self.colors, events))
            self.view.lane.set_events(events)
        self.view.slide_to(now)

    def _prefill(self, now: float) -> tuple[float, float] | None:
        """Show the prompt's progress; returns the prompt's band, if it is in view."""
        m, label = self.metrics, self.view.prefill_label
        started = m.prefill_started_at
        ended = m.prefill_ended_at if m.prefill_ended_at is not None else now
        if started is None or ended < now - WINDOW_SECONDS or m.prompt_tokens == 0:
            label.hide()
            return None
        if m.prefilling:
            text = self.tr("prompt {done} / {total} tokens ({percent} %)").format(
                done=m.prefill_done,
                total=m.prompt_tokens,
                percent=round((m.prefill_fraction or 0.0) * 100),
            )
            if text != label.toPlainText():
                label.setText(text)
            top = self.view.top(self.view.rate_plot)
            label.setPos(max(started - now, -WINDOW_SECONDS), top)
            label.show()
        else:
            label.hide()
        return (started, ended)

    # -- hover --------------------------------------------------------------------------------

    @Slot(object)
    def _on_mouse_moved(self, position: QPointF) -> None:
        for plot in self.plots:
            if plot.sceneBoundingRect().contains(position):
                self.hover_at(float(plot.vb.mapSceneToView(position).x()))
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
        row = self.series.nearest(self._now + x) if x is not None else None
        if x is None or row is None:
            if self.hover_label.text():
                self.hover_label.setText("")
                self.view.show_hover_line(None)
            return
        sample = self.series.row(row)
        self.view.show_hover_line(sample.at - self._now)
        at = self._now + x
        near = sorted(
            (e for e in self.events if abs(e.at - at) <= HOVER_REACH_S), key=lambda e: e.at
        )
        parts = self._sample_parts(sample) + [_moment_text(e) for e in near]
        self.hover_label.setText(" · ".join(parts))

    def _sample_parts(self, sample: FlowSample) -> list[str]:
        parts = [
            self.tr("{seconds} s ago").format(seconds=f"{self._now - sample.at:.1f}"),
            self.tr("{rate} tokens/s").format(rate=f"{sample.tokens_per_s:.1f}"),
            self.tr("queue {depth} / {bound}").format(
                depth=sample.queue_depth, bound=sample.queue_bound
            ),
        ]
        if sample.guessed_per_s > 0:
            parts.append(
                self.tr("guessed {guessed}/s, {kept}/s kept").format(
                    guessed=f"{sample.guessed_per_s:.0f}", kept=f"{sample.kept_per_s:.0f}"
                )
            )
        if not math.isnan(sample.frame_cost_ms):
            parts.append(self.tr("frame {ms} ms").format(ms=f"{sample.frame_cost_ms:.1f}"))
        if not math.isnan(sample.loop_lag_ms):
            parts.append(self.tr("lag {ms} ms").format(ms=f"{sample.loop_lag_ms:.1f}"))
        if not math.isnan(sample.prefill):
            parts.append(self.tr("prompt {percent} %").format(percent=round(sample.prefill * 100)))
        if not math.isnan(sample.gpu_mb):
            parts.append(self.tr("GPU memory {mb} MB").format(mb=f"{sample.gpu_mb:,.0f}"))
        return parts


def _top(values: np.ndarray) -> float:
    """The largest finite value, 0 when there is none."""
    finite = values[np.isfinite(values)]
    return float(finite.max()) if len(finite) else 0.0


def _moment_text(event: FlowEvent) -> str:
    text = moment_name(event)
    if event.detail is not None:
        text += f" ({say_sentence(event.detail)})"
    return text
