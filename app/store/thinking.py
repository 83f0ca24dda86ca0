"""A reasoning model's ``<think>…</think>`` section, in one place.

No Qt: the chat view routes streamed text with :class:`ThinkSplitter`, and the conversation
drops the section from its history with :func:`strip_thinking`. Both read the same tags here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

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
class ThinkUpdate:
    """Text routed by :class:`ThinkSplitter`: to the thinking section or to the answer."""

    thinking: str = ""
    answer: str = ""
    thinking_started: bool = False
    thinking_ended: bool = False


class ThinkSplitter:
    """Separates a leading ``<think>…</think>`` section (reasoning models) from the answer.

    Tags can arrive cut across pieces; a piece that might be the start of a tag is held back
    until the next piece decides it.
    """

    def __init__(self) -> None:
        self._held = ""
        self._state: Literal["start", "thinking", "after", "answer"] = "start"
        self.answering = False
        """Past any thinking: every piece from now on is the answer's, as it is."""

    def feed(self, text: str) -> ThinkUpdate:
        """Route a piece of the reply."""
        update = ThinkUpdate()
        text = self._held + text
        self._held = ""
        if self._state == "start":
            stripped = text.lstrip()
            if stripped.startswith(THINK_OPEN):
                self._state = "thinking"
                update.thinking_started = True
                text = stripped[len(THINK_OPEN) :]
            elif THINK_OPEN.startswith(stripped):
                self._held = text  # may still become "<think>"
                return update
            else:
                self._state = "answer"
                self.answering = True
        if self._state == "thinking":
            end = text.find(THINK_CLOSE)
            if end >= 0:
                update.thinking = text[:end]
                update.thinking_ended = True
                self._state = "after"
                text = text[end + len(THINK_CLOSE) :]
            else:
                keep = _partial_suffix(text, THINK_CLOSE)
                update.thinking = text[: len(text) - keep]
                self._held = text[len(text) - keep :]
                return update
        if self._state == "after":
            # The blank lines between the thinking and the answer belong to neither.
            text = text.lstrip()
            if not text:
                return update
            self._state = "answer"
            self.answering = True
        update.answer += text
        return update

    def finish(self) -> ThinkUpdate:
        """The reply ended: whatever was held back is text after all."""
        held, self._held = self._held, ""
        if self._state == "thinking":
            return ThinkUpdate(thinking=held, thinking_ended=True)
        return ThinkUpdate(answer=held)


def _partial_suffix(text: str, tag: str) -> int:
    """Length of the longest end of ``text`` that is a proper start of ``tag``."""
    for n in range(min(len(tag) - 1, len(text)), 0, -1):
        if text.endswith(tag[:n]):
            return n
    return 0
