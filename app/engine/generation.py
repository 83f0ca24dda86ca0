"""Floodgate's own decode loop over llama.cpp's C API: sampler chain, text, stop strings.

llama-cpp-python's high-level stream runs a good deal of Python per token (a new sampler per
reply, detokenizing the whole reply again, chunk dictionaries). Here each token costs one
``llama_decode`` and one ``llama_sampler_sample`` (both C, both without the GIL, unless a
grammar or penalties that raise logits need :mod:`app.engine.penalties`' callback), plus a
dictionary lookup for the token's bytes, an incremental UTF-8 decode and, when the template has
stop strings, a short check of the text's tail.
"""

from __future__ import annotations

import codecs
import ctypes
import time
from collections.abc import Callable, Generator, Sequence
from typing import Any

import llama_cpp

from app.engine.backend import GenerationReport, GenerationSettings
from app.engine.draft import MOST_DRAFTED, Drafter
from app.engine.penalties import Penalties, is_neutral, only_lower
from app.engine.stop import StopSignal
from app.trace import TRACE

PENALTY_LAST_N = 64
"""Tokens the repeat penalty looks back over: llama-cpp-python's ``last_n_tokens_size``."""

DECODE_ABORTED = 2
"""What ``llama_decode`` returns when the abort callback ended it."""


class SamplerChain:
    """A llama.cpp sampler chain built from :class:`GenerationSettings`.

    The chain is the one llama-cpp-python builds for ``create_chat_completion`` (so greedy and
    seeded replies are the same as its): repeat, frequency and presence penalties over the
    last 64 generated tokens, a grammar when the reply must follow one, then greedy at
    temperature 0, otherwise top k, top p, min p, temperature and a seeded distribution
    sampler. (llama-cpp-python also adds a typical-p sampler at 1.0, which does nothing.)
    All are llama.cpp's own. The penalties are applied where they cost least for the same
    candidates: after a top-k cut when one follows them (greedy counts as a cut to one), else
    by :class:`~app.engine.penalties.Penalties` over every candidate. The chain is rebuilt only when
    the settings change; each reply resets it, which empties the penalty's history and
    restarts the seeded generator, so a seed gives the same reply every time.
    """

    def __init__(self, vocab: Any = None) -> None:
        self._vocab = vocab
        self._n_vocab = int(llama_cpp.llama_vocab_n_tokens(vocab)) if vocab is not None else 0
        self._key: tuple[object, ...] | None = None
        self._chain: Any = None
        self._penalties: Penalties | None = None
        """The chain's penalties: kept while the chain lives (llama.cpp calls into it)."""

    def prepare(self, settings: GenerationSettings) -> Any:
        """The chain for ``settings``, reset for a new reply (a ``llama_sampler_p``)."""
        key = (
            settings.temperature,
            settings.top_k,
            settings.top_p,
            settings.min_p,
            settings.repeat_penalty,
            settings.seed,
            settings.frequency_penalty,
            settings.presence_penalty,
            settings.grammar,
        )
        if key != self._key or self._chain is None:
            self.close()
            self._chain = self._build(settings)
            self._key = key
        else:
            llama_cpp.llama_sampler_reset(self._chain)
        return self._chain

    def _build(self, settings: GenerationSettings) -> Any:
        chain = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
        add = llama_cpp.llama_sampler_chain_add
        penalties = (settings.repeat_penalty, settings.frequency_penalty, settings.presence_penalty)
        self._penalties = None
        cut = cut_before_penalties(settings)
        if is_neutral(*penalties):
            pass
        elif cut:
            # llama.cpp's penalties over the best candidates only, in C: no call into Python
            # per token, which takes the GIL the window's thread may be holding (the same
            # text decoded 0.7-1.9 % faster in the window this way on a 2-core VM).
            add(chain, llama_cpp.llama_sampler_init_top_k(cut))
            add(
                chain,
                llama_cpp.llama_sampler_init_penalties(self._n_vocab, PENALTY_LAST_N, *penalties),
            )
        else:
            # Penalties before a grammar, or over the whole distribution, or raising some
            # logits: over every candidate, as llama.cpp does, but found by id (not a lookup
            # per vocabulary entry), the same logits at a fraction of the cost.
            self._penalties = Penalties(PENALTY_LAST_N, *penalties)
            add(chain, self._penalties.sampler)
        if settings.grammar is not None:
            # After the penalties and before any cut, as llama-cpp-python orders it: the
            # grammar leaves only the tokens it allows, and the rest samples among them.
            grammar = llama_cpp.llama_sampler_init_grammar(
                self._vocab, settings.grammar.encode("utf-8"), b"root"
            )
            if not grammar:  # llama.cpp could not parse it (it logs why)
                llama_cpp.llama_sampler_free(chain)
                raise GrammarError("llama.cpp could not read the grammar")
            add(chain, grammar)
        if settings.temperature <= 0.0:
            add(chain, llama_cpp.llama_sampler_init_greedy())
        else:
            seed = llama_cpp.LLAMA_DEFAULT_SEED if settings.seed is None else settings.seed
            add(chain, llama_cpp.llama_sampler_init_top_k(settings.top_k))
            add(chain, llama_cpp.llama_sampler_init_top_p(settings.top_p, 1))
            add(chain, llama_cpp.llama_sampler_init_min_p(settings.min_p, 1))
            add(chain, llama_cpp.llama_sampler_init_temp(settings.temperature))
            add(chain, llama_cpp.llama_sampler_init_dist(seed & 0xFFFFFFFF))
        return chain

    def close(self) -> None:
        """Free the chain (and the samplers it owns)."""
        if self._chain is not None:
            llama_cpp.llama_sampler_free(self._chain)
            self._chain = None
            self._key = None
        self._penalties = None


