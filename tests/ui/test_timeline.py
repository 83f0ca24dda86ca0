"""The live timeline in the diagnostics panel, and the trace recording the window drives."""

from __future__ import annotations

import itertools
import json
import math
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import QEvent, QObject, QPointF, QRectF
from PySide6.QtGui import QColor, QImage, QPainter, QPalette
from PySide6.QtWidgets import QApplication, QWidget
from pytestqt.qtbot import QtBot

from app.engine import GenerationReport, StopSignal
from app.flow.metrics import (
    COMPUTATION_ENDED,
    FIRST_TOKEN,
    PAUSED,
    PROMPT_PROCESSING,
    REPLY_END,
    REPLY_START,
    RESUMED,
    SIDE_BY_SIDE,
    STOP_PRESSED,
    CacheFigures,
    Distribution,
    FlowEvent,
    FlowMetrics,
    FlowSample,
    ReplyFigures,
)
from app.trace import Tracer, check_trace
from app.ui.look.theme import apply_theme, contrast
from app.ui.timeline.diagnostics import NO_VALUE, DiagnosticsPanel, RecentPercentiles
from app.ui.timeline.marks import NAME_GAP_PX
from app.ui.timeline.plots import fitted_top, round_top
from app.ui.timeline.series import AT, TOKENS, SampleSeries
from app.ui.timeline.style import marker_pen
from app.ui.timeline.timeline import LANES, REDRAW_MOST_S, WINDOW_SECONDS, Timeline
from app.ui.timeline.trace_recording import TraceRecording

STEP = 0.125


@pytest.fixture(params=["light", "dark"])
def theme(request: pytest.FixtureRequest, qapp: QApplication) -> Iterator[str]:
    """Each test in both themes, set the way the app sets them; the palette is put back."""
    saved_palette, saved_style = QPalette(qapp.palette()), qapp.style().name()
    apply_theme(qapp, request.param)
    yield str(request.param)
    qapp.setStyle(saved_style)
    qapp.setPalette(saved_palette)


@pytest.fixture
def timeline(qtbot: QtBot, theme: str) -> Timeline:
    # Redrawn at every reading: these tests check what a reading draws (the pace is tested
    # on its own, below).
    widget = Timeline(FlowMetrics(queue_bound=16), redraw_share=1.0)
    qtbot.addWidget(widget)
    widget.resize(480, 420)
    widget.show()
    qtbot.waitExposed(widget)
    return widget


def play_reply(timeline: Timeline, start: float) -> dict[str, float]:
    """A reply in readings 1/8 s apart: prompt, tokens at 80/s, backpressure, Stop."""
    m = timeline.metrics
    report, stop = GenerationReport(), StopSignal()
    # As the session does it: a new reply's figures, its report and its stop signal.
    m.reply, m.report, m.stop_signal = ReplyFigures(sent_at=start), report, stop
    moments = {"start": start}
    report.prompt_tokens, report.prefill_started_at = 400, start + 0.1
    for step in range(1, 81):
        now = start + step * STEP
        if step == 4:
            report.prefill_done = 200  # halfway through the prompt
        if step == 8:
            report.prefill_done, report.prefill_ended_at = 400, now
            moments["prefill end"] = now
        if step > 8:
            m.reply.pieces_shown += 10  # 10 pieces each 1/8 s: 80 tokens/s
            if m.reply.first_shown_at is None:
                m.reply.first_shown_at = now
            m.frame_cost_ms.add(2.0)
            m.loop_lag_ms.add(1.0 if step != 30 else 40.0)  # one late frame
            m.queue_depth = 4
        if 40 <= step < 60:
            m.backpressure_waits += 1  # the window fell behind: the worker waited
        if step == 70:
            stop.set()
            stop.set_at = now
            report.compute_ended_at = now + 0.01
            moments["stop"] = now
        timeline.tick(now)
    m.end_reply()
    timeline.tick(start + 81 * STEP)
    return moments


