"""What the app was doing when it died: a file that the next launch reads.

A native crash (a llama.cpp built for the wrong CPU, a driver, a bug in C) cannot be caught,
but it can be recorded. While Floodgate runs, ``session.crash`` in its data directory holds:

- a header of :data:`HEADER_BYTES`, rewritten in place (``os.pwrite``, no fsync: the kernel
  keeps what a dying process wrote) whenever the worker changes what it does: loading a
  model, processing a prompt, decoding, idle; with the model's file name, llama.cpp's system
  info, and the conversation being answered;
- after the header, Python's fault handler output (the signal and every thread's stack),
  written by :mod:`faulthandler` from the signal handler itself.

A clean exit deletes the file. So a file found at the next launch means the last session
ended unexpectedly; it is moved to ``crashes/`` for the user to read, and :class:`LastEnd` says
what happened in words. Like :data:`app.trace.TRACE`, one process-wide :data:`CRASH_RECORD`
is written to from any thread, and costs nothing until :meth:`CrashRecord.begin`.
"""

from __future__ import annotations

import contextlib
import faulthandler
import json
import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Final

from app.sentence import QT_TRANSLATE_NOOP, Sentence

log = logging.getLogger(__name__)

FILE_NAME: Final = "session.crash"
"""The record of the running session, in the data directory."""

KEPT_FOLDER: Final = "crashes"
"""Where the records of sessions that ended unexpectedly are kept, in the data directory."""

KEPT_LIMIT: Final = 10
"""Records kept in :data:`KEPT_FOLDER`; the oldest go first."""

HEADER_BYTES: Final = 4096
"""Room for the header; the fault handler writes after it."""

ACTIVITIES: Final = {
    "starting": QT_TRANSLATE_NOOP("Floodgate", "starting"),
    "loading": QT_TRANSLATE_NOOP("Floodgate", "loading a model"),
    "prefill": QT_TRANSLATE_NOOP("Floodgate", "processing a prompt"),
    "decode": QT_TRANSLATE_NOOP("Floodgate", "writing a reply"),
    "idle": QT_TRANSLATE_NOOP("Floodgate", "waiting for a prompt"),
}
"""What the app can be doing, by key, in words (translated where they are shown)."""


@dataclass(frozen=True)
class LastEnd:
    """How the previous session ended, read from the record it left.

    Attributes:
        activity: a key of :data:`ACTIVITIES`.
        model: the open model's file name ("" if none was open yet).
        system_info: what llama.cpp was built with ("" if no model was loaded yet).
        conversation: the id of the conversation being answered ("" if none).
        fault: the fault handler's first line, e.g. "Segmentation fault" ("" if the process
            was killed without one: SIGKILL, the machine stopped).
        kept_at: where the record was moved for the user to read.
    """

    activity: str
    model: str
    system_info: str
    conversation: str
    fault: str
    kept_at: Path

    def _fields(self) -> dict[str, object]:
        return {
            "fault": self.fault
            or Sentence(QT_TRANSLATE_NOOP("Floodgate", "no error was recorded: it was killed")),
            "activity": Sentence(ACTIVITIES.get(self.activity, self.activity)),
            "model": self.model or Sentence(QT_TRANSLATE_NOOP("Floodgate", "no model open")),
            "build": self.system_info
            or Sentence(QT_TRANSLATE_NOOP("Floodgate", "not known (no model had been loaded)")),
            "file": self.kept_at,
        }

    def sentence(self) -> Sentence:
        """What to tell the user at the next launch."""
        return Sentence(
            QT_TRANSLATE_NOOP(
                "Floodgate",
                "The last session ended unexpectedly ({fault}) while {activity}, with "
                "{model}. What was typed and received is kept; a reply cut off is marked as "
                "interrupted. llama.cpp was built with: {build}. The details are in {file}. "
                "If it happens again, `floodgate --self-test` checks the build.",
            ),
            self._fields(),
        )

    def server_sentence(self) -> Sentence:
        """What ``floodgate serve`` says at its next start (a server keeps no conversation)."""
        return Sentence(
            QT_TRANSLATE_NOOP(
                "Floodgate",
                "The last floodgate serve ended unexpectedly ({fault}) while {activity}, with "
                "{model}. llama.cpp was built with: {build}. The details are in {file}. If it "
                "happens again, `floodgate --self-test` checks the build.",
            ),
            self._fields(),
        )


