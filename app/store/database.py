"""Conversations in SQLite: one file in the data directory, WAL, numbered migrations.

No Qt, no threads of its own: :class:`Database` is a plain object that the flow layer drives
from one worker thread (see :mod:`app.flow.archive`), so no query ever runs on the UI thread.

If the file cannot be used (corrupt, locked by another process, read-only), :func:`open_database`
falls back to an in-memory database with a sentence saying why, and never writes to the file:
the app keeps working and whatever was there is left as it was.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from app.sentence import QT_TRANSLATE_NOOP, Sentence
from app.store.conversation import Conversation, Message
from app.store.paths import data_dir

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
)
"""Schema changes, in order; ``PRAGMA user_version`` records how many have been applied."""

UNDO_SECONDS = 600.0
"""How long a deleted conversation can be brought back (it is purged on a later start)."""


@dataclass(frozen=True)
class ConversationSummary:
    """What the sidebar lists for a conversation."""

    id: str
    title: str
    updated_at: float


class Database:
    """The conversations in one SQLite connection. Call it from one thread only."""

    def __init__(self, connection: sqlite3.Connection, path: Path | None) -> None:
        self._db = connection
        self.path = path
        """The file, or None when running in memory."""

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

    # -- conversations ----------------------------------------------------------------------------

    def list_conversations(self, query: str = "") -> list[ConversationSummary]:
        """Conversations newest first; with ``query``, those whose title or text contains it."""
        sql = "SELECT id, title, updated_at FROM conversations WHERE deleted_at IS NULL"
        args: list[str] = []
        if query.strip():
            pattern = "%" + _escape_like(query.strip()) + "%"
            sql += (
                " AND (title LIKE ? ESCAPE '\\' OR id IN (SELECT conversation_id FROM messages"
                " WHERE content LIKE ? ESCAPE '\\'))"
            )
            args = [pattern, pattern]
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
        for m in self._db.execute(
            "SELECT id, parent_id, role, content, status, note, model, created_at"
            " FROM messages WHERE conversation_id = ? ORDER BY created_at",
            (conversation_id,),
        ):
            conversation.nodes[m[0]] = Message(
                role=m[2],
                content=m[3],
                status=m[4],
                note=m[5],
                id=m[0],
                parent_id=m[1],
                model=m[6],
                created_at=m[7],
            )
        return conversation

    def save_conversation(self, conversation: Conversation) -> None:
        """Create or update a conversation's own fields (not its messages)."""
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
                    conversation.id,
                    conversation.title,
                    conversation.system_prompt,
                    conversation.model,
                    conversation.created_at,
                    conversation.updated_at,
                    conversation.leaf_id,
                    json.dumps(conversation.settings),
                ),
            )

    def save_messages(self, conversation_id: str, messages: Sequence[Message]) -> None:
        """Create or update messages of a conversation, in one transaction."""
        with self._db:
            self._db.executemany(
                "INSERT INTO messages"
                " (id, conversation_id, parent_id, role, content, status, note, model, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT(id) DO UPDATE SET content = excluded.content,"
                " status = excluded.status, note = excluded.note, model = excluded.model",
                [
                    (
                        m.id,
                        conversation_id,
                        m.parent_id,
                        m.role,
                        m.content,
                        m.status,
                        m.note,
                        m.model,
                        m.created_at,
                    )
                    for m in messages
                ],
            )

    def save_all(self, conversation: Conversation) -> None:
        """Save a conversation and every one of its messages (imports, first saves)."""
        self.save_conversation(conversation)
        self.save_messages(conversation.id, list(conversation.nodes.values()))

    def rename(self, conversation_id: str, title: str) -> None:
        """Give a conversation a new title."""
        with self._db:
            self._db.execute(
                "UPDATE conversations SET title = ? WHERE id = ?", (title, conversation_id)
            )

    def delete(self, conversation_id: str) -> None:
        """Hide a conversation; :meth:`undelete` brings it back until it is purged."""
        with self._db:
            self._db.execute(
                "UPDATE conversations SET deleted_at = ? WHERE id = ?",
                (time.time(), conversation_id),
            )

    def undelete(self, conversation_id: str) -> None:
        """Bring back a conversation hidden by :meth:`delete`."""
        with self._db:
            self._db.execute(
                "UPDATE conversations SET deleted_at = NULL WHERE id = ?", (conversation_id,)
            )

    def purge_deleted(self, older_than: float = UNDO_SECONDS) -> int:
        """Remove for good the conversations deleted more than ``older_than`` seconds ago."""
        with self._db:
            cursor = self._db.execute(
                "DELETE FROM conversations WHERE deleted_at IS NOT NULL AND deleted_at < ?",
                (time.time() - older_than,),
            )
        return cursor.rowcount


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


def _connect(path: Path | str) -> sqlite3.Connection:
    # One worker thread uses the connection, but not the thread that opened it.
    connection = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    connection.execute("PRAGMA busy_timeout = 2000")
    connection.execute("PRAGMA foreign_keys = ON")
    return connection


def open_database(path: Path | None = None) -> tuple[Database, Sentence | None]:
    """Open (or create) the database file, migrated to the newest schema.

    Returns:
        The database, and None; or, if the file cannot be used, an in-memory database
        (holding a copy of the file's conversations when they can still be read) and a
        sentence for the user saying why. The file itself is left untouched then.
    """
    path = path or database_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        connection = _connect(path)
    except (OSError, sqlite3.Error) as exc:
        return _in_memory(None), _sentence(path, exc)
    if not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)):
        # WAL needs to write next to the file too; SQLite would only fail at the first save.
        copy = _in_memory(connection)
        connection.close()
        return copy, _sentence(path, PermissionError("read-only"))
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
    return database, None


def _in_memory(source: sqlite3.Connection | None) -> Database:
    memory = _connect(":memory:")
    if source is not None:
        try:
            source.backup(memory)  # read-only or locked files can often still be read
        except sqlite3.Error:
            memory.close()
            memory = _connect(":memory:")
    database = Database(memory, None)
    try:
        database.migrate()
    except sqlite3.Error:
        # The copy was of a schema we cannot migrate: start empty rather than fail.
        memory.close()
        database = Database(_connect(":memory:"), None)
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
