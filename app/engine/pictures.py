"""Pictures as the engine reads them: a content-addressed file, decoded to RGB with a cap.

Decoded with Pillow (PNG, JPEG, WebP, GIF's first frame, BMP), on whatever thread calls it:
never the UI thread. A picture larger than :data:`MAX_PIXELS` is refused before it is
decoded (its header says its size), so a hostile or huge file costs a sentence, not memory.
"""

from __future__ import annotations

import hashlib
import warnings
from dataclasses import dataclass
from pathlib import Path

from PIL import Image, UnidentifiedImageError

from app.engine.media import KeptFile, MediaError
from app.sentence import QT_TRANSLATE_NOOP, Sentence

MAX_PIXELS = 40_000_000
"""The most pixels a picture may have (a 40-megapixel photo; a screenshot is a few)."""

KINDS = ("PNG", "JPEG", "WEBP", "GIF", "BMP")
"""The formats Floodgate reads (Pillow's names)."""


class PictureError(MediaError):
    """A picture that cannot be used, with the sentence that says why."""


@dataclass(frozen=True)
class Picture(KeptFile):
    """A picture in a conversation (its digest and file: :class:`KeptFile`)."""


def digest_of(data: bytes) -> str:
    """The digest a picture of these bytes is kept under."""
    return hashlib.sha256(data).hexdigest()


def check(path: Path) -> tuple[str, int, int]:
    """The picture's format and size, read from its header only.

    Raises:
        PictureError: not a picture Floodgate reads, or too large.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(path) as image:
                kind, (width, height) = image.format or "", image.size
    except (UnidentifiedImageError, Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise PictureError(_unreadable(path)) from None
    except OSError as exc:
        if exc.errno is None:  # Pillow's own errors (a file cut short): a damaged picture
            raise PictureError(_unreadable(path)) from None
        raise PictureError(
            Sentence(
                QT_TRANSLATE_NOOP("Floodgate", "{name} could not be read: {reason}"),
                {"name": path.name, "reason": exc.strerror or exc},
            )
        ) from None
    if kind not in KINDS:
        raise PictureError(_unreadable(path))
    if width * height > MAX_PIXELS:
        raise PictureError(
            Sentence(
                QT_TRANSLATE_NOOP(
                    "Floodgate",
                    "{name} is {width} by {height} pixels, larger than the {limit} megapixels "
                    "Floodgate reads. Attach a smaller copy.",
                ),
                {
                    "name": path.name,
                    "width": width,
                    "height": height,
                    "limit": MAX_PIXELS // 1_000_000,
                },
            )
        )
    return kind, width, height


def verify(path: Path) -> tuple[str, int, int]:
    """Check a picture whole: its header (:func:`check`), then every pixel decoded once.

    What attaching a picture runs (off the UI thread), so a picture cut short or damaged is
    said when it is attached, not when the model is asked about it.

    Raises:
        PictureError: not a readable picture, damaged, or too large.
    """
    found = check(path)
    try:
        with Image.open(path) as image:
            image.seek(0)
            image.load()
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError):
        raise PictureError(_unreadable(path)) from None
    return found


def read_rgb(path: Path) -> tuple[int, int, bytes]:
    """Width, height and RGB bytes (row by row) of a picture (a GIF's first frame).

    Raises:
        PictureError: the file is not a readable picture, or too large.
    """
    check(path)
    try:
        with Image.open(path) as image:
            image.seek(0)
            rgb = image.convert("RGB")
            return rgb.width, rgb.height, rgb.tobytes()
    except (OSError, ValueError, Image.DecompressionBombError):
        raise PictureError(_unreadable(path)) from None


def _unreadable(path: Path) -> Sentence:
    return Sentence(
        QT_TRANSLATE_NOOP(
            "Floodgate",
            "{name} is not a picture Floodgate can read (PNG, JPEG, WebP, GIF or BMP), or it "
            "is damaged.",
        ),
        {"name": path.name},
    )
