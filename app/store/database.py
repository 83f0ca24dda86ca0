"""Conversations in SQLite: one file in the data directory, WAL, numbered migrations.

No Qt, no threads of its own: :class:`Database` is a plain object that the flow layer drives
from one worker thread (see :mod:`app.flow.archive`), so no query ever runs on the UI thread.

At start the file is checked for real (:func:`app.store.backup.check_file`). A damaged file is
moved aside untouched and the newest good backup opened in its place
(:func:`app.store.rescue.restore_newest_backup`). If the file cannot be used otherwise (no
backup, locked by another process, read-only), :func:`open_database` falls back to an in-memory
database with a sentence saying why, and never writes to the file: the app keeps working and
whatever was there is left as it was.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from app.sentence import QT_TRANSLATE_NOOP, Sentence
from app.store.backup import (
    BACKUP_EVERY,
    Backup,
    backups_folder,
    check_file,
    list_backups,
    make_backup,
    prune_backups,
)
from app.store.conversation import ATTACHMENT_FIELDS, Conversation, Message, title_from
from app.store.message_rows import read_messages, write_messages
from app.store.paths import data_dir
from app.store.rescue import (
    connect,
    file_identity,
    file_stamp,
    readable_copy,
    recreate,
    replace_damaged_while_running,
    restore_newest_backup,
)
from app.store.text import storable_text

log = logging.getLogger(__name__)

FILE_NAME = "floodgate.sqlite3"

MIGRATIONS: Sequence[str] = (
    # 1: conversations and their turns, as a tree (parent_id) with the shown path's leaf.
    """
    CREATE TABLE conversations (
        id TEXT PRIMARY KEY,
        title TEXT NOT NULL DEFAULT '',
        system_prompt TEXT NOT NULL DEFAULT '',
        model TEXT NOT NULL DEFAULT '',
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        leaf_id TEXT
    );
    CREATE TABLE messages (
        id TEXT PRIMARY KEY,
        conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
        parent_id TEXT,
        role TEXT NOT NULL,
        content TEXT NOT NULL,
        status TEXT NOT NULL,
        note TEXT NOT NULL DEFAULT '',
        model TEXT NOT NULL DEFAULT '',
        created_at REAL NOT NULL
    );
    CREATE INDEX messages_by_conversation ON messages(conversation_id);
    """,
    # 2: deleting a conversation can be undone: it is hidden first, removed for good later.
    """
    ALTER TABLE conversations ADD COLUMN deleted_at REAL;
    CREATE INDEX conversations_by_update ON conversations(deleted_at, updated_at);
    """,
    # 3: a conversation's own sampling settings (JSON), over the app's.
    """
    ALTER TABLE conversations ADD COLUMN settings TEXT NOT NULL DEFAULT '{}';
    """,
    # 4: files attached to a prompt: their text itself (not a path that may move), in order.
    """
    CREATE TABLE attachments (
        message_id TEXT NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
        position INTEGER NOT NULL,
        name TEXT NOT NULL,
        kind TEXT NOT NULL,
        size INTEGER NOT NULL,
        text TEXT NOT NULL,
        tokens INTEGER,
        cut INTEGER NOT NULL DEFAULT 0,
        encoding TEXT,
        pages INTEGER,
        kept_tokens INTEGER,
        full_tokens INTEGER,
        PRIMARY KEY (message_id, position)
    );
    """,
    # 5: pictures: an attachment's digest names its file in the data folder's pictures/.
    """
    ALTER TABLE attachments ADD COLUMN digest TEXT;
    """,
)
"""Schema changes, in order; ``PRAGMA user_version`` records how many have been applied."""

UNDO_SECONDS = 600.0
"""How long a deleted conversation can be brought back (it is purged on a later start)."""


WRITES = frozenset(
    (
        "save_conversation",
        "save_messages",
        "save_all",
        "rename",
        "delete",
        "undelete",
        "purge_deleted",
        "rewrite",
    )
)
"""The :class:`Database` methods that write: the archive watches the file before them."""

WATCH_EVERY = 1.0
"""Seconds between two looks at the file's identity (a ``stat``) before writes."""


@dataclass(frozen=True)
class ConversationSummary:
    """What the sidebar lists for a conversation."""

    id: str
    title: str
    updated_at: float


