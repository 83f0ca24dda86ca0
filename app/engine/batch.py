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
  read in chunks sized to take a share of a decoding step's time (:data:`PREFILL_SHARE`),
  in the same ``llama_decode`` as the others' next tokens; alone, in chunks of the engine's
  usual time.

The engine that owns the context (:class:`~app.engine.llama.LlamaBackend`) renders prompts,
reuses and keeps processed prompts per conversation and words its errors
(:class:`SequenceHost`); this module only schedules and decodes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import llama_cpp

from app.engine.backend import ChatMessage, GenerationReport, GenerationSettings
from app.engine.draft import Drafter
from app.engine.generation import (
    DECODE_ABORTED,
    DecodeFailedError,
    SamplerChain,
    StopStrings,
    TokenPieces,
    held_back,
    new_text_decoder,
    put_token,
)
from app.engine.projector import MediaPrompt
from app.engine.sequence import (
    ChunkSizer,
    KvSequence,
    common_prefix,
    next_picture,
    whole_pictures,
)
from app.engine.stop import StopSignal
from app.trace import TRACE

PREFILL_SHARE = 0.75
"""While others decode, a newcomer's prompt chunk takes about this share of a decoding
step's time: their gap between tokens grows by that share at most while it is read."""

MIXED_CHUNK = 2
"""The smallest prompt chunk read beside decoding replies, and the first."""


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

    def render_tokens(
        self,
        messages: Sequence[ChatMessage],
        settings: GenerationSettings,
        stop: StopSignal,
        plain: str | None,
    ) -> tuple[list[int], tuple[str, ...]]:
        """The prompt's token ids and the strings that end its reply (raises on failure)."""
        ...

    def pictures_seen(self, messages: Sequence[ChatMessage]) -> Sequence[ChatMessage]:
        """The turns without their pictures if the model cannot see (raises if the newest has)."""
        ...

    def render_pictures(
        self, messages: Sequence[ChatMessage], stop: StopSignal
    ) -> tuple[MediaPrompt, tuple[str, ...]]:
        """A prompt with pictures: tokens with placeholders, and its stop strings (raises)."""
        ...

    def feed_picture(
        self,
        media: MediaPrompt,
        sequence: KvSequence,
        report: GenerationReport,
        position: int,
        stop: StopSignal,
    ) -> tuple[int, int]:
        """Put the picture at ``position`` into ``sequence``: llama_decode's code, positions."""
        ...

    def prepare(
        self, sequence: KvSequence, prompt: list[int], conversation: str, report: GenerationReport
    ) -> int:
        """Make ``sequence`` hold the longest prefix of ``prompt`` it can without computing."""
        ...

    def settle(self, sequence: KvSequence, conversation: str, generated_from: int) -> None:
        """After a reply: what the sequence keeps of it, handed to the prompt cache."""
        ...

    def drafter(self, prompt: list[int], seq_id: int) -> Drafter | None:
        """A reply's proposed tokens, if the engine drafts (:mod:`app.engine.draft`)."""
        ...

    def record_failure(self, exc: Exception, report: GenerationReport) -> bool:
        """Word ``exc`` in ``report`` for the user; False if it is not the engine's own."""
        ...