def curve(item: object) -> tuple[np.ndarray, np.ndarray]:
    x, y = item.getData()  # type: ignore[attr-defined]
    return np.asarray(x), np.asarray(y)


def test_the_timeline_plots_the_flow_against_time(timeline: Timeline, qtbot: QtBot) -> None:
    start = time.perf_counter() + 1  # after the reading taken when shown
    play_reply(timeline, start)
    now = start + 81 * STEP
    view = timeline.view
    ago, rate = curve(view.tokens_curve)
    x = ago + now  # the plots' x is seconds before the latest reading
    assert len(x) == 82  # the reading at show, then the reply's
    assert ago[-1] == 0
    assert np.all(np.diff(x) > 0)
    steady = rate[(x > start + 3) & (x < start + 8)]
    assert np.allclose(steady, 80, rtol=0.05)
    _, depth = curve(view.queue_curve)
    _, bound = curve(view.bound_curve)
    assert set(bound[1:]) == {16}
    at_bound = (x >= start + 40 * STEP) & (x < start + 60 * STEP)
    assert np.all(depth[at_bound] == 16)  # backpressure: the depth reaches the bound line
    assert np.all(depth[(x > start + 10 * STEP) & (x < start + 39 * STEP)] == 4)
    _, lag = curve(view.lag_curve)
    assert np.nanmax(lag) == 40.0
    assert math.isnan(curve(view.frame_curve)[1][2])  # no frames during the prompt: a gap
    for plot in timeline.plots:
        assert plot.viewRange()[0] == pytest.approx([-WINDOW_SECONDS, 0])
    # Every value is inside its plot's range.
    assert view.rate_plot.viewRange()[1][1] >= np.nanmax(rate)
    assert view.queue_plot.viewRange()[1][1] >= 16
    assert view.ms_plot.viewRange()[1][1] >= 40


def test_the_ranges_move_in_round_steps_not_at_every_reading(
    timeline: Timeline, qtbot: QtBot
) -> None:
    m, plot = timeline.metrics, timeline.view.rate_plot
    start = time.perf_counter() + 1
    m.reply = ReplyFigures(sent_at=start)
    tops = []
    for step in range(1, 60):
        # 40 then 56 tokens/s, a second each: round tops 50 and 100 without the hysteresis
        m.reply.pieces_shown += 5 if step % 16 < 8 else 7
        m.reply.first_shown_at = m.reply.first_shown_at or start
        timeline.tick(start + step * STEP)
        tops.append(plot.viewRange()[1][1])
    assert set(tops[16:]) == {100.0}  # once the rate is known, the axis stays put
    items = set(map(id, plot.items))
    timeline.tick(start + 61 * STEP)
    assert set(map(id, plot.items)) == items  # a redraw feeds the items, makes none
    assert [round_top(v) for v in (0.3, 7, 10, 11, 24, 26, 4000)] == [0.5, 10, 10, 20, 25, 50, 5000]
    assert fitted_top(100, 40) == 100  # in between: stays
    assert fitted_top(100, 120) == 200  # outgrown: up
    assert fitted_top(100, 20) == 20  # far under: down


def test_an_axis_is_painted_anew_when_its_range_or_the_theme_changes(
    timeline: Timeline, qtbot: QtBot, qapp: QApplication, theme: str
) -> None:
    # The axes and legends are painted once into pixmaps of their own and copied at each
    # repaint: a new range or a new theme must paint them again, not copy what they were.
    view = timeline.view
    axis = view.rate_plot.getAxis("left")

    def axis_pixels() -> QImage:
        area = view.graphics.mapFromScene(axis.sceneBoundingRect()).boundingRect()
        return view.graphics.grab(area).toImage()

    first = axis_pixels()
    assert first == axis_pixels()  # nothing changed: the same pixels
    view.set_top(view.rate_plot, 4000)
    ranged = axis_pixels()
    assert ranged != first  # the labels of the new range
    apply_theme(qapp, "light" if theme == "dark" else "dark")
    qtbot.waitUntil(lambda: axis_pixels() != ranged)  # the labels in the new colours
    view.set_top(view.rate_plot, 5)
    assert axis_pixels() != ranged