def cut_before_penalties(settings: GenerationSettings) -> int:
    """How many of the best candidates the penalties need see for ``settings`` (0: all).

    Where only the best ``k`` candidates after the penalties are kept (a top k, or greedy's
    one) and the penalties only lower logits, they lower at most :data:`PENALTY_LAST_N` of
    them (the recent tokens, each counted once): the ``k`` kept are among the best
    ``k + PENALTY_LAST_N`` before them, and the penalties over those leave what they leave
    over the whole vocabulary. Not before a grammar (it may refuse all of those).
    """
    keep = 1 if settings.temperature <= 0.0 else settings.top_k
    penalties = (settings.repeat_penalty, settings.frequency_penalty, settings.presence_penalty)
    if settings.grammar is not None or keep <= 0 or not only_lower(*penalties):
        return 0
    return keep + PENALTY_LAST_N


class GrammarError(ValueError):
    """A grammar that llama.cpp's grammar sampler refused."""


class TokenPieces:
    """Each token's bytes as the reply shows them, asked of llama.cpp once per token id.

    Control tokens (``<|im_end|>``) read as nothing, as in llama-cpp-python's replies.
    """

    def __init__(self, vocab: Any) -> None:
        self._vocab = vocab
        self._buffer = ctypes.create_string_buffer(64)
        self.known: dict[int, bytes] = {}

    def __call__(self, token: int) -> bytes:
        """The bytes of ``token`` (cached: call ``known.get`` first on the hot path)."""
        size = len(self._buffer)
        n = llama_cpp.llama_token_to_piece(self._vocab, token, self._buffer, size, 0, False)
        if n < 0:  # a piece longer than the buffer: llama.cpp says how long
            self._buffer = ctypes.create_string_buffer(-n)
            n = llama_cpp.llama_token_to_piece(self._vocab, token, self._buffer, -n, 0, False)
        piece = self._buffer.raw[: max(n, 0)]
        self.known[token] = piece
        return piece


def new_text_decoder() -> codecs.IncrementalDecoder:
    """An incremental UTF-8 decoder: a character split across tokens waits for its last byte.

    Bytes that can never form a character are dropped (as llama-cpp-python does), so the
    reply never shows U+FFFD; a character cut by the end of the reply is dropped at the end.
    """
    return codecs.getincrementaldecoder("utf-8")("ignore")


class StopStrings:
    """Ends the reply at the first stop string, never showing any part of one.

    Text that could still be the beginning of a stop string is held back until the next
    piece tells; :meth:`flush` releases it when the reply ends another way.
    """

    def __init__(self, stops: Sequence[str]) -> None:
        self.stops = tuple(s for s in stops if s)
        self._firsts = frozenset(s[0] for s in self.stops)
        self._held = ""
        self.hit = False

    def feed(self, text: str) -> str:
        """The part of ``text`` (after what was held back) that is safe to show now."""
        if self.hit:
            return ""
        pending = self._held + text if self._held else text
        if not any(c in pending for c in self._firsts):
            self._held = ""
            return pending
        cut = -1
        for stop in self.stops:
            at = pending.find(stop)
            if at >= 0 and (cut < 0 or at < cut):
                cut = at
        if cut >= 0:
            self.hit = True
            self._held = ""
            return pending[:cut]
        keep = 0
        for stop in self.stops:
            for k in range(min(len(stop) - 1, len(pending)), keep, -1):
                if pending.endswith(stop[:k]):
                    keep = k
                    break
        if keep:
            self._held = pending[-keep:]
            return pending[:-keep]
        self._held = ""
        return pending

    def flush(self) -> str:
        """What was held back, once the reply ended without a stop string."""
        held, self._held = self._held, ""
        return held


