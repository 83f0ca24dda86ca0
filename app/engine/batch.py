"""Several replies decoded side by side: one ``llama_decode`` per step for all of them.

Decoding one token is bound by reading the model's weights; decoding one token for each of
four sequences in the same ``llama_decode`` reads them once. So, as llama.cpp's server does
with its slots, the context holds several sequences (``n_seq_max``, a KV cache for each) and
each step decodes the next token of every reply at once: the *batch*. What Floodgate adds
is what its single reply always had, now per reader:

- **Backpressure per reader.** A piece its reader has no room for is held, and the reply
  leaves the batch (its sequence and KV cache stay) until the reader takes what is waiting;
  the others go on. Nothing is dropped and memory stays flat.
- **Stop per reader.** Stop raises the context's native abort flag, so the step in flight
  ends within milliseconds; the step is then dropped for every sequence in it (each
  sequence's KV cache is cut back to what it held before) and done again without the
  stopped reply. The others lose one step, not their text.
- **A newcomer's prompt does not stall the others.** While replies decode, a new prompt is
  read in chunks sized to take a share of a decoding step's time
  (:data:`~app.engine.batch_chunks.PREFILL_SHARE`), in the same ``llama_decode`` as the
  others' next tokens; alone, in chunks of the engine's usual time.

The engine that owns the context (:class:`~app.engine.llama.LlamaBackend`) renders prompts
(:class:`SequenceHost`), its KV record reuses and keeps processed prompts per conversation
(:class:`~app.engine.kv_record.KvRecord`), and its failures are worded by
:mod:`app.engine.failures`; each reply samples and shows its own tokens
(:class:`~app.engine.batch_reply.BatchedReply`); this module schedules and decodes.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Protocol

import llama_cpp

from app.engine.backend import ChatMessage, GenerationReport
from app.engine.batch_chunks import PromptChunks
from app.engine.batch_reply import BatchedReply, share_python
from app.engine.draft import Drafter
from app.engine.failures import record_failure
from app.engine.generation import (
    DECODE_ABORTED,
    DecodeFailedError,
    SamplerChain,
    TokenPieces,
    put_token,
)
from app.engine.kv_record import KvRecord
from app.engine.projector import MediaPrompt
from app.engine.sequence import KvSequence, common_prefix, whole_pictures
from app.engine.stop import StopSignal
from app.trace import TRACE

__all__ = ["AbortFlag", "BatchDecoder", "BatchedReply", "ContextFullError", "SequenceHost"]


class AbortFlag(Protocol):
    """The context's native abort flag (:class:`~app.engine.llama.NativeAbortFlag`)."""

    def raise_flag(self) -> None:
        """Make the step in flight end."""
        ...

    def lower(self) -> None:
        """Let steps run again."""
        ...

    @property
    def raised(self) -> bool:
        """Whether a Stop raised it since it was last lowered."""
        ...


class SequenceHost(Protocol):
    """What the batch asks of the engine that owns the context."""

    def render_prompt(
        self, messages: Sequence[ChatMessage], stop: StopSignal, plain: str | None
    ) -> tuple[list[int], tuple[str, ...], MediaPrompt | None]:
        """The prompt's token ids, the strings that end its reply, its media (raises)."""
        ...

    def feed_picture(
        self,
        media: MediaPrompt,
        sequence: KvSequence,
        report: GenerationReport,
        position: int,
        stop: StopSignal,
    ) -> tuple[int, int]:
        """Put the picture or sound chunk at ``position`` into ``sequence``: code, positions."""
        ...

    def drafter(self, prompt: list[int], seq_id: int) -> Drafter | None:
        """A reply's proposed tokens, if the engine drafts (:mod:`app.engine.draft`)."""
        ...


