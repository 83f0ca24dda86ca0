"""A conversation: the turns the user and the model exchanged."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from app.roles import Role
from app.store.thinking import strip_thinking

Status = Literal["complete", "streaming", "stopped", "length", "error"]

MEDIA_KINDS = frozenset(("picture", "sound"))
"""Attachments that are files a projector reads (pictures, sounds), not text."""


def new_id() -> str:
    """A fresh id for a conversation or a message."""
    return uuid.uuid4().hex


@dataclass
class Message:
    """One turn.

    Attributes:
        role: who wrote it.
        content: its text; for a reply, everything received so far.
        status: ``stopped`` marks a partial reply kept after Stop; ``error`` a reply that
            failed (its ``note`` says why); ``length`` one cut by the token limit;
            ``streaming`` one still arriving (or cut off when the app was killed).
        note: a sentence for the user about how the turn ended.
        id: unique id.
        parent_id: the turn this one answers or follows (None for the first).
        model: for a reply, the name of the model that wrote it.
        created_at: seconds since the epoch.
        attachments: for a prompt, the files attached to it, in order: each the plain data of
            :meth:`app.documents.Attachment.to_dict` (``name``, ``kind``, ``size``,
            ``text``, ``tokens``, ``cut``, ``encoding``, ``pages``, ``kept_tokens``,
            ``full_tokens``). The text itself is kept, not a path that may move. ``content``
            stays the question alone.
    """

    role: Role
    content: str
    status: Status = "complete"
    note: str = ""
    id: str = field(default_factory=new_id)
    parent_id: str | None = None
    model: str = ""
    created_at: float = field(default_factory=time.time)
    attachments: list[dict[str, object]] = field(default_factory=list)


ATTACHMENT_FIELDS = (
    "name",
    "kind",
    "size",
    "text",
    "tokens",
    "cut",
    "encoding",
    "pages",
    "kept_tokens",
    "full_tokens",
    "digest",
)
"""The keys of an attachment's data, in the order the store keeps them."""


TITLE_LENGTH = 60


def title_from(prompt: str) -> str:
    """A conversation's title from its first prompt: its first line, shortened."""
    line = " ".join(prompt.strip().split("\n", 1)[0].split())
    return line if len(line) <= TITLE_LENGTH else line[: TITLE_LENGTH - 1].rstrip() + "…"


@dataclass
class Conversation:
    """One chat: a tree of turns, of which one path (root to :attr:`leaf_id`) is shown.

    Regenerating a reply adds a sibling of it; editing a prompt adds a sibling of the prompt.
    Nothing is deleted, so every earlier variant stays reachable.
    """

    system_prompt: str = ""
    id: str = field(default_factory=new_id)
    title: str = ""
    model: str = ""
    """The path of the model the conversation last used."""
    created_at: float = field(default_factory=time.time)
    updated_at: float = field(default_factory=time.time)
    nodes: dict[str, Message] = field(default_factory=dict)
    leaf_id: str | None = None
    settings: dict[str, object] = field(default_factory=dict)
    """This conversation's own sampling settings (by name), over the app's; empty: none."""

    @property
    def messages(self) -> list[Message]:
        """The turns shown, oldest first (the path from the first turn to the leaf)."""
        path: list[Message] = []
        node = self.nodes.get(self.leaf_id) if self.leaf_id else None
        while node is not None:
            path.append(node)
            node = self.nodes.get(node.parent_id) if node.parent_id else None
        path.reverse()
        return path

    def add(
        self,
        role: Role,
        content: str,
        status: Status = "complete",
        *,
        parent_id: str | None = None,
        after_leaf: bool = True,
        attachments: Sequence[dict[str, object]] = (),
    ) -> Message:
        """Add a turn under the leaf (or under ``parent_id``) and make it the leaf."""
        parent = self.leaf_id if after_leaf and parent_id is None else parent_id
        # Strictly increasing times within a conversation, so "newest" is never a tie.
        latest = max((m.created_at for m in self.nodes.values()), default=0.0)
        stamp = max(time.time(), latest + 1e-6)
        message = Message(
            role,
            content,
            status,
            parent_id=parent,
            created_at=stamp,
            attachments=[dict(a) for a in attachments],
        )
        self.nodes[message.id] = message
        self.leaf_id = message.id
        if not self.title and role == "user":
            names = ", ".join(str(a.get("name", "")) for a in attachments)
            self.title = title_from(content) or title_from(names)
        return message

    def variants(self, message: Message) -> list[Message]:
        """The message and its siblings (same parent, same role), oldest first."""
        siblings = [
            m
            for m in self.nodes.values()
            if m.parent_id == message.parent_id and m.role == message.role
        ]
        return sorted(siblings, key=lambda m: (m.created_at, m.id))

    def show_variant(self, message: Message) -> None:
        """Show ``message`` instead of its sibling, with the newest turns that followed it."""
        node = message
        while True:
            children = [m for m in self.nodes.values() if m.parent_id == node.id]
            if not children:
                break
            node = max(children, key=lambda m: (m.created_at, m.id))
        self.leaf_id = node.id

    def history(
        self, with_attachments: Callable[[Message], str] | None = None
    ) -> list[tuple[Role, str]]:
        """The turns to send to the model, oldest first (see :meth:`history_turns`)."""
        return [(role, content) for role, content, _ in self.history_turns(with_attachments)]

    def history_turns(
        self, with_attachments: Callable[[Message], str] | None = None
    ) -> list[tuple[Role, str, Message | None]]:
        """The turns to send to the model, oldest first, each with its message.

        Partial replies kept after Stop are included: the user saw them, so the model should
        too. Failed and empty replies are not, nor is a reply's thinking section. A prompt
        that is pictures or sounds alone (no text) is a turn too. The system prompt's turn
        has no message (None).

        Args:
            with_attachments: gives a prompt that has attachments as the model reads it (the
                files, then the question); the store does not know that form, the flow does.
                Without it, such a prompt is its question alone.
        """
        turns: list[tuple[Role, str, Message | None]] = []
        if self.system_prompt:
            turns.append(("system", self.system_prompt, None))
        for message in self.messages:
            content = message.content
            if message.role == "assistant":
                content = strip_thinking(content)
            elif message.attachments and with_attachments is not None:
                content = with_attachments(message)
            media = any(a.get("kind") in MEDIA_KINDS for a in message.attachments)
            if message.status == "error" or not (content or media):
                continue
            turns.append((message.role, content, message))
        return turns
