"""A draft model: a small model of the same vocabulary that proposes tokens for a larger one.

Where prompt lookup (:mod:`app.engine.draft`) proposes only what the context already holds, a
draft model writes ahead on its own: a few tokens decoded greedily by, say, a 0.5B model of
a 14B one's family, which the large model then checks in one call. What is kept is what the
large model samples, so the text is its own; only the time changes (LM Studio's and
llama.cpp's ``--model-draft``).

Both models must cut text into the same tokens: the same vocabulary, token for token
(:func:`vocabulary_difference`; a name says nothing). The draft model runs on the same worker
thread as the model, in a context of its own with one sequence per place in the batch, and its
decodes listen to the same native abort flag, so Stop ends them too.

The draft proposes while it is confident: it stops at the first token it gives less than
:data:`CONFIDENT` probability, as llama.cpp's speculative example does (``p_min`` 0.75),
and after :data:`~app.engine.draft.MOST_DRAFTED` tokens.
"""

from __future__ import annotations

import ctypes
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

import llama_cpp
import numpy as np

from app.engine.draft import MOST_DRAFTED, DraftCosts
from app.engine.generation import put_token
from app.engine.sequence import common_prefix
from app.sentence import QT_TRANSLATE_NOOP, Sentence

CONFIDENT: Final = 0.75
"""A draft goes on while the draft model gives its next token at least this probability."""


def vocabulary_difference(model_vocab: Any, draft_vocab: Any) -> Sentence | None:
    """How two llama.cpp vocabularies differ, in a few words; None when they are the same.

    The same tokenizer kind, the same count, the same beginning and end tokens, and the same
    text for every token: a draft token is checked by its id, so every id must mean the same.
    """
    kinds = llama_cpp.llama_vocab_type(model_vocab), llama_cpp.llama_vocab_type(draft_vocab)
    if kinds[0] != kinds[1]:
        return Sentence(QT_TRANSLATE_NOOP("Floodgate", "another kind of tokenizer"))
    count = llama_cpp.llama_vocab_n_tokens(model_vocab)
    other = llama_cpp.llama_vocab_n_tokens(draft_vocab)
    if count != other:
        return Sentence(
            QT_TRANSLATE_NOOP("Floodgate", "{other} tokens, not {count}"),
            {"other": f"{other:,}", "count": f"{count:,}"},
        )
    for name in ("bos", "eos"):
        ask = getattr(llama_cpp, f"llama_vocab_{name}")
        if ask(model_vocab) != ask(draft_vocab):
            return Sentence(QT_TRANSLATE_NOOP("Floodgate", "other beginning or end tokens"))
    text = llama_cpp.llama_vocab_get_text
    for token in range(count):
        if text(model_vocab, token) != text(draft_vocab, token):
            return Sentence(
                QT_TRANSLATE_NOOP("Floodgate", "token {token} is another piece of text"),
                {"token": token},
            )
    return None


def mismatch_sentence(draft: Path, model: Path, how: Sentence) -> Sentence:
    """What the user reads when ``draft`` cannot propose tokens for ``model``."""
    return Sentence(
        QT_TRANSLATE_NOOP(
            "Floodgate",
            "{draft} cannot guess ahead for {model}: their vocabularies differ ({how}). "
            "Choose a draft model of the same family (in Settings, Compute), or none.",
        ),
        {"draft": draft.name, "model": model.name, "how": how},
    )


