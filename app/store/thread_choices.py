"""Decode threads measured per model file and machine, kept in a small JSON file.

Measuring takes a few seconds of decoding (:mod:`app.engine.threads`); it is done the first
time a model is opened on a machine and kept here, under a key naming the model file (its
name, size and modification time), the CPU and llama.cpp's build, so a changed file, another
machine sharing the data folder, or a rebuilt llama.cpp measures again. Read and written on
the worker's thread, never the window's.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

FILE_NAME = "decode-threads.json"

KEEP = 50
"""Measurements kept; the oldest go first (a model not opened for long is measured again)."""


@dataclass(frozen=True)
class Measured:
    """A kept measurement: the count chosen and the tokens per second at each count tried.

    Attributes:
        n_threads: the count chosen.
        rates: the calibration's tokens per second at each count (decoding alone).
        streaming: tokens per second of the window's replies at each count they were decoded
            with (the window streaming meanwhile), smoothed over replies (a quarter of each new
            reply's rate).
    """

    n_threads: int
    rates: dict[int, float]
    streaming: dict[int, float] = field(default_factory=dict)


class ThreadChoices:
    """The file of measurements in a data folder."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / FILE_NAME
        self._lock = threading.Lock()

    @staticmethod
    def key(model: Path, machine: str, build: str) -> str:
        """The key of ``model`` measured on ``machine`` with llama.cpp ``build``."""
        try:
            status = model.stat()
            stamp = f"{status.st_size}:{status.st_mtime_ns}"
        except OSError:
            stamp = "?"
        return f"{model.name}|{stamp}|{machine}|{build}"

    def get(self, key: str) -> Measured | None:
        """The measurement kept under ``key``, if any."""
        entry = self._read().get(key)
        if not isinstance(entry, dict):
            return None
        try:
            rates = {int(n): float(r) for n, r in dict(entry.get("rates", {})).items()}
            streaming = {int(n): float(r) for n, r in dict(entry.get("streaming", {})).items()}
            return Measured(int(entry["n_threads"]), rates, streaming)
        except (KeyError, TypeError, ValueError):
            return None

    def put(self, key: str, measured: Measured) -> None:
        """Keep ``measured`` under ``key`` (a full disk only loses the measurement)."""
        with self._lock:
            entries = self._read()
            entries.pop(key, None)
            entries[key] = {
                "n_threads": measured.n_threads,
                "rates": {str(n): round(r, 2) for n, r in measured.rates.items()},
                "streaming": {str(n): round(r, 2) for n, r in measured.streaming.items()},
            }
            kept = dict(list(entries.items())[-KEEP:])
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with tempfile.NamedTemporaryFile(
                    "w", dir=self.path.parent, prefix=".threads-", delete=False, encoding="utf-8"
                ) as tmp:
                    json.dump(kept, tmp, indent=1)
                os.replace(tmp.name, self.path)
            except OSError as exc:
                log.warning("Decode threads not kept: %s", exc)
                with contextlib.suppress(OSError, UnboundLocalError):
                    os.unlink(tmp.name)

    def forget(self, key: str) -> None:
        """Drop the measurement under ``key`` (so the next open measures again)."""
        entries = self._read()
        if key in entries:
            entries.pop(key)
            with contextlib.suppress(OSError):
                self.path.write_text(json.dumps(entries, indent=1), encoding="utf-8")

    def _read(self) -> dict[str, object]:
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return raw if isinstance(raw, dict) else {}
