"""Sound files written by the tests: a tone with noise, as WAV, FLAC or MP3 (libsndfile)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import soundfile

from app.engine.pictures import digest_of
from app.engine.sounds import Sound


def tone(seconds: float, rate: int = 16_000, pitch: float = 440.0, seed: int = 0) -> np.ndarray:
    """Mono float samples: a sine at ``pitch`` under a little noise (seeded)."""
    times = np.arange(int(seconds * rate)) / rate
    noise = np.random.default_rng(seed).standard_normal(times.size) * 0.05
    return (0.3 * np.sin(2 * np.pi * pitch * times) + noise).astype(np.float32)


def write_sound(
    folder: Path,
    name: str = "voice.wav",
    seconds: float = 1.0,
    *,
    rate: int = 16_000,
    pitch: float = 440.0,
    seed: int = 0,
) -> Sound:
    """A sound written as ``name`` (its suffix picks WAV, FLAC or MP3), as the engine gets it."""
    path = folder / name
    soundfile.write(path, tone(seconds, rate, pitch, seed), rate)
    return as_sound(path)


def as_sound(path: Path) -> Sound:
    """The file at ``path`` as a conversation refers to it: its digest and the file."""
    return Sound(digest_of(path.read_bytes()), path)
