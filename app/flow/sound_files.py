"""Attached sounds: told apart by their first bytes, checked whole, kept by their digest.

As pictures are (:mod:`app.flow.attachments`): a WAV, MP3 or FLAC file attached to a prompt
is decoded once off the UI thread (:func:`app.engine.sounds.verify_sound`: a file cut short
or too long is said when it is attached, not when the model is asked), then copied into the
data folder's ``sounds/`` under its SHA-256, where the conversation refers to it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from app.documents import Attachment
from app.engine.media import MediaError
from app.engine.sounds import SoundError, sniff, verify_sound
from app.sentence import QT_TRANSLATE_NOOP, Sentence, size_text
from app.store.media_files import keep_file, sounds_dir

MAX_SOUND_BYTES: Final = 128 * 1024 * 1024
"""The largest sound file attached (its length is capped too, from its header)."""


def is_sound_file(path: Path) -> bool:
    """Whether ``path`` holds a WAV, MP3 or FLAC sound, by its first bytes (as pictures are).

    By content, not by name: a ``notes.wav`` that is text is read as text.
    """
    try:
        if not path.is_file():
            return False
        with path.open("rb") as handle:
            head = handle.read(12)
    except OSError:
        return False
    return sniff(head) is not None


def read_sound(path: Path, name: str, folder: Path | None = None) -> Attachment:
    """Check a sound whole and keep a copy by its digest (a reader's thread).

    Raises:
        SoundError: not a sound Floodgate reads, too large or too long, or damaged.
        OSError: the copy could not be written.
    """
    too_large = QT_TRANSLATE_NOOP(
        "Floodgate", "{name} is {size}, more than the {limit} a sound may be."
    )
    size = checked_size(path, name, MAX_SOUND_BYTES, too_large, SoundError)
    verify_sound(path)
    digest, _kept = keep_file(path, folder or sounds_dir())
    return Attachment(name=name, kind="sound", size=size, text="", tokens=None, digest=digest)


def checked_size(path: Path, name: str, limit: int, too_large: str, error: type[MediaError]) -> int:
    """The size of an attached picture's or sound's file, at most ``limit`` bytes.

    Args:
        path: the file.
        name: what its chip calls it.
        limit: the most bytes it may have.
        too_large: the sentence for a larger one (fields ``name``, ``size``, ``limit``).
        error: the kind's error, raised with the sentence.

    Raises:
        MediaError: ``error``, when the file cannot be read or is larger than ``limit``.
    """
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise error(
            Sentence(
                QT_TRANSLATE_NOOP("Floodgate", "{name} could not be read: {reason}"),
                {"name": name, "reason": exc.strerror or exc},
            )
        ) from None
    if size > limit:
        raise error(
            Sentence(too_large, {"name": name, "size": size_text(size), "limit": size_text(limit)})
        )
    return size