def test_the_value_labels_of_stacked_plots_do_not_touch(timeline: Timeline) -> None:
    # The plots are stacked with no space between them: the top value of one plot and the 0
    # of the plot above it sit at the same height. Each label stays within its own axis.
    view = timeline.view
    view.set_top(view.rate_plot, 100)
    view.set_top(view.queue_plot, 100)
    image = QImage(10, 10, QImage.Format.Format_ARGB32)
    painter = QPainter(image)
    labels: list[list[tuple[str, QRectF]]] = []
    try:
        for plot in (view.rate_plot, view.queue_plot, view.ms_plot):
            axis = plot.getAxis("left")
            _line, _ticks, texts = axis.generateDrawSpecs(painter)
            edges = axis.parentItem().mapRectToScene(axis.geometry())  # not its bounds: wider
            drawn = [(text, axis.mapRectToScene(rect)) for rect, _flags, text in texts]
            assert {"0"} < {text for text, _rect in drawn}  # the 0 and a top value at least
            for text, rect in drawn:
                # The rect is 0.8 of the text's height, centred on it (pyqtgraph's measure).
                glyphs = rect.adjusted(0, -rect.height() / 8, 0, rect.height() / 8)
                assert edges.top() <= glyphs.top(), text
                assert glyphs.bottom() <= edges.bottom(), text
            labels.append(drawn)
    finally:
        painter.end()
    for upper, lower in itertools.pairwise(labels):
        lowest = max(rect.bottom() for _text, rect in upper)
        highest = min(rect.top() for _text, rect in lower)
        assert lowest < highest


def test_readings_are_kept_in_arrays_for_the_last_seconds_only() -> None:
    series = SampleSeries(keep_seconds=10, capacity=4)
    for i in range(40):  # more than the capacity: it grows, and drops what is too old
        series.append(FlowSample(float(i), float(i), 0, 8, math.nan, 1.0, math.nan))
    assert list(series.column(AT)) == [float(i) for i in range(29, 40)]
    assert list(series.column(TOKENS)) == list(series.column(AT))
    assert series.nearest(33.4) == 4
    assert series.nearest(33.6) == 5
    assert series.nearest(-100) == 0
    assert series.nearest(100) == len(series) - 1
    row = series.row(5)
    assert (row.at, row.tokens_per_s, row.queue_bound, row.loop_lag_ms) == (34.0, 34.0, 8, 1.0)
    assert math.isnan(row.frame_cost_ms)
    assert SampleSeries(keep_seconds=10).nearest(0) is None


def test_the_reply_moments_are_marked_and_named(timeline: Timeline, qtbot: QtBot) -> None:
    start = time.perf_counter() + 1  # after the reading taken when shown
    moments = play_reply(timeline, start)
    now = start + 81 * STEP
    names = {event.name for event in timeline.events}
    assert names == {
        REPLY_START,
        PROMPT_PROCESSING,
        "prompt processed",
        FIRST_TOKEN,
        STOP_PRESSED,
        COMPUTATION_ENDED,
        REPLY_END,
    }
    lines = timeline.view.marker_lines
    assert len(lines) == len(timeline.plots)  # one line across every plot
    for item in lines:
        assert any(x == pytest.approx(moments["stop"] - now) for x in item.positions)
    placed = timeline.view.lane.placed
    # Stop and what followed it are always named; the lane has room for them.
    assert {STOP_PRESSED, COMPUTATION_ENDED} <= {name.text for name in placed}
    # Names that are shown never overlap on one row of the lane.
    for i, a in enumerate(placed):
        for b in placed[i + 1 :]:
            assert (
                a.lane != b.lane
                or a.right + NAME_GAP_PX <= b.left
                or b.right + NAME_GAP_PX <= a.left
            )
    assert all(0 <= name.lane < LANES for name in placed)
    assert not timeline.grab().isNull()  # the lane and the lines paint


