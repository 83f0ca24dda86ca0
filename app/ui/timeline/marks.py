"""The reply's moments on the timeline: their lines across each plot, their names in the lane.

Each is one graphics item that paints every moment itself: a reply's seven moments times a
few replies in half a minute would otherwise be dozens of line and text items, each
re-measured by the scene on every redraw. The plots' time axis is fixed (seconds before
now), so as time passes only the offset these items paint at moves.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import pyqtgraph as pg  # type: ignore[import-untyped]
from PySide6.QtCore import QCoreApplication, QLineF, QPointF, QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QFont, QFontMetricsF, QPainter, QPen, QStaticText

from app.flow.metrics import (
    COMPUTATION_ENDED,
    FIRST_TOKEN,
    PROMPT_PROCESSED,
    PROMPT_PROCESSING,
    REPLY_END,
    REPLY_START,
    STOP_PRESSED,
    FlowEvent,
)
from app.sentence import CONTEXT
from app.ui.timeline.style import SeriesColors, marker_color, marker_pen

LANES: Final = 4
"""Rows of the events lane: moments close in time get their names on different rows."""

NAME_GAP_PX: Final = 8
"""Room kept between two names on one row, in pixels."""

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


def view_rect(item: Any) -> QRectF:
    """The rectangle of the view ``item`` is in, in its coordinates (empty outside one).

    The bounds of the timeline's items that span their plot: the view clips what it holds to
    itself, so its rectangle bounds them, and costs nothing to know.
    """
    box = item.getViewBox()
    return QRectF() if box is None else QRectF(box.viewRect())


def moment_name(event: FlowEvent) -> str:
    """A moment's name in the current language."""
    return QCoreApplication.translate(CONTEXT, event.name)


class MarkerLines(pg.GraphicsObject):  # type: ignore[misc]
    """A vertical line at each moment, across one plot, painted at ``at - now``."""

    def __init__(self) -> None:
        super().__init__()
        self._lines: list[tuple[float, QPen]] = []
        self._by_pen: list[tuple[QPen, list[float]]] = []
        self._now = 0.0

    def set_lines(self, lines: Sequence[tuple[float, QPen]]) -> None:
        """Draw a line at each moment (``perf_counter`` seconds) with its pen."""
        self._lines = list(lines)
        # Kept by pen (one per kind of moment): a paint sets each pen once and draws its
        # lines in one call. A pen and a line per moment cost 0.3 ms per plot per paint with
        # seven replies in view, a third of the panel's redraw.
        groups: dict[int, tuple[QPen, list[float]]] = {}
        for at, pen in self._lines:
            groups.setdefault(id(pen), (pen, []))[1].append(at)
        self._by_pen = list(groups.values())
        self.update()

    def set_now(self, now: float) -> None:
        """Slide the lines: the plot's x is seconds before ``now``."""
        if now != self._now:
            self._now = now
            if self._lines:
                self.update()

    @property
    def positions(self) -> list[float]:
        """Where the lines are, in the plot's x (seconds before now, negative)."""
        return [at - self._now for at, _ in self._lines]

    def boundingRect(self) -> QRectF:
        """The whole view: the lines span it."""
        return view_rect(self)

    def viewRangeChanged(self) -> None:
        """The view's rectangle is this item's: tell the scene it changed."""
        self.prepareGeometryChange()
        super().viewRangeChanged()

    def paint(self, painter: QPainter, *args: Any) -> None:
        """Each line in view, top to bottom."""
        if not self._by_pen:
            return
        rect = self.boundingRect()
        left, right, top, bottom = rect.left(), rect.right(), rect.top(), rect.bottom()
        now = self._now
        # A few lines per pen: plain Python, where numpy's few microseconds per operation
        # added up to a tenth of a millisecond per plot per paint.
        for pen, ats in self._by_pen:
            lines = [QLineF(x, top, x, bottom) for at in ats if left <= (x := at - now) <= right]
            if lines:
                painter.setPen(pen)
                painter.drawLines(lines)


@dataclass(frozen=True)
class PlacedName:
    """A moment's name written in the lane: its row and its text's span in pixels from the left."""

    event: FlowEvent
    text: str
    lane: int
    left: float
    right: float
    right_aligned: bool