class Database:
    """The conversations in one SQLite connection. Call it from one thread only.

    Every text is made storable (:func:`~app.store.text.storable_text`) before it is written,
    so no save fails on text. What this run has saved (or tried to) is also kept as a record,
    so it can be written again when the file was deleted or when saving works again after a
    failure (:meth:`rewrite_held`).
    """

    def __init__(self, connection: sqlite3.Connection, path: Path | None) -> None:
        self._db = connection
        self.path = path
        """The file, or None when running in memory."""
        self._identity = file_identity(path) if path is not None else None
        self._stamp = file_stamp(path) if path is not None else None
        self._watched_at = time.monotonic()
        self._held: dict[str, Conversation] = {}
        self._held_fields: set[str] = set()  # conversations whose own fields are known
        self.changed = False
        """Something was written since the last backup."""
        self.backed_up_at = time.monotonic()
        """When the last backup was made (``time.monotonic``)."""

    # -- schema ---------------------------------------------------------------------------------

    def migrate(self, migrations: Sequence[str] = MIGRATIONS) -> int:
        """Apply the migrations not applied yet; returns the schema version now."""
        version = int(self._db.execute("PRAGMA user_version").fetchone()[0])
        for number, script in enumerate(migrations[version:], start=version + 1):
            try:
                self._db.executescript(f"BEGIN; {script}; PRAGMA user_version = {number}; COMMIT;")
            except sqlite3.Error:
                if self._db.in_transaction:
                    self._db.rollback()
                raise
            version = number
        return version

    @property
    def version(self) -> int:
        """The schema version of the open database."""
        return int(self._db.execute("PRAGMA user_version").fetchone()[0])

    def integrity_ok(self) -> bool:
        """``PRAGMA integrity_check`` says ok."""
        return bool(self._db.execute("PRAGMA integrity_check").fetchone()[0] == "ok")

    def close(self) -> None:
        """Close the connection (WAL contents are checkpointed into the file)."""
        self._db.close()

    # -- the file: watched, backed up -------------------------------------------------------------

    def watch(self, force: bool = False) -> Sentence | None:
        """Look whether the file is still the one opened (at most once a second).

        If it was deleted or replaced, it is created again at the same path with every
        conversation the open connection can still read (it keeps the deleted file open), or,
        failing that, with what this run saved; a file that replaced it is moved aside, never
        overwritten.

        Returns:
            A sentence saying what happened, or None if the file is as it was.

        Raises:
            OSError, sqlite3.Error: the file could not be created again (saving then fails).
        """
        if self.path is None:
            return None
        now = time.monotonic()
        if not force and now - self._watched_at < WATCH_EVERY:
            return None
        self._watched_at = now
        if file_identity(self.path) == self._identity:
            stamp = file_stamp(self.path)
            if stamp == self._stamp:
                return None
            # Changed since this connection last wrote: by another hand. Looked at afresh (a
            # new connection, none of this one's cached pages).
            self._stamp = stamp
            if check_file(self.path) is None:
                return None
            return self.rescue()
        outcome = recreate(self._db, self.path)
        self._db = outcome.connection
        self._identity = file_identity(self.path)
        self.migrate()
        self.rewrite_held()
        self.note_written()
        return outcome.sentence

    def note_written(self) -> None:
        """Remember the file's size and time after this connection wrote to it."""
        if self.path is not None:
            self._stamp = file_stamp(self.path)

    def rescue(self) -> Sentence:
        """Put the newest good backup in place of the open file, which turned out damaged.

        The damaged file is moved aside, and what this run saved is written again.

        Raises:
            OSError, sqlite3.Error: that failed too (saving then stays failed).
        """
        if self.path is None:
            raise sqlite3.DatabaseError("the in-memory history is damaged")
        outcome = replace_damaged_while_running(self._db, self.path)
        self._db = outcome.connection
        self._identity = file_identity(self.path)
        self._watched_at = time.monotonic()
        self.migrate()
        self.rewrite_held()
        self.note_written()
        return outcome.sentence

    def backup(self, now: float | None = None) -> Backup | None:
        """Copy the database into ``backups/`` and prune the old copies (not in memory)."""
        if self.path is None:
            return None
        folder = backups_folder(self.path)
        made = make_backup(self._db, folder, self.path.stem, now)
        prune_backups(folder, self.path.stem, now)
        self.changed = False
        self.backed_up_at = time.monotonic()
        return made

    def backup_due(self, every: float = BACKUP_EVERY) -> bool:
        """Something changed and the last backup is older than ``every`` seconds."""
        return (
            self.path is not None and self.changed and time.monotonic() - self.backed_up_at >= every
        )

    # -- conversations ----------------------------------------------------------------------------

    def list_conversations(self, query: str = "") -> list[ConversationSummary]:
        """Conversations newest first; with ``query``, those whose title or text contains it."""
        sql = "SELECT id, title, updated_at FROM conversations WHERE deleted_at IS NULL"
        args: list[str] = []
        query = storable_text(query).text.strip()
        if query:
            pattern = "%" + _escape_like(query) + "%"
            sql += (
                " AND (title LIKE ? ESCAPE '\\' OR id IN (SELECT conversation_id FROM messages"
                " WHERE content LIKE ? ESCAPE '\\') OR id IN (SELECT m.conversation_id"
                " FROM attachments a JOIN messages m ON m.id = a.message_id"
                " WHERE a.text LIKE ? ESCAPE '\\' OR a.name LIKE ? ESCAPE '\\'))"
            )
            args = [pattern] * 4
        sql += " ORDER BY updated_at DESC"
        return [ConversationSummary(*row) for row in self._db.execute(sql, args)]

    def load(self, conversation_id: str) -> Conversation | None:
        """A whole conversation with every branch, or None if there is no such one."""
        row = self._db.execute(
            "SELECT id, title, system_prompt, model, created_at, updated_at, leaf_id, settings"
            " FROM conversations WHERE id = ? AND deleted_at IS NULL",
            (conversation_id,),
        ).fetchone()
        if row is None:
            return None
        conversation = Conversation(
            id=row[0],
            title=row[1],
            system_prompt=row[2],
            model=row[3],
            created_at=row[4],
            updated_at=row[5],
            leaf_id=row[6],
            settings=_settings(row[7]),
        )
        read_messages(self._db, conversation)
        return conversation

    def save_conversation(self, conversation: Conversation) -> None:
        """Create or update a conversation's own fields (not its messages)."""
        c = _storable_conversation(conversation)
        held = self._held.get(c.id)
        self._held[c.id] = replace(c, nodes=held.nodes if held is not None else {})
        self._held_fields.add(c.id)
        with self._db:
            self._db.execute(
                "INSERT INTO conversations"
                " (id, title, system_prompt, model, created_at, updated_at, leaf_id, settings)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT(id) DO UPDATE SET title = excluded.title,"
                " system_prompt = excluded.system_prompt, model = excluded.model,"
                " updated_at = excluded.updated_at, leaf_id = excluded.leaf_id,"
                " settings = excluded.settings",
                (
                    c.id,
                    c.title,
                    c.system_prompt,
                    c.model,
                    c.created_at,
                    c.updated_at,
                    c.leaf_id,
                    json.dumps(c.settings),  # ASCII: surrogates in values come out escaped
                ),
            )
        self.changed = True

    def save_messages(self, conversation_id: str, messages: Sequence[Message]) -> None:
        """Create or update messages of a conversation, in one transaction."""
        conversation_id = storable_text(conversation_id).text
        clean = [_storable_message(m) for m in messages]
        held = self._held.setdefault(conversation_id, Conversation(id=conversation_id))
        held.nodes.update((m.id, m) for m in clean)
        with self._db:
            write_messages(self._db, conversation_id, clean)
        self.changed = True

    def save_all(self, conversation: Conversation) -> None:
        """Save a conversation and every one of its messages (imports, first saves)."""
        self.save_conversation(conversation)
        self.save_messages(conversation.id, list(conversation.nodes.values()))

    def rewrite(self, conversations: Sequence[Conversation]) -> None:
        """Write these conversations again, whole (what the app holds, after a failure)."""
        for conversation in conversations:
            self.save_all(conversation)

    def rewrite_held(self) -> None:
        """Write again everything this run has saved or tried to save."""
        for conversation_id, held in list(self._held.items()):
            if conversation_id in self._held_fields:
                self.save_conversation(held)
            else:
                # Only messages were saved this run: the conversation's row came from an
                # earlier one. If the file lost it, a row is made from what is known.
                first = next((m for m in held.nodes.values() if m.role == "user"), None)
                with self._db:
                    self._db.execute(
                        "INSERT OR IGNORE INTO conversations"
                        " (id, title, created_at, updated_at) VALUES (?, ?, ?, ?)",
                        (
                            conversation_id,
                            title_from(first.content) if first else "",
                            min((m.created_at for m in held.nodes.values()), default=0.0),
                            time.time(),
                        ),
                    )
            self.save_messages(conversation_id, list(held.nodes.values()))

    def rename(self, conversation_id: str, title: str) -> None:
        """Give a conversation a new title."""
        title = storable_text(title).text
        if conversation_id in self._held_fields:
            self._held[conversation_id].title = title
        with self._db:
            self._db.execute(
                "UPDATE conversations SET title = ? WHERE id = ?", (title, conversation_id)
            )
        self.changed = True

    def delete(self, conversation_id: str) -> None:
        """Hide a conversation; :meth:`undelete` brings it back until it is purged."""
        # Never written again from the record: a file made anew must not bring it back.
        self._held.pop(conversation_id, None)
        self._held_fields.discard(conversation_id)
        with self._db:
            self._db.execute(
                "UPDATE conversations SET deleted_at = ? WHERE id = ?",
                (time.time(), conversation_id),
            )
        self.changed = True

    def undelete(self, conversation_id: str) -> None:
        """Bring back a conversation hidden by :meth:`delete`."""
        with self._db:
            self._db.execute(
                "UPDATE conversations SET deleted_at = NULL WHERE id = ?", (conversation_id,)
            )
        self.changed = True

    def purge_deleted(self, older_than: float = UNDO_SECONDS) -> int:
        """Remove for good the conversations deleted more than ``older_than`` seconds ago."""
        with self._db:
            cursor = self._db.execute(
                "DELETE FROM conversations WHERE deleted_at IS NOT NULL AND deleted_at < ?",
                (time.time() - older_than,),
            )
        if cursor.rowcount:
            self.changed = True
        return cursor.rowcount


