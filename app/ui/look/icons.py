"""The interface's icons: Lucide SVGs, tinted with the palette, drawn at the size and scale asked.

The SVGs are in ``resources/icons/`` (ISC licence beside them). Each is drawn in the colour of a
palette role of the application (the button text by default), so the light and the dark theme
tint them without any widget doing anything: a change of palette repaints the buttons, and the
next paint draws in the new colour. They are rendered from the SVG at the pixel size a paint
needs (the logical size times the device pixel ratio), never a bitmap scaled, and each
rendering is cached by name, size, scale and colour: repainting a button (each frame of a
streaming reply repaints the view) costs a dictionary look-up.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from typing import Final

from PySide6.QtCore import QByteArray, QPoint, QRect, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QGuiApplication, QIcon, QIconEngine, QPainter, QPalette, QPixmap
from PySide6.QtSvg import QSvgRenderer
from typing_extensions import override

from app.store.paths import PROJECT_DIR

ICON_DIR: Final = PROJECT_DIR / "resources" / "icons"
"""Where the SVGs are (only the icons the interface uses; the set's licence is beside them)."""

CACHED: Final = 256
"""Renderings kept (a few dozen are in use; themes and scales multiply them)."""

FILLED: Final = frozenset({"square"})
"""Icons drawn filled, not outlined (Stop's square reads as a stop only when solid)."""

_rendered: OrderedDict[tuple[str, int, int, float, int], QPixmap] = OrderedDict()


@functools.cache
def _svg(name: str) -> bytes:
    """The SVG's text, read once (a few hundred bytes each)."""
    return (ICON_DIR / f"{name}.svg").read_bytes()


def _color(role: QPalette.ColorRole, mode: QIcon.Mode) -> QColor:
    palette = QGuiApplication.palette()
    group = (
        QPalette.ColorGroup.Disabled if mode == QIcon.Mode.Disabled else QPalette.ColorGroup.Active
    )
    return palette.color(group, role)


def render(name: str, size: QSize, scale: float, color: QColor) -> QPixmap:
    """The icon ``name`` drawn in ``color`` at ``size`` logical pixels for a screen's ``scale``."""
    key = (name, size.width(), size.height(), scale, color.rgba())
    cached = _rendered.get(key)
    if cached is not None:
        _rendered.move_to_end(key)
        return cached
    svg = _svg(name)
    if name in FILLED:
        svg = svg.replace(b'fill="none"', b'fill="currentColor"')
    svg = svg.replace(b"currentColor", color.name().encode())
    renderer = QSvgRenderer(QByteArray(svg))
    pixmap = QPixmap(max(1, round(size.width() * scale)), max(1, round(size.height() * scale)))
    pixmap.fill(Qt.GlobalColor.transparent)
    painter = QPainter(pixmap)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    renderer.render(painter, QRectF(pixmap.rect()))
    painter.end()
    pixmap.setDevicePixelRatio(scale)
    _rendered[key] = pixmap
    while len(_rendered) > CACHED:
        _rendered.popitem(last=False)
    return pixmap


def cached() -> list[tuple[str, int, int, float, int]]:
    """The renderings kept: name, width, height, scale, colour (tests check none is redone)."""
    return list(_rendered)


class TintedSvgEngine(QIconEngine):
    """Draws one SVG in a palette role's colour, at the size and device pixel ratio asked."""

    def __init__(self, name: str, role: QPalette.ColorRole) -> None:
        super().__init__()
        self.name = name
        self.role = role

    @override
    def clone(self) -> QIconEngine:
        return TintedSvgEngine(self.name, self.role)

    @override
    def key(self) -> str:
        return "floodgate-tinted-svg"

    @override
    def iconName(self) -> str:
        return self.name

    @override
    def isNull(self) -> bool:
        return False

    @override
    def actualSize(self, size: QSize, mode: QIcon.Mode, state: QIcon.State) -> QSize:
        side = min(size.width(), size.height())
        return QSize(side, side)

    @override
    def pixmap(self, size: QSize, mode: QIcon.Mode, state: QIcon.State) -> QPixmap:
        return self.scaledPixmap(size, mode, state, 1.0)

    @override
    def scaledPixmap(
        self, size: QSize, mode: QIcon.Mode, state: QIcon.State, scale: float
    ) -> QPixmap:
        side = min(size.width(), size.height())
        return render(self.name, QSize(side, side), scale, _color(self.role, mode))

    @override
    def paint(self, painter: QPainter, rect: QRect, mode: QIcon.Mode, state: QIcon.State) -> None:
        side = min(rect.width(), rect.height())
        scale = painter.device().devicePixelRatioF() if painter.device() is not None else 1.0
        pixmap = self.scaledPixmap(QSize(side, side), mode, state, scale)
        corner = rect.center() - QPoint(side // 2, side // 2)
        painter.drawPixmap(corner, pixmap)


def icon(name: str, role: QPalette.ColorRole = QPalette.ColorRole.ButtonText) -> QIcon:
    """The icon ``name`` (a file in :data:`ICON_DIR`), tinted with the palette's ``role``."""
    return QIcon(TintedSvgEngine(name, role))