def test_names_of_moments_close_together_keep_apart(timeline: Timeline) -> None:
    # Near the right edge a name ends at its line; the next moment's name, a little later,
    # begins at its own. On one row they keep the lane's room between them, as anywhere else.
    lane = timeline.view.lane
    now = time.perf_counter()
    width = float(lane.getViewBox().width())
    seconds_per_px = WINDOW_SECONDS / width
    ended = FlowEvent(now - 82 * seconds_per_px, PROMPT_PROCESSING)
    first = FlowEvent(now - 80 * seconds_per_px, FIRST_TOKEN)  # 2 px to the right
    lane.set_events([ended, first])
    lane.advance(now, None)
    placed = {name.event.name: name for name in lane.placed}
    assert set(placed) == {PROMPT_PROCESSING, FIRST_TOKEN}
    a, b = placed[PROMPT_PROCESSING], placed[FIRST_TOKEN]
    assert a.right_aligned  # no room on its right: it ends at its line
    assert not b.right_aligned
    assert a.lane != b.lane or a.right + NAME_GAP_PX <= b.left


def test_a_prompt_being_processed_is_a_band_with_its_progress(
    timeline: Timeline, qtbot: QtBot
) -> None:
    m = timeline.metrics
    report = GenerationReport(prompt_tokens=1000, prefill_done=250)
    m.begin_reply(report, StopSignal())
    report.prefill_started_at = time.perf_counter() - 1
    timeline.tick()
    lane, label = timeline.view.lane, timeline.view.prefill_label
    assert lane.band is not None
    assert lane.band[0] == pytest.approx(report.prefill_started_at)
    assert label.isVisible()
    assert "250 / 1000" in label.toPlainText()
    assert "25 %" in label.toPlainText()
    report.prefill_done, report.prefill_ended_at = 1000, time.perf_counter()
    timeline.tick()
    assert not label.isVisible()
    assert lane.band[1] == pytest.approx(report.prefill_ended_at)
    assert not timeline.grab().isNull()  # the band paints


def test_hovering_shows_the_values_under_the_pointer(timeline: Timeline, qtbot: QtBot) -> None:
    start = time.perf_counter() + 1  # after the reading taken when shown
    moments = play_reply(timeline, start)
    now = start + 81 * STEP
    timeline.hover_at(start + 50 * STEP - now)
    assert "80.0 tokens/s" in timeline.hover_text
    assert "queue 16 / 16" in timeline.hover_text
    assert "frame 2.0 ms" in timeline.hover_text
    assert timeline.view.hover_lines[0].isVisible()

    # Through the mouse: a move over the plots at the moment Stop was pressed.
    plot = timeline.view.ms_plot
    scene = plot.vb.mapViewToScene(QPointF(moments["stop"] - now, 1.0))
    timeline.graphics.scene().sigMouseMoved.emit(scene)
    assert STOP_PRESSED in timeline.hover_text
    assert COMPUTATION_ENDED in timeline.hover_text
    assert "s ago" in timeline.hover_text

    timeline.graphics.scene().sigMouseMoved.emit(QPointF(-50, -50))  # off the plots
    assert timeline.hover_text == ""
    assert not timeline.view.hover_lines[0].isVisible()


def test_it_samples_only_while_shown(timeline: Timeline, qtbot: QtBot) -> None:
    timeline.metrics.queue_depth = 2  # something moves (else it stops reading: below)
    assert timeline.sampling
    qtbot.waitUntil(lambda: len(timeline.sampler.samples) >= 3, timeout=3000)
    timeline.hide()
    assert not timeline.sampling
    kept = len(timeline.sampler.samples)
    qtbot.wait(400)
    assert len(timeline.sampler.samples) == kept
    timeline.show()
    assert timeline.sampling
    assert len(timeline.sampler.samples) == kept + 1  # a reading at once when shown


