"""The rows of a conversation's messages and of their attachments, read and written.

:class:`~app.store.database.Database` keeps conversations; a message's row and its
attachments' rows (one per file, in order) are read and written together here.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from app.store.conversation import ATTACHMENT_FIELDS, Conversation, Message

__all__ = ["read_messages", "write_messages"]


def read_messages(connection: sqlite3.Connection, conversation: Conversation) -> None:
    """Read every message of ``conversation``, with its attachments, into its nodes."""
    conversation_id = conversation.id
    for m in connection.execute(
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
    columns = ", ".join(f"a.{name}" for name in ATTACHMENT_FIELDS)
    for row in connection.execute(
        f"SELECT a.message_id, {columns} FROM attachments a"
        " JOIN messages m ON m.id = a.message_id WHERE m.conversation_id = ?"
        " ORDER BY a.message_id, a.position",
        (conversation_id,),
    ):
        message = conversation.nodes.get(row[0])
        if message is not None:
            attachment = dict(zip(ATTACHMENT_FIELDS, row[1:], strict=True))
            attachment["cut"] = bool(attachment["cut"])
            if attachment["digest"] is None:  # a text: its data as before pictures existed
                del attachment["digest"]
            message.attachments.append(attachment)


def write_messages(
    connection: sqlite3.Connection, conversation_id: str, clean: Sequence[Message]
) -> None:
    """Create or update storable messages and replace their attachments, whole.

    Runs in the caller's transaction, so a message and its attachments are saved together.
    """
    connection.executemany(
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
            for m in clean
        ],
    )
    # A message's attachments are replaced whole, in the same transaction.
    connection.executemany("DELETE FROM attachments WHERE message_id = ?", [(m.id,) for m in clean])
    connection.executemany(
        f"INSERT INTO attachments (message_id, position, {', '.join(ATTACHMENT_FIELDS)})"
        f" VALUES (?, ?, {', '.join('?' * len(ATTACHMENT_FIELDS))})",
        [
            (m.id, position, *(a.get(name) for name in ATTACHMENT_FIELDS))
            for m in clean
            for position, a in enumerate(m.attachments)
        ],
    )
