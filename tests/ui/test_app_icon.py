"""Floodgate's icon: the committed PNGs are the drawing rendered, and the window carries it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QApplication

from app.ui.look.app_icon import SIZES, app_icon, png_path, render_all


def pixels(image: QImage) -> np.ndarray:
    rgba = image.convertToFormat(QImage.Format.Format_RGBA8888)
    # Copied: the array must not outlive the image's own buffer.
    return np.frombuffer(rgba.constBits(), np.uint8).reshape(rgba.height(), rgba.width(), 4).copy()


def test_the_committed_pngs_are_the_drawing_rendered(qapp: QApplication, tmp_path: Path) -> None:
    assert render_all(tmp_path) == [png_path(size, tmp_path) for size in SIZES]
    for size in SIZES:
        stored = QImage(str(png_path(size)))
        assert (stored.width(), stored.height()) == (size, size)
        fresh = QImage(str(png_path(size, tmp_path)))
        # The same renderer gives the same pixels; a little room for another Qt's rounding.
        difference = np.abs(pixels(stored).astype(int) - pixels(fresh).astype(int))
        assert difference.max() <= 3, f"floodgate-{size}.png is stale: run `make app-icon`"


def test_the_icon_is_an_opaque_tile_with_transparent_corners(qapp: QApplication) -> None:
    """Reads on any background: its own tile behind the drawing, and rounded corners."""
    for size in SIZES:
        alpha = pixels(QImage(str(png_path(size))))[:, :, 3]
        assert alpha[0, 0] == 0
        assert alpha[size // 2, size // 2] == 255


def test_the_window_icon_holds_every_size(qapp: QApplication) -> None:
    sizes = {(s.width(), s.height()) for s in app_icon().availableSizes()}
    assert sizes == {(size, size) for size in SIZES}


SHOW_ICON = """
import sys
from PySide6.QtWidgets import QApplication
from app.main import main

async def tell(window):
    app = QApplication.instance()
    print(app.desktopFileName(), sorted(s.width() for s in app.windowIcon().availableSizes()))
    print(not window.windowIcon().isNull(), flush=True)
    window.close()

sys.exit(main(sys.argv[1:], driver=tell))
"""


def test_floodgate_shows_its_icon_and_desktop_name(tmp_path: Path, floodgate_home: Path) -> None:
    # A missing model: the window opens with a sentence, and nothing is loaded.
    started = subprocess.run(
        [sys.executable, "-c", SHOW_ICON, "--model", str(tmp_path / "absent.gguf")],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "QT_QPA_PLATFORM": "offscreen", "FLOODGATE_HOME": str(floodgate_home)},
        cwd=Path(__file__).resolve().parents[2],
    )
    assert started.returncode == 0, started.stderr
    assert started.stdout.splitlines() == [
        f"io.github.floodgate.Floodgate {sorted(SIZES)}",
        "True",
    ]