def test_a_quiet_timeline_stops_redrawing(timeline: Timeline, qtbot: QtBot) -> None:
    start = time.perf_counter() - 200
    timeline.tick(start)
    timeline.tick(start + WINDOW_SECONDS + 2)
    redraws = timeline.redraws
    for step in range(10):
        timeline.tick(start + WINDOW_SECONDS + 3 + step)
    assert timeline.redraws == redraws  # nothing moved for longer than it shows
    timeline.metrics.mark(STOP_PRESSED, at=start + WINDOW_SECONDS + 13.5)
    timeline.tick(start + WINDOW_SECONDS + 14)
    assert timeline.redraws == redraws + 1


def test_a_quiet_timeline_wakes_nothing_until_something_moves(qtbot: QtBot) -> None:
    panel = DiagnosticsPanel(FlowMetrics(queue_bound=8))
    qtbot.addWidget(panel)
    panel.show()
    timeline = panel.timeline
    assert timeline.sampling
    start = time.perf_counter() - 200
    timeline.tick(start)
    timeline.tick(start + WINDOW_SECONDS + 2)  # nothing moved for longer than it shows
    timeline.tick(start + WINDOW_SECONDS + 3)
    assert not timeline.sampling  # no more readings: its timer wakes nothing
    woke_at = time.perf_counter()
    panel.refresh()  # a reply's figures moved: the window refreshes the panel
    assert timeline.sampling
    assert timeline.series.column(AT)[-1] >= woke_at  # a reading at once
    read_at = timeline.series.column(AT)[-1]
    qtbot.waitUntil(lambda: timeline.series.column(AT)[-1] > read_at)  # and on its timer


def test_a_dear_redraw_is_drawn_less_often_than_read(qtbot: QtBot) -> None:
    # A share no redraw can keep within: the plots wait the longest they may between
    # redraws, while every reading is kept (and drawn at the next redraw).
    widget = Timeline(FlowMetrics(queue_bound=8), redraw_share=1e-6)
    qtbot.addWidget(widget)
    widget.resize(480, 420)
    widget.show()
    qtbot.waitExposed(widget)
    m = widget.metrics
    start = time.perf_counter() + 1
    m.reply = ReplyFigures(sent_at=start, first_shown_at=start)
    drawn: list[float] = []
    for step in range(1, 51):  # ten seconds of readings, a fifth of a second apart
        m.reply.pieces_shown += 20
        redraws = widget.redraws
        widget.tick(start + step * 0.2)
        QApplication.processEvents()  # the window paints what the redraw changed
        if widget.redraws > redraws:
            drawn.append(step * 0.2)
    paint = widget.graphics.paint_s  # the last redraw's paint, counted in the next one's cost
    assert paint is not None
    assert paint > 0
    assert widget.pace.cost is not None
    assert widget.pace.cost > 0
    assert widget.pace.gap == REDRAW_MOST_S
    assert len(drawn) == 10
    assert np.allclose(np.diff(drawn), REDRAW_MOST_S)
    # Drawn: the reading at show, and every reading up to the last redraw's, which is now.
    ago, _ = curve(widget.view.tokens_curve)
    assert len(ago) == 1 + round(drawn[-1] / 0.2)
    assert ago[-1] == 0
    assert len(widget.series) == 1 + 50  # and the readings since, kept for the next redraw
    # The hover line reads the picture drawn: its newest point is "now".
    widget.hover_at(0.0)
    assert widget.hover_text.startswith("0.0 s ago")


def test_a_cheap_redraw_is_drawn_at_every_reading(qtbot: QtBot) -> None:
    widget = Timeline(FlowMetrics(queue_bound=8))  # the app's share
    qtbot.addWidget(widget)
    widget.show()
    qtbot.waitExposed(widget)
    m = widget.metrics
    start = time.perf_counter() + 1
    m.reply = ReplyFigures(sent_at=start, first_shown_at=start)
    redraws = widget.redraws
    for step in range(1, 11):
        m.reply.pieces_shown += 20
        widget.pace.cost = 0.0002  # what each redraw measures, the fast machine's
        widget.tick(start + step * 0.2)
    assert widget.redraws == redraws + 10