def _storable_conversation(c: Conversation) -> Conversation:
    return replace(
        c,
        id=storable_text(c.id).text,
        title=storable_text(c.title).text,
        system_prompt=storable_text(c.system_prompt).text,
        model=storable_text(c.model).text,
        leaf_id=storable_text(c.leaf_id).text if c.leaf_id is not None else None,
        nodes={},
    )


def _storable_message(m: Message) -> Message:
    # A copy: the caller's message may go on changing on another thread.
    return replace(
        m,
        content=storable_text(m.content).text,
        note=storable_text(m.note).text,
        model=storable_text(m.model).text,
        id=storable_text(m.id).text,
        parent_id=storable_text(m.parent_id).text if m.parent_id is not None else None,
        attachments=[_storable_attachment(a) for a in m.attachments],
    )


def _storable_attachment(attachment: dict[str, object]) -> dict[str, object]:
    """An attachment's data as SQLite keeps it: every key, texts storable, ``cut`` a 0 or 1."""
    kept: dict[str, object] = {name: attachment.get(name) for name in ATTACHMENT_FIELDS}
    for name in ("name", "kind", "text", "encoding"):
        value = kept[name]
        if isinstance(value, str):
            kept[name] = storable_text(value).text
    kept["name"] = kept["name"] if isinstance(kept["name"], str) else ""
    kept["kind"] = kept["kind"] if isinstance(kept["kind"], str) else "text"
    kept["text"] = kept["text"] if isinstance(kept["text"], str) else ""
    kept["size"] = kept["size"] if isinstance(kept["size"], int) else 0
    kept["cut"] = bool(kept["cut"])
    return kept


