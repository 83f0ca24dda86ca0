"""A conversation as a file: Markdown to read or share, JSON to keep and import again."""

from __future__ import annotations

import json
import math
import re
from typing import Any, NamedTuple, get_args

from app.roles import Role
from app.sentence import QT_TRANSLATE_NOOP, Sentence
from app.store.conversation import (
    ATTACHMENT_FIELDS,
    MEDIA_KINDS,
    Conversation,
    Message,
    Status,
    new_id,
)
from app.store.text import storable_text

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
        parts.append(f"## {speaker}\n")
        parts.extend(_attachment_markdown(a) for a in message.attachments)
        if message.content.strip():
            parts.append(f"{message.content.strip()}\n")
        if message.note:
            parts.append(f"*{message.note}*\n")
    # Saved text is storable already; a conversation never saved may not be (yet).
    return storable_text("\n".join(parts)).text


_DIGEST = re.compile(r"[0-9a-f]{64}")
"""A picture's digest: the name its file is kept under in the data folder's ``pictures/``."""

_KINDS = frozenset(("text", "code", "markdown", "csv", "json", "html", "pdf", "picture", "sound"))
"""The kinds of attachment there are (:data:`app.documents.KINDS`; the store does not import
the documents package: the two sit side by side)."""


def _attachment_markdown(attachment: dict[str, object]) -> str:
    """``**Attached: name** (kind, size, N tokens, cut)``, then the text in an unclosable fence."""
    details = [str(attachment.get("kind", "text")), _size_text(attachment.get("size"))]
    tokens = attachment.get("tokens")
    if isinstance(tokens, int):
        details.append(f"{tokens:,} tokens")
    if attachment.get("cut"):
        details.append("cut")
    text = str(attachment.get("text", ""))
    longest = max((len(run) for run in re.findall("`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    body = text if text.endswith("\n") or not text else text + "\n"
    name = str(attachment.get("name", "")).replace("*", "\\*")
    return f"**Attached: {name}** ({', '.join(details)})\n\n{fence}\n{body}{fence}\n"


def _size_text(size: object) -> str:
    if not isinstance(size, int):
        return "? B"
    for unit, scale in (("GB", 2**30), ("MB", 2**20), ("KB", 2**10)):
        if size >= scale:
            value = size / scale
            return f"{value:.1f} {unit}" if value < 10 else f"{value:,.0f} {unit}"
    return f"{size} B"


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
                **({"attachments": m.attachments} if m.attachments else {}),
            }
            for m in sorted(conversation.nodes.values(), key=lambda m: m.created_at)
        ],
    }
    return storable_text(json.dumps(document, ensure_ascii=False, indent=2)).text


class NotAConversationError(ValueError):
    """The file is not a conversation exported by Floodgate; ``sentence`` says why."""

    def __init__(self, sentence: Sentence) -> None:
        super().__init__(str(sentence))
        self.sentence = sentence


class Imported(NamedTuple):
    """A conversation read from a file, and whether some of its text had to be replaced."""

    conversation: Conversation
    replaced: bool


_ROLES = frozenset(("user", "assistant"))
_STATUSES = frozenset(get_args(Status))


def from_json(text: str) -> Conversation:
    """A conversation from :func:`to_json`'s output, with fresh ids (importing twice is fine).

    Raises:
        NotAConversationError: the text is not such a document.
    """
    return read_json(text).conversation


def read_json(text: str) -> Imported:
    r"""Read and check a whole exported conversation before anything is made of it.

    Everything is checked first (the structure, each field's type, that ids are unique, that
    every message follows one in the file and none follows itself), so a bad file raises here
    and never reaches the current conversation or the history. Text that cannot be stored
    (lone surrogates from ``\ud800`` escapes) is replaced, and :attr:`Imported.replaced` says
    so. Ids are fresh, so importing the same file twice gives two conversations.

    Raises:
        NotAConversationError: the text is not such a document; its sentence says why.
    """
    doc = _document(text)
    messages = doc.get("messages")
    if not isinstance(messages, list):
        raise _wrong_field("messages")
    reader = _Reader()
    conversation = Conversation(
        title=reader.text(doc, "title"),
        system_prompt=reader.text(doc, "system_prompt"),
        model=reader.text(doc, "model"),
        created_at=_number(doc, "created_at"),
        updated_at=_number(doc, "updated_at"),
        settings=_settings(doc),
    )
    ids = _read_messages(messages, conversation, reader)
    conversation.leaf_id = _leaf(doc, ids, conversation)
    return Imported(conversation, reader.replaced)


