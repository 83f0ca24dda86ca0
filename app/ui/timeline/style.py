"""The timeline's colours and pens: one set per theme, and how each moment of a reply is drawn."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QPalette, QPen

from app.flow.metrics import COMPUTATION_ENDED, FIRST_TOKEN, REPLY_END, REPLY_START, STOP_PRESSED


@dataclass(frozen=True)
class SeriesColors:
    """The colour of each series and marker, for one theme."""

    tokens: str
    queue: str
    bound: str
    frame: str
    lag: str
    stop: str
    marker: str


# Picked per theme for contrast with the plot's background (the palette's Base): the light
# set is dark enough on white, the dark set light enough on near-black.
LIGHT: Final = SeriesColors(
    tokens="#1a5fd0",
    queue="#137333",
    bound="#c5221f",
    frame="#b05a00",
    lag="#8430ce",
    stop="#c5221f",
    marker="#5f6368",
)
DARK: Final = SeriesColors(
    tokens="#8ab4f8",
    queue="#81c995",
    bound="#f28b82",
    frame="#fdd663",
    lag="#d7aefb",
    stop="#f28b82",
    marker="#bdc1c6",
)


def is_dark(palette: QPalette) -> bool:
    """Whether the palette is a dark theme's (its Base is dark)."""
    return palette.color(QPalette.ColorRole.Base).lightness() < 128


def colors_for(palette: QPalette) -> SeriesColors:
    """The series colours for ``palette``."""
    return DARK if is_dark(palette) else LIGHT


def marker_color(colors: SeriesColors, name: str) -> QColor:
    """The colour of a moment's line and name: Stop's story in red, the first token in blue."""
    if name in (STOP_PRESSED, COMPUTATION_ENDED):
        return QColor(colors.stop)
    if name == FIRST_TOKEN:
        return QColor(colors.tokens)
    return QColor(colors.marker)


def marker_pen(colors: SeriesColors, name: str) -> QPen:
    """The pen of a moment's line: solid for a reply's start and end, dashed between."""
    pen = QPen(marker_color(colors, name))
    pen.setCosmetic(True)  # one pixel wide whatever the view's scale
    pen.setWidth(1)
    solid = name in (REPLY_START, REPLY_END)
    pen.setStyle(Qt.PenStyle.SolidLine if solid else Qt.PenStyle.DashLine)
    return pen
