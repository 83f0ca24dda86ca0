"""When the history file goes wrong: deleted or replaced while Floodgate runs, damaged at start.

The rule throughout: a file the user may still want is never overwritten or changed. A damaged
file, or one that replaced the history while Floodgate ran, is moved aside (renamed, with its
``-wal`` and ``-shm``, bytes untouched) and named in the sentence; the history is then made
again at its usual path, from the best source there is.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from app.sentence import QT_TRANSLATE_NOOP, Sentence
from app.store.backup import backups_folder, newest_good_backup

log = logging.getLogger(__name__)

_COMPANIONS = ("-wal", "-shm")


def connect(path: Path | str) -> sqlite3.Connection:
    """A connection as the archive uses it: from one worker thread, autocommit, foreign keys."""
    # One worker thread uses the connection, but not the thread that opened it.
    connection = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    connection.execute("PRAGMA busy_timeout = 2000")
    connection.execute("PRAGMA foreign_keys = ON")
    return connection


def file_identity(path: Path) -> tuple[int, int] | None:
    """The file's device and inode (None if it is gone): what changes when it is replaced."""
    try:
        status = os.stat(path)
    except FileNotFoundError:
        return None
    return status.st_dev, status.st_ino


def file_stamp(path: Path) -> tuple[int, int] | None:
    """The file's size and modification time: what a write into it changes."""
    try:
        status = os.stat(path)
    except FileNotFoundError:
        return None
    return status.st_size, status.st_mtime_ns


