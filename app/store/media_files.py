"""Pictures and sounds kept with conversations: content-addressed files in the data folder.

A picture attached to a prompt is copied into ``<data>/pictures/<2 hex>/<SHA-256>`` (a sound
into ``<data>/sounds/``) before the prompt is saved, written to a temporary name, synced, then
renamed: after a kill -9 the file is there whole or not at all, and a conversation refers to
it by its digest alone (the same file attached twice is one file). Nothing here decodes them:
the flow checks them (:mod:`app.engine.pictures`, :mod:`app.engine.sounds`) before they are
kept. Each function takes the folder (pictures' by default).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import time
from collections.abc import Callable, Collection
from pathlib import Path

from app.store.paths import data_dir


def pictures_dir() -> Path:
    """Where pictures are kept (``<data dir>/pictures``)."""
    return data_dir() / "pictures"


def sounds_dir() -> Path:
    """Where sounds are kept (``<data dir>/sounds``), as pictures are, by digest."""
    return data_dir() / "sounds"


def sound_path(digest: str, folder: Path | None = None) -> Path:
    """The file a sound of ``digest`` is kept in (it may not exist)."""
    return picture_path(digest, folder or sounds_dir())


def picture_path(digest: str, folder: Path | None = None) -> Path:
    """The file a picture of ``digest`` is kept in (it may not exist)."""
    return (folder or pictures_dir()) / digest[:2] / digest


def kept(digest: str, size: int, folder: Path | None = None) -> bool:
    """Whether a file of ``digest`` (and ``size`` bytes) is kept already."""
    path = picture_path(digest, folder)
    try:
        return path.stat().st_size == size
    except OSError:
        return False


def keep_checked_bytes(
    data: bytes, check: Callable[[Path], object], folder: Path | None = None
) -> tuple[str, Path]:
    """Keep a file's bytes, then ``check`` the kept file; returns (digest, path).

    When ``check`` raises, the file goes again, unless it was kept before (another
    conversation refers to it), and the exception goes on.

    Raises:
        OSError: the file could not be written; whatever ``check`` raises.
    """
    before = kept(hashlib.sha256(data).hexdigest(), len(data), folder)
    digest, path = keep_bytes(data, folder)
    try:
        check(path)
    except BaseException:
        if not before:
            path.unlink(missing_ok=True)
        raise
    return digest, path


def keep_file(source: Path, folder: Path | None = None) -> tuple[str, Path]:
    """Copy ``source`` into ``folder`` under its digest; returns (digest, path).

    Raises:
        OSError: it could not be read or written (a full disk): nothing half-written stays.
    """
    return keep_bytes(source.read_bytes(), folder)


def keep_bytes(data: bytes, folder: Path | None = None) -> tuple[str, Path]:
    """Keep a file's bytes (a pasted screenshot) under their digest; returns (digest, path).

    Raises:
        OSError: the file could not be written: nothing half-written stays.
    """
    digest = hashlib.sha256(data).hexdigest()
    path = picture_path(digest, folder)
    if kept(digest, len(data), folder):
        return digest, path
    path.parent.mkdir(parents=True, exist_ok=True)
    part: Path | None = None
    try:
        with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".part", delete=False) as out:
            part = Path(out.name)
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(part, path)
    except BaseException:
        if part is not None:
            with contextlib.suppress(OSError):
                part.unlink()
        raise
    return digest, path


SWEEP_AFTER_S = 3600.0
"""A kept file no conversation refers to goes once it is this old: one kept for a prompt
not yet saved, or for an API request still running, is younger."""


def sweep_folder(
    referenced: Collection[str],
    folder: Path | None = None,
    *,
    older_than: float = SWEEP_AFTER_S,
    now: float | None = None,
) -> int:
    """Remove the files in ``folder`` whose digest is not in ``referenced``; returns how many.

    Files stay when a conversation is deleted (another may refer to the same file), and
    the API server keeps a request's pictures and sounds for its encoder: without a sweep
    the folder only grows. A file younger than ``older_than`` seconds stays, and so does a
    ``.part`` left by a kill mid-write until it is as old. Errors (a file in use, a read-only
    folder) leave the file where it is.
    """
    root = folder or pictures_dir()
    cutoff = (time.time() if now is None else now) - older_than
    removed = 0
    with contextlib.suppress(OSError):
        for sub in root.iterdir():
            if not sub.is_dir() or len(sub.name) != 2:
                continue  # not one of ours
            for path in sub.iterdir():
                # A ".part" is a write cut short: no conversation refers to it.
                if path.name in referenced or not path.is_file():
                    continue
                with contextlib.suppress(OSError):
                    if path.stat().st_mtime < cutoff:
                        path.unlink()
                        removed += 1
            with contextlib.suppress(OSError):
                sub.rmdir()  # only when it is empty now
    return removed
