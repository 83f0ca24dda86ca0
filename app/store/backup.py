"""Checking the history file, and rolling backups of it.

At start the file is checked for real (``PRAGMA quick_check`` through a read-only connection,
and the write-ahead log read frame by frame, since SQLite silently ignores a damaged log and
everything after the damage). While Floodgate runs, copies are made with SQLite's online backup
API into ``backups/`` next to the file, and a few are kept by age, as Anki does with its
collection: the newest :data:`KEEP_NEWEST`, plus the newest of each of the last
:data:`KEEP_DAYS` days.

No threads and no Qt: :mod:`app.flow.archive` calls these on its own thread.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import os
import sqlite3
import struct
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

log = logging.getLogger(__name__)

FOLDER = "backups"
"""The backups' folder, next to the history file."""

KEEP_NEWEST = 3
KEEP_DAYS = 7
BACKUP_EVERY = 30 * 60.0
"""Seconds between backups while Floodgate runs (only when something was written)."""

_NAME_FORMAT = "%Y%m%dT%H%M%S.%fZ"


@dataclass(frozen=True)
class Backup:
    """One backup file and when it was made (seconds since the epoch)."""

    path: Path
    made_at: float

    def local_time(self) -> str:
        """When it was made, as the user's clock showed it."""
        return time.strftime("%Y-%m-%d %H:%M", time.localtime(self.made_at))


def backups_folder(database: Path) -> Path:
    """Where the backups of ``database`` are kept."""
    return database.parent / FOLDER


def make_backup(
    connection: sqlite3.Connection, folder: Path, stem: str, now: float | None = None
) -> Backup:
    """Copy the database behind ``connection`` into ``folder`` with the online backup API.

    The copy is written under a temporary name and renamed when complete, so a copy cut short
    (a crash, a full disk) is never taken for a backup.
    """
    made_at = time.time() if now is None else now
    folder.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.fromtimestamp(made_at, datetime.UTC).strftime(_NAME_FORMAT)
    path = folder / f"{stem}-{stamp}.sqlite3"
    partial = path.with_name(path.name + ".partial")
    target = sqlite3.connect(partial)
    try:
        connection.backup(target)
        target.execute("PRAGMA journal_mode = DELETE")  # one self-contained file
    finally:
        target.close()
    os.replace(partial, path)
    return Backup(path, made_at)


def list_backups(folder: Path, stem: str) -> list[Backup]:
    """The backups in ``folder``, newest first."""
    found: list[Backup] = []
    with contextlib.suppress(OSError):
        for path in folder.glob(f"{stem}-*.sqlite3"):
            stamp = path.name[len(stem) + 1 : -len(".sqlite3")]
            try:
                made = datetime.datetime.strptime(stamp, _NAME_FORMAT)
            except ValueError:
                continue  # not one of ours
            found.append(Backup(path, made.replace(tzinfo=datetime.UTC).timestamp()))
    return sorted(found, key=lambda b: b.made_at, reverse=True)


