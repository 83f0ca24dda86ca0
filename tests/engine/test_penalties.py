"""The penalties sampler leaves exactly the logits llama.cpp's own penalties sampler leaves."""

from __future__ import annotations

import ctypes
import random
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import llama_cpp
import pytest

from app.engine import GenerationSettings
from app.engine.generation import PENALTY_LAST_N, SamplerChain, cut_before_penalties
from app.engine.penalties import Penalties, is_neutral

VOCAB = 5_000


@contextmanager
def samplers(repeat: float, frequency: float, presence: float) -> Iterator[tuple[Any, Any]]:
    """llama.cpp's penalties and ours, each alone in a chain (which frees it)."""
    ours = Penalties(PENALTY_LAST_N, repeat, frequency, presence)
    chains = []
    for sampler in (
        llama_cpp.llama_sampler_init_penalties(VOCAB, PENALTY_LAST_N, repeat, frequency, presence),
        ours.sampler,
    ):
        chain = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
        llama_cpp.llama_sampler_chain_add(chain, sampler)
        chains.append(chain)
    try:
        yield chains[0], chains[1]
    finally:
        for chain in chains:
            llama_cpp.llama_sampler_free(chain)


def candidates(rng: random.Random, order: list[int]) -> Any:
    """Candidates with random logits (some zero, negative zero, large), in the given id order."""
    entries = (llama_cpp.llama_token_data * len(order))()
    for i, token in enumerate(order):
        roll = rng.random()
        logit = 0.0 if roll < 0.01 else -0.0 if roll < 0.02 else rng.uniform(-30, 30)
        entries[i] = llama_cpp.llama_token_data(token, logit, 0.0)
    return entries


def applied(chain: Any, entries: Any) -> bytes:
    copy = type(entries).from_buffer_copy(entries)
    array = llama_cpp.llama_token_data_array(
        ctypes.cast(copy, llama_cpp.llama_token_data_p), len(copy), -1, False
    )
    llama_cpp.llama_sampler_apply(chain, ctypes.byref(array))
    assert array.sorted is False
    return bytes(copy)


@pytest.mark.parametrize(
    ("repeat", "frequency", "presence"),
    [(1.1, 0.0, 0.0), (1.3, 0.0, 0.0), (0.85, 0.0, 0.0), (1.1, 0.35, 0.6), (1.0, 0.2, 0.0)],
)
@pytest.mark.parametrize("shuffled", [False, True], ids=["in id order", "shuffled"])
def test_logits_are_bit_for_bit_llama_cpps(
    repeat: float, frequency: float, presence: float, shuffled: bool
) -> None:
    rng = random.Random(f"{repeat} {frequency} {presence} {shuffled}")
    order = list(range(VOCAB))
    if shuffled:  # not the order llama.cpp hands the first sampler: ours scans instead
        rng.shuffle(order)
    with samplers(repeat, frequency, presence) as (theirs, ours):
        for step in range(150):  # past the 64-token window: old tokens leave the counts
            entries = candidates(rng, order)
            assert applied(ours, entries) == applied(theirs, entries), step
            # Repeats are common in real replies: draw from a small set half of the time.
            token = rng.randrange(40) if rng.random() < 0.5 else rng.randrange(VOCAB)
            for chain in (theirs, ours):
                llama_cpp.llama_sampler_accept(chain, token)
            if step == 100:  # a new reply
                for chain in (theirs, ours):
                    llama_cpp.llama_sampler_reset(chain)


def test_penalties_change_the_recent_tokens_only() -> None:
    rng = random.Random(7)
    with samplers(1.5, 0.0, 0.0) as (_theirs, ours):
        for token in (3, 3, 9):
            llama_cpp.llama_sampler_accept(ours, token)
        entries = candidates(rng, list(range(VOCAB)))
        before = [entries[i].logit for i in range(VOCAB)]
        after = type(entries).from_buffer_copy(applied(ours, entries))
        changed = [i for i in range(VOCAB) if after[i].logit != before[i] and before[i] != 0]
        assert changed == [3, 9]


def test_neutral_values_add_no_sampler() -> None:
    assert is_neutral(1.0, 0.0, 0.0)
    assert not is_neutral(1.1, 0.0, 0.0)
    assert not is_neutral(1.0, 0.0, 0.1)
    chain = SamplerChain()
    try:
        neutral = GenerationSettings(temperature=0.0, repeat_penalty=1.0)
        assert llama_cpp.llama_sampler_chain_n(chain.prepare(neutral)) == 1  # greedy alone
        penalised = GenerationSettings(temperature=0.0, presence_penalty=0.5)
        # the cut before the penalties, the penalties, greedy
        assert llama_cpp.llama_sampler_chain_n(chain.prepare(penalised)) == 3
    finally:
        chain.close()


