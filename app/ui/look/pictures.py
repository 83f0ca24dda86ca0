"""Pictures shown in the window (chips' thumbnails, the picture window), decoded off the UI thread.

A picture from the data folder may be large (40 megapixels is allowed): Qt's image reader
decodes it at the size it will be shown, on a thread of its own, and the result comes back to
the UI thread by a queued signal. The receiver may be gone by then (a chip removed, a window
closed): the delivery object is its child, so it goes with it and the result is dropped.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, QSize, Qt, Signal
from PySide6.QtGui import QImage, QImageReader

THUMBNAIL_PX = 28
"""A thumbnail's longer side on a chip, in pixels."""


_DECODING = threading.BoundedSemaphore(2)
"""Pictures decoded at once: a conversation with many large ones decodes them two by two
(a PNG is read whole before it is scaled)."""


class _Delivery(QObject):
    done = Signal(QImage)


class _Found(QObject):
    done = Signal(bool)


def find_file(path: Path, owner: QObject, deliver: Callable[[bool], None]) -> None:
    """Whether ``path`` is a file, asked on a thread; ``deliver`` gets it on the UI thread.

    Never after ``owner`` is destroyed (a kept sound's window, before its Play is offered).
    """
    delivery = _Found(owner)
    delivery.done.connect(deliver)

    def work() -> None:
        there = path.is_file()
        with contextlib.suppress(RuntimeError):  # the owner (and the delivery) are gone
            delivery.done.emit(there)

    threading.Thread(target=work, name="floodgate-find-file", daemon=True).start()


def load_picture(
    path: Path, largest: QSize, owner: QObject, deliver: Callable[[QImage], None]
) -> None:
    """Decode ``path`` to fit ``largest`` (never enlarged) on a thread; ``deliver`` gets it.

    ``deliver`` runs on the UI thread, with a null image when the file is missing or cannot
    be read; never after ``owner`` is destroyed.
    """
    delivery = _Delivery(owner)
    delivery.done.connect(deliver)

    def work() -> None:
        with _DECODING:
            image = _read(path, largest)
        with contextlib.suppress(RuntimeError):  # the owner (and the delivery) are gone
            delivery.done.emit(image)

    threading.Thread(target=work, name="floodgate-picture", daemon=True).start()


def _read(path: Path, largest: QSize) -> QImage:
    """``path`` decoded to fit ``largest`` (a null image when it cannot be read)."""
    if not path.is_file():
        return QImage()
    reader = QImageReader(str(path))
    reader.setAutoTransform(True)
    size = reader.size()
    if size.isValid() and (size.width() > largest.width() or size.height() > largest.height()):
        reader.setScaledSize(size.scaled(largest, Qt.AspectRatioMode.KeepAspectRatio))
    return reader.read()