class DecodeFailedError(Exception):
    """``llama_decode`` failed for another reason than Stop; ``code`` is what it returned."""

    def __init__(self, code: int) -> None:
        super().__init__(f"llama_decode returned {code}")
        self.code = code


def decode_reply(
    *,
    ctx: Any,
    vocab: Any,
    sampler: Any,
    pieces: TokenPieces,
    stops: StopStrings,
    kv_tokens: list[int],
    limit: int,
    room: int,
    stop: StopSignal,
    report: GenerationReport,
    drafter: Drafter | None = None,
    discard: Callable[[], None] | None = None,
    shrink: int = 0,
) -> Generator[str, None, None]:
    """Sample, show and decode tokens until end of generation, a stop string, Stop or ``limit``.

    ``limit`` is the reply's token budget; when it is reached in the middle of a character
    (a CJK character or an emoji split across tokens), up to three more tokens finish the
    character, as llama-cpp-python does, within ``room`` (the tokens left in the context).

    The prompt must have been processed, with logits for its last token. Each token that goes
    through ``llama_decode`` is appended to ``kv_tokens`` (the engine's record of the KV
    cache); the last sampled token is not decoded (nothing would read its logits).

    With a ``drafter`` (speculative decoding, :mod:`app.engine.draft`), a token may be
    decoded with proposed tokens after it in one call, logits for each: the next token is
    sampled from the first row, and while it equals the proposed one, the one after from the
    next row, each through the same checks as any token; the first that differs is decoded
    next, and the KV cache's positions of the proposed tokens not kept are dropped
    (``discard``: llama.cpp's positions past ``kv_tokens``). ``shrink``: how many fewer
    positions than ids ``kv_tokens`` takes (M-RoPE pictures: see
    :class:`~app.engine.sequence.KvSequence`), for the positions a draft's call gives.

    Sets ``report.finish`` (``"done"``, ``"length"``; a Stop leaves it as it was) and
    ``report.python_ms_per_token``: the wall time in this loop outside ``llama_decode`` and
    the sampler call, and outside the consumer's own time between pieces.

    It stays one function of more than 70 lines on purpose: each token's path runs in this one
    frame over names bound to locals, and splitting it would add Python calls per token, the
    cost this loop exists to avoid (its end and its tracing are helpers outside that path).

    Raises:
        DecodeFailedError: ``llama_decode`` failed other than by Stop.
    """
    # Locals: one attribute lookup less per use on the hot path.
    decode = llama_cpp.llama_decode
    sample = llama_cpp.llama_sampler_sample
    is_eog = llama_cpp.llama_vocab_is_eog
    perf = time.perf_counter
    known = pieces.known
    decoder = new_text_decoder()
    text_of: Callable[..., str] = decoder.decode
    filtering = bool(stops.stops)
    feed = stops.feed
    stopped = stop.is_set
    append = kv_tokens.append
    one = (llama_cpp.llama_token * 1)()
    batch = llama_cpp.llama_batch_get_one(one, 1)
    costs = drafter.costs if drafter is not None else None
    checked = _Checked(ctx)  # proposed tokens decoded in the last call, not yet sampled

    python = 0.0
    generated = 0
    row = -1  # the output row the next token is sampled from
    report.finish = "done"
    mark = perf()
    try:
        while True:
            native_start = perf()
            python += native_start - mark
            token = sample(sampler, ctx, row)
            mark = perf()
            if drafter is not None:
                drafter.saw(token)
            if is_eog(vocab, token):
                break
            generated += 1
            report.reply_tokens = generated  # read live: the server's panel, its tokens/s
            piece = known.get(token)
            if piece is None:
                piece = pieces(token)
            text = text_of(piece)
            if filtering and text:
                text = feed(text)
            if text:
                report.pieces += 1
                python += perf() - mark
                yield text
                mark = perf()
            if stops.hit:
                break
            if generated >= limit and (
                generated >= min(room, limit + 3) or not decoder.getstate()[0]
            ):
                report.finish = "length"
                break
            if stopped():
                return
            if checked.tokens:
                if token == checked.tokens[0]:
                    # Proposed, and decoded already in the last call: the next token's
                    # logits are in its row.
                    del checked.tokens[0]
                    append(token)
                    report.draft_kept += 1
                    row += 1
                    continue
                checked.tokens.clear()
                if discard is not None:
                    discard()
            draft = drafter.draft(min(limit, room) - generated) if drafter is not None else []
            native_start = perf()
            python += native_start - mark
            if draft:
                code = checked.decode(token, draft, len(kv_tokens) - shrink)
            else:
                one[0] = token
                code = decode(ctx, batch) if not TRACE.recording else _traced(ctx, batch)
            mark = perf()
            if code == DECODE_ABORTED and stopped():
                _trace_abort()
                return
            if code != 0:
                raise DecodeFailedError(code)
            append(token)
            if costs is not None:
                costs.record(1 + len(draft), mark - native_start)
            if draft:
                report.drafted += len(draft)
                checked.tokens = draft
                row = 0
            else:
                row = -1
        tail = held_back(decoder, stops)
        if tail:
            report.pieces += 1
            yield tail
    finally:
        _close_reply(checked, report, python, generated, discard if drafter is not None else None)


