"""Floodgate's own icon: the window's icon, and its PNG sizes rendered from the SVG.

The drawing is ``resources/icons/app/floodgate.svg``; the PNGs beside it are rendered from it
and committed, for the window at small sizes (a bitmap drawn for 16 pixels is crisper than a
scaled one) and for desktops that want the hicolor theme's fixed sizes (``make install``).
After changing the drawing, render them again::

    make app-icon        # QT_QPA_PLATFORM=offscreen python -m app.ui.look.app_icon
"""

from __future__ import annotations

import sys
from pathlib import Path

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QGuiApplication, QIcon, QImage, QPainter
from PySide6.QtSvg import QSvgRenderer

from app.store.paths import PROJECT_DIR

ICON_DIR = PROJECT_DIR / "resources" / "icons" / "app"
"""The drawing and its renderings."""

DRAWING = ICON_DIR / "floodgate.svg"

SIZES = (16, 32, 48, 64, 128, 256, 512)
"""The pixel sizes rendered: the hicolor theme's usual ones, up to the largest a dock shows."""


def png_path(size: int, folder: Path = ICON_DIR) -> Path:
    """Where the rendering at ``size`` pixels is kept."""
    return folder / f"floodgate-{size}.png"


def app_icon() -> QIcon:
    """The window's icon: the rendering at every size (Qt picks the nearest for each use)."""
    icon = QIcon()
    for size in SIZES:
        icon.addFile(str(png_path(size)), QSize(size, size))
    return icon


def render(drawing: Path, size: int) -> QImage:
    """The SVG drawn on a transparent square of ``size`` pixels.

    Raises:
        ValueError: the file is not an SVG that Qt can draw.
    """
    renderer = QSvgRenderer(str(drawing))
    if not renderer.isValid():
        raise ValueError(f"{drawing} is not an SVG drawing Qt can render")
    image = QImage(size, size, QImage.Format.Format_ARGB32_Premultiplied)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform)
    renderer.render(painter)
    painter.end()
    return image


def render_all(folder: Path = ICON_DIR) -> list[Path]:
    """Render every size from the drawing into PNG files in ``folder``.

    Raises:
        OSError: a file could not be written.
    """
    written = []
    for size in SIZES:
        path = png_path(size, folder)
        if not render(DRAWING, size).save(str(path)):
            raise OSError(f"Could not write {path}.")
        written.append(path)
    return written


def main() -> int:
    """``make app-icon``: render the PNGs beside the drawing."""
    app = QGuiApplication.instance() or QGuiApplication(sys.argv[:1])
    for path in render_all():
        print(path.relative_to(PROJECT_DIR))
    del app
    return 0


if __name__ == "__main__":
    sys.exit(main())
