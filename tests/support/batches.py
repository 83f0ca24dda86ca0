"""Replies decoded side by side in one batch, stepped by the test itself."""

from __future__ import annotations

import pytest

from app.engine import ChatMessage, GenerationReport, GenerationSettings, StopSignal
from app.engine.batch import BatchedReply
from app.engine.llama import LlamaBackend


def side_by_side(
    backend: LlamaBackend, conversations: list[list[ChatMessage]], settings: GenerationSettings
) -> list[tuple[str, GenerationReport]]:
    """Replies decoded in one batch, stepped here until every one has ended."""
    batch = backend.batch
    assert batch is not None
    results: list[tuple[list[str], GenerationReport]] = []
    for messages in conversations:
        pieces: list[str] = []
        report = GenerationReport()
        offer = lambda t, p=pieces: p.append(t) or True  # noqa: E731 - the reader has room
        reply = BatchedReply(messages, settings, StopSignal(), report, offer, lambda: None)
        assert batch.place(reply)
        results.append((pieces, report))
    while batch.busy:
        batch.step()
    return [("".join(pieces), report) for pieces, report in results]


def note_keeping(
    backend: LlamaBackend, moments: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Append "keep the state" to ``moments`` each time ``backend`` keeps a sequence's KV state.

    The state is kept after every reply, for the prompt cache (a copy of tens of MB); tests
    check what comes before it.
    """
    settle = backend._kv.settle

    def settle_noted(*args: object, **kwargs: object) -> None:
        moments.append("keep the state")
        settle(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(backend._kv, "settle", settle_noted)