def _document(text: str) -> dict[str, Any]:
    """Parse ``text`` and check it is a Floodgate export of a version this one can read."""
    try:
        doc: Any = json.loads(text)
    except ValueError as exc:
        line, column = getattr(exc, "lineno", 0), getattr(exc, "colno", 0)
        raise _refuse(
            QT_TRANSLATE_NOOP("Floodgate", "it is not valid JSON (line {line}, column {column})"),
            line=line,
            column=column,
        ) from exc
    except RecursionError as exc:  # thousands of nested brackets
        raise _refuse(QT_TRANSLATE_NOOP("Floodgate", "it is nested too deeply")) from exc
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise _refuse(
            QT_TRANSLATE_NOOP("Floodgate", "it is not a conversation exported by Floodgate")
        )
    version = doc.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise _wrong_field("version")
    if version > VERSION:
        raise _refuse(QT_TRANSLATE_NOOP("Floodgate", "it was made by a newer Floodgate"))
    return doc


def _read_messages(
    messages: list[Any], conversation: Conversation, reader: _Reader
) -> dict[str, str]:
    """Read every message into ``conversation`` under a fresh id, its parents checked.

    Returns:
        The file's ids mapped to the fresh ones.
    """
    ids: dict[str, str] = {}
    parents: dict[str, str | None] = {}
    for n, item in enumerate(messages, start=1):
        message = _message(item, n, reader)
        old_id = message.id
        if old_id in ids:
            raise _refuse(
                QT_TRANSLATE_NOOP("Floodgate", "message {n} has the same id as an earlier one"),
                n=n,
            )
        ids[old_id] = new_id()
        parents[old_id] = message.parent_id
        message.id = ids[old_id]
        conversation.nodes[message.id] = message
    for n, parent in enumerate(parents.values(), start=1):
        if parent is not None and parent not in ids:
            raise _refuse(
                QT_TRANSLATE_NOOP(
                    "Floodgate", "message {n} follows a message that is not in the file"
                ),
                n=n,
            )
    _check_no_loop(parents)
    for message in conversation.nodes.values():
        message.parent_id = ids[message.parent_id] if message.parent_id is not None else None
    return ids


def _leaf(doc: dict[str, Any], ids: dict[str, str], conversation: Conversation) -> str | None:
    """The fresh id of the message the file shows, or the newest one when it names none."""
    leaf = doc.get("leaf_id")
    if leaf is not None and not isinstance(leaf, str):
        raise _wrong_field("leaf_id")
    if leaf is not None and leaf not in ids:
        raise _refuse(
            QT_TRANSLATE_NOOP("Floodgate", "the message it shows (leaf_id) is not in the file")
        )
    if leaf is not None:
        return ids[leaf]
    if conversation.nodes:
        return max(conversation.nodes.values(), key=lambda m: m.created_at).id
    return None


class _Reader:
    """Reads text fields, made storable, remembering whether any had to be changed."""

    def __init__(self) -> None:
        self.replaced = False

    def text(self, item: dict[str, Any], key: str, n: int = 0, required: bool = False) -> str:
        value = item.get(key, None if required else "")
        if not isinstance(value, str):
            raise _wrong_field(key, n)
        fixed, replaced = storable_text(value)
        self.replaced = self.replaced or replaced
        return fixed


def _message(item: object, n: int, reader: _Reader) -> Message:
    if not isinstance(item, dict):
        raise _refuse(QT_TRANSLATE_NOOP("Floodgate", "message {n} is not an object"), n=n)
    message_id = item.get("id")
    if not isinstance(message_id, str) or not message_id:
        raise _wrong_field("id", n)
    parent = item.get("parent_id")
    if parent is not None and not isinstance(parent, str):
        raise _wrong_field("parent_id", n)
    role, status = item.get("role"), item.get("status", "complete")
    if role not in _ROLES:
        raise _refuse(
            QT_TRANSLATE_NOOP("Floodgate", "message {n} has an unknown role ({role})"),
            n=n,
            role=storable_text(str(role)).text[:40],
        )
    if status not in _STATUSES:
        raise _refuse(
            QT_TRANSLATE_NOOP("Floodgate", "message {n} has an unknown status ({status})"),
            n=n,
            status=storable_text(str(status)).text[:40],
        )
    known_role: Role = role
    known_status: Status = status
    return Message(
        role=known_role,
        content=reader.text(item, "content", n, required=True),
        status=known_status,
        note=reader.text(item, "note", n),
        id=message_id,
        parent_id=parent or None,
        model=reader.text(item, "model", n),
        created_at=_number(item, "created_at", n),
        attachments=_attachments(item, n, reader),
    )


