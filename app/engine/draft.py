"""Drafts: tokens proposed for the model to check in one call (speculative decoding).

Decoding one token reads all the weights once; checking several proposed tokens in one
``llama_decode`` reads them once for all of them. Every proposed token that the model would
have sampled anyway is kept, so the text is the plain loop's (:func:`~app.engine.generation.
decode_reply` samples each position in order with the reply's own sampler chain and keeps a
proposed token only when it equals the token sampled).

The proposals come from the context itself (*prompt lookup*): the tokens that followed the
latest earlier occurrence of the last few tokens. Replies that copy from their input (code
to edit, a document to quote, an earlier turn) are full of such runs; open-ended text has
few, and a proposal that is refused costs a larger call for one token. So a draft is made
only when it pays, by measurement on this machine (:class:`DraftCosts`: what a call of n
tokens takes here) and on this text (:class:`LookupDrafter`: how many proposed tokens were kept
lately). The proposals that are not worth checking are still compared with the tokens the
model then samples, at no cost to it, so a reply that begins to copy is seen to.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final, Protocol

NGRAMS: Final = (3, 2)
"""The lengths of the runs looked up, longest first (a single token matches too often to be
a good guess: llama-cpp-python's ``LlamaPromptLookupDecoding`` looks up 2, the reference
implementation up to 3)."""

MOST_DRAFTED: Final = 16
"""The most tokens checked in one call beside the one decoded."""

PRIOR_KEPT: Final = 1.0
PRIOR_REFUSED: Final = 1.0
"""Before any proposal was checked: as if one token was kept and one refused (a share kept
of one half)."""

FORGET: Final = 0.9
"""Each token compared weighs the earlier ones down by this factor: the shares kept follow the
text as it changes (code quoted, then an explanation)."""

PRIOR_COST_PER_TOKEN: Final = 0.25
"""Until a call of n tokens is measured, each token more than the largest size measured below
it is taken to cost a quarter of a one-token call (hopeful: the first drafts of a size are
what measures it)."""

GAIN_NEEDED: Final = 1.1
"""A draft is checked when it is expected to give this many times the tokens per second of a
call of one: a bet that barely pays on average loses as often as it wins."""

SMOOTHING: Final = 0.2
"""The weight of the newest measurement of a call's time."""


class DraftCosts:
    """What a call of n tokens takes on this machine, this model and this context, measured.

    The engine keeps one for its context and gives it every decode it times. A size never
    measured is estimated hopefully: the largest measured size below it, and
    :data:`PRIOR_COST_PER_TOKEN` of a one-token call for each token more. So a size that
    might pay is tried, and from then on its own time counts (on a CPU the second token of a
    call costs most and the later ones less; on a GPU a few more tokens cost about nothing:
    no straight line through two sizes fits both).

    A size's first call does not count: it can carry a cost paid once. A GPU builds the
    pipelines for a shape it has not computed before on first use (through Vulkan on an H200,
    a 2-token call first took seconds), and a size measured that slow would never be drafted
    again, so never measured again: drafts stayed off for the whole context.
    """

    def __init__(self) -> None:
        self._seconds: dict[int, float] = {}
        self._first_seen: set[int] = set()

    def record(self, tokens: int, seconds: float) -> None:
        """A call of ``tokens`` tokens took ``seconds`` (a size's first call is not counted)."""
        if seconds <= 0 or tokens <= 0:
            return
        if tokens not in self._first_seen:
            self._first_seen.add(tokens)
            return
        known = self._seconds.get(tokens)
        self._seconds[tokens] = seconds if known is None else known + SMOOTHING * (seconds - known)

    def seconds(self, tokens: int) -> float:
        """The time a call of ``tokens`` tokens takes (NaN until a smaller call was measured).

        The hopeful estimate's unit is a call of one token, or, where only the batch's
        larger calls were measured, the smallest of them shared by its tokens.
        """
        known = self._seconds
        if tokens in known:
            return known[tokens]
        below = max((n for n in known if n < tokens), default=0)
        if not below:
            return math.nan
        smallest = min(known)
        one = known[smallest] / smallest
        return known[below] + PRIOR_COST_PER_TOKEN * one * (tokens - below)


class PromptLookup:
    """Proposes the tokens that followed the latest earlier occurrence of the last few.

    An index per run length maps each run to where the tokens after its latest occurrence
    begin. A run is indexed once the token after it is known, so the run at the very end is
    looked up among the earlier ones only. Adding a token and looking up cost a few dict
    operations, whatever the context's length.

    Args:
        tokens: the context so far (the prompt); the index is built over it.
    """

    def __init__(self, tokens: Sequence[int]) -> None:
        self.tokens: list[int] = []
        self._after: dict[int, dict[tuple[int, ...], int]] = {n: {} for n in NGRAMS}
        for token in tokens:
            self.append(token)

    def append(self, token: int) -> None:
        """The context grew by ``token``."""
        tokens = self.tokens
        end = len(tokens)
        tokens.append(token)
        for n, after in self._after.items():
            if end >= n:
                after[tuple(tokens[end - n : end])] = end

    def propose(self, most: int) -> list[int]:
        """Up to ``most`` tokens that followed the context's last run before; [] if none."""
        tokens = self.tokens
        for n, after in self._after.items():
            if len(tokens) < n:
                continue
            start = after.get(tuple(tokens[-n:]))
            if start is not None:
                found = tokens[start : start + most]
                # A picture's positions hold negative placeholders, never a token to propose.
                for i, token in enumerate(found):
                    if token < 0:
                        return found[:i]
                return found
        return []