def _settings(text: str) -> dict[str, object]:
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def database_path() -> Path:
    """The database file in the data directory."""
    return data_dir() / FILE_NAME


def open_database(
    path: Path | None = None, *, backups: bool = True
) -> tuple[Database, Sentence | None]:
    """Open (or create) the database file, checked and migrated to the newest schema.

    A damaged file (``quick_check`` fails, or its write-ahead log lost committed work) is
    moved aside untouched and the newest good backup opened in its place; with no backup, the
    app runs in memory (with what the damaged file still shows consistently, if anything). A
    sound file is backed up (``backups=False`` skips that, for tools and tests).

    Returns:
        The database, and None; or a sentence for the user saying what happened: the backup
        opened instead, or why the file cannot be used (an in-memory database is returned
        then, holding a copy of the file's conversations when they can still be read, and the
        file is left untouched).
    """
    path = path or database_path()
    said: Sentence | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        damage = check_file(path) if path.exists() else None
        if not path.exists():
            said = _missing_sentence(path)
        if damage is not None:
            log.warning("The chat history %s is damaged: %s", path, damage)
            said = restore_newest_backup(path)
            if said is None:
                return _in_memory(readable_copy(path)), _sentence(path, ValueError("malformed"))
        connection = connect(path)
    except (OSError, sqlite3.Error) as exc:
        return _in_memory(None), _sentence(path, exc)
    if not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)):
        # WAL needs to write next to the file too; SQLite would only fail at the first save.
        return _in_memory(connection), _sentence(path, PermissionError("read-only"))
    try:
        # Reading the schema fails on a file that is not a database; taking the write lock
        # fails on a read-only or locked one. Both before anything is written.
        connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
        connection.execute("BEGIN IMMEDIATE")
        connection.execute("ROLLBACK")
        mode = connection.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            log.info("SQLite kept journal mode %s for %s", mode, path)
        database = Database(connection, path)
        database.migrate()
    except sqlite3.Error as exc:
        # A damaged or locked file is not read further (copying a locked one would wait for
        # the lock forever); the in-memory store starts empty.
        connection.close()
        return _in_memory(None), _sentence(path, exc)
    if backups and said is None:
        try:
            database.backup()
        except (OSError, sqlite3.Error) as exc:
            log.warning("No backup of %s could be made: %s", path, exc)
    database.note_written()
    return database, said


