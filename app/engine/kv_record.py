"""The KV record: what each sequence of a llama.cpp context holds, reused and kept.

The engine (:class:`~app.engine.llama.LlamaBackend`) keeps the token ids of each sequence's
KV cache (:class:`~app.engine.sequence.KvSequence`), so a new prompt reuses the longest
shared prefix in place, a stopped prompt resumes where it stopped, and, with a
:class:`~app.engine.prompt_cache.PromptCache`, a conversation that comes back is restored
rather than processed again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import llama_cpp

from app.engine.backend import GenerationReport
from app.engine.failures import ContextOverflowError
from app.engine.generation import DECODE_ABORTED, DecodeFailedError
from app.engine.prompt_cache import CacheStats, PromptCache, read_sequence
from app.engine.sequence import KvSequence, common_prefix, whole_pictures
from app.engine.stop import StopSignal

# The engine's log, as before it was split up.
log = logging.getLogger("app.engine.llama")

KEEP_DISCARDED = 64
"""Tokens of this conversation that must be about to go before their state is kept first."""

DISK_WORTHY_SECONDS = 2.0
"""A state that took this long to compute is kept at the end of each reply, for the disk."""


class KvRecord:
    """The sequences of one llama.cpp context, the token ids each holds, and the prompt cache.

    Used by the worker thread only.

    Args:
        llm: the loaded model and context (one sequence per place in the batch).
        cache: where processed prompts are kept per conversation (None: nowhere).
        synchronize: wait for the device after each prompt chunk (a GPU's).
        reuse_reply_tokens: keep a reply's tokens in the KV cache for the next prompt.
    """

    def __init__(
        self,
        llm: llama_cpp.Llama,
        cache: PromptCache | None,
        *,
        synchronize: bool,
        reuse_reply_tokens: bool,
    ) -> None:
        self._llm = llm
        ctx = llm.ctx
        self._ctx = ctx
        self.cache = cache
        self._reuse_reply_tokens = reuse_reply_tokens
        n_batch = int(llama_cpp.llama_n_batch(ctx))
        self.sequences = [
            KvSequence(ctx, n_batch, synchronize=synchronize, seq_id=seq_id)
            for seq_id in range(int(llama_cpp.llama_n_seq_max(ctx)))
        ]
        """One per place in the batch (sequence ids 0 … n-1); one when replies go alone."""

    def prepare(
        self, sequence: KvSequence, prompt: list[int], conversation: str, report: GenerationReport
    ) -> int:
        """Make ``sequence`` hold the longest prefix of ``prompt`` it can get without computing.

        The prefix shared in place, a state from the prompt cache, or (when the oldest turns
        were left out) the held tokens shifted down over them. At least the last prompt token
        is always left to process, for its logits. Returns how many tokens are held.
        """
        cache = self.cache
        if not sequence.in_step():
            sequence.clear()
        held = sequence.tokens
        # The last prompt token is always processed again, for its logits, and with the one
        # before it: a token computed alone comes out slightly different (see prefill).
        reuse = max(0, min(common_prefix(held, prompt), len(prompt) - 2))
        switching = sequence.conversation is not None and sequence.conversation != conversation
        # Keep what is about to be lost: another conversation's prompt, or this one's branch
        # (a regenerated reply, an edited prompt) when a good part of it would go.
        if cache is not None and held and (switching or len(held) - reuse >= KEEP_DISCARDED):
            self.keep(sequence, sequence.conversation or conversation)
        continuing = sequence.conversation == conversation and reuse == len(held)
        if cache is not None and conversation and not continuing:
            hit = cache.lookup(conversation, prompt, longer_than=reuse)
            if hit is not None:
                usable = min(common_prefix(hit.tokens, prompt), len(prompt) - 2)
                if usable > reuse:
                    if sequence.restore(hit.tokens, usable, hit.saved_seconds, hit.state):
                        sequence.conversation = conversation
                        report.prefix_source = hit.source
                        report.saved_seconds = hit.saved_seconds
                        log.debug("Prompt cache: %d tokens from %s", usable, hit.source)
                        return usable
                    log.warning("Prompt cache: llama.cpp refused a saved state; processing")
                    reuse = 0
        if report.dropped_turns and reuse < len(held) and not switching:
            # The oldest turns were left out: shift the kept ones down over them.
            shifted = sequence.shift_for(prompt)
            if shifted:
                sequence.trim(min(shifted, len(prompt) - 2))
                sequence.conversation = conversation
                report.prefix_source = "shift"
                report.saved_seconds = sequence.seconds
                return len(sequence.tokens)
        sequence.trim(reuse)
        sequence.conversation = conversation
        if sequence.tokens:
            report.prefix_source = "kept"
            report.saved_seconds = sequence.seconds
        return len(sequence.tokens)

    def process(
        self,
        sequence: KvSequence,
        prompt: list[int],
        conversation: str,
        report: GenerationReport,
        chunk_seconds: float,
        pictures: Callable[[int], tuple[int, int]] | None,
        stop: StopSignal,
    ) -> bool:
        """Make ``sequence`` hold all of ``prompt``: what it can without computing, then the rest.

        For a context that holds this sequence alone (see :meth:`KvSequence.prefill`, which
        ``chunk_seconds`` and ``pictures`` are for; None: the prompt has no pictures).

        Returns:
            False if the reply's ``stop`` ended it: what was processed stays in place for a
            resume.

        Raises:
            ContextOverflowError: no room in the KV cache.
            DecodeFailedError: llama_decode failed another way.
        """
        self.take_back_context()
        kept = self.prepare(sequence, prompt, conversation, report)
        if pictures is not None:
            kept = whole_pictures(sequence, prompt, kept)
        report.cached_tokens = kept
        report.prefill_done = kept
        report.prefill_started_at = time.perf_counter()
        code = sequence.prefill(prompt, report, chunk_seconds, pictures)
        if code == 0:
            report.prefill_ended_at = time.perf_counter()
            return True
        if code == DECODE_ABORTED and stop.is_set():
            # Nothing more on Stop's way out (its latency is measured to here): what was
            # processed stays in place for a resume, and is handed to the cache when
            # another conversation needs the context (prepare keeps it first).
            return False
        self.keep(sequence, conversation)
        if code == 1:
            raise ContextOverflowError(f"no room in the KV cache (llama_decode returned {code})")
        raise DecodeFailedError(code)

    def settle(self, sequence: KvSequence, conversation: str, generated_from: int) -> None:
        """After a reply, however it ended: what the KV record keeps of it, then keep that.

        Never raises: the reply has ended (its reader has all of it) before this runs, on the
        single path and in a batch alike, so a failure here may cost the next prompt's time,
        never this reply.
        """
        try:
            if not sequence.in_step():
                sequence.clear()
            elif not self._reuse_reply_tokens:
                # Computed one by one, the reply's tokens are not exactly what processing
                # them within the next prompt gives: that prompt processes them again.
                sequence.trim(generated_from)
            elif sequence.rate:
                # What processing the reply's tokens as part of the next prompt would cost.
                sequence.seconds += (len(sequence.tokens) - generated_from) / sequence.rate
        except Exception:
            # What the sequence holds is not known now: the next prompt is processed whole.
            log.exception("A reply's KV state could not be trimmed; it is dropped")
            sequence.clear()
            return
        self.keep(sequence, conversation, at_end=True)  # logs its own failures

    def keep(self, sequence: KvSequence, conversation: str | None, *, at_end: bool = False) -> None:
        """Hand ``sequence`` to the prompt cache as ``conversation``'s.

        At the end of a reply, only when it cost enough to be worth writing to disk (the
        cache keeps every conversation's newest state in RAM anyway when it is put before
        being replaced).
        """
        if self.cache is None or not conversation or not sequence.tokens:
            return
        if at_end and sequence.seconds < DISK_WORTHY_SECONDS:
            return
        if sequence.shifted:
            # Shifted KV entries are close to, not exactly, what these tokens give when
            # processed: the cache only holds states that restore exactly.
            return
        if not sequence.in_step():
            return
        try:
            state = read_sequence(self._ctx, sequence.seq_id)
            self.cache.put(conversation, tuple(sequence.tokens), state, sequence.seconds)
        except Exception:  # only the cache loses: never a reply (this one may have ended)
            log.exception("A conversation's KV state could not be kept")

    def take_back_context(self) -> None:
        """Forget the KV record if llama-cpp-python's own API used the context meanwhile.

        Nothing in the app does (the bench's llama-cpp-python references run on a ``Llama``
        of their own, in a child process: :mod:`app.bench.bare`), so this is a guard, one
        integer read per reply: a call such as ``create_chat_completion`` on this context
        would change the KV cache without this engine knowing, and the next reply would
        reuse a prefix that is no longer there. llama-cpp-python's own count of evaluated
        tokens stays 0 while only this engine computes.
        """
        if self._llm.n_tokens:
            self._llm.n_tokens = 0
            for sequence in self.sequences:
                sequence.clear()
                sequence.conversation = None

    def forget(self, conversation: str) -> None:
        """Drop everything kept of ``conversation`` (it was deleted)."""
        for sequence in self.sequences:
            if sequence.conversation == conversation:
                sequence.conversation = None
        if self.cache is not None:
            self.cache.forget(conversation)

    def clear_cache(self) -> None:
        """Drop every kept prompt, in RAM and on disk."""
        if self.cache is not None:
            self.cache.clear()

    def cache_stats(self) -> CacheStats | None:
        """The prompt cache's figures, or None when there is no cache."""
        return self.cache.stats() if self.cache is not None else None

    def close(self) -> None:
        """Close the prompt cache (what it has pending is written first, briefly)."""
        for sequence in self.sequences:
            sequence.close()
        if self.cache is not None:
            self.cache.close()