def reference_chain(settings: GenerationSettings) -> Any:
    """llama-cpp-python's order: llama.cpp's penalties over every candidate, then the rest."""
    add = llama_cpp.llama_sampler_chain_add
    chain = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
    add(
        chain,
        llama_cpp.llama_sampler_init_penalties(
            VOCAB,
            PENALTY_LAST_N,
            settings.repeat_penalty,
            settings.frequency_penalty,
            settings.presence_penalty,
        ),
    )
    if settings.temperature <= 0.0:
        add(chain, llama_cpp.llama_sampler_init_greedy())
        return chain
    add(chain, llama_cpp.llama_sampler_init_top_k(settings.top_k))
    add(chain, llama_cpp.llama_sampler_init_top_p(settings.top_p, 1))
    add(chain, llama_cpp.llama_sampler_init_min_p(settings.min_p, 1))
    add(chain, llama_cpp.llama_sampler_init_temp(settings.temperature))
    add(chain, llama_cpp.llama_sampler_init_dist(settings.seed or 0))
    return chain


def chosen(chain: Any, entries: Any) -> tuple[int, bytes]:
    """What ``chain`` leaves of ``entries``: the token it selects, and the candidates kept."""
    copy = type(entries).from_buffer_copy(entries)
    array = llama_cpp.llama_token_data_array(
        ctypes.cast(copy, llama_cpp.llama_token_data_p), len(copy), -1, False
    )
    llama_cpp.llama_sampler_apply(chain, ctypes.byref(array))
    kept = ctypes.string_at(array.data, array.size * ctypes.sizeof(llama_cpp.llama_token_data))
    return copy[array.selected].id, kept


@pytest.mark.parametrize(
    "settings",
    [
        GenerationSettings(temperature=0.0),
        GenerationSettings(temperature=0.0, repeat_penalty=1.5, presence_penalty=0.4),
        GenerationSettings(temperature=0.7, seed=5),
        GenerationSettings(temperature=1.0, top_k=5, repeat_penalty=1.3, seed=9),
        GenerationSettings(temperature=0.8, top_p=1.0, min_p=0.0, frequency_penalty=0.5, seed=1),
    ],
    ids=["greedy", "greedy, strong", "default", "top 5, strong", "frequency"],
)
def test_penalties_after_a_cut_leave_the_candidates_of_penalties_over_all(
    settings: GenerationSettings,
) -> None:
    # The chain cuts to the best top k + 64 before llama.cpp's penalties (in C, no call into
    # Python per token). Penalties that only lower logits lower at most the 64 recent tokens,
    # so what is left after the top k is what penalties over every candidate leave. The
    # recent tokens here are the best candidates, so the penalties reorder the top.
    rng = random.Random(str(settings))
    ours = SamplerChain()
    theirs = reference_chain(settings)
    try:
        chain = ours.prepare(settings)
        for step in range(120):
            entries = (llama_cpp.llama_token_data * VOCAB)()
            for token in range(VOCAB):
                high = token < 100
                logit = rng.uniform(5, 9) if high else rng.uniform(-20, 6)
                entries[token] = llama_cpp.llama_token_data(token, logit, 0.0)
            token, kept = chosen(chain, entries)
            their_token, their_kept = chosen(theirs, entries)
            assert token == their_token, step
            if settings.temperature > 0:  # greedy: the reference keeps every candidate
                assert kept == their_kept, step
            token = rng.randrange(100) if rng.random() < 0.8 else rng.randrange(VOCAB)
            for each in (chain, theirs):
                llama_cpp.llama_sampler_accept(each, token)
    finally:
        ours.close()
        llama_cpp.llama_sampler_free(theirs)


@pytest.mark.parametrize(
    "settings",
    [
        GenerationSettings(temperature=0.0, repeat_penalty=0.9),  # raises negative logits
        GenerationSettings(temperature=0.0, presence_penalty=-0.5),
        GenerationSettings(temperature=0.7, top_k=0),  # no cut after the penalties
        GenerationSettings(temperature=0.0, grammar='root ::= "yes"'),
    ],
    ids=["repeat under 1", "negative presence", "no top k", "grammar"],
)
def test_penalties_see_every_candidate_where_a_cut_would_change_what_they_leave(
    settings: GenerationSettings,
) -> None:
    assert cut_before_penalties(settings) == 0


def test_the_cut_keeps_room_for_every_recent_token_beside_those_kept() -> None:
    assert cut_before_penalties(GenerationSettings(temperature=0.0)) == 1 + PENALTY_LAST_N
    assert cut_before_penalties(GenerationSettings(top_k=40)) == 40 + PENALTY_LAST_N