def prune_backups(
    folder: Path,
    stem: str,
    now: float | None = None,
    keep_newest: int = KEEP_NEWEST,
    keep_days: int = KEEP_DAYS,
) -> list[Path]:
    """Remove the backups no longer kept; returns the removed files.

    Kept: the newest ``keep_newest``, and the newest of each of the last ``keep_days`` days.
    """
    now = time.time() if now is None else now
    backups = list_backups(folder, stem)
    kept = {b.path for b in backups[:keep_newest]}
    days_seen: set[int] = set()
    for backup in backups:  # newest first: the first of each day is its newest
        age_days = int((now - backup.made_at) // 86400)
        if 0 <= age_days < keep_days and age_days not in days_seen:
            days_seen.add(age_days)
            kept.add(backup.path)
    removed = []
    for backup in backups:
        if backup.path not in kept:
            with contextlib.suppress(FileNotFoundError):
                backup.path.unlink()
            removed.append(backup.path)
    return removed


def newest_good_backup(folder: Path, stem: str) -> Backup | None:
    """The newest backup that passes the check, or None."""
    for backup in list_backups(folder, stem):
        if check_file(backup.path) is None:
            return backup
        log.warning("Backup %s is damaged; trying an older one", backup.path)
    return None


def check_file(path: Path) -> str | None:
    """Check a database file without writing to it.

    Returns:
        None if the file is sound (or cannot be read at all: opening it properly reports
        that); otherwise what is wrong, in English, for the log.
    """
    if wal_is_damaged(path):
        return "its write-ahead log is damaged"
    try:
        # Read-only: a damaged file is never checkpointed or otherwise changed by looking.
        connection = sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True)
    except sqlite3.Error:
        return None
    try:
        rows = connection.execute("PRAGMA quick_check").fetchall()
    except sqlite3.DatabaseError as exc:
        detail = str(exc)
        if "malformed" in detail or "not a database" in detail or "corrupt" in detail:
            return detail
        return None  # locked, unreadable: not damage
    finally:
        connection.close()
    if rows and rows[0][0] == "ok":
        return None
    return "; ".join(str(r[0]) for r in rows[:5])


_WAL_MAGIC = (0x377F0682, 0x377F0683)
_WAL_HEADER = 32
_FRAME_HEADER = 24


def wal_is_damaged(path: Path) -> bool:
    """Whether the write-ahead log next to ``path`` lost committed transactions.

    SQLite replays the log up to its first frame that fails its checksum and silently drops
    the rest. A frame of this log's generation (same salts) that fails, followed by a frame
    that checks out on its own or claiming to end a transaction, means committed work would be
    lost: the log is damaged. A torn last frame after a crash (no later frame, not a commit)
    is what SQLite expects and is not counted.
    """
    wal = path.with_name(path.name + "-wal")
    try:
        data = wal.read_bytes()
    except OSError:
        return False
    if len(data) < _WAL_HEADER:
        return False
    magic, version, page_size, _, salt1, salt2, check1, check2 = struct.unpack(
        ">8I", data[:_WAL_HEADER]
    )
    frames_present = len(data) >= _WAL_HEADER + _FRAME_HEADER + 512
    if magic not in _WAL_MAGIC or version != 3007000:
        return frames_present
    order = ">" if magic & 1 else "<"
    if _checksum(data[:24], order, (0, 0)) != (check1, check2):
        return frames_present
    if page_size < 512 or page_size & (page_size - 1):
        return frames_present
    frame_size = _FRAME_HEADER + page_size
    running = (check1, check2)
    broken = False
    offset = _WAL_HEADER
    while offset + frame_size <= len(data):
        header = data[offset : offset + _FRAME_HEADER]
        _, commit, f_salt1, f_salt2, f_check1, f_check2 = struct.unpack(">6I", header)
        if (f_salt1, f_salt2) != (salt1, salt2):
            # Another generation's leftovers (or damage to the salts themselves: what follows
            # tells which).
            if not broken:
                broken = True
            running = (f_check1, f_check2)
            offset += frame_size
            continue
        body = header[:8] + data[offset + _FRAME_HEADER : offset + frame_size]
        ok = _checksum(body, order, running) == (f_check1, f_check2)
        if broken and ok:
            return True  # a sound frame of this log after a broken one: work was dropped
        if not ok:
            if commit:
                return True
            broken = True
        running = (f_check1, f_check2)
        offset += frame_size
    return False


def _checksum(data: bytes, order: str, start: tuple[int, int]) -> tuple[int, int]:
    s0, s1 = start
    words = struct.unpack(f"{order}{len(data) // 4}I", data)
    for i in range(0, len(words), 2):
        s0 = (s0 + words[i] + s1) & 0xFFFFFFFF
        s1 = (s1 + words[i + 1] + s0) & 0xFFFFFFFF
    return s0, s1