def test_a_hidden_timeline_never_redraws(timeline: Timeline, qtbot: QtBot) -> None:
    timeline.hide()
    redraws = timeline.redraws
    timeline.metrics.mark(STOP_PRESSED, at=time.perf_counter())
    timeline.tick()
    assert timeline.redraws == redraws
    timeline.show()  # and what happened meanwhile is drawn when shown
    assert timeline.redraws == redraws + 1
    assert STOP_PRESSED in {event.name for event in timeline.events}


def test_a_timeline_shown_again_after_a_quiet_while_is_drawn_anew(
    timeline: Timeline, qtbot: QtBot
) -> None:
    timeline.hide()
    now = time.perf_counter()
    timeline.metrics.mark(STOP_PRESSED, at=now - 100)
    timeline.tick(now - 99)  # something moved while hidden...
    timeline.tick(now - 60)  # ...and went quiet again, all while hidden
    redraws = timeline.redraws
    timeline.show()
    assert timeline.redraws == redraws + 1  # not the picture from before it was hidden
    assert timeline.events == []  # the Stop is long out of view


def test_colours_follow_the_theme_and_stay_readable(
    timeline: Timeline, theme: str, qtbot: QtBot
) -> None:
    base = timeline.palette().color(QPalette.ColorRole.Base)
    assert (base.lightness() < 128) == (theme == "dark")
    assert timeline.graphics.backgroundBrush().color() == base
    for item in timeline.view.curves:
        assert contrast(item.opts["pen"].color(), base) >= 3.0, item
    for name in (STOP_PRESSED, FIRST_TOKEN, REPLY_START):
        assert contrast(marker_pen(timeline.colors, name).color(), base) >= 3.0, name
    text = timeline.view.ms_plot.getAxis("left").textPen().color()
    assert text == timeline.palette().color(QPalette.ColorRole.WindowText)
    assert contrast(text, base) >= 4.5


def test_a_theme_change_recolours_a_timeline_already_shown(
    qtbot: QtBot, qapp: QApplication, theme: str
) -> None:
    widget = Timeline(FlowMetrics(queue_bound=8))
    qtbot.addWidget(widget)
    widget.show()
    before = QColor(widget.view.tokens_curve.opts["pen"].color())
    apply_theme(qapp, "light" if theme == "dark" else "dark")
    qtbot.waitUntil(lambda: widget.view.tokens_curve.opts["pen"].color() != before)
    base = widget.palette().color(QPalette.ColorRole.Base)
    assert widget.graphics.backgroundBrush().color() == base
    # The legends' words are written again in the new theme's text colour: as many of their
    # pixels are in it as in a timeline made in that theme.
    text = widget.palette().color(QPalette.ColorRole.WindowText)
    fresh = Timeline(FlowMetrics(queue_bound=8))
    qtbot.addWidget(fresh)
    fresh.show()
    qtbot.waitExposed(fresh)
    expected = pixels_near(legend_pixels(fresh), text)
    assert expected > 20  # the words are there to count
    qtbot.waitUntil(lambda: pixels_near(legend_pixels(widget), text) == expected)


def legend_pixels(timeline: Timeline) -> QImage:
    """What the frame-cost legend shows now."""
    view = timeline.view
    area = view.graphics.mapFromScene(view.ms_legend.sceneBoundingRect()).boundingRect()
    return view.graphics.grab(area).toImage()


def pixels_near(image: QImage, color: QColor) -> int:
    """How many pixels of ``image`` are close to ``color`` (text, antialiased)."""
    near = 0
    for y in range(image.height()):
        for x in range(image.width()):
            c = image.pixelColor(x, y)
            diff = abs(c.red() - color.red()) + abs(c.green() - color.green())
            near += diff + abs(c.blue() - color.blue()) < 120
    return near