class BatchedReply:
    """One reply in the batch: what was asked, who reads it, and where it stands.

    Args:
        messages: the turns to answer.
        settings: how to sample.
        stop: the reply's stop signal.
        report: filled in as the reply goes (read live by the window and the server panel).
        offer: hands a piece to the reader without waiting; False when the reader has no
            room for it (the batch holds it, and asks the reader's wake-up to come back).
        ended: called once, on the batch's thread, when the reply is over however it ended.
        conversation: the conversation's id (processed prompts are kept per id).
        plain: a plain text to continue instead of ``messages`` (the API's completions).
    """

    def __init__(
        self,
        messages: Sequence[ChatMessage],
        settings: GenerationSettings,
        stop: StopSignal,
        report: GenerationReport,
        offer: Callable[[str], bool],
        ended: Callable[[], None],
        *,
        conversation: str = "",
        plain: str | None = None,
    ) -> None:
        self.messages = messages
        self.settings = settings
        self.stop = stop
        self.report = report
        self.offer = offer
        self.ended = ended
        self.conversation = conversation
        self.plain = plain
        self.sequence: KvSequence | None = None
        self.prompt: list[int] = []
        self.media: MediaPrompt | None = None
        """Its prompt's pictures (None: text only), freed when it ends."""
        self.sampler: Any = None
        self.stops = StopStrings(())
        self.decoder = new_text_decoder()
        self.sizer: ChunkSizer | None = None
        """Sizes its prompt's chunks while nothing else decodes."""
        self.sizer_beside: ChunkSizer | None = None
        """Sizes them while other replies stream: each its own sizer, as chunks beside
        decoding replies are small and cost more per token (a call's fixed part)."""
        self.pending: int | None = None
        """The last token sampled, which the next step decodes (None: reading the prompt)."""
        self.held = ""
        """Text its reader had no room for: the reply waits out of the batch until taken."""
        self.held_since = 0.0
        self.ending = False
        """It ended by itself (end of text, a stop string, its length); held text goes first."""
        self.drafter: Drafter | None = None
        """Its proposals (None: it does not draft)."""
        self.draft: list[int] = []
        """Proposed tokens to check after ``pending`` in its next step."""
        self.checked: list[int] = []
        """Proposed tokens decoded in its last step and not sampled yet: each kept while it
        equals the token sampled from the row before it."""
        self.generated = 0
        self.generated_from = 0
        self.limit = 0
        self.room = 0
        self._remove_listener: Callable[[], None] | None = None

    @property
    def reading_prompt(self) -> bool:
        """Whether its prompt is still being processed."""
        return self.pending is None and not self.ending


