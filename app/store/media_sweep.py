"""Which kept pictures and sounds a history still refers to, and the sweep of the others.

The pictures and sounds folders hold the files of every conversation's pictures and sounds,
and of the API server's requests. A file goes when no conversation refers to it in the
history, in any of its backups (a restored backup must find its files), or in a file moved
aside as damaged or replaced (its conversations may still be recovered); if one of those
cannot be read, nothing is swept: what it refers to cannot be known.
"""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

from app.store.backup import backups_folder, list_backups
from app.store.media_files import pictures_dir, sounds_dir, sweep_folder

log = logging.getLogger(__name__)


def referenced_digests(database: Path) -> set[str] | None:
    """The digests of the kept files that ``database``, its backups and files aside refer to.

    Returns:
        The digests, or None when one of those files could not be read.
    """
    # No history yet (only ``floodgate serve`` has run): no conversation refers to anything.
    files = [database] if database.exists() else []
    files += [b.path for b in list_backups(backups_folder(database), database.stem)]
    files += sorted(database.parent.glob(f"{database.stem}.*-*{database.suffix}"))
    digests: set[str] = set()
    for path in files:
        try:
            digests |= _digests_in(path)
        except sqlite3.Error as exc:
            log.warning("Pictures are not swept: %s cannot be read (%s)", path, exc)
            return None
    return digests


def _digests_in(path: Path) -> set[str]:
    """The digests one history file refers to (none before pictures existed)."""
    connection = sqlite3.connect(path.as_uri() + "?mode=ro", uri=True)
    try:
        columns = {row[1] for row in connection.execute("PRAGMA table_info(attachments)")}
        if "digest" not in columns:
            return set()  # a file from before pictures (or without attachments at all)
        rows = connection.execute("SELECT DISTINCT digest FROM attachments WHERE digest NOT NULL")
        return {digest for (digest,) in rows}
    finally:
        connection.close()


def sweep_unreferenced(database: Path) -> int:
    """Remove the kept pictures and sounds no history file refers to; returns how many went.

    Only the folders beside ``database`` are the ones its conversations use (a history opened
    from elsewhere, as in a test, sweeps nothing).
    """
    folders = [
        folder
        for folder in (pictures_dir(), sounds_dir())
        if folder.is_dir() and folder.resolve().parent == database.parent.resolve()
    ]
    digests = referenced_digests(database) if folders else None
    if digests is None:
        return 0
    removed = sum(sweep_folder(digests, folder) for folder in folders)
    if removed:
        log.info("Removed %d kept files no conversation refers to", removed)
    return removed