def _traced(ctx: Any, batch: Any) -> int:
    """One token's ``llama_decode`` while the tracer records (:mod:`app.trace`)."""
    with TRACE.span("decode token", cat="engine"):
        return int(llama_cpp.llama_decode(ctx, batch))


def _trace_abort() -> None:
    """The decode loop saw Stop's abort: a mark in the trace, if one is recorded."""
    if TRACE.recording:
        TRACE.instant("abort seen", cat="engine")


def _close_reply(
    checked: _Checked,
    report: GenerationReport,
    python: float,
    generated: int,
    discard: Callable[[], None] | None,
) -> None:
    """After the decode loop, however it ended: its books, and the KV of unkept proposals.

    ``discard`` is given when the reply drafted: proposed tokens decoded but not kept, if
    any, leave the KV cache.
    """
    checked.close()
    if generated:
        report.python_ms_per_token = python * 1000.0 / generated
    if discard is not None:
        discard()


def put_token(batch: Any, i: int, token: int, pos: int, seq_id: int, logits: bool) -> None:
    """Row ``i`` of a ``llama_batch``: ``token`` at ``pos`` of sequence ``seq_id``."""
    batch.token[i] = token
    batch.pos[i] = pos
    batch.n_seq_id[i] = 1
    batch.seq_id[i][0] = seq_id
    batch.logits[i] = logits


class _Checked:
    """The proposed tokens decoded in one call after a token (a ``llama_batch`` made once)."""

    def __init__(self, ctx: Any) -> None:
        self._ctx = ctx
        self._batch: Any = None
        self.tokens: list[int] = []

    def decode(self, token: int, draft: Sequence[int], position: int) -> int:
        """Decode ``token`` at ``position`` and ``draft`` after it, logits for each."""
        if self._batch is None:
            self._batch = llama_cpp.llama_batch_init(MOST_DRAFTED + 1, 0, 1)
        batch = self._batch
        for i, each in enumerate((token, *draft)):
            put_token(batch, i, each, position + i, 0, True)
        batch.n_tokens = 1 + len(draft)
        if TRACE.recording:
            with TRACE.span("decode with draft", cat="engine", drafted=len(draft)):
                return int(llama_cpp.llama_decode(self._ctx, batch))
        return int(llama_cpp.llama_decode(self._ctx, batch))

    def close(self) -> None:
        if self._batch is not None:
            llama_cpp.llama_batch_free(self._batch)
            self._batch = None


def held_back(decoder: codecs.IncrementalDecoder, stops: StopStrings) -> str:
    """What the reply shows once it ended by itself (called once, after its last token).

    Text held back for a possible stop string or for a character's remaining bytes is
    released; an unfinished character is dropped.
    """
    tail: str = decoder.decode(b"", True)
    if stops.stops:
        tail = stops.feed(tail) if tail else ""
        if not stops.hit:
            tail += stops.flush()
    return tail
