"""The room in the model's context: what a prompt may take, and how fast this machine reads.

The attachment tray asks how much of the context is left for the next prompt's files, and how
long the model would take to read them; :class:`PromptRoom` answers both for the chat session.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from app.engine import GenerationSettings
from app.engine.context import TEMPLATE_OVERHEAD
from app.flow.metrics import FlowMetrics
from app.flow.model_host import ModelHost
from app.flow.reply import ReplyEnd, prompt_for_model
from app.flow.worker import InferenceWorker
from app.store.conversation import Conversation

__all__ = ["MIN_RATE_TOKENS", "PromptRoom"]

MIN_RATE_TOKENS = 16
"""A prompt-processing rate is kept only from a reply that processed at least this many
tokens: a few tokens in a few milliseconds say little about a long document."""


class PromptRoom:
    """Counts tokens with the open model and reckons the room left for attachments.

    Args:
        host: the model host (which model answers, and its worker).
        metrics: the flow's figures, from which the prompt-processing rate is kept.
        reply_settings: what the next reply is sampled with (its room is kept free).
        conversation: the conversation on screen.
    """

    def __init__(
        self,
        host: ModelHost,
        metrics: FlowMetrics,
        reply_settings: Callable[[], GenerationSettings],
        conversation: Callable[[], Conversation],
    ) -> None:
        self.host = host
        self.metrics = metrics
        self.reply_settings = reply_settings
        self.conversation = conversation
        self.prefill_rate: float | None = None
        """The last prompt-processing rate measured on this machine, tokens/s (None: none yet);
        what the attachments' "about N s to read" is reckoned from."""

    def count_tokens(self, text: str) -> int | None:
        """The open local model's token count of ``text`` (None: no local model, or closing).

        Blocks until the worker gets to it: call it off the UI thread (the attachment reader
        does, from its own threads).
        """
        producer = self.host.producer
        if isinstance(producer, InferenceWorker):
            return producer.count_tokens(text)
        return None

    def budget(self) -> int | None:
        """The prompt's share of the context (the reply keeps its room), None without a model."""
        model = self.host.model
        if model is None or model.n_ctx <= 0:
            return None
        n_ctx = model.n_ctx
        return n_ctx - min(self.reply_settings().max_tokens, n_ctx // 4)

    async def for_attachments(self) -> int | None:
        """The tokens left in the context for the next prompt's attachments (None: unknown).

        The context less the reply's room, the conversation so far (counted on the worker,
        off the UI thread) and the question's turn at the template's overhead. Older turns
        would be left out of a prompt that does not fit, so this is the room with all of them
        kept: on the safe side.
        """
        budget = self.budget()
        if budget is None:
            return None
        # Read here, on the UI thread; only the counting runs elsewhere.
        contents = [content for _role, content in self.conversation().history(prompt_for_model)]
        used = await asyncio.to_thread(self._count_turns, contents)
        if used is None:
            return None
        return max(0, budget - used - TEMPLATE_OVERHEAD)

    def _count_turns(self, contents: Sequence[str]) -> int | None:
        total = 0
        for content in contents:
            counted = self.count_tokens(content)
            if counted is None:
                return None
            total += counted + TEMPLATE_OVERHEAD
        return total

    def keep_prefill_rate(self, _end: ReplyEnd) -> None:
        """At a reply's end, keep its prompt-processing rate if it processed enough to say."""
        metrics = self.metrics
        processed = metrics.prefill_done - metrics.cached_tokens
        rate = metrics.prefill_rate
        if rate is not None and processed >= MIN_RATE_TOKENS:
            self.prefill_rate = rate
