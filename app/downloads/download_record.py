"""A download's record on disk: what the next run needs to bring it back as one download.

Each download (a model: one file, or every part of a split one) has a record of its own in the
partial files' folder, ``<first file>.download.json``: its files in order, whether the user
paused it, and when it was first queued. The download queue writes it on its thread;
:func:`waiting_downloads` reads the records (and the partial files without one) back.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from app.downloads.transfer import PARTIAL_FOLDER, RemoteFile, partial_paths, pending


@dataclass(frozen=True)
class WaitingDownload:
    """A download a previous run left unfinished, as its record and the folder tell it.

    Attributes:
        files: its files, in order.
        done: bytes already here (finished parts and partial files).
        held: whether the user paused it (else it was running or waiting when Floodgate ended).
        added: when it was first queued.
    """

    files: tuple[RemoteFile, ...]
    done: int
    held: bool
    added: float


def download_record(folder: Path, files: Sequence[RemoteFile]) -> Path:
    """Where the record of the download of ``files`` is kept in the models ``folder``."""
    return folder / PARTIAL_FOLDER / f"{files[0].name}.download.json"


def write_download_record(
    folder: Path, files: Sequence[RemoteFile], held: bool, added: float
) -> None:
    """Write (or replace, atomically) the record of the download of ``files``.

    Raises:
        OSError: the record could not be written.
    """
    record = download_record(folder, files)
    record.parent.mkdir(parents=True, exist_ok=True)
    temporary = record.with_suffix(".tmp")
    data = {"files": [asdict(f) for f in files], "held": held, "added": added}
    temporary.write_text(json.dumps(data, indent=1), encoding="utf-8")
    os.replace(temporary, record)


def delete_download_record(folder: Path, files: Sequence[RemoteFile]) -> None:
    """Delete the record of the download of ``files``, if there is one (errors ignored)."""
    with contextlib.suppress(OSError):
        download_record(folder, files).unlink(missing_ok=True)


def _read_download_record(record: Path) -> tuple[tuple[RemoteFile, ...], bool, float] | None:
    try:
        data = json.loads(record.read_text(encoding="utf-8"))
        listed = data["files"]
        files = tuple(RemoteFile.from_record(f) for f in listed)
        held, added = bool(data.get("held", False)), float(data.get("added", 0.0))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not files or any(f is None for f in files):
        return None
    known = tuple(f for f in files if f is not None)  # all of them (checked above); for mypy
    if download_record(record.parent.parent, known) != record:
        return None
    return known, held, added


def _bytes_here(folder: Path, remote: RemoteFile) -> int:
    """Bytes of ``remote`` already in ``folder``: the whole file once finished, else its part."""
    final = folder / remote.name
    with contextlib.suppress(OSError):
        if final.stat().st_size == remote.size:
            return remote.size  # verified again when the download runs
    part = partial_paths(folder, remote.name)[0]
    try:
        return part.stat().st_size
    except OSError:
        return 0


def waiting_downloads(folder: Path) -> list[WaitingDownload]:
    """The downloads a previous run left in ``folder``, in the order they were queued.

    Reads the folder: call it off the UI thread. A partial file with no download record of its
    own (left by ``floodgate pull``, or by a Floodgate before download records) is one download
    of its one file, paused.
    """
    waiting = folder / PARTIAL_FOLDER
    if not waiting.is_dir():
        return []
    found: list[WaitingDownload] = []
    covered: set[RemoteFile] = set()
    for record in sorted(waiting.glob("*.download.json")):
        read = _read_download_record(record)
        if read is None:
            continue
        files, held, added = read
        covered.update(files)
        done = sum(_bytes_here(folder, f) for f in files)
        found.append(WaitingDownload(files, done, held, added))
    found.sort(key=lambda w: w.added)
    for remote, done in pending(folder):
        if remote not in covered:
            found.append(WaitingDownload((remote,), done, True, 0.0))
    return found