def aside_path(path: Path, kind: str) -> Path:
    """A free name next to ``path`` for a file moved aside, e.g. ``floodgate.damaged-….sqlite3``."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    candidate = path.with_name(f"{path.stem}.{kind}-{stamp}{path.suffix}")
    n = 1
    while candidate.exists():
        n += 1
        candidate = path.with_name(f"{path.stem}.{kind}-{stamp}-{n}{path.suffix}")
    return candidate


def move_aside(path: Path, aside: Path) -> None:
    """Rename the database and its ``-wal``/``-shm`` together (so it still opens as it was)."""
    for suffix in _COMPANIONS:
        companion = path.with_name(path.name + suffix)
        if companion.exists():
            os.replace(companion, aside.with_name(aside.name + suffix))
    os.replace(path, aside)


@dataclass(frozen=True)
class Recreated:
    """The new connection to the history made again, and what to tell the user."""

    connection: sqlite3.Connection
    sentence: Sentence
    complete: bool
    """Every conversation of the old file was copied (else only what the run still holds)."""


def recreate(old: sqlite3.Connection, path: Path) -> Recreated:
    """Make the history file again at ``path`` after it was deleted or replaced.

    The old connection still holds the deleted (or replaced) file open, so everything in it is
    copied first; then it is closed, a file now at ``path`` is moved aside, and the copy is
    written to a new file at ``path``. The caller migrates it and writes what it holds again.
    """
    copy = sqlite3.connect(":memory:")
    try:
        old.backup(copy)
        complete = copy.execute("PRAGMA quick_check").fetchone()[0] == "ok"
    except sqlite3.Error as exc:
        log.warning("The deleted history could not be read any more: %s", exc)
        complete = False
    with contextlib.suppress(sqlite3.Error):
        old.close()
    # The old file's log and index stay behind when it was deleted or replaced on its own (as
    # `rm` or `mv` do); everything in them was copied above. SQLite drops a log it finds next
    # to an empty file, but removing them here does not depend on that.
    for suffix in _COMPANIONS:
        path.with_name(path.name + suffix).unlink(missing_ok=True)
    aside = None
    if os.path.lexists(path):
        aside = aside_path(path, "replaced")
        os.replace(path, aside)
    path.parent.mkdir(parents=True, exist_ok=True)
    connection = connect(path)
    try:
        if complete:
            copy.backup(connection)
        connection.execute("PRAGMA journal_mode = WAL")
    except sqlite3.Error:
        connection.close()
        raise
    finally:
        copy.close()
    return Recreated(connection, _recreated_sentence(path, aside, complete), complete)


def _recreated_sentence(path: Path, aside: Path | None, complete: bool) -> Sentence:
    fields = {"path": path, "aside": aside, "folder": backups_folder(path)}
    if aside is None and complete:
        template = QT_TRANSLATE_NOOP(
            "Floodgate",
            "The chat history file {path} was deleted while Floodgate was running. Floodgate "
            "created it again, with every conversation.",
        )
    elif aside is None:
        template = QT_TRANSLATE_NOOP(
            "Floodgate",
            "The chat history file {path} was deleted while Floodgate was running. Floodgate "
            "created it again with the conversations of this session; older ones are in the "
            "backups in {folder}.",
        )
    elif complete:
        template = QT_TRANSLATE_NOOP(
            "Floodgate",
            "The chat history file {path} was replaced while Floodgate was running. Floodgate "
            "wrote every conversation to it again; the file that replaced it was kept as "
            "{aside}.",
        )
    else:
        template = QT_TRANSLATE_NOOP(
            "Floodgate",
            "The chat history file {path} was replaced while Floodgate was running. Floodgate "
            "wrote the conversations of this session to it again (older ones are in the "
            "backups in {folder}); the file that replaced it was kept as {aside}.",
        )
    return Sentence(template, fields)


def restore_newest_backup(path: Path) -> Sentence | None:
    """Put the newest good backup in place of the damaged file at ``path``.

    The damaged file is moved aside untouched; the backup is copied (the backup itself stays);
    conversations the damaged file can still show consistently (a log damaged after a crash
    leaves its earlier part readable) that are newer than the backup are added to the copy.

    Returns:
        What happened, for the user; None if there is no good backup (nothing was moved).
    """
    backup = newest_good_backup(backups_folder(path), path.stem)
    if backup is None:
        return None
    # Copied first (what can fail for want of space), so a failure leaves the damaged file
    # where it was; then two renames.
    partial = path.with_name(path.name + ".restoring")
    shutil.copyfile(backup.path, partial)
    aside = aside_path(path, "damaged")
    move_aside(path, aside)
    os.replace(partial, path)
    recovered = merge_newer(aside, path)
    with contextlib.closing(sqlite3.connect(path)) as restored:
        count = restored.execute(
            "SELECT count(*) FROM conversations WHERE deleted_at IS NULL"
        ).fetchone()[0]
    fields = {
        "path": path,
        "aside": aside,
        "time": backup.local_time(),
        "count": count,
        "recovered": recovered,
    }
    if recovered:
        template = QT_TRANSLATE_NOOP(
            "Floodgate",
            "The chat history in {path} is damaged; it was kept, untouched, as {aside}. "
            "Floodgate opened its backup from {time} ({count} conversations as they were then) "
            "and recovered {recovered} newer conversations from the damaged file; the rest of "
            "what was written after {time} is lost.",
        )
    else:
        template = QT_TRANSLATE_NOOP(
            "Floodgate",
            "The chat history in {path} is damaged; it was kept, untouched, as {aside}. "
            "Floodgate opened its backup from {time}: {count} conversations as they were then. "
            "What was written after {time} is lost.",
        )
    log.warning("Damaged history %s moved to %s; restored %s", path, aside, backup.path)
    return Sentence(template, fields)


def is_damage(exc: BaseException) -> bool:
    """Whether SQLite said the file is damaged (not merely busy, full or unwritable)."""
    return isinstance(exc, sqlite3.DatabaseError) and getattr(exc, "sqlite_errorname", "") in (
        "SQLITE_CORRUPT",
        "SQLITE_NOTADB",
    )


def replace_damaged_while_running(old: sqlite3.Connection, path: Path) -> Recreated:
    """The open file turned out damaged: move it aside and open its newest good backup.

    With no backup, a new empty file is started. The caller writes what this run saved on top,
    so nothing said in this session is lost either way.
    """
    with contextlib.suppress(sqlite3.Error):
        old.close()
    backup = newest_good_backup(backups_folder(path), path.stem)
    partial = path.with_name(path.name + ".restoring")
    if backup is not None:
        shutil.copyfile(backup.path, partial)
    aside = aside_path(path, "damaged")
    if os.path.lexists(path):
        move_aside(path, aside)
    if backup is not None:
        os.replace(partial, path)
    connection = connect(path)
    connection.execute("PRAGMA journal_mode = WAL")
    fields = {"path": path, "aside": aside, "time": backup.local_time() if backup else ""}
    if backup is not None:
        template = QT_TRANSLATE_NOOP(
            "Floodgate",
            "The chat history in {path} was damaged while Floodgate was running; it was kept as "
            "{aside}. Floodgate opened its backup from {time} and wrote this session's "
            "conversations to it again.",
        )
    else:
        template = QT_TRANSLATE_NOOP(
            "Floodgate",
            "The chat history in {path} was damaged while Floodgate was running; it was kept as "
            "{aside}. There is no backup, so Floodgate started a new history with this "
            "session's conversations.",
        )
    log.warning("History %s damaged while running; moved to %s", path, aside)
    return Recreated(connection, Sentence(template, fields), backup is not None)


def readable_copy(path: Path) -> sqlite3.Connection | None:
    """An in-memory copy of what a damaged file still shows consistently, or None."""
    try:
        with contextlib.closing(_read_only(path)) as source:
            if source.execute("PRAGMA quick_check").fetchone()[0] != "ok":
                return None
            memory = connect(":memory:")
            source.backup(memory)
            return memory
    except sqlite3.Error:
        return None


def merge_newer(damaged: Path, working: Path) -> int:
    """Add to ``working`` what ``damaged`` holds that is newer; returns how many conversations.

    Only if ``damaged`` reads consistently (``quick_check``) with the same schema: a log damaged
    after a crash leaves a sound earlier state that may be newer than the last backup.
    """
    try:
        with contextlib.closing(_read_only(damaged)) as source:
            if source.execute("PRAGMA quick_check").fetchone()[0] != "ok":
                return 0
            old_version = source.execute("PRAGMA user_version").fetchone()[0]
        uri = f"file:{quote(str(working))}"  # URIs on, so the attached file can be read-only
        with contextlib.closing(sqlite3.connect(uri, uri=True, isolation_level=None)) as target:
            if target.execute("PRAGMA user_version").fetchone()[0] != old_version:
                return 0
            target.execute("ATTACH DATABASE ? AS old", (_read_only_uri(damaged),))
            return _merge(target)
    except sqlite3.Error as exc:
        log.warning("Nothing could be recovered from %s: %s", damaged, exc)
        return 0


def _merge(target: sqlite3.Connection) -> int:
    columns = [row[1] for row in target.execute("PRAGMA main.table_info(conversations)")]
    names = ", ".join(columns)
    updates = ", ".join(f"{c} = excluded.{c}" for c in columns if c != "id")
    newer = target.execute(
        "SELECT count(*) FROM old.conversations AS o LEFT JOIN main.conversations AS m"
        " ON m.id = o.id WHERE m.id IS NULL OR o.updated_at > m.updated_at"
    ).fetchone()[0]
    message_columns = [row[1] for row in target.execute("PRAGMA main.table_info(messages)")]
    message_names = ", ".join(message_columns)
    target.execute("BEGIN")
    try:
        # "WHERE true" lets SQLite tell the upsert's ON from a join's.
        target.execute(
            f"INSERT INTO main.conversations ({names}) SELECT {names} FROM old.conversations"
            f" WHERE true ON CONFLICT(id) DO UPDATE SET {updates}"
            " WHERE excluded.updated_at > conversations.updated_at"
        )
        # A message present in both keeps the longer text (a reply saved as it streamed).
        target.execute(
            f"INSERT INTO main.messages ({message_names}) SELECT {message_names}"
            " FROM old.messages WHERE conversation_id IN (SELECT id FROM main.conversations)"
            " ON CONFLICT(id) DO UPDATE SET content = excluded.content,"
            " status = excluded.status, note = excluded.note"
            " WHERE length(excluded.content) > length(messages.content)"
            " OR (messages.status = 'streaming' AND excluded.status <> 'streaming')"
        )
        target.execute("COMMIT")
    except sqlite3.Error:
        target.execute("ROLLBACK")
        raise
    return int(newer)


def _read_only_uri(path: Path) -> str:
    return f"file:{quote(str(path))}?mode=ro"


def _read_only(path: Path) -> sqlite3.Connection:
    # Read-only: looking at a damaged file never checkpoints its log into it or changes it.
    return sqlite3.connect(_read_only_uri(path), uri=True)