class _Share:
    """How often proposed tokens of one kind were kept, lately (counts that fade)."""

    def __init__(self) -> None:
        self.kept = PRIOR_KEPT
        self.refused = PRIOR_REFUSED

    @property
    def value(self) -> float:
        return self.kept / (self.kept + self.refused)

    def count(self, kept: bool) -> None:
        self.kept = FORGET * self.kept + kept
        self.refused = FORGET * self.refused + (not kept)


class Drafter(Protocol):
    """One reply's drafts, as the decode loops ask for them.

    Every token sampled goes through :meth:`saw`, in order; :meth:`draft` then says what to
    check in the next call beside the token to decode (none: decode it alone).
    """

    costs: DraftCosts
    """The engine's measured call times (the loops record each call's)."""

    def saw(self, token: int) -> bool:
        """``token`` was sampled next: True if it is the next proposed one (kept)."""
        ...

    def draft(self, most: int, beside: int = 0) -> list[int]:
        """The tokens to check beside the next one decoded (at most ``most``); [] for none."""
        ...


class LookupDrafter:
    """One reply's drafts from its context: what to propose, and whether checking it now pays.

    Every token sampled goes through :meth:`saw`, in order; :meth:`draft` then says what to
    check in the next call beside the token to decode (none: decode it alone). The tokens
    proposed and not checked are compared with the next ones sampled all the same, so what
    is kept is known whether drafts are checked or not.

    Two shares are kept apart: of first guesses (a proposal's first token, the reply not
    copying just then), and of tokens after a kept one. A reply that copies keeps most of the
    second kind, and a run once begun goes on; a first guess is often wrong.

    Args:
        context: the reply's prompt tokens.
        costs: the engine's measured call times.
    """

    def __init__(self, context: Sequence[int], costs: DraftCosts) -> None:
        self.lookup = PromptLookup(context)
        self.costs = costs
        self.first = _Share()
        """Proposals' first tokens, outside a run of kept ones."""
        self.after = _Share()
        """Tokens right after a kept proposed one."""
        self._expected: list[int] = []
        self._next = 0
        self._copying = False  # the last token compared was kept

    def saw(self, token: int) -> bool:
        """``token`` was sampled next: True if it is the next proposed one (kept)."""
        kept = False
        if self._next < len(self._expected):
            kept = token == self._expected[self._next]
            (self.after if self._copying else self.first).count(kept)
            self._copying = kept
            self._next += 1
            if not kept:
                self._expected, self._next = [], 0
        self.lookup.append(token)
        return kept

    def draft(self, most: int, beside: int = 0) -> list[int]:
        """The tokens to check beside the next one decoded (at most ``most``); [] for none.

        Called after :meth:`saw` of the token about to be decoded. A proposal is looked up
        when none is pending; it is checked when the expected tokens per second with it beat
        those of a call without it, else only compared with what comes.

        Args:
            most: the most tokens to propose (the reply's length limit and room).
            beside: the other replies' tokens in the same call (the batch's, one each): the
                draft's rows slow their step too, so what pays is counted over all of them.
        """
        if self._next < len(self._expected):  # a proposal still being compared with what comes
            return []
        proposal = self.lookup.propose(min(most, MOST_DRAFTED))
        self._expected, self._next = proposal, 0
        if not proposal:
            return []
        size = self._worth(len(proposal), beside)
        if not size:
            return []
        self._expected = proposal[:size]
        return list(self._expected)

    def _worth(self, available: int, beside: int = 0) -> int:
        """How many proposed tokens to check for the most tokens per second (0: none).

        The tokens per second of the whole call: the ``beside`` other replies' one token
        each, this reply's token and the proposed ones expected to be kept. (Other replies'
        own drafts in the same call are not foreseen: each reply decides as if it drafted
        alone, and the measured call times correct the next decisions.)
        """
        plain = self.costs.seconds(1 + beside)
        if math.isnan(plain):
            return 0  # nothing measured yet: the first token is decoded alone
        kept_first = (self.after if self._copying else self.first).value
        kept_next = self.after.value
        best, best_rate = 0, GAIN_NEEDED * (1 + beside) / plain
        expected = 0.0  # tokens kept, expected, among the first k proposed
        all_kept = kept_first
        for k in range(1, available + 1):
            expected += all_kept
            rate = (1 + beside + expected) / self.costs.seconds(1 + beside + k)
            if rate > best_rate:
                best, best_rate = k, rate
            all_kept *= kept_next
        return best