class EventsLane(pg.GraphicsObject):  # type: ignore[misc]
    """The lane over the plots: each moment's name on a row, and the prompt being processed.

    Names are laid out when the time moves (:meth:`advance`), in pixels: moments close
    together (start, prompt, first token within milliseconds) go on different rows; a name
    with no room is left out (its line stays, hovering names it).

    Args:
        window_seconds: the width of the view, in seconds.
    """

    def __init__(self, window_seconds: float) -> None:
        super().__init__()
        self.window_seconds = window_seconds
        self.placed: list[PlacedName] = []
        """The names written, as of the last :meth:`advance`."""
        self.band: tuple[float, float] | None = None
        """The prompt being (or last) processed, in ``perf_counter`` seconds, if in view."""
        self._events: list[FlowEvent] = []
        self._texts: dict[tuple[float, str], tuple[str, float]] = {}
        self._statics: dict[str, QStaticText] = {}
        self._now = 0.0
        self._font = QFont()
        self._colors: SeriesColors | None = None
        self._band_brush = QBrush()
        self._backdrop = QColor()

    def set_style(self, font: QFont, colors: SeriesColors, backdrop: QColor, band: QColor) -> None:
        """The names' font and colours, the backdrop behind a name, the prompt band's colour."""
        self._font, self._colors, self._backdrop = font, colors, backdrop
        self._band_brush = QBrush(band)
        self._texts.clear()
        self._statics.clear()
        self.update()

    def set_events(self, events: Sequence[FlowEvent]) -> None:
        """The moments to name (those in view); names are laid out at the next advance."""
        self._events = list(events)
        kept = {(e.at, e.name) for e in self._events}
        for key in [key for key in self._texts if key not in kept]:
            del self._texts[key]

    def retranslate(self) -> None:
        """Write the names again in the current language (at the next advance)."""
        self._texts.clear()
        self._statics.clear()

    def advance(self, now: float, band: tuple[float, float] | None) -> None:
        """Move to ``now``: place the names again, and the prompt's band."""
        self._now, self.band = now, band
        self.placed = self._place(float(self.getViewBox().width()))
        self.update()

    def _text(self, event: FlowEvent) -> tuple[str, float]:
        known = self._texts.get((event.at, event.name))
        if known is None:
            text = moment_name(event)
            width = QFontMetricsF(self._font).horizontalAdvance(text)
            known = self._texts[event.at, event.name] = (text, width)
        return known

    def _static(self, text: str) -> QStaticText:
        static = self._statics.get(text)
        if static is None:
            static = self._statics[text] = QStaticText(text)
            static.setTextFormat(Qt.TextFormat.PlainText)
            static.prepare(font=self._font)
        return static

    def _place(self, width: float) -> list[PlacedName]:
        if width <= 0:
            return []
        per_second = width / self.window_seconds
        taken: list[list[tuple[float, float]]] = [[] for _ in range(LANES)]
        placed = []
        for event in sorted(self._events, key=lambda e: (_PRIORITY.get(e.name, 9), -e.at)):
            text, text_width = self._text(event)
            x = (event.at - self._now + self.window_seconds) * per_second
            right_aligned = x + text_width > width
            span = (x - text_width, x) if right_aligned else (x, x + text_width)
            for lane, spans in enumerate(taken):
                # The room is kept on both sides of a name: a name that ends at its line
                # (near the right edge) and one that begins at the next line are apart too.
                if all(span[1] + NAME_GAP_PX <= a or span[0] >= b + NAME_GAP_PX for a, b in spans):
                    spans.append(span)
                    placed.append(PlacedName(event, text, lane, *span, right_aligned))
                    break
        return placed

    def boundingRect(self) -> QRectF:
        """The whole lane."""
        return view_rect(self)

    def viewRangeChanged(self) -> None:
        """The view's rectangle is this item's: tell the scene it changed."""
        self.prepareGeometryChange()
        super().viewRangeChanged()

    def paint(self, painter: QPainter, *args: Any) -> None:
        """The band, then each placed name on its backdrop."""
        if self.band is not None:
            start, end = (max(t - self._now, -self.window_seconds) for t in self.band)
            painter.fillRect(QRectF(start, -0.5, end - start, LANES), self._band_brush)
        if not self.placed or self._colors is None:
            return
        # Names are drawn in pixels: the view's scale would stretch the text.
        to_device = painter.transform()
        painter.save()
        painter.resetTransform()
        painter.setFont(self._font)
        height = QFontMetricsF(self._font).height()
        for name in self.placed:
            anchor = to_device.map(QPointF(name.event.at - self._now, name.lane))
            width = name.right - name.left
            left = anchor.x() - width if name.right_aligned else anchor.x()
            box = QRectF(math.floor(left), anchor.y() - height / 2, math.ceil(width) + 1, height)
            painter.fillRect(box, self._backdrop)
            painter.setPen(marker_color(self._colors, name.event.name))
            # Laid out once per name (a QStaticText), not shaped again at every paint.
            painter.drawStaticText(box.topLeft(), self._static(name.text))
        painter.restore()


def marker_pens(colors: SeriesColors, events: Sequence[FlowEvent]) -> list[tuple[float, QPen]]:
    """Each moment's time and the pen of its line."""
    pens: dict[str, QPen] = {}
    lines = []
    for event in events:
        pen = pens.get(event.name)
        if pen is None:
            pen = pens[event.name] = marker_pen(colors, event.name)
        lines.append((event.at, pen))
    return lines