def test_the_panel_shows_prompt_and_cache_figures_and_holds_the_timeline(
    qtbot: QtBot, theme: str
) -> None:
    metrics = FlowMetrics(queue_bound=8)
    panel = DiagnosticsPanel(metrics)
    qtbot.addWidget(panel)
    panel.show()
    assert panel.timeline.isVisible()
    assert panel.values["prompt"].text() == NO_VALUE
    assert panel.values["cache"].text() == NO_VALUE
    report = GenerationReport(prompt_tokens=1200, cached_tokens=200, prefill_done=700)
    metrics.begin_reply(report, StopSignal())
    report.prefill_started_at = time.perf_counter() - 1.0
    report.python_ms_per_token = 0.42
    metrics.cache = CacheFigures(entries=3, megabytes=48.4, hits=5, misses=2, seconds_saved=7.25)
    panel.refresh()
    assert panel.values["prompt"].text() == "700 / 1200 tokens (58 %), 200 cached"
    rate, seconds = panel.values["prefill"].text().split(", ")
    assert 400 <= float(rate.split()[0]) <= 500  # 500 processed in a little over a second
    assert seconds.endswith(" s")
    assert panel.values["python"].text() == "0.4 ms"
    assert panel.values["cache"].text() == "3 entries, 48 MB; 5 hits, 2 misses; 7.2 s saved"
    panel.hide()
    assert not panel.timeline.sampling


def test_a_new_figure_lays_the_panel_out_again_only_when_it_needs_another_size(
    qtbot: QtBot,
) -> None:
    metrics = FlowMetrics(queue_bound=8)
    panel = DiagnosticsPanel(metrics)
    qtbot.addWidget(panel)
    panel.resize(320, 800)
    panel.show()
    qtbot.waitExposed(panel)
    holder, label = panel.holders["cache"], panel.values["cache"]
    holder.set_text("3 entries, 48 MB; 9 hits")  # the first value (after NO_VALUE) may ask
    qtbot.waitUntil(lambda: label.width() > 0)
    QApplication.processEvents()
    requests = LayoutRequests()
    panel.installEventFilter(requests)
    relayouts, height = holder.relayouts, label.height()
    for hits in range(10, 20):  # a streaming reply's figures: other digits, the same size
        holder.set_text(f"3 entries, 48 MB; {hits} hits")
        QApplication.processEvents()
    assert holder.relayouts == relayouts
    assert requests.count == 0  # the panel (and the window above it) was not laid out again
    assert label.text() == "3 entries, 48 MB; 19 hits"
    # A value that wraps onto more lines does ask, and its row grows.
    holder.set_text("3 entries, 48 MB; 5 hits, 2 misses; 7.2 s saved")
    assert holder.relayouts == relayouts + 1
    qtbot.waitUntil(lambda: label.height() > height)
    assert label.height() >= label.heightForWidth(label.width())


