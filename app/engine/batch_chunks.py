"""How much of a prompt the batch reads at each step, alone or beside decoding replies.

Alone, a prompt is read in chunks of the engine's usual time; beside decoding replies, in
chunks sized to take a share of a decoding step's time (:data:`PREFILL_SHARE`), so that a
newcomer's prompt does not stall the replies already streaming.
"""

from __future__ import annotations

import time

from app.engine.batch_reply import BatchedReply
from app.engine.sequence import ChunkSizer, next_picture

PREFILL_SHARE = 0.75
"""While others decode, a newcomer's prompt chunk takes about this share of a decoding
step's time: their gap between tokens grows by that share at most while it is read."""

MIXED_CHUNK = 2
"""The smallest prompt chunk read beside decoding replies, and the first."""


class PromptChunks:
    """Sizes the chunks of the prompts the batch reads, and counts each chunk read.

    Args:
        n_batch: the most tokens one ``llama_decode`` takes.
        chunk_seconds: a prompt chunk's time when nothing else decodes (0: ``n_batch``).
    """

    def __init__(self, n_batch: int, chunk_seconds: float) -> None:
        self._n_batch = n_batch
        self._chunk_seconds = chunk_seconds

    def next(self, reply: BatchedReply, *, mixed: bool, decode_step: float) -> list[int]:
        """The next piece of ``reply``'s prompt, sized to a time.

        ``mixed``: read beside decoding replies, whose step takes ``decode_step`` seconds.
        """
        room = self._n_batch
        sequence = reply.sequence
        assert sequence is not None
        done = len(sequence.tokens)
        end = next_picture(reply.prompt, done) if reply.media is not None else len(reply.prompt)
        left = end - done
        sizer = self._sizer(reply, mixed=mixed, decode_step=decode_step)
        # No sizer: the first chunk beside others, or chunks of n_batch when asked no time.
        size = sizer.size if sizer is not None else MIXED_CHUNK if mixed else self._n_batch
        size = max(MIXED_CHUNK, min(size, room))
        n = min(size, left)
        if left - n == 1:  # never leave a lone last token: computed alone it differs
            n = n + 1 if n < room else n - 1
        return reply.prompt[done : done + max(1, n)]

    def read(
        self,
        reply: BatchedReply,
        chunk: list[int],
        elapsed: float,
        *,
        mixed: bool,
        decode_step: float,
    ) -> None:
        """A prompt chunk went through: count it, size the next, begin the reply if done."""
        sequence = reply.sequence
        assert sequence is not None
        sequence.tokens.extend(chunk)
        sequence.seconds += elapsed
        if elapsed > 0:
            sizer = self._sizer(reply, mixed=mixed, decode_step=decode_step)
            if sizer is not None:
                sizer.record(len(chunk), elapsed)
            if not mixed:  # the rate that sizes a later prompt's first chunk, read alone
                measured = len(chunk) / elapsed
                sequence.rate = measured if not sequence.rate else 0.5 * (sequence.rate + measured)
        reply.report.prefill_done = len(sequence.tokens)
        if len(sequence.tokens) == len(reply.prompt):
            reply.report.prefill_ended_at = time.perf_counter()
            reply.generated_from = len(sequence.tokens)
            reply.pending = -1  # its first token is sampled from this chunk's last output

    def _sizer(self, reply: BatchedReply, *, mixed: bool, decode_step: float) -> ChunkSizer | None:
        """The sizer for ``reply``'s next chunk; None before there is a time to size to."""
        if not mixed:
            if not self._chunk_seconds:
                return None
            if reply.sizer is None:
                # The sequence's rate read alone (chunks read beside others do not change it).
                rate = reply.sequence.rate if reply.sequence is not None else 0.0
                reply.sizer = ChunkSizer(self._chunk_seconds, self._n_batch, rate)
            return reply.sizer
        # Beside decoding replies: a share of their step's time, as the step is now.
        if not decode_step:
            return None
        # Its own sizer: small chunks here cost more per token (a call's fixed part) than
        # those read alone. Whatever the floor over the fixed part (a GPU's), the ceiling is a
        # whole step, so that the others' gap between tokens at most doubles.
        sizer = reply.sizer_beside
        if sizer is None:
            sizer = reply.sizer_beside = ChunkSizer(
                0.0,
                self._n_batch,
                smallest=MIXED_CHUNK,
                first=MIXED_CHUNK,
            )
        sizer.seconds = PREFILL_SHARE * decode_step
        sizer.ceiling = decode_step
        return sizer