def _missing_sentence(path: Path) -> Sentence | None:
    # Deleted between runs, on purpose or not: the backups are not opened unasked, but the
    # user learns where they are.
    backups = list_backups(backups_folder(path), path.stem)
    if not backups:
        return None
    return Sentence(
        QT_TRANSLATE_NOOP(
            "Floodgate",
            "There was no chat history in {path}, so Floodgate started a new one. Backups of "
            "the earlier one, the newest from {time}, are in {folder}.",
        ),
        {"path": path, "time": backups[0].local_time(), "folder": backups[0].path.parent},
    )


def _in_memory(source: sqlite3.Connection | None) -> Database:
    memory = connect(":memory:")
    if source is not None:
        try:
            source.backup(memory)  # read-only or locked files can often still be read
        except sqlite3.Error:
            memory.close()
            memory = connect(":memory:")
        finally:
            source.close()
    database = Database(memory, None)
    try:
        database.migrate()
    except sqlite3.Error:
        # The copy was of a schema we cannot migrate: start empty rather than fail.
        memory.close()
        database = Database(connect(":memory:"), None)
        database.migrate()
    return database


def _sentence(path: Path, exc: Exception) -> Sentence:
    detail = str(exc)
    if "not a database" in detail or "malformed" in detail:
        template = QT_TRANSLATE_NOOP(
            "Floodgate",
            "The chat history in {path} is damaged or is not a Floodgate database. Floodgate "
            "keeps working without saving, and the file was left as it was.",
        )
    elif "locked" in detail or "busy" in detail:
        template = QT_TRANSLATE_NOOP(
            "Floodgate",
            "The chat history in {path} is in use by another program (is Floodgate already "
            "open?). Floodgate keeps working without saving, and the file was left as it was.",
        )
    elif isinstance(exc, PermissionError) or "readonly" in detail or "read-only" in detail:
        template = QT_TRANSLATE_NOOP(
            "Floodgate",
            "The chat history in {path} cannot be written to; its conversations are shown but "
            "nothing new is saved. The file was left as it was.",
        )
    else:
        template = QT_TRANSLATE_NOOP(
            "Floodgate",
            "The chat history in {path} cannot be opened ({reason}). Floodgate keeps working "
            "without saving, and the file was left as it was.",
        )
    return Sentence(template, {"path": path, "reason": detail})
