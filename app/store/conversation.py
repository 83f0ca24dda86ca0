"""A conversation: the turns the user and the model exchanged."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Role = Literal["system", "user", "assistant"]
Status = Literal["complete", "streaming", "stopped", "length", "error"]

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
"""The tags reasoning models put around their thinking, at the start of a reply."""


def strip_thinking(text: str) -> str:
    """A reply without its leading thinking section.

    Chat templates of reasoning models drop earlier turns' thinking themselves (Qwen3 keeps
    only what follows ``</think>``), and templates of other models never expect it, so it is
    never sent back.
    """
    stripped = text.lstrip()
    if not stripped.startswith(THINK_OPEN):
        return text
    end = stripped.find(THINK_CLOSE)
    if end < 0:
        return ""  # stopped while still thinking: there is no answer to send back
    return stripped[end + len(THINK_CLOSE) :].lstrip()


@dataclass
class Message:
    """One turn.

    Attributes:
        role: who wrote it.
        content: its text; for a reply, everything received so far.
        status: ``stopped`` marks a partial reply kept after Stop; ``error`` a reply that
            failed (its ``note`` says why); ``length`` one cut by the token limit.
        note: a sentence for the user about how the turn ended.
    """

    role: Role
    content: str
    status: Status = "complete"
    note: str = ""


@dataclass
class Conversation:
    """The turns of one chat, in order, and the system prompt that precedes them."""

    system_prompt: str = ""
    messages: list[Message] = field(default_factory=list)

    def add(self, role: Role, content: str, status: Status = "complete") -> Message:
        """Append a turn and return it."""
        message = Message(role, content, status)
        self.messages.append(message)
        return message

    def history(self) -> list[tuple[Role, str]]:
        """The turns to send to the model, oldest first.

        Partial replies kept after Stop are included: the user saw them, so the model should
        too. Failed and empty replies are not, nor is a reply's thinking section.
        """
        turns: list[tuple[Role, str]] = []
        if self.system_prompt:
            turns.append(("system", self.system_prompt))
        for message in self.messages:
            content = message.content
            if message.role == "assistant":
                content = strip_thinking(content)
            if message.status == "error" or not content:
                continue
            turns.append((message.role, content))
        return turns