class BatchDecoder:
    """Replies side by side in one llama.cpp context, one ``llama_decode`` per step.

    Used by one thread only (the worker's). The worker :meth:`place`s replies while a
    sequence is free and calls :meth:`step` while :attr:`computing`; a reply's reader that
    takes held text, or a Stop, should wake the worker so that it steps again.

    Args:
        ctx: the llama.cpp context, opened with ``n_seq_max`` of ``len(sequences)``.
        vocab: the model's vocabulary.
        host: the engine that owns the context.
        kv: the context's KV record: its sequences, one per place in the batch.
        abort: the context's native abort flag.
        pieces: each token's bytes (shared with the engine).
        prefill_chunk_seconds: a prompt chunk's time when nothing else decodes (0: n_batch).
        synchronize: wait for the device after each step (a GPU returns before it is done).
    """

    def __init__(
        self,
        ctx: Any,
        vocab: Any,
        host: SequenceHost,
        kv: KvRecord,
        abort: AbortFlag,
        pieces: TokenPieces,
        *,
        prefill_chunk_seconds: float,
        synchronize: bool = False,
    ) -> None:
        self._ctx = ctx
        self._vocab = vocab
        self._host = host
        self._kv = kv
        self.sequences = list(kv.sequences)
        self._abort = abort
        self._pieces = pieces
        self._synchronize = synchronize
        self._n_batch = int(llama_cpp.llama_n_batch(ctx))
        self._n_ctx = int(llama_cpp.llama_n_ctx_seq(ctx))
        self._chunks = PromptChunks(self._n_batch, prefill_chunk_seconds)
        self._samplers = [SamplerChain(vocab) for _ in self.sequences]
        self._batch = llama_cpp.llama_batch_init(self._n_batch, 0, 1)
        self._placed: list[BatchedReply] = []
        self._used: dict[int, int] = {}  # a sequence's id: the step it last served
        self._steps = 0
        self._beside = 0  # the other replies decoding in the last step (drafts are sized by it)
        self.decode_step = 0.0
        """A step's time while only decoding replies were in it (smoothed), seconds."""
        self.last_size = 0
        """Replies in the last step that computed."""

    @property
    def places(self) -> int:
        """How many replies can be decoded side by side."""
        return len(self.sequences)

    @property
    def placed(self) -> list[BatchedReply]:
        """The replies in the batch now (computing, or waiting for their readers)."""
        return list(self._placed)

    @property
    def busy(self) -> bool:
        """Whether any reply is in the batch."""
        return bool(self._placed)

    @property
    def free(self) -> bool:
        """Whether a sequence is free for another reply."""
        return len(self._placed) < len(self.sequences)

    @property
    def computing(self) -> bool:
        """Whether a step would compute: some reply is neither waiting for its reader nor done."""
        return any(r.stop.is_set() or (not r.held and not r.ending) for r in self._placed)

    def place(self, reply: BatchedReply) -> bool:
        """Give ``reply`` a free sequence and prepare its prompt; False if none is free.

        A reply that cannot begin (its prompt does not render or fit, a grammar llama.cpp
        refuses, Stop already pressed) ends here, its report saying why.
        """
        busy = {r.sequence.seq_id for r in self._placed if r.sequence is not None}
        free = [s for s in self.sequences if s.seq_id not in busy]
        if not free:
            return False
        report = reply.report
        self._placed.append(reply)
        try:
            prompt, stop_strings, reply.media = self._host.render_prompt(
                reply.messages, reply.stop, reply.plain
            )
            self._kv.take_back_context()
            report.prompt_tokens = len(prompt)
            if reply.stop.is_set():
                self._end(reply)
                return True
            sequence = choose_sequence(free, prompt, reply.conversation, self._used)
            reply.sequence = sequence
            reply.sampler = self._samplers[sequence.seq_id].prepare(reply.settings)
            kept = self._kv.prepare(sequence, prompt, reply.conversation, report)
            if reply.media is not None:
                kept = whole_pictures(sequence, prompt, kept)
        except Exception as exc:
            if not record_failure(exc, report, self._n_ctx):
                self._placed.remove(reply)
                raise
            reply.sequence = None
            self._end(reply)
            return True
        drafter = self._host.drafter(prompt, sequence.seq_id)
        reply.begin(prompt, stop_strings, drafter, kept, self._n_ctx)
        reply.listen_for_stop(self._abort.raise_flag)
        self._used[sequence.seq_id] = self._steps
        return True

    def step(self) -> None:
        """Hand held text to readers with room, end stopped replies, then decode one step.

        A step is one ``llama_decode`` of every decoding reply's next token, then, if a
        prompt is being read, one of its next chunk. Two calls, not one: in one call with a
        prompt chunk, llama.cpp computes the replies' tokens in other micro-batches than
        alone, and their logits differ in the last bits (a greedy reply then forks where two
        tokens nearly tie); apart, a reply decoded side by side is the reply decoded alone.
        """
        self._end_stopped()
        for reply in list(self._placed):
            if reply.held and reply.hand_held() and reply.ending:
                self._end(reply)
        decoding = [r for r in self._placed if r.pending is not None and not r.held]
        reading = next((r for r in self._placed if r.reading_prompt), None)
        if not decoding and reading is None:
            return
        self._steps += 1
        size = len(decoding) + (reading is not None)
        self.last_size = size
        if decoding:
            self._decode_tokens(decoding, size)
        if reading is not None and not reading.stop.is_set():
            # Beside others as long as any streams, held for its reader too: it comes back
            # at the next step, and should not wait behind a chunk sized for an idle batch.
            streaming = bool(decoding) or any(
                r.held and not r.ending and r is not reading for r in self._placed
            )
            self._read_prompt(reading, size, mixed=streaming)

    def _decode_tokens(self, decoding: list[BatchedReply], size: int) -> None:
        """Decode each reply's last sampled token in one call, then sample the next ones.

        A reply's proposed tokens (its ``draft``) go in the same call after its token, with
        logits for each row: :meth:`_advance` keeps them while they equal what is sampled.
        """
        began = time.perf_counter()
        rows: list[int] = []  # each reply's first row
        ended: list[BatchedReply] = []
        n = 0
        for i, reply in enumerate(decoding):
            sequence = reply.sequence
            assert sequence is not None
            at = sequence.position(len(sequence.tokens))
            # Room in the batch for the replies after this one, one row each.
            reply.draft = reply.draft[: max(0, self._n_batch - n - (len(decoding) - i))]
            rows.append(n)
            for offset, token in enumerate((reply.pending or 0, *reply.draft)):
                put_token(self._batch, n, token, at + offset, sequence.seq_id, True)
                n += 1
        self._batch.n_tokens = n
        started = time.perf_counter()
        code = self._decode("decode step", replies=len(decoding), rows=n)
        elapsed = time.perf_counter() - started
        if code != 0:
            self._drop_step(decoding, code)  # their drafts are checked when it is done again
            return
        # Smoothed, weighted to the newest: a newcomer's prompt chunks are sized from it.
        step = self.decode_step
        self.decode_step = elapsed if not step else 0.8 * step + 0.2 * elapsed
        drafting = next((r.drafter for r in decoding if r.drafter is not None), None)
        if drafting is not None:
            drafting.costs.record(n, elapsed)  # the engine's call times, which drafts size by
        self._beside = len(decoding) - 1
        for reply, row in zip(decoding, rows, strict=True):
            sequence = reply.sequence
            assert sequence is not None
            assert reply.pending is not None
            sequence.tokens.append(reply.pending)
            reply.checked, reply.draft = reply.draft, []
            reply.report.drafted += len(reply.checked)
            reply.report.batch_size = size
            reply.report.batch_peak = max(reply.report.batch_peak, size)
            if reply.stop.is_set():
                continue
            if reply.advance(self._ctx, self._vocab, self._pieces, row, self._beside):
                ended.append(reply)  # it ended by itself
        # Shared before the ended ones leave: keeping their KV state is no one's Python.
        share_python(decoding, time.perf_counter() - began - elapsed)
        for reply in ended:
            self._end(reply)

    def _read_prompt(self, reading: BatchedReply, size: int, *, mixed: bool) -> None:
        """Process the next chunk of ``reading``'s prompt; sample its first token at the end."""
        sequence = reading.sequence
        assert sequence is not None
        done = len(sequence.tokens)
        if reading.media is not None and reading.prompt[done] < 0:
            # A picture or a sound's chunk: encoded (or kept), decoded for this sequence alone.
            try:
                code, n = self._host.feed_picture(
                    reading.media, sequence, reading.report, done, reading.stop
                )
            except Exception as exc:  # media that cannot be read end their reply alone
                sequence.discard_uncounted()
                if not record_failure(exc, reading.report, self._n_ctx):
                    raise
                self._end(reading)
                return
            if code != 0:
                self._drop_step([reading], code)
                return
            sequence.tokens.extend(reading.prompt[done : done + n])
            reading.report.prefill_done = len(sequence.tokens)
            return
        chunk = self._chunks.next(reading, mixed=mixed, decode_step=self.decode_step)
        at = len(sequence.tokens)
        last, first = len(reading.prompt) - 1 - at, sequence.position(at)
        for offset, token in enumerate(chunk):
            put_token(self._batch, offset, token, first + offset, sequence.seq_id, offset == last)
        self._batch.n_tokens = len(chunk)
        started = time.perf_counter()
        code = self._decode("prompt chunk", tokens=len(chunk), at=at)
        elapsed = time.perf_counter() - started
        if code != 0:
            self._drop_step([reading], code)
            return
        self._chunks.read(reading, chunk, elapsed, mixed=mixed, decode_step=self.decode_step)
        reading.report.batch_size = size
        reading.report.batch_peak = max(reading.report.batch_peak, size)
        if reading.pending == -1 and not reading.stop.is_set():
            self._advance(reading, len(chunk) - 1)

    def _decode(self, what: str, **args: int) -> int:
        if TRACE.recording:
            with TRACE.span(what, cat="engine", **args):
                return self._decode_now()
        return self._decode_now()

    def _decode_now(self) -> int:
        code = int(llama_cpp.llama_decode(self._ctx, self._batch))
        if self._synchronize:
            llama_cpp.llama_synchronize(self._ctx)
        return code

    def _advance(self, reply: BatchedReply, index: int) -> None:
        """Sample ``reply``'s next token from this step's output ``index``; end it if it ended."""
        if reply.advance(self._ctx, self._vocab, self._pieces, index, self._beside):
            self._end(reply)

    def _end_stopped(self) -> None:
        """End every stopped reply, then let steps run again (a later Stop raises it anew)."""
        if not self._abort.raised:
            return  # every placed reply's Stop raises it: none was stopped since it was lowered
        while True:
            stopped = [r for r in self._placed if r.stop.is_set()]
            for reply in stopped:
                self._end(reply)
            self._abort.lower()
            # A Stop between the look and the lowering would be lost: look again.
            if not any(r.stop.is_set() for r in self._placed):
                return

    def _drop_step(self, stepped: list[BatchedReply], code: int) -> None:
        """A step that did not go through counts for nobody: each sequence is cut back."""
        for reply in stepped:
            sequence = reply.sequence
            assert sequence is not None
            sequence.discard_uncounted()
        if TRACE.recording:
            TRACE.instant("abort seen" if code == DECODE_ABORTED else "decode failed", cat="engine")
        if code == DECODE_ABORTED:
            return  # a Stop: the stopped reply ends at the next step, the others go on
        failed = [r for r in stepped if r.reading_prompt] or stepped
        for reply in failed:
            error = ContextFullError(code) if code == 1 else DecodeFailedError(code)
            if not record_failure(error, reply.report, self._n_ctx):
                raise error
            self._end(reply)

    def _end(self, reply: BatchedReply) -> None:
        """End ``reply`` (its reader's queue, Stop's latency), then keep its sequence's state."""
        if reply in self._placed:
            self._placed.remove(reply)
        sequence = reply.sequence if not reply.reading_prompt else None
        reply.leave()
        reply.report.end(reply.stop.is_set())
        if sequence is not None:
            self._kv.settle(sequence, reply.conversation, reply.generated_from)
        reply.ended()

    def end_all(self) -> None:
        """End every reply in the batch now, whatever it was doing."""
        for reply in list(self._placed):
            reply.held = ""
            self._end(reply)
        self._abort.lower()

    def close(self) -> None:
        """Free the samplers and the batch (the replies must have ended)."""
        for sampler in self._samplers:
            sampler.close()
        if self._batch is not None:
            llama_cpp.llama_batch_free(self._batch)
            self._batch = None


def choose_sequence(
    free: list[KvSequence], prompt: list[int], conversation: str, used: dict[int, int]
) -> KvSequence:
    """The free sequence that holds this conversation, else the one unused the longest.

    Not the one sharing the longest prefix: every chat prompt shares its template's opening
    with every other, and taking a sequence that holds another conversation sends that one to
    the prompt cache (kept, but restored at a cost when it comes back). ``used``: the step
    each sequence (by id) last served.
    """
    same = [s for s in free if conversation and s.conversation == conversation]
    if same:
        return max(same, key=lambda s: common_prefix(s.tokens, prompt))
    return min(free, key=lambda s: (bool(s.tokens), used.get(s.seq_id, -1)))


class ContextFullError(DecodeFailedError):
    """llama.cpp found no room in the KV cache for the step (``llama_decode`` returned 1)."""
