"""A conversation as a file: Markdown to read or share, JSON to keep and import again."""

from __future__ import annotations

import json
from typing import Any

from app.store.conversation import Conversation, Message, new_id

FORMAT = "floodgate-conversation"
VERSION = 1


def to_markdown(conversation: Conversation, you: str = "You") -> str:
    """The shown turns as Markdown: a heading per speaker, replies as the model wrote them."""
    parts = [f"# {conversation.title or 'Conversation'}\n"]
    if conversation.system_prompt:
        quoted = "\n".join(f"> {line}" for line in conversation.system_prompt.splitlines())
        parts.append(f"System prompt:\n\n{quoted}\n")
    for message in conversation.messages:
        speaker = you if message.role == "user" else (message.model or "Assistant")
        parts.append(f"## {speaker}\n\n{message.content.strip()}\n")
        if message.note:
            parts.append(f"*{message.note}*\n")
    return "\n".join(parts)


def to_json(conversation: Conversation) -> str:
    """Everything about a conversation, every branch included."""
    document = {
        "format": FORMAT,
        "version": VERSION,
        "id": conversation.id,
        "title": conversation.title,
        "system_prompt": conversation.system_prompt,
        "model": conversation.model,
        "created_at": conversation.created_at,
        "updated_at": conversation.updated_at,
        "leaf_id": conversation.leaf_id,
        "settings": conversation.settings,
        "messages": [
            {
                "id": m.id,
                "parent_id": m.parent_id,
                "role": m.role,
                "content": m.content,
                "status": m.status,
                "note": m.note,
                "model": m.model,
                "created_at": m.created_at,
            }
            for m in sorted(conversation.nodes.values(), key=lambda m: m.created_at)
        ],
    }
    return json.dumps(document, ensure_ascii=False, indent=2)


class NotAConversationError(ValueError):
    """The file is not a conversation exported by Floodgate."""


def from_json(text: str) -> Conversation:
    """A conversation from :func:`to_json`'s output, with fresh ids (importing twice is fine).

    Raises:
        NotAConversationError: the text is not such a document.
    """
    try:
        doc: Any = json.loads(text)
    except ValueError as exc:
        raise NotAConversationError(f"not JSON: {exc}") from exc
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise NotAConversationError("not a Floodgate conversation")
    if not isinstance(doc.get("version"), int) or doc["version"] > VERSION:
        raise NotAConversationError("made by a newer Floodgate")
    try:
        ids = {m["id"]: new_id() for m in doc["messages"]}
        conversation = Conversation(
            system_prompt=str(doc.get("system_prompt", "")),
            title=str(doc.get("title", "")),
            model=str(doc.get("model", "")),
            created_at=float(doc.get("created_at", 0.0)),
            updated_at=float(doc.get("updated_at", 0.0)),
            leaf_id=ids.get(doc.get("leaf_id")),
            settings=dict(doc["settings"]) if isinstance(doc.get("settings"), dict) else {},
        )
        for m in doc["messages"]:
            role, status = m["role"], m.get("status", "complete")
            if role not in ("user", "assistant") or status not in (
                "complete",
                "streaming",
                "stopped",
                "length",
                "error",
            ):
                raise NotAConversationError(f"unknown role or status: {role}, {status}")
            message = Message(
                role=role,
                content=str(m["content"]),
                status=status,
                note=str(m.get("note", "")),
                id=ids[m["id"]],
                parent_id=ids.get(m["parent_id"]) if m.get("parent_id") else None,
                model=str(m.get("model", "")),
                created_at=float(m.get("created_at", 0.0)),
            )
            conversation.nodes[message.id] = message
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, NotAConversationError):
            raise
        raise NotAConversationError(f"malformed conversation: {exc}") from exc
    if conversation.leaf_id is None and conversation.nodes:
        conversation.leaf_id = max(conversation.nodes.values(), key=lambda m: m.created_at).id
    return conversation