class LayoutRequests(QObject):
    """Counts the layout requests that reach the object it filters."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.LayoutRequest:
            self.count += 1
        return False


class Window(QWidget):
    pass


def test_recording_from_the_window_shows_an_indicator_and_writes_the_file(
    qtbot: QtBot, tmp_path: Path
) -> None:
    window = Window()
    qtbot.addWidget(window)
    tracer = Tracer()
    recording = TraceRecording(window, tracer)
    window.show()
    assert not recording.indicator.isVisibleTo(window)
    path = tmp_path / "flow.json"
    recording.start(path)
    assert tracer.recording
    assert recording.action.isChecked()
    assert recording.indicator.isVisibleTo(window)
    assert "Recording" in recording.indicator.text()
    assert "0:00" in recording.indicator.text()
    with tracer.span("frame"):
        pass
    with qtbot.waitSignal(recording.finished, timeout=10_000) as written:
        recording.action.trigger()  # the menu item again: stop
        assert not tracer.recording
        assert not recording.action.isChecked()
    assert written.args == [f"Flow trace written to {path}"]
    assert not recording.indicator.isVisibleTo(window)
    document = json.loads(path.read_text(encoding="utf-8"))
    assert check_trace(document) == []
    assert [e["name"] for e in document["traceEvents"] if e["ph"] == "X"] == ["frame"]


def test_a_trace_that_cannot_be_written_is_said(qtbot: QtBot, tmp_path: Path) -> None:
    window = Window()
    qtbot.addWidget(window)
    recording = TraceRecording(window, Tracer())
    recording.start(tmp_path / "missing" / "flow.json")
    with qtbot.waitSignal(recording.finished, timeout=10_000) as said:
        recording.stop()
    assert said.args[0].startswith("The flow trace could not be written:")
    recording.start(tmp_path / "flow.json")
    assert recording.stop_now() == tmp_path / "flow.json"
    assert not recording.recording


def test_the_panel_reads_percentiles_as_the_distribution_summarises_them() -> None:
    rng = np.random.default_rng(7)
    # The app's distributions keep the default 20,000; one with another bound is read right
    # once it is full (then its length is its bound).
    for keep, first in ((20_000, 0), (50, 60)):
        source, mirror = Distribution(keep=keep), RecentPercentiles()
        for batch in (first, 1, 30, 45, 200, 3):  # caught up a little at a time
            source.extend(float(v) for v in rng.exponential(5, batch))
            mirror.read(source)
            expected = source.summary()
            assert mirror.percentile(99) == pytest.approx(expected["p99"], nan_ok=True)
            assert mirror.percentile(95) == pytest.approx(source.percentile(95), nan_ok=True)
            assert mirror.max == pytest.approx(expected["max"], nan_ok=True)
    swapped = Distribution()  # as the bench swaps in a new one: start over
    swapped.add(1.5)
    mirror.read(swapped)
    assert mirror.percentile(99) == mirror.max == 1.5


def test_a_reply_beside_others_marks_its_batch_and_its_pauses() -> None:
    metrics = FlowMetrics(queue_bound=8)
    report = GenerationReport()
    metrics.begin_reply(report)

    def moments() -> list[tuple[str, str]]:
        return [
            (e.name, str(e.detail) if e.detail is not None else "")
            for e in metrics.events
            if e.name in (SIDE_BY_SIDE, PAUSED, RESUMED)
        ]

    report.batch_size = 1  # decoded alone so far: nothing to mark
    metrics.observe()
    assert moments() == []
    report.batch_size = 3  # two API requests joined its steps
    metrics.observe()
    metrics.observe()  # marked once, not per reading
    report.paused = True  # the window fell behind: it waits out of the batch
    metrics.observe()
    report.paused = False
    report.batch_size = 1
    metrics.observe()
    assert moments() == [
        (SIDE_BY_SIDE, "3 replies"),
        (PAUSED, ""),
        (SIDE_BY_SIDE, "alone"),  # read in the same reading as the resumption
        (RESUMED, ""),
    ]
    metrics.begin_reply(GenerationReport(batch_size=2))  # a new reply starts afresh
    assert moments()[-1] == (SIDE_BY_SIDE, "2 replies")


def test_guesses_kept_are_shown_in_the_panel_and_drawn_under_the_rate(
    timeline: Timeline, qtbot: QtBot
) -> None:
    view = timeline.view
    start = time.perf_counter() + 1
    play_reply(timeline, start)
    assert not view.kept_curve.isVisible()  # no guesses: nothing more is drawn
    m = timeline.metrics
    report = GenerationReport(prompt_tokens=10)
    m.begin_reply(report, StopSignal())
    begin = start + 90 * STEP
    report.prefill_started_at, report.prefill_ended_at = begin - 0.5, begin
    for step in range(1, 17):
        report.drafted += 12  # 96 guessed a second, 72 of them kept
        report.draft_kept += 9
        timeline.tick(begin + step * STEP)
    assert view.kept_curve.isVisible()
    now = begin + 16 * STEP
    ago, kept = curve(view.kept_curve)
    assert kept[-1] == pytest.approx(72)
    timeline.hover_at(-STEP * 4)
    assert "guessed 96/s, 72/s kept" in timeline.hover_text
    panel = DiagnosticsPanel(m)
    qtbot.addWidget(panel)
    panel.show()
    report.compute_ended_at = now
    panel.refresh()
    assert (
        panel.values["guesses"].text() == "144 of 192 tokens kept (75 %); 96/s guessed, 72/s kept"
    )
    assert ago[-1] == 0
