"""Sounds as the engine reads them: a content-addressed file, checked before the encoder sees it.

A sound is WAV, MP3 or FLAC: what libmtmd's own decoder reads (miniaudio's dr_wav, dr_mp3 and
dr_flac, inside ``mtmd_helper_bitmap_init_from_buf``), read here with the same decoders from
the ``miniaudio`` package, on whatever thread calls it: never the UI thread. The format is told
by the file's first bytes, as libmtmd tells it, not by its name: the data folder keeps a sound
under its digest, without a suffix. A sound longer than :data:`MAX_SOUND_SECONDS` is refused
from its header, before it is decoded.

Telling the format here is also what keeps libmtmd's helper from guessing: a buffer it does not
take for a picture or a sound it hands to ``ffprobe`` as a video, a process started on whatever
the file holds. The projector checks a sound's first bytes (:func:`sniff`) before the helper
sees them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import miniaudio  # type: ignore[import-untyped]  # no type information shipped

from app.engine.media import KeptFile, MediaError
from app.sentence import QT_TRANSLATE_NOOP, Sentence

MAX_SOUND_SECONDS = 600.0
"""The longest sound Floodgate reads (ten minutes: 21 of a Whisper encoder's windows)."""

KINDS = ("WAV", "MP3", "FLAC")
"""The formats Floodgate reads: those libmtmd decodes."""

WINDOW_SECONDS = 30.0
"""The audio a Whisper-style encoder reads at once; a shorter sound is padded up to it."""

_WINDOW_FRAMES = 3000
"""Spectrogram frames in a window: 100 a second."""

_EDGE_FRAMES = 2
"""Frames libmtmd's spectrogram has beyond 100 a second (its padded edges): measured, a
sound of 29.99 s (479,840 samples at 16 kHz) is two windows, one a sample shorter is one."""

TOKENS_PER_WINDOW = 750
"""Positions one window takes in the prompt for Qwen2-Audio (qwen2a): an estimate for others."""

_HEAD_BYTES = 16
"""Bytes read to tell the format (an ID3 tag's header is 10; RIFF's form type ends at 12)."""

_WAV_CHUNKS = 64
"""Chunks of a WAV looked through for its data chunk (fmt, LIST, fact... come first)."""

_STREAM_FRAMES = 65536
"""Frames decoded at a time when a sound is checked whole (never the whole sound in memory)."""


class SoundError(MediaError):
    """A sound that cannot be used, with the sentence that says why."""


@dataclass(frozen=True)
class Sound(KeptFile):
    """A sound in a conversation (its digest and file: :class:`KeptFile`)."""


def sniff(head: bytes) -> str | None:
    """The format a file's first bytes say (one of :data:`KINDS`), or None: not a sound.

    The same tests as libmtmd's helper (RIFF/WAVE, ``fLaC``, ``ID3`` or an MPEG frame's sync
    bits), so what passes here is what the helper decodes as a sound. An ID3 tag may stand
    before a FLAC stream too: the bytes after it say which (with only the tag's header read,
    MP3, the common case).
    """
    if head[:4] == b"RIFF" and head[8:12] == b"WAVE":
        return "WAV"
    if head[:4] == b"fLaC":
        return "FLAC"
    if head[:3] == b"ID3":
        return "MP3"
    if len(head) >= 2 and head[0] == 0xFF and head[1] & 0xE0 == 0xE0:
        return "MP3"
    return None


def _kind_of(path: Path) -> str | None:
    """The format of the file at ``path`` by its first bytes (raises OSError)."""
    with path.open("rb") as handle:
        head = handle.read(_HEAD_BYTES)
        kind = sniff(head)
        if kind == "MP3" and head[:3] == b"ID3" and len(head) >= 10:
            # An ID3v2 tag: a 10-byte header, its size in four 7-bit bytes, and a 10-byte
            # footer if its flags say so; the stream follows it.
            size = 0
            for byte in head[6:10]:
                size = size << 7 | byte & 0x7F
            footer = 10 if head[5] & 0x10 else 0
            handle.seek(10 + size + footer)
            if handle.read(4) == b"fLaC":
                return "FLAC"
    return kind


_INFO: dict[str, Callable[[str], Any]] = {
    "WAV": miniaudio.wav_get_file_info,
    "MP3": miniaudio.mp3_get_file_info,
    "FLAC": miniaudio.flac_get_file_info,
}
_STREAM: dict[str, Callable[..., Iterator[Any]]] = {
    "WAV": miniaudio.wav_stream_file,
    "MP3": miniaudio.mp3_stream_file,
    "FLAC": miniaudio.flac_stream_file,
}


def check_sound(path: Path) -> tuple[str, float]:
    """The sound's format (one of :data:`KINDS`) and length in seconds, from its header.

    An MP3 has no length in its header: its frames' headers are read (not decoded).

    Raises:
        SoundError: not a sound Floodgate reads (or damaged), longer than
            :data:`MAX_SOUND_SECONDS`, or the file could not be read (the system's reason).
    """
    kind, _frames, _channels, seconds = _header(path)
    return kind, seconds


def verify_sound(path: Path) -> tuple[str, float]:
    """Check a sound whole: its header (:func:`check_sound`), then every frame decoded once.

    What attaching a sound runs (off the UI thread), so a sound cut short or damaged is said
    when it is attached, not when the model is asked about it. Decoded a slice at a time, so
    a long sound costs time, not memory.

    Raises:
        SoundError: not a readable sound, damaged or cut short, or too long.
    """
    kind, frames, channels, seconds = _header(path)
    decoded = 0
    try:
        for samples in _STREAM[kind](str(path), frames_to_read=_STREAM_FRAMES):
            decoded += len(samples) // channels
        cut_short = kind == "WAV" and _wav_cut_short(path)
    except (miniaudio.MiniaudioError, OSError, ValueError):
        raise SoundError(unreadable(path)) from None
    # Its header promised more than it holds. dr_wav counts a WAV's frames from what the file
    # holds, not from what its data chunk says, so a WAV's chunk is measured as well.
    if decoded < frames or decoded == 0 or cut_short:
        raise SoundError(unreadable(path))
    return kind, seconds


def _wav_cut_short(path: Path) -> bool:
    """Whether a WAV's data chunk says more bytes than the file holds after it.

    A size of 0 or 0xFFFFFFFF is a recorder's "until the end" (written before it knew), not a
    promise. Raises OSError.
    """
    with path.open("rb") as handle:
        end = handle.seek(0, 2)
        position = 12  # after "RIFF", the size and "WAVE"
        for _ in range(_WAV_CHUNKS):
            handle.seek(position)
            header = handle.read(8)
            if len(header) < 8:
                return False
            size = int.from_bytes(header[4:], "little")
            if header[:4] == b"data":
                return size not in (0, 0xFFFFFFFF) and position + 8 + size > end
            position += 8 + size + (size & 1)  # chunks are padded to even sizes
    return False


def _header(path: Path) -> tuple[str, int, int, float]:
    """Format, frames, channels and seconds of the sound at ``path`` (raises SoundError)."""
    try:
        kind = _kind_of(path)
        if kind is None:
            raise SoundError(unreadable(path))
        info = _INFO[kind](str(path))
    except miniaudio.MiniaudioError:
        raise SoundError(unreadable(path)) from None
    except OSError as exc:
        raise SoundError(
            Sentence(
                QT_TRANSLATE_NOOP("Floodgate", "{name} could not be read: {reason}"),
                {"name": path.name, "reason": exc.strerror or exc},
            )
        ) from None
    frames, channels, rate = int(info.num_frames), int(info.nchannels), int(info.sample_rate)
    if rate <= 0 or channels <= 0:
        raise SoundError(unreadable(path))
    seconds = frames / rate
    if seconds > MAX_SOUND_SECONDS:
        raise SoundError(
            Sentence(
                QT_TRANSLATE_NOOP(
                    "Floodgate",
                    "{name} is {length} long (minutes:seconds); Floodgate reads sounds of up to "
                    "{limit} minutes. Attach a shorter part of it.",
                ),
                {
                    "name": path.name,
                    "length": _minutes(seconds),
                    "limit": int(MAX_SOUND_SECONDS // 60),
                },
            )
        )
    return kind, frames, channels, seconds


def estimate_tokens(path: Path, tokens_per_window: int = TOKENS_PER_WINDOW) -> int:
    """The positions a sound is reckoned to take in a prompt: a window per started 30 s.

    Whisper-style encoders (Qwen2-Audio, Ultravox, Voxtral) pad a sound to whole 30-second
    windows; ``tokens_per_window`` is what one window becomes (Qwen2-Audio's 750 unless the
    projector measured another). As libmtmd cuts them, a sound of exactly 30 s starts a second
    window (:data:`_EDGE_FRAMES`). A sound that cannot be read counts one window: the prompt
    then fails with its sentence anyway.
    """
    try:
        seconds = check_sound(path)[1]
    except SoundError:
        seconds = 0.0
    frames = int(seconds * _WINDOW_FRAMES / WINDOW_SECONDS + 1e-6) + _EDGE_FRAMES
    return math.ceil(frames / _WINDOW_FRAMES) * tokens_per_window


def _minutes(seconds: float) -> str:
    whole = math.ceil(seconds)
    return f"{whole // 60}:{whole % 60:02d}"


def unreadable(path: Path) -> Sentence:
    """Why a sound at ``path`` cannot be used: not one Floodgate reads, or damaged."""
    return Sentence(
        QT_TRANSLATE_NOOP(
            "Floodgate",
            "{name} is not a sound Floodgate can read (WAV, MP3 or FLAC), or it is damaged.",
        ),
        {"name": path.name},
    )