class CrashRecord:
    """The running session's record (see the module's docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._file: IO[bytes] | None = None
        self._path: Path | None = None
        self._fields: dict[str, str] = {}

    def begin(self, folder: Path) -> LastEnd | None:
        """Start recording in ``folder``; return how the previous session ended, if badly.

        Never raises: a data folder that cannot be written only loses the record.
        """
        path = folder / FILE_NAME
        last = last_end(folder)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            file = path.open("w+b", buffering=0)
        except OSError as exc:
            log.warning("No crash record: %s", exc)
            return last
        with self._lock:
            self._file, self._path = file, path
            self._fields = {"activity": "starting", "pid": str(os.getpid())}
            self._write_header()
        file.seek(HEADER_BYTES)
        # Every thread's stack: the one that crashed is usually the worker, not the UI.
        faulthandler.enable(file, all_threads=True)
        return last

    def doing(self, activity: str, **fields: str) -> None:
        """Record what the app is doing now (a key of :data:`ACTIVITIES`) and any details.

        Details not named keep their value (``model``, ``system_info``, ``conversation``).
        A few microseconds: one small write into the page cache, from any thread.
        """
        if self._file is None:
            return
        with self._lock:
            self._fields.update(fields, activity=activity)
            self._write_header()

    def end(self) -> None:
        """A clean exit: stop recording and delete the record."""
        with self._lock:
            file, path = self._file, self._path
            self._file = self._path = None
        if file is None or path is None:
            return
        faulthandler.disable()
        with contextlib.suppress(OSError):
            file.close()
            path.unlink()

    def _write_header(self) -> None:
        assert self._file is not None
        data = json.dumps(self._fields, ensure_ascii=True).encode()[: HEADER_BYTES - 1]
        try:
            os.pwrite(self._file.fileno(), data.ljust(HEADER_BYTES - 1) + b"\n", 0)
        except OSError as exc:  # a full disk: the record is worth less than the app
            log.warning("Crash record not updated: %s", exc)


def last_end(folder: Path) -> LastEnd | None:
    """How the session before ended, if badly: the record it left in ``folder``, kept aside.

    None if it ended cleanly (it left no record). The record is moved to :data:`KEPT_FOLDER`,
    so it is told once.
    """
    path = folder / FILE_NAME
    kept_folder = folder / KEPT_FOLDER
    try:
        raw = path.read_bytes()
    except OSError:
        return None
    try:
        fields = json.loads(raw[:HEADER_BYTES].decode("utf-8", "replace").strip() or "{}")
    except ValueError:
        fields = {}
    if not isinstance(fields, dict):
        fields = {}
    report = raw[HEADER_BYTES:].decode("utf-8", "replace").strip()
    fault = ""
    for line in report.splitlines():
        if line.startswith("Fatal Python error:"):
            fault = line.removeprefix("Fatal Python error:").strip()
            break
    kept_at = _keep(path, kept_folder, fields, report)
    return LastEnd(
        activity=str(fields.get("activity", "starting")),
        model=str(fields.get("model", "")),
        system_info=str(fields.get("system_info", "")),
        conversation=str(fields.get("conversation", "")),
        fault=fault,
        kept_at=kept_at,
    )


def _keep(path: Path, kept_folder: Path, fields: dict[str, object], report: str) -> Path:
    """Write the record as readable text into ``kept_folder`` and remove ``path``."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(_mtime(path)))
    kept = kept_folder / f"crash-{stamp}.txt"
    lines = [f"{key}: {value}" for key, value in fields.items()]
    text = "\n".join([*lines, "", report or "(no fault handler output)", ""])
    try:
        kept_folder.mkdir(parents=True, exist_ok=True)
        kept.write_text(text, encoding="utf-8")
        path.unlink()
        for old in sorted(kept_folder.glob("crash-*.txt"))[:-KEPT_LIMIT]:
            old.unlink()
    except OSError as exc:
        log.warning("Crash record left at %s: %s", path, exc)
        return path
    return kept


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return time.time()


CRASH_RECORD: Final = CrashRecord()
"""The process's one record (idle until :meth:`CrashRecord.begin`)."""