class DraftModel:
    """A loaded draft model and what each of its sequences holds.

    Used by the worker thread only, like the model it drafts for.

    Args:
        llm: the draft model and its context (one sequence per place in the model's batch).
        path: its file.
        abort: the model's native abort flag's callback and data: a Stop ends a draft's
            decode as it ends the model's.
    """

    def __init__(self, llm: llama_cpp.Llama, path: Path, abort: tuple[Any, Any]) -> None:
        self.llm = llm
        self.path = path
        ctx = llm.ctx
        self._ctx = ctx
        llama_cpp.llama_set_abort_callback(ctx, *abort)
        self.vocab = llama_cpp.llama_model_get_vocab(llm.model)
        self._n_vocab = int(llama_cpp.llama_vocab_n_tokens(self.vocab))
        self._memory = llama_cpp.llama_get_memory(ctx)
        self._n_batch = int(llama_cpp.llama_n_batch(ctx))
        self._batch = llama_cpp.llama_batch_init(self._n_batch, 0, 1)
        self._held: dict[int, list[int]] = {}  # a sequence's id: the tokens its KV holds

    def propose(self, seq_id: int, context: Sequence[int], most: int) -> list[int]:
        """Up to ``most`` tokens after ``context``, while the draft model is confident.

        The sequence's KV cache keeps what it shares with ``context``; the rest of the context
        is decoded first (the whole prompt, the first time). A decode that fails or is
        stopped ends the draft where it is.
        """
        if most <= 0 or not context:
            return []
        held = self._held.get(seq_id, [])
        keep = min(common_prefix(held, context), len(context) - 1)  # the last one's logits
        llama_cpp.llama_memory_seq_rm(self._memory, seq_id, keep, -1)
        held = list(context[:keep])
        self._held[seq_id] = held
        if not self._decode(seq_id, held, context[keep:]):
            return []
        proposal: list[int] = []
        while True:
            token, probability = self._best()
            if probability < CONFIDENT:
                break
            proposal.append(token)
            if len(proposal) >= min(most, MOST_DRAFTED) or not self._decode(seq_id, held, [token]):
                break
        return proposal

    def _decode(self, seq_id: int, held: list[int], tokens: Sequence[int]) -> bool:
        """Decode ``tokens`` after ``held`` (which grows by them), logits for the last."""
        batch = self._batch
        for start in range(0, len(tokens), self._n_batch):
            chunk = tokens[start : start + self._n_batch]
            last = start + len(chunk) == len(tokens)
            for i, token in enumerate(chunk):
                put_token(batch, i, token, len(held) + i, seq_id, last and i == len(chunk) - 1)
            batch.n_tokens = len(chunk)
            if llama_cpp.llama_decode(self._ctx, batch) != 0:
                llama_cpp.llama_memory_seq_rm(self._memory, seq_id, len(held), -1)
                return False
            held.extend(chunk)
        return True

    def _best(self) -> tuple[int, float]:
        """The draft model's likeliest next token and its probability."""
        pointer = llama_cpp.llama_get_logits_ith(self._ctx, -1)
        logits = np.ctypeslib.as_array(
            ctypes.cast(pointer, ctypes.POINTER(ctypes.c_float)), shape=(self._n_vocab,)
        )
        token = int(logits.argmax())
        top = logits[token]
        return token, float(1.0 / np.exp(logits - top).sum())

    def close(self) -> None:
        """Free the batch, the context and the weights."""
        if self._batch is not None:
            llama_cpp.llama_batch_free(self._batch)
            self._batch = None
        llama_cpp.llama_set_abort_callback(self._ctx, llama_cpp.ggml_abort_callback(), None)
        self.llm.close()


PAUSE_TOKENS: Final = 32
"""Tokens decoded without the draft model after its drafts measured slower than none, before
it is tried again (the text may have changed: code to copy after an explanation)."""


class ModelDrafter:
    """One reply's drafts from a draft model (a :class:`~app.engine.draft.Drafter`).

    A draft model's guesses cost its own calls on top of the larger check, so each proposal's
    outcome is measured: the tokens the reply got from it (one, and the guesses kept) per
    second of drafting and checking, against a plain call's one token. While that measures
    slower (a fading ratio under 1), the reply decodes without drafts for
    :data:`PAUSE_TOKENS` tokens, then tries again.

    Args:
        context: the reply's prompt tokens.
        model: the draft model.
        seq_id: the reply's sequence (the draft model keeps one per place in the batch).
        costs: the engine's measured call times (the decode loops record them).
        clock: the time, in seconds (for tests).
    """

    def __init__(
        self,
        context: Sequence[int],
        model: DraftModel,
        seq_id: int,
        costs: DraftCosts,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.context = list(context)
        self.model = model
        self.seq_id = seq_id
        self.costs = costs
        self._clock = clock
        self._pending: list[int] = []  # the last proposal, compared with what comes
        self._round: tuple[float, int, int] | None = None  # seconds, proposed, beside
        self._kept = 0
        self._pause = 0
        self._weighed_from = False  # proposals are weighed from the second on
        self.gain = 1.0
        """Tokens per second with its drafts over without, fading (1 until measured)."""
        self.pauses = 0
        """How many times drafting paused for measuring slower (for tests and the bench)."""

    def saw(self, token: int) -> bool:
        """``token`` was sampled next: True if it is the next guessed one (kept)."""
        self.context.append(token)
        if self._pending and token == self._pending[0]:
            del self._pending[0]
            self._kept += 1
            return True
        self._pending = []
        return False

    def draft(self, most: int, beside: int = 0) -> list[int]:
        """What the draft model writes next, while it is confident (at most ``most``)."""
        self._settle()
        if self._pause > 0:
            self._pause -= 1
            return []
        started = self._clock()
        proposal = self.model.propose(self.seq_id, self.context, most)
        if self._weighed_from:  # the first one read the whole prompt: not a draft's cost
            self._round = (self._clock() - started, len(proposal), beside)
        self._weighed_from = True
        self._pending, self._kept = list(proposal), 0
        return proposal

    def _settle(self) -> None:
        """Weigh the last proposal's outcome; pause drafting while it measures slower."""
        if self._round is None:
            return
        seconds, proposed, beside = self._round
        self._round = None
        plain = self.costs.seconds(1 + beside)
        checked = self.costs.seconds(1 + beside + proposed)
        if math.isnan(plain) or math.isnan(checked):
            return  # nothing to weigh it against yet
        ratio = (1 + self._kept) / (seconds + checked) * plain
        self.gain += 0.3 * (ratio - self.gain)
        if self.gain < 1.0:
            self._pause = PAUSE_TOKENS
            self.pauses += 1
            self.gain = 1.0  # the next try starts afresh
