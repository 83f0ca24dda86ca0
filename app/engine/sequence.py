"""A sequence of the KV cache, with the exact token ids it holds, and prompt processing.

llama-cpp-python's ``Llama`` keeps its own count of evaluated tokens and does not update it
when a ``llama_decode`` is aborted, although llama.cpp keeps the micro-batches it finished.
Floodgate's engine therefore keeps its own list, in step with llama.cpp after every call:
after an abort or a failure it asks llama.cpp where the sequence ends
(``llama_memory_seq_pos_max``) and keeps exactly that much.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import llama_cpp

from app.engine.backend import GenerationReport
from app.engine.generation import DECODE_ABORTED, put_token
from app.engine.prompt_cache import write_sequence
from app.trace import TRACE

MIN_CHUNK = 8
"""The smallest prompt chunk: below this, llama_decode's fixed cost per call starts to show."""

FIRST_CHUNK = 16
"""The first chunk's size while the prompt processing rate is not yet known."""

QUICKEST_SHARE = 1.5
"""A chunk may take this many times the quickest call seen, when that exceeds the target."""


class ChunkSizer:
    """Sizes prompt chunks so that each takes about ``seconds``, from what the last ones took.

    A call's time is a fixed part and a part per token. On a CPU the fixed part is small
    and a chunk's time follows its tokens. On a GPU the fixed part (launches, reading the
    weights once) can be most of it: a few tokens cost about what one does, and on lavapipe
    small micro-batches take a slower path. The sizer fits the two parts to the quickest call
    and the last one (while it knows one size only, it takes the time per token as fixed)
    and asks for what the budget allows, never more than twice the last chunk (one noisy
    chunk makes no wild jump). The budget is at least one and a half times the fixed part:
    Stop then waits at most that, and the prompt goes at a third of the rate of large chunks
    or better.

    Args:
        seconds: the time a chunk should take.
        n_batch: the largest chunk.
        rate: the last prompt rate measured (tokens/s; 0: unknown), for the first chunk.
        smallest: the smallest chunk it gives (smaller beside decoding replies,
            :mod:`app.engine.batch`).
        first: the first chunk's size when ``rate`` is unknown.

    Attributes:
        ceiling: the most a chunk may take whatever the floor (beside decoding replies,
            their step's time: their gap between tokens at most doubles).
    """

    def __init__(
        self,
        seconds: float,
        n_batch: int,
        rate: float = 0.0,
        *,
        smallest: int = MIN_CHUNK,
        first: int = FIRST_CHUNK,
    ) -> None:
        self.seconds = seconds
        self.ceiling = math.inf
        self.n_batch = n_batch
        self.fastest = math.inf
        """The quickest call seen: at least the fixed part of a call."""
        self._fastest_tokens = 0
        self.fixed = math.inf
        """The fixed part of a call, fitted (inf: one size seen, the quickest call stands in)."""
        self.smallest = smallest
        if rate:
            first = int(rate * seconds)
        self.size = max(smallest, min(n_batch, first))

    @property
    def budget(self) -> float:
        """The time a chunk may take: the target, or the floor over the fixed part if more."""
        floor = 0.0
        if self.fastest != math.inf:
            floor = QUICKEST_SHARE * min(self.fixed, self.fastest)
        return min(self.ceiling, max(self.seconds, floor))

    def record(self, tokens: int, elapsed: float) -> None:
        """A chunk of ``tokens`` took ``elapsed`` seconds: size the next one."""
        if elapsed <= 0 or tokens <= 0:
            return
        if elapsed < self.fastest:
            self.fastest, self._fastest_tokens = elapsed, tokens
        if tokens != self._fastest_tokens:
            slope = (elapsed - self.fastest) / (tokens - self._fastest_tokens)
            if slope > 0:
                self.fixed = max(0.0, min(self.fastest, elapsed - slope * tokens))
                wanted = int((self.budget - self.fixed) / slope + 1e-9)  # (not 63.999… for 64)
                self._resize(min(wanted, 2 * max(tokens, self.smallest)))
                return
        # One size known: as if all of it were per token, and one more if there is room
        # (a call that is mostly its fixed part would otherwise never be seen to grow).
        linear = tokens * self.budget / elapsed
        self._resize(min(math.ceil(linear) if linear > tokens else int(linear), 2 * tokens))

    def _resize(self, wanted: int) -> None:
        self.size = max(self.smallest, min(self.n_batch, wanted))


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading token ids ``a`` and ``b`` share (slices compare in C)."""
    if type(a) is not type(b):  # a list never equals a tuple
        a, b = list(a), list(b)
    high = min(len(a), len(b))
    if a[:high] == b[:high]:
        return high
    low = 0
    while low < high:  # a[:low] == b[:low], a[:high] != b[:high]
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


class KvSequence:
    """One sequence of a llama.cpp context: its token ids, what they cost, how to add more.

    A context opened for several replies side by side (:mod:`app.engine.batch`) holds one
    sequence per place in the batch, each with its own positions in the KV cache; a context
    for one reply at a time holds sequence 0 alone.

    Attributes:
        tokens: the token ids at positions 0..n-1 of the sequence, exactly.
        seconds: what computing them cost (prompt processing time, including that of a
            restored state's prefix), which the prompt cache weighs.
        conversation: the conversation they belong to (None: none yet).
        rate: the last measured prompt processing rate, tokens/s (0 until measured).
        shifted: the positions were shifted since the sequence was last empty (the kept
            tokens were computed with turns that are no longer there: close to, but not
            exactly, what processing them afresh gives).
        spans: for a model whose positions are M-RoPE (Qwen-VL's, Qwen 3.5's), beside its
            projector: the positions each picture chunk takes, by its placeholder id
            (:attr:`~app.engine.projector.Projector.spans`). None: each token id is one
            position, the one after the last (every other model).

    Under M-RoPE, :attr:`tokens` still has an id for each embedding of a picture (the KV
    cache has a cell for each), fewer positions: :meth:`position` and :meth:`held` go
    between the two (:class:`PicturePositions`).
    """

    def __init__(
        self, ctx: Any, n_batch: int, *, synchronize: bool = False, seq_id: int = 0
    ) -> None:
        self._ctx = ctx
        self.seq_id = seq_id
        # The context's only sequence is emptied with the whole memory, as before there
        # were several; one of several must leave the others' positions alone.
        self._alone = int(llama_cpp.llama_n_seq_max(ctx)) == 1
        # Wait for the device after each chunk (a GPU's llama_decode returns before it is
        # done): each chunk's time is then its device time, which sizes the next.
        self._synchronize = synchronize
        self._memory = llama_cpp.llama_get_memory(ctx)
        self._n_batch = n_batch
        self.tokens: list[int] = []
        self.seconds = 0.0
        self.conversation: str | None = None
        self.rate = 0.0
        self.shifted = False
        self.spans: Mapping[int, int] | None = None
        self._pictures = PicturePositions()
        self._batch: Any = None  # explicit positions (M-RoPE), made on first use

    def position(self, index: int) -> int:
        """Where the token id at ``index`` of :attr:`tokens` goes in llama.cpp's positions.

        ``len(tokens)``: where the next one goes.
        """
        if self.spans is None:
            return index
        return self._pictures.position(self.tokens, self.spans, index)

    def held(self) -> int:
        """How many of :attr:`tokens` llama.cpp holds, read from its last position."""
        last = int(llama_cpp.llama_memory_seq_pos_max(self._memory, self.seq_id))
        if self.spans is None:
            return last + 1
        return self._pictures.count(self.tokens, self.spans, last)

    def in_step(self) -> bool:
        """Whether llama.cpp holds exactly as many positions as :attr:`tokens` says."""
        return self.held() == len(self.tokens)

    def clear(self) -> None:
        """Empty the sequence."""
        self._empty()
        self.tokens = []
        self.seconds = 0.0
        self.shifted = False

    def discard_uncounted(self) -> None:
        """Drop whatever llama.cpp holds past :attr:`tokens` (a step that did not go through)."""
        llama_cpp.llama_memory_seq_rm(
            self._memory, self.seq_id, self.position(len(self.tokens)), -1
        )
        if not self.in_step():
            self.clear()

    def _empty(self) -> None:
        if self._alone:
            llama_cpp.llama_memory_clear(self._memory, True)
        else:
            llama_cpp.llama_memory_seq_rm(self._memory, self.seq_id, -1, -1)

    def trim(self, n: int) -> None:
        """Keep the first ``n`` tokens only."""
        if n >= len(self.tokens):
            return
        if self.spans is not None:
            n = self._pictures.outside(self.tokens, self.spans, n)
        position = self.position(n)
        if n <= 0:
            self.clear()
            return
        if not llama_cpp.llama_memory_seq_rm(self._memory, self.seq_id, position, -1):
            self.clear()  # this memory cannot drop a partial sequence (recurrent models)
            return
        self.seconds *= n / len(self.tokens)
        del self.tokens[n:]
        self._pictures.forget()

    def restore(self, tokens: Sequence[int], keep: int, seconds: float, state: bytes) -> bool:
        """Replace the sequence by a saved state holding ``tokens``, keeping its first ``keep``.

        Args:
            tokens: every token id the state holds.
            keep: how many of them to keep (the prefix the prompt shares with them).
            seconds: what processing those ``keep`` tokens would cost.
            state: the sequence state (:func:`~app.engine.prompt_cache.read_sequence`).

        Returns:
            False if llama.cpp refused the state (the sequence is then empty).
        """
        self._empty()
        self.tokens = list(tokens)
        self.seconds = 0.0
        self.shifted = False
        if not write_sequence(self._ctx, state, self.seq_id) or not self.in_step():
            self.clear()
            return False
        self.trim(keep)
        self.seconds = seconds
        return True

    def shift_for(self, prompt: Sequence[int], minimum: int = 32) -> int:
        """Reuse the sequence for a prompt that lost a middle range of it, by shifting.

        When the oldest turns are left out of a conversation (after the system prompt), the
        prompt is the held tokens with one range removed, then something new. Where the
        memory allows (``llama_memory_can_shift``: not for recurrent or sliding-window
        models), that range is removed and the positions after it are moved down, instead of
        processing the rest again.

        Returns:
            How many leading prompt tokens the sequence now holds (0 if it was not shifted).
        """
        held = self.tokens
        start = common_prefix(held, prompt)
        if start >= len(held) or start >= len(prompt):
            return 0
        if not llama_cpp.llama_memory_can_shift(self._memory):
            return 0
        # Where does the prompt pick up the held tokens again? Try each place that starts
        # with the prompt's next token; keep the one that matches the longest run.
        best_at, best_run = 0, 0
        first = prompt[start]
        for at in range(start + 1, len(held)):
            if held[at] != first:
                continue
            run = common_prefix(held[at:], prompt[start:])
            if run > best_run:
                best_at, best_run = at, run
        if best_run < minimum:
            return 0
        end = best_at + best_run  # held[best_at:end] == prompt[start:start + best_run]
        gap = best_at - start
        memory, seq = self._memory, self.seq_id
        if not (
            llama_cpp.llama_memory_seq_rm(memory, seq, end, -1)
            and llama_cpp.llama_memory_seq_rm(memory, seq, start, best_at)
        ):
            self.clear()
            return 0
        llama_cpp.llama_memory_seq_add(memory, seq, best_at, end, -gap)
        kept = start + best_run
        self.seconds *= kept / len(held)
        self.tokens = list(prompt[:kept])
        self.shifted = True
        if not self.in_step():
            self.clear()
            return 0
        return kept

    def prefill(
        self,
        prompt: Sequence[int],
        report: GenerationReport,
        chunk_seconds: float,
        pictures: Callable[[int], tuple[int, int]] | None = None,
    ) -> int:
        """Process the prompt's tokens after those already held, in chunks with progress.

        For a context that holds this sequence alone (sequence 0); several sequences side by
        side are fed by :class:`~app.engine.batch.BatchDecoder`.

        The sequence must hold a proper prefix of ``prompt`` (so the last prompt token is
        processed here and its logits are ready for sampling). After each chunk the report's
        ``prefill_done`` is updated. Chunks are sized from the measured rate so that each
        takes about ``chunk_seconds``; 0 processes ``n_batch`` tokens per call, as
        llama-cpp-python does.

        A picture's positions hold negative placeholder ids (:mod:`app.engine.projector`):
        ``pictures(position)`` puts the picture starting there into the KV cache and returns
        llama_decode's code and how many positions it filled. A picture goes in whole or
        not at all: one stopped midway is taken out again.

        Returns:
            ``llama_decode``'s code: 0 when the prompt was processed; otherwise what ended it
            (2: aborted by Stop). Whatever finished before that stays held, exactly.
        """
        n_batch = self._n_batch
        total = len(prompt)
        done = len(self.tokens)
        sizer = ChunkSizer(chunk_seconds, n_batch, self.rate) if chunk_seconds > 0 else None
        starts = _picture_starts(prompt, done) if pictures is not None else []
        while done < total:
            if starts and starts[0] == done and pictures is not None:
                starts.pop(0)
                code = self._put_picture(prompt, report, pictures)
            else:
                end = starts[0] if starts else total
                n = _chunk_length(sizer.size if sizer is not None else n_batch, end - done, n_batch)
                code = self._put_chunk(prompt[done : done + n], report, sizer)
            if code != 0:
                return code
            done = len(self.tokens)
        return 0

    def _put_picture(
        self,
        prompt: Sequence[int],
        report: GenerationReport,
        pictures: Callable[[int], tuple[int, int]],
    ) -> int:
        """Put the picture that starts after the held tokens in, whole; llama_decode's code."""
        done = len(self.tokens)
        code, n = pictures(done)
        if code != 0:
            llama_cpp.llama_memory_seq_rm(self._memory, self.seq_id, self.position(done), -1)
            report.prefill_done = len(self.tokens)
            return code
        self.tokens.extend(prompt[done : done + n])
        report.prefill_done = done + n
        return 0

    def _put_chunk(
        self, part: Sequence[int], report: GenerationReport, sizer: ChunkSizer | None
    ) -> int:
        """Process the prompt tokens ``part`` after the held ones in one call; its code."""
        done = len(self.tokens)
        n = len(part)
        batch = self._batch_of(part, done)
        decode = llama_cpp.llama_decode
        started = time.perf_counter()
        if TRACE.recording:
            with TRACE.span("prefill chunk", cat="engine", tokens=n, at=done):
                code = decode(self._ctx, batch)
                if self._synchronize:
                    llama_cpp.llama_synchronize(self._ctx)
        else:
            code = decode(self._ctx, batch)
            if self._synchronize:
                llama_cpp.llama_synchronize(self._ctx)
        elapsed = time.perf_counter() - started
        if code != 0:
            if TRACE.recording:
                TRACE.instant(
                    "abort seen" if code == DECODE_ABORTED else "decode failed", cat="engine"
                )
            self._resync(part, done, elapsed)
            report.prefill_done = len(self.tokens)
            return int(code)
        self.tokens.extend(part)
        self.seconds += elapsed
        report.prefill_done = done + n
        if elapsed > 0:
            # A running estimate, weighted to the newest chunk: the rate falls as the
            # prompt grows (attention over more positions).
            measured = n / elapsed
            self.rate = measured if not self.rate else 0.5 * (self.rate + measured)
        if sizer is not None:
            sizer.record(n, elapsed)
        return 0

    def _batch_of(self, part: Sequence[int], done: int) -> Any:
        """A batch of ``part`` after the ``done`` tokens held (valid until the next call).

        llama.cpp puts a batch without positions after the last one it holds, which is one
        too few after an M-RoPE picture: there the positions are given.
        """
        n = len(part)
        if self.spans is None:
            # The batch points into this array: it must live until llama_decode returns.
            self._ids = (llama_cpp.llama_token * n)(*part)
            return llama_cpp.llama_batch_get_one(self._ids, n)
        if self._batch is None:
            self._batch = llama_cpp.llama_batch_init(self._n_batch, 0, 1)
        batch, at = self._batch, self.position(done)
        for i, token in enumerate(part):
            put_token(batch, i, token, at + i, self.seq_id, i == n - 1)
        batch.n_tokens = n
        return batch

    def close(self) -> None:
        """Free what the sequence allocated (its batch of given positions)."""
        if self._batch is not None:
            llama_cpp.llama_batch_free(self._batch)
            self._batch = None

    def _resync(self, part: Sequence[int], done: int, elapsed: float) -> None:
        """After a failed or aborted call of ``part`` at ``done``: keep what llama.cpp kept."""
        end = self.held()
        n = len(part)
        if done <= end <= done + n:
            kept = end - done
            self.tokens.extend(part[:kept])
            self.seconds += elapsed * kept / n
        else:  # llama.cpp holds something else than expected: start clean
            self.clear()


class PicturePositions:
    """Between a sequence's token ids and llama.cpp's positions, for M-RoPE pictures.

    A picture chunk under M-RoPE puts all of its embeddings at its first position (each
    also has a row and a column) and moves the next position on by the larger of its grid's
    columns and rows, fewer than its embeddings. The chunks are found by their placeholder
    ids (``spans``: how many positions each takes), each id scanned once: the ids only ever
    grow at their end between the sequence's own cuts and replacements (which start a new
    scan).
    """

    def __init__(self) -> None:
        self._tokens: list[int] | None = None
        self._scanned = 0
        self._runs: list[tuple[int, int, int]] = []

    def position(self, tokens: list[int], spans: Mapping[int, int], index: int) -> int:
        """The position of ``tokens[index]`` (inside a picture chunk: its first)."""
        shrink = 0
        for start, length, n_pos in self._runs_of(tokens, spans):
            if start >= index:
                break
            if start + length > index:
                return start - shrink
            shrink += length - n_pos
        return index - shrink

    def count(self, tokens: list[int], spans: Mapping[int, int], last: int) -> int:
        """How many of ``tokens`` are held when the last position held is ``last``."""
        shrink = 0
        for start, length, n_pos in self._runs_of(tokens, spans):
            first = start - shrink
            if last < first:
                break
            if last < first + n_pos:  # the chunk's cells, all at its first position
                return start + length
            shrink += length - n_pos
        return last + 1 + shrink

    def outside(self, tokens: list[int], spans: Mapping[int, int], n: int) -> int:
        """``n``, or the start of the picture chunk it falls inside (kept whole)."""
        for start, length, _n_pos in self._runs_of(tokens, spans):
            if start < n < start + length:
                return start
        return n

    def _runs_of(self, tokens: list[int], spans: Mapping[int, int]) -> list[tuple[int, int, int]]:
        """Each picture chunk's (start, embeddings, positions), in order."""
        if tokens is not self._tokens or len(tokens) < self._scanned:
            self._tokens, self._scanned, self._runs = tokens, 0, []
        runs = self._runs
        for i in range(self._scanned, len(tokens)):
            token = tokens[i]
            if token >= 0 or token not in spans:
                continue
            if runs and runs[-1][0] + runs[-1][1] == i and tokens[i - 1] == token:
                start, length, n_pos = runs[-1]
                runs[-1] = (start, length + 1, n_pos)
            else:
                runs.append((i, 1, spans[token]))
        self._scanned = len(tokens)
        return runs

    def forget(self) -> None:
        """Scan again from the start (the ids were cut)."""
        self._tokens = None


def whole_pictures(sequence: KvSequence, prompt: Sequence[int], kept: int) -> int:
    """Trim ``sequence`` so that it does not end inside a picture; returns what it holds.

    A picture goes into the KV cache whole (some models attend over it both ways), so a
    prefix that ends inside one is cut back to where it starts.
    """
    if 0 < kept < len(prompt) and prompt[kept] < 0 and prompt[kept - 1] == prompt[kept]:
        start = kept
        while start > 0 and prompt[start - 1] == prompt[kept]:
            start -= 1
        sequence.trim(start)
        return len(sequence.tokens)
    return kept


def next_picture(prompt: Sequence[int], start: int) -> int:
    """Where the next picture begins in ``prompt`` at or after ``start`` (its end: none)."""
    for i in range(start, len(prompt)):
        if prompt[i] < 0:
            return i
    return len(prompt)


def _picture_starts(prompt: Sequence[int], start: int) -> list[int]:
    """Where pictures begin in ``prompt`` from ``start`` on (runs of one negative id)."""
    return [
        i
        for i in range(start, len(prompt))
        if prompt[i] < 0 and (i == start or prompt[i - 1] != prompt[i])
    ]


def _chunk_length(chunk: int, left: int, n_batch: int) -> int:
    """How many of the ``left`` prompt tokens the next chunk takes: about ``chunk``.

    At least two tokens when two are left, and never one token left for a chunk of its own:
    llama.cpp computes a token alone slightly differently from the same token within a batch
    (its matrix-vector path), which would make the reply differ from processing the prompt
    whole.
    """
    n = max(2, min(chunk, left))
    if left - n == 1:
        n += 1 if n < n_batch else -1
    return min(n, left)
