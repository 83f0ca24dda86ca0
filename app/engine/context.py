"""Fitting a conversation into the model's context window."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from app.engine.backend import ChatMessage
from app.engine.sounds import Sound

TEMPLATE_OVERHEAD = 8
"""Tokens a chat template adds around each turn (role markers, separators), a safe estimate."""


class PromptTooLongError(Exception):
    """Even the system prompt and the newest prompt alone do not fit."""

    def __init__(self, tokens: int, budget: int) -> None:
        super().__init__(f"{tokens} tokens, {budget} available")
        self.tokens = tokens
        self.budget = budget


def fit_to_context(
    messages: Sequence[ChatMessage],
    count: Callable[[str], int],
    budget: int,
    picture_tokens: int = 0,
    sound_tokens: Callable[[Sound], int] | None = None,
) -> tuple[list[ChatMessage], int]:
    """Leave out the oldest turns until the prompt fits in ``budget`` tokens.

    The system prompt and the newest turn always stay. Turns are left out oldest first, a
    prompt together with the reply that followed it, so the model never sees a reply
    without its question.

    A turn's pictures count ``picture_tokens`` each (the positions one takes in the prompt,
    as the model's projector lays it out), its sounds ``sound_tokens(sound)`` each (a sound's
    length decides its positions: the backend's ``sound_tokens``, as laid out before or
    reckoned from its header; None: the model cannot hear, its sounds are left out and count
    nothing).

    Returns:
        The turns to send, and how many were left out.

    Raises:
        PromptTooLongError: the system prompt and the newest turn alone exceed ``budget``.
    """
    sizes = [
        count(m["content"])
        + TEMPLATE_OVERHEAD
        + picture_tokens * len(m.get("pictures", ()))
        + (sum(sound_tokens(s) for s in m.get("sounds", ())) if sound_tokens is not None else 0)
        for m in messages
    ]
    system = [i for i, m in enumerate(messages) if m["role"] == "system"]
    fixed = sum(sizes[i] for i in system) + (sizes[-1] if messages else 0)
    if fixed > budget:
        raise PromptTooLongError(fixed, budget)
    middle = [i for i in range(len(messages) - 1) if i not in system]
    total = sum(sizes)
    dropped: set[int] = set()
    while total > budget and middle:
        first = middle.pop(0)
        dropped.add(first)
        total -= sizes[first]
        # A reply without its question is useless: leave the reply out with it.
        if messages[first]["role"] == "user" and middle and messages[middle[0]]["role"] != "user":
            reply = middle.pop(0)
            dropped.add(reply)
            total -= sizes[reply]
    kept = [m for i, m in enumerate(messages) if i not in dropped]
    return kept, len(dropped)
