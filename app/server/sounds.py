"""Sounds in API requests: OpenAI's ``input_audio`` content parts (base64 data and a format).

As pictures are (:mod:`app.server.pictures`): the sound comes inside the request, is decoded
from base64, kept in the data folder by its digest (the window's store, so the engine's kept
embeddings serve both) and checked whole, off the event loop; anything wrong is a 400 that
names the part.
"""

from __future__ import annotations

from pathlib import Path

from app.engine.sounds import Sound, verify_sound
from app.server.errors import ApiError
from app.server.pictures import decoded, kept
from app.store.media_files import sounds_dir

MAX_SOUND_BYTES = 25 * 1024 * 1024
"""The largest sound a request may carry (decoded; OpenAI's own limit for audio input)."""

FORMATS = ("wav", "mp3", "flac")
"""The ``format`` values taken (the decoder reads the file's own header either way)."""


def sound_from_part(data: str, kind: str, param: str, folder: Path | None = None) -> Sound:
    """The sound an ``input_audio`` part holds, kept and checked (call off the event loop).

    Raises:
        ApiError: 400 naming ``param``: an unknown format, not base64, too large, or not a
            sound Floodgate reads.
    """
    if kind not in FORMATS:
        raise ApiError(
            400,
            f"Floodgate reads sound as {', '.join(FORMATS)}, not {kind!r}.",
            param=param + ".format",
            code="invalid_audio_format",
        )
    if len(data) * 3 // 4 > MAX_SOUND_BYTES:
        raise ApiError(
            400,
            f"The sound is larger than the {MAX_SOUND_BYTES // (1024 * 1024)} MB a request "
            "may carry.",
            param=param + ".data",
            code="audio_too_large",
        )
    raw = decoded(data, "The sound's data is not valid base64.", param + ".data", "invalid_audio")
    digest, path = kept(raw, verify_sound, folder or sounds_dir(), param, "invalid_audio")
    return Sound(digest, path)