class BatchDecoder:
    """Replies side by side in one llama.cpp context, one ``llama_decode`` per step.

    Used by one thread only (the worker's). The worker :meth:`place`s replies while a
    sequence is free and calls :meth:`step` while :attr:`computing`; a reply's reader that
    takes held text, or a Stop, should wake the worker so that it steps again.

    Args:
        ctx: the llama.cpp context, opened with ``n_seq_max`` of ``len(sequences)``.
        vocab: the model's vocabulary.
        host: the engine that owns the context.
        sequences: one per place in the batch (sequence ids 0 … n-1).
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
        sequences: Sequence[KvSequence],
        abort: AbortFlag,
        pieces: TokenPieces,
        *,
        prefill_chunk_seconds: float,
        synchronize: bool = False,
    ) -> None:
        self._ctx = ctx
        self._vocab = vocab
        self._host = host
        self.sequences = list(sequences)
        self._abort = abort
        self._pieces = pieces
        self._chunk_seconds = prefill_chunk_seconds
        self._synchronize = synchronize
        self._n_batch = int(llama_cpp.llama_n_batch(ctx))
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
            reply.messages = self._host.pictures_seen(reply.messages)
            if reply.plain is None and any(m.get("pictures") for m in reply.messages):
                reply.media, stop_strings = self._host.render_pictures(reply.messages, reply.stop)
                prompt = reply.media.tokens
            else:
                prompt, stop_strings = self._host.render_tokens(
                    reply.messages, reply.settings, reply.stop, reply.plain
                )
            report.prompt_tokens = len(prompt)
            if reply.stop.is_set():
                self._end(reply)
                return True
            sequence = self._choose(free, prompt, reply.conversation)
            reply.sequence = sequence
            reply.sampler = self._samplers[sequence.seq_id].prepare(reply.settings)
            kept = self._host.prepare(sequence, prompt, reply.conversation, report)
            if reply.media is not None:
                kept = whole_pictures(sequence, prompt, kept)
        except Exception as exc:
            if not self._host.record_failure(exc, report):
                self._placed.remove(reply)
                raise
            reply.sequence = None
            self._end(reply)
            return True
        reply.prompt = prompt
        reply.stops = StopStrings(stop_strings + reply.settings.stop)
        reply.drafter = self._host.drafter(prompt, sequence.seq_id)
        report.cached_tokens = kept
        report.prefill_done = kept
        report.prefill_started_at = time.perf_counter()
        n_ctx = int(llama_cpp.llama_n_ctx_seq(self._ctx))
        reply.room = n_ctx - len(prompt)
        max_tokens = reply.settings.max_tokens
        reply.limit = min(max_tokens, reply.room) if max_tokens > 0 else reply.room
        reply._remove_listener = reply.stop.add_listener(self._abort.raise_flag)
        self._used[sequence.seq_id] = self._steps
        return True

    def _choose(self, free: list[KvSequence], prompt: list[int], conversation: str) -> KvSequence:
        """The free sequence that holds this conversation, else the one unused the longest.

        Not the one sharing the longest prefix: every chat prompt shares its template's
        opening with every other, and taking a sequence that holds another conversation
        sends that one to the prompt cache (kept, but restored at a cost when it comes back).
        """
        same = [s for s in free if conversation and s.conversation == conversation]
        if same:
            return max(same, key=lambda s: common_prefix(s.tokens, prompt))
        return min(free, key=lambda s: (bool(s.tokens), self._used.get(s.seq_id, -1)))

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
            if reply.held:
                self._hand_held(reply)
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
        rows: list[int] = []  # each reply's first row
        n = 0
        for i, reply in enumerate(decoding):
            sequence = reply.sequence
            assert sequence is not None
            at = len(sequence.tokens)
            # Room in the batch for the replies after this one, one row each.
            reply.draft = reply.draft[: max(0, self._n_batch - n - (len(decoding) - i))]
            rows.append(n)
            for offset, token in enumerate((reply.pending or 0, *reply.draft)):
                self._put(n, token, at + offset, sequence.seq_id, True)
                n += 1
        self._batch.n_tokens = n
        started = time.perf_counter()
        code = self._decode("decode step", replies=len(decoding), rows=n)
        elapsed = time.perf_counter() - started
        if code != 0:
            self._drop_step(decoding, code)  # their drafts are checked when it is done again
            return
        # Smoothed, weighted to the newest: a newcomer's prompt chunks are sized from it.
        self.decode_step = (
            elapsed if not self.decode_step else 0.8 * self.decode_step + 0.2 * elapsed
        )
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
            if not reply.stop.is_set():
                self._advance(reply, row)

    def _read_prompt(self, reading: BatchedReply, size: int, *, mixed: bool) -> None:
        """Process the next chunk of ``reading``'s prompt; sample its first token at the end."""
        sequence = reading.sequence
        assert sequence is not None
        done = len(sequence.tokens)
        if reading.media is not None and reading.prompt[done] < 0:
            # A picture: encoded (or kept) and decoded for this sequence alone, whole.
            try:
                code, n = self._host.feed_picture(
                    reading.media, sequence, reading.report, done, reading.stop
                )
            except Exception as exc:  # a picture that cannot be read ends its reply alone
                sequence.discard_uncounted()
                if not self._host.record_failure(exc, reading.report):
                    raise
                self._end(reading)
                return
            if code != 0:
                self._drop_step([reading], code)
                return
            sequence.tokens.extend(reading.prompt[done : done + n])
            reading.report.prefill_done = len(sequence.tokens)
            return
        chunk = self._prompt_chunk(reading, mixed=mixed)
        at = len(sequence.tokens)
        last = len(reading.prompt) - 1
        for offset, token in enumerate(chunk):
            self._put(offset, token, at + offset, sequence.seq_id, at + offset == last)
        self._batch.n_tokens = len(chunk)
        started = time.perf_counter()
        code = self._decode("prompt chunk", tokens=len(chunk), at=at)
        elapsed = time.perf_counter() - started
        if code != 0:
            self._drop_step([reading], code)
            return
        self._read(reading, chunk, elapsed, mixed=mixed)
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

    def _put(self, i: int, token: int, pos: int, seq_id: int, logits: bool) -> None:
        put_token(self._batch, i, token, pos, seq_id, logits)

    def _prompt_chunk(self, reply: BatchedReply, *, mixed: bool) -> list[int]:
        """The next piece of ``reply``'s prompt, sized to a time."""
        room = self._n_batch
        sequence = reply.sequence
        assert sequence is not None
        done = len(sequence.tokens)
        end = next_picture(reply.prompt, done) if reply.media is not None else len(reply.prompt)
        left = end - done
        sizer = self._sizer(reply, mixed=mixed)
        # No sizer: the first chunk beside others, or chunks of n_batch when asked no time.
        size = sizer.size if sizer is not None else MIXED_CHUNK if mixed else self._n_batch
        size = max(MIXED_CHUNK, min(size, room))
        n = min(size, left)
        if left - n == 1:  # never leave a lone last token: computed alone it differs
            n = n + 1 if n < room else n - 1
        return reply.prompt[done : done + max(1, n)]

    def _sizer(self, reply: BatchedReply, *, mixed: bool) -> ChunkSizer | None:
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
        if not self.decode_step:
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
        sizer.seconds = PREFILL_SHARE * self.decode_step
        sizer.ceiling = self.decode_step
        return sizer

    def _read(self, reply: BatchedReply, chunk: list[int], elapsed: float, *, mixed: bool) -> None:
        """A prompt chunk went through: count it, size the next, begin the reply if done."""
        sequence = reply.sequence
        assert sequence is not None
        sequence.tokens.extend(chunk)
        sequence.seconds += elapsed
        if elapsed > 0:
            sizer = self._sizer(reply, mixed=mixed)
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

    def _advance(self, reply: BatchedReply, index: int) -> None:
        """Sample ``reply``'s next token from this step's output ``index``; show its text.

        While the token sampled is the next of the reply's checked proposals, that one was
        decoded already: the token after it is sampled from the next row, through the same
        checks. The first that differs is decoded at the next step, with a new draft.
        """
        sequence = reply.sequence
        assert sequence is not None
        drafter = reply.drafter
        report = reply.report
        while True:
            token = int(llama_cpp.llama_sampler_sample(reply.sampler, self._ctx, index))
            if drafter is not None:
                drafter.saw(token)
            if llama_cpp.llama_vocab_is_eog(self._vocab, token):
                self._finish(reply, "done")
                return
            reply.generated += 1
            report.reply_tokens = reply.generated
            piece = self._pieces.known.get(token)
            if piece is None:
                piece = self._pieces(token)
            text: str = reply.decoder.decode(piece)
            if reply.stops.stops and text:
                text = reply.stops.feed(text)
            if text:
                report.pieces += 1
                self._hand(reply, text)
            if reply.stops.hit:
                self._finish(reply, "done")
                return
            if reply.generated >= reply.limit and (
                reply.generated >= min(reply.room, reply.limit + 3)
                or not reply.decoder.getstate()[0]
            ):
                self._finish(reply, "length")
                return
            checked = reply.checked
            if checked and token == checked[0] and not reply.stop.is_set():
                del checked[0]
                sequence.tokens.append(token)
                report.draft_kept += 1
                index += 1
                continue
            self._forget_checked(reply)
            reply.pending = token
            if drafter is not None and not reply.stop.is_set():
                most = min(reply.limit, reply.room) - reply.generated
                reply.draft = drafter.draft(most, self._beside)
            return

    def _forget_checked(self, reply: BatchedReply) -> None:
        """Drop the KV of ``reply``'s checked proposals that were not kept."""
        if reply.checked:
            reply.checked = []
            if reply.sequence is not None:
                reply.sequence.discard_uncounted()

    def _hand(self, reply: BatchedReply, text: str) -> None:
        """Give ``text`` to the reader, or hold it (the reply waits out of the batch)."""
        if reply.held:
            reply.held += text
            return
        if not reply.offer(text):
            reply.held = text
            reply.held_since = time.perf_counter()
            reply.report.paused = True

    def _hand_held(self, reply: BatchedReply) -> None:
        if reply.stop.is_set() or not reply.offer(reply.held):
            return
        reply.held = ""
        reply.report.paused = False
        reply.report.paused_seconds += time.perf_counter() - reply.held_since
        if reply.ending:
            self._end(reply)

    def _finish(self, reply: BatchedReply, finish: str) -> None:
        """The reply ended by itself: what was held back goes to the reader, then it ends."""
        reply.report.finish = "length" if finish == "length" else "done"
        reply.ending = True
        reply.pending = None
        tail = held_back(reply.decoder, reply.stops)
        if tail:
            reply.report.pieces += 1
            self._hand(reply, tail)
        if not reply.held:
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
            error: Exception = DecodeFailedError(code)
            if code == 1:
                error = ContextFullError(code)
            if not self._host.record_failure(error, reply.report):
                raise error
            self._end(reply)

    def _end(self, reply: BatchedReply) -> None:
        """Take ``reply`` out of the batch, keep what its sequence holds, and tell its reader."""
        if reply in self._placed:
            self._placed.remove(reply)
        if reply._remove_listener is not None:
            reply._remove_listener()
            reply._remove_listener = None
        # Proposals not kept when it ended (a Stop, the end of text, a stop string, its length).
        self._forget_checked(reply)
        reply.draft = []
        sequence = reply.sequence
        reply.report.paused = False
        if sequence is not None and not reply.reading_prompt:
            try:
                self._host.settle(sequence, reply.conversation, reply.generated_from)
            except Exception as exc:  # keeping a state must never cost the reply
                self._host.record_failure(exc, reply.report)
        reply.pending = None
        if reply.media is not None:
            reply.media.close()
            reply.media = None
        reply.report.compute_ended_at = time.perf_counter()
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


class ContextFullError(DecodeFailedError):
    """llama.cpp found no room in the KV cache for the step (``llama_decode`` returned 1)."""