def _attachments(item: dict[str, Any], n: int, reader: _Reader) -> list[dict[str, object]]:
    """A message's attachments, each checked as strictly as the rest of the file."""
    value = item.get("attachments", [])
    if not isinstance(value, list):
        raise _wrong_field("attachments", n)
    kept: list[dict[str, object]] = []
    for k, attachment in enumerate(value, start=1):
        if not isinstance(attachment, dict):
            raise _bad_attachment(n, k)
        kind = attachment.get("kind")
        if kind not in _KINDS:
            raise _bad_attachment(n, k)
        counts: dict[str, object] = {}
        for key in ("size", "tokens", "pages", "kept_tokens", "full_tokens"):
            count = attachment.get(key, 0 if key == "size" else None)
            if count is not None and (
                not isinstance(count, int) or isinstance(count, bool) or count < 0
            ):
                raise _bad_attachment(n, k)
            counts[key] = count
        cut = attachment.get("cut", False)
        encoding = attachment.get("encoding")
        if not isinstance(cut, bool) or not (encoding is None or isinstance(encoding, str)):
            raise _bad_attachment(n, k)
        if not isinstance(attachment.get("name"), str) or not isinstance(
            attachment.get("text"), str
        ):
            raise _bad_attachment(n, k)
        digest = attachment.get("digest")
        if (digest is not None or kind in MEDIA_KINDS) and not (
            isinstance(digest, str) and _DIGEST.fullmatch(digest)
        ):
            raise _bad_attachment(n, k)
        data: dict[str, object] = {
            "name": reader.text(attachment, "name", n),
            "kind": kind,
            "text": reader.text(attachment, "text", n),
            "cut": cut,
            "encoding": reader.text(attachment, "encoding", n) if encoding is not None else None,
            "digest": digest,
            **counts,
        }
        kept.append(
            {
                key: data[key]
                for key in ATTACHMENT_FIELDS
                if data[key] is not None or key != "digest"
            }
        )
    return kept


def _bad_attachment(n: int, k: int) -> NotAConversationError:
    return _refuse(
        QT_TRANSLATE_NOOP(
            "Floodgate",
            "in message {n}, attachment {k} is not a file as Floodgate keeps it (a name, a "
            "kind, a size and a text)",
        ),
        n=n,
        k=k,
    )


def _check_no_loop(parents: dict[str, str | None]) -> None:
    # A message following itself (through others) would make the shown path endless. Each
    # message is walked once: paths already known to reach a first message are not walked again.
    reaches_a_first: set[str] = set()
    for n, start in enumerate(parents, start=1):
        path: list[str] = []
        on_path: set[str] = set()
        node: str | None = start
        while node is not None and node not in reaches_a_first:
            if node in on_path:
                raise _refuse(
                    QT_TRANSLATE_NOOP(
                        "Floodgate", "message {n} follows itself through the messages before it"
                    ),
                    n=n,
                )
            on_path.add(node)
            path.append(node)
            node = parents[node]
        reaches_a_first.update(path)


def _number(item: dict[str, Any], key: str, n: int = 0) -> float:
    value = item.get(key, 0.0)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _wrong_field(key, n)
    try:
        number = float(value)
    except OverflowError:
        raise _wrong_field(key, n) from None
    if not math.isfinite(number):
        raise _wrong_field(key, n)
    return number


def _settings(doc: dict[str, Any]) -> dict[str, object]:
    value = doc.get("settings", {})
    if not isinstance(value, dict):
        raise _wrong_field("settings")
    return dict(value)


def _wrong_field(key: str, n: int = 0) -> NotAConversationError:
    if n:
        return _refuse(
            QT_TRANSLATE_NOOP(
                "Floodgate", "in message {n}, “{field}” is missing or has the wrong type"
            ),
            n=n,
            field=key,
        )
    return _refuse(
        QT_TRANSLATE_NOOP("Floodgate", "“{field}” is missing or has the wrong type"), field=key
    )


def _refuse(template: str, **fields: object) -> NotAConversationError:
    return NotAConversationError(Sentence(template, fields))
