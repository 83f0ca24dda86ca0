"""Speculative decoding from the context itself: proposals, when they pay, and the same text.

The model tests use the real bundled model through llama.cpp, with flash attention and one
thread on both sides: that is where llama.cpp's CPU attention gives a token checked within a
call of several the same bits as the token decoded alone (measured: without flash attention,
or with two threads, logits up to 0.8 apart, so ``prompt_lookup`` is off by default, see
EngineOptions). Whether checking a draft pays depends on this machine's call times (measured
as the engine goes); to exercise the checking itself on every machine, the drafting engine's
gate is opened with call times that cost nothing more per token (as on a GPU), which only
decides *when* drafts are checked, never what is kept.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from app.engine import (
    ChatMessage,
    EngineOptions,
    GenerationReport,
    GenerationSettings,
    StopSignal,
    draft_model,
    generation,
)
from app.engine.batch import BatchDecoder, BatchedReply
from app.engine.draft import GAIN_NEEDED, DraftCosts, LookupDrafter, PromptLookup
from app.engine.draft_model import ModelDrafter
from app.engine.llama import LlamaBackend, open_llama
from app.engine.model_file import readable_name
from app.flow.session import ChatSession, ModelState
from app.store.settings import Settings
from tests.support.loop import Loop, run_until
from tests.support.model_files import copy_model

CODE = """def load(path, limit):
    rows = []
    with open(path) as handle:
        for line in handle:
            if not line.strip():
                continue
            name, value = line.split("=", 1)
            rows.append((name.strip(), int(value)))
            if len(rows) >= limit:
                break
    return rows
"""
TEXT = (
    "The lighthouse stood on the northern cliff. Its keeper, Mara, climbed the stairs every "
    "evening. The lamp burned oil until 1921, when electricity reached the island. Ships "
    "passing the cape relied on its light."
)
COPYING: dict[str, str] = {
    "code": f"Repeat this code exactly:\n\n{CODE}",
    "type hints": f"Add type hints to this function and show the whole code:\n\n{CODE}",
    "text": f"Copy this text word for word:\n\n{TEXT}",
    "quote": f"Quote the sentences that mention the keeper:\n\n{TEXT}",
}
OPEN: dict[str, str] = {
    "story": "Tell me a story about a dragon.",
    "rain": "Explain how rain forms.",
}
GREEDY = GenerationSettings(temperature=0.0, max_tokens=160)
SEEDED = GenerationSettings(temperature=0.8, seed=7, max_tokens=120)
WHOLE = EngineOptions(n_threads=1, cache_ram_mb=0, flash_attn=True, prefill_chunk_seconds=0)
"""Prompts in chunks of n_batch, not of a time: the same chunks on both sides whatever the
machine's load (a prompt cut elsewhere computes other last bits)."""


# --------------------------------------------------------------------- without the model


def test_lookup_proposes_what_followed_the_latest_earlier_run() -> None:
    lookup = PromptLookup([1, 2, 3, 4, 5, 9, 2, 3, 7, 8])
    assert lookup.propose(4) == []  # "7 8" never came before
    lookup.append(2)
    lookup.append(3)
    # "2 3" came twice before (then 4, then 7): the latest wins; the longest run first.
    assert lookup.propose(4) == [7, 8, 2, 3]
    lookup.append(4)
    assert lookup.propose(3) == [5, 9, 2]  # "2 3 4" matches its only occurrence
    assert lookup.propose(0) == []


def test_the_run_at_the_end_is_not_its_own_match() -> None:
    lookup = PromptLookup([5, 6, 7])
    assert lookup.propose(4) == []
    lookup.append(5)
    lookup.append(6)
    assert lookup.propose(4) == [7, 5, 6]  # the earlier "5 6", up to the end of the context


def test_call_times_never_measured_are_estimated_hopefully() -> None:
    costs = DraftCosts()
    assert math.isnan(costs.seconds(4))  # nothing measured: no draft is sized from nothing
    costs.record(1, 0.5)  # a size's first call, which may carry a cost paid once: not counted
    assert math.isnan(costs.seconds(1))
    costs.record(1, 0.010)
    assert costs.seconds(1) == 0.010
    assert costs.seconds(5) == pytest.approx(0.010 + 4 * 0.25 * 0.010)
    costs.record(3, 2.0)  # as a GPU building the pipelines of a new shape: not counted
    assert costs.seconds(3) == pytest.approx(0.010 + 2 * 0.25 * 0.010)
    costs.record(3, 0.030)
    assert costs.seconds(3) == 0.030
    assert costs.seconds(2) == pytest.approx(0.0125)  # from the largest below, not a line
    assert costs.seconds(9) == pytest.approx(0.030 + 6 * 0.0025)
    costs.record(3, 0.020)  # smoothed towards the newest
    assert 0.020 < costs.seconds(3) < 0.030


def _costs(seconds_of: Any, sizes: range = range(1, 18)) -> DraftCosts:
    costs = DraftCosts()
    for n in sizes:
        costs.record(n, seconds_of(n) * 100)  # a first call, not counted
        costs.record(n, seconds_of(n))
    return costs


def _replay(drafter: LookupDrafter, reply: list[int]) -> list[list[int]]:
    """The drafts a reply's tokens lead to, each token seen in order as the loop sees them."""
    drafts = []
    for token in reply:
        drafter.saw(token)
        drafts.append(drafter.draft(16))
    return drafts


def test_drafts_are_checked_when_a_call_of_many_costs_about_one() -> None:
    context = list(range(100, 160))
    flat = _costs(lambda n: 0.010 + 0.0001 * n)  # a GPU: the call's fixed part is all of it
    drafts = _replay(LookupDrafter(context, flat), context[10:40])
    assert sum(len(d) for d in drafts) >= 20
    # Each proposal is the context's run after the last tokens seen.
    for seen, draft in enumerate(drafts, start=11):
        if draft:
            assert draft == context[seen : seen + len(draft)]
    # Short while little is known of the text; as long as allowed once the reply copies.
    lengths = [len(d) for d in drafts if d]
    assert lengths[0] < 16
    assert lengths[-1] == 16


def test_drafts_are_not_checked_when_every_token_costs_a_call() -> None:
    context = list(range(100, 160))
    linear = _costs(lambda n: 0.010 * n)
    drafter = LookupDrafter(context, linear)
    assert not any(_replay(drafter, context[10:40]))
    # Proposals were still compared with what came: the shares kept know the reply copies.
    assert drafter.after.value > 0.9


def test_a_reply_that_stops_copying_stops_being_drafted() -> None:
    context = list(range(100, 160))
    concave = _costs(lambda n: 0.006 + (0.005 if n > 1 else 0) + 0.0025 * (n - 1))
    drafter = LookupDrafter(context, concave)
    copying = _replay(drafter, context[10:30])
    assert any(copying)
    # Then it writes something else: pairs of the context's tokens, each pair followed by
    # another than what followed it there (every proposal refused at its first token).
    other = [token for i in range(0, 56, 7) for token in (context[i], context[i + 1])]
    drafted = _replay(drafter, other)
    assert not any(drafted[-6:])
    assert drafter.first.value < 0.5


def test_a_draft_must_beat_a_call_of_one_by_the_margin() -> None:
    context = [1, 2, 3, 4] * 10
    # Two tokens in a call cost exactly what two calls do at the margin of worth: no draft.
    costs = _costs(lambda n: 0.010 * n / GAIN_NEEDED if n > 1 else 0.010, range(1, 3))
    drafter = LookupDrafter(context, costs)
    drafter.saw(1)
    drafter.saw(2)
    assert drafter.draft(1) == []


def test_call_times_measured_only_in_a_batch_are_a_start_for_hopes() -> None:
    costs = _costs(lambda n: 0.012, range(4, 5))  # steps of four replies, never a call of one
    assert math.isnan(costs.seconds(3))
    assert costs.seconds(6) == pytest.approx(0.012 + 2 * 0.25 * 0.012 / 4)


def test_beside_other_replies_a_draft_must_pay_for_their_slower_step() -> None:
    context = [1, 2, 3, 4] * 10
    costs = _costs(lambda n: 0.010 + 0.002 * n)  # each row adds a fifth of a call
    # Alone, a proposal kept half the time gives 1.5 tokens for 1.17 calls' time: checked.
    alone = LookupDrafter(context, costs)
    alone.saw(1)
    alone.saw(2)
    assert alone.draft(1) == [3]
    # Beside three replies, its row slows all four: 4.5 tokens for 1.125 steps' time, less
    # than the margin over 4 tokens a step.
    beside = LookupDrafter(context, costs)
    beside.saw(1)
    beside.saw(2)
    assert beside.draft(1, beside=3) == []


class GuessingModel:
    """A draft model that proposes the context's next tokens, taking ``seconds`` to do so."""

    def __init__(self, clock: list[float], seconds: float, guesses: list[int]) -> None:
        self.clock, self.seconds, self.guesses = clock, seconds, guesses

    def propose(self, seq_id: int, context: list[int], most: int) -> list[int]:
        self.clock[0] += self.seconds
        return self.guesses[len(context) : len(context) + min(most, 4)]


def _draft_model_run(seconds: float, costs: DraftCosts, tokens: int = 200) -> ModelDrafter:
    """A reply of ``tokens`` that the guesses always match, decoded through a ModelDrafter."""
    clock = [0.0]
    reply = list(range(1000, 1000 + tokens + 10))
    model = GuessingModel(clock, seconds, reply)
    drafter = ModelDrafter([], model, 0, costs, clock=lambda: clock[0])  # type: ignore[arg-type]
    drafts = 0
    i = 0
    while i < tokens:
        drafter.saw(reply[i])
        draft = drafter.draft(tokens - i)
        drafts += bool(draft)
        for token in draft:  # every guess kept
            i += 1
            drafter.saw(token)
        i += 1
    drafter.drafts = drafts  # type: ignore[attr-defined]
    return drafter


def test_a_draft_model_that_drafts_slower_than_none_pauses_then_tries_again() -> None:
    linear = _costs(lambda n: 0.010 * n)  # a check of n costs n plain calls
    # Each draft of 4 (all kept) takes 50 ms of drafting and 50 ms of checking: 5 tokens in
    # 100 ms, against one per 10 ms plain.
    slow = _draft_model_run(0.050, linear)
    assert slow.pauses >= 2  # paused, tried again after the pause, paused again
    assert slow.drafts < 20  # most of the reply decoded plainly  # type: ignore[attr-defined]
    # Drafting in 1 ms, checking 5 in one 11 ms call (a GPU's costs): never paused.
    fast = _draft_model_run(0.001, _costs(lambda n: 0.010 + 0.0002 * n))
    assert fast.pauses == 0
    assert fast.drafts >= 35  # type: ignore[attr-defined]


# --------------------------------------------------------------------- with the model


class Flat(DraftCosts):
    """Call times that do not grow with the tokens in a call: every proposal is checked."""

    def seconds(self, tokens: int) -> float:
        return 0.010


@pytest.fixture(scope="module")
def drafting(model_path: Path) -> Iterator[LlamaBackend]:
    # Prompts in chunks of n_batch on both sides (WHOLE): chunks cut by time differ between
    # the two backends when the machine is loaded, and so do the last bits (a clean-clone
    # run read another "type hints" and seeded "code" reply that way).
    opened = open_llama(model_path, replace(WHOLE, prompt_lookup=True))
    opened._draft_costs = Flat()
    yield opened
    opened.close()


@pytest.fixture(scope="module")
def plain(model_path: Path) -> Iterator[LlamaBackend]:
    opened = open_llama(model_path, WHOLE)
    yield opened
    opened.close()


def reply(
    backend: LlamaBackend,
    content: str,
    settings: GenerationSettings = GREEDY,
    stop: StopSignal | None = None,
) -> tuple[str, GenerationReport]:
    report = GenerationReport()
    messages: list[ChatMessage] = [{"role": "user", "content": content}]
    text = "".join(backend.stream_reply(messages, settings, stop or StopSignal(), report))
    return text, report


def tokens_of(backend: LlamaBackend) -> list[int]:
    """The prompt and reply the sequence holds after a reply (all but its last token)."""
    return list(backend._sequence.tokens)


@pytest.mark.model
@pytest.mark.parametrize("name", [*COPYING, *OPEN])
def test_greedy_replies_with_drafts_are_the_plain_loops(
    drafting: LlamaBackend, plain: LlamaBackend, name: str
) -> None:
    content = {**COPYING, **OPEN}[name]
    text, report = reply(drafting, content)
    ours = tokens_of(drafting)
    assert drafting._sequence.in_step()  # the KV record holds what llama.cpp holds
    expected, plain_report = reply(plain, content)
    assert plain_report.drafted == 0
    assert text == expected
    assert ours == tokens_of(plain)
    assert report.finish == plain_report.finish
    assert report.draft_kept <= report.drafted
    if name in ("code", "text"):
        # It copied, drafts were checked (each proposal whole: the gate is open), and most
        # were kept (measured: 58 of 80 and 37 of 64).
        assert report.draft_kept > report.reply_tokens / 3
        assert report.draft_kept / report.drafted > 0.5
    elif name in OPEN:
        # Text that copies nothing keeps few of its proposals (5 of 159 for "rain").
        assert report.draft_kept / report.drafted < 0.25


@pytest.mark.model
@pytest.mark.parametrize("name", ["code", "story"])
def test_seeded_replies_with_drafts_are_the_plain_loops(
    drafting: LlamaBackend, plain: LlamaBackend, name: str
) -> None:
    content = {**COPYING, **OPEN}[name]
    text, report = reply(drafting, content, SEEDED)
    assert text == reply(plain, content, SEEDED)[0]
    if name == "code":
        assert report.drafted > 0


@pytest.mark.model
def test_a_length_limit_inside_a_draft_ends_where_the_plain_loop_does(
    drafting: LlamaBackend, plain: LlamaBackend
) -> None:
    settings = GenerationSettings(temperature=0.0, max_tokens=30)
    text, report = reply(drafting, COPYING["code"], settings)
    assert report.finish == "length"
    assert report.reply_tokens == 30
    assert text == reply(plain, COPYING["code"], settings)[0]
    assert drafting._sequence.in_step()


@pytest.mark.model
def test_the_end_of_text_inside_a_draft_ends_the_reply(
    drafting: LlamaBackend, plain: LlamaBackend
) -> None:
    # Copying the user's text to its end, the lookup proposes what followed it in the prompt:
    # the template's end of turn, which is the model's end of generation.
    text, report = reply(drafting, COPYING["text"], GenerationSettings(temperature=0.0))
    expected, plain_report = reply(plain, COPYING["text"], GenerationSettings(temperature=0.0))
    assert report.finish == plain_report.finish == "done"
    assert text == expected
    assert drafting._sequence.in_step()


@pytest.mark.model
def test_a_stop_string_inside_a_draft_ends_the_reply_before_it(
    drafting: LlamaBackend, plain: LlamaBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    full = reply(plain, COPYING["code"])[0]
    word = "continue"
    assert word in full

    for backend in (drafting, plain):
        render = backend._prompt.render

        def with_stop_word(*args: Any, render: Any = render) -> tuple[str, tuple[str, ...], bool]:
            text, stops, add_bos = render(*args)
            return text, (*stops, word), add_bos

        monkeypatch.setattr(backend._prompt, "render", with_stop_word)
    text, report = reply(drafting, COPYING["code"])
    assert text == full[: full.index(word)]
    assert text == reply(plain, COPYING["code"])[0]
    assert report.drafted > 0
    assert drafting._sequence.in_step()


@pytest.mark.model
def test_stop_in_a_draft_check_then_a_follow_up_is_the_exact_modes(
    model_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Prompts chunked by time, as the app chunks them, on both sides of the follow-up: the
    # drafting side reads only the follow-up's new tokens after the kept prefix, the exact
    # side reads it all, and chunks of n_batch would cut those two differently.
    options = EngineOptions(n_threads=1, cache_ram_mb=0, flash_attn=True, prompt_lookup=True)
    drafting = open_llama(model_path, options)
    drafting._draft_costs = Flat()
    try:
        stop_then_follow_up(drafting, model_path, monkeypatch)
    finally:
        drafting.close()


def stop_then_follow_up(
    drafting: LlamaBackend, model_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stop raised while ``drafting`` checks a draft, then a follow-up against the exact mode."""
    stop = StopSignal()
    checked = generation._Checked.decode

    def stop_while_checking(self: Any, token: int, draft: Any, position: int) -> int:
        if len(draft) >= 2:
            stop.set()  # raised just before the call: the abort callback ends it
        return checked(self, token, draft, position)

    monkeypatch.setattr(generation._Checked, "decode", stop_while_checking)
    _, report = reply(drafting, COPYING["code"], stop=stop)
    assert stop.is_set()
    assert report.finish == "stopped"
    assert report.draft_kept == 0 or report.drafted > report.draft_kept
    assert drafting._sequence.in_step()  # the draft's positions went with the aborted call
    monkeypatch.undo()
    drafting._draft_costs = Flat()
    follow_up = "What does the function return?"
    exact = open_llama(
        model_path,
        EngineOptions(n_threads=1, cache_ram_mb=0, flash_attn=True, reuse_reply_tokens=False),
    )
    try:
        assert reply(drafting, follow_up)[0] == reply(exact, follow_up)[0]
    finally:
        exact.close()


@contextlib.contextmanager
def batches(model_path: Path, **drafting: Any) -> Iterator[tuple[LlamaBackend, LlamaBackend]]:
    """Two contexts of two places each, one drafting with ``drafting``'s options, one plain."""
    options = replace(WHOLE, parallel=2)
    with contextlib.ExitStack() as stack:
        ours = open_llama(model_path, replace(options, **drafting))
        stack.callback(ours.close)
        plain = open_llama(model_path, options)
        stack.callback(plain.close)
        yield ours, plain


@pytest.mark.model
def test_replies_side_by_side_with_drafts_are_their_plain_replies(model_path: Path) -> None:
    """Two copying replies in one batch, each checking its own drafts in the same calls."""
    with batches(model_path, prompt_lookup=True) as (drafting, plain):
        drafting._draft_costs = Flat()
        names = ["code", "text"]
        ours = side_by_side(drafting, [COPYING[n] for n in names])
        theirs = side_by_side(plain, [COPYING[n] for n in names])
        for name, (text, report), (expected, plain_report) in zip(names, ours, theirs, strict=True):
            assert plain_report.drafted == 0
            assert report.batch_peak == 2
            assert text == expected, name
            assert report.finish == plain_report.finish
            assert report.draft_kept > report.reply_tokens / 3, name
        for sequence in drafting.batch.sequences if drafting.batch else ():
            assert sequence.in_step()


def side_by_side(
    backend: LlamaBackend, contents: list[str], stops: list[StopSignal] | None = None
) -> list[tuple[str, GenerationReport]]:
    """Replies decoded in one batch, stepped here until every one has ended.

    ``stops`` gets the first reply's stop signal, for a test to press.
    """
    batch = backend.batch
    assert batch is not None
    results: list[tuple[list[str], GenerationReport, StopSignal]] = []
    for content in contents:
        pieces: list[str] = []
        report = GenerationReport()
        stop = StopSignal()
        messages: list[ChatMessage] = [{"role": "user", "content": content}]
        offer = lambda t, p=pieces: p.append(t) or True  # noqa: E731 - the reader has room
        assert batch.place(BatchedReply(messages, GREEDY, stop, report, offer, lambda: None))
        results.append((pieces, report, stop))
        if stops is not None and len(results) == 1:
            stops.append(stop)
    while batch.busy:
        batch.step()
    return [("".join(pieces), report) for pieces, report, _ in results]


@pytest.mark.model
def test_stop_in_a_batch_step_with_drafts_cuts_one_reply_and_not_the_other(
    model_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stops: list[StopSignal] = []
    decode = BatchDecoder._decode

    def stop_the_first_while_checking(self: BatchDecoder, what: str, **args: int) -> int:
        if what == "decode step" and args["rows"] > args["replies"] and stops:
            stops.pop().set()  # raised just before the call: the abort callback ends it
        return decode(self, what, **args)

    with batches(model_path, prompt_lookup=True) as (drafting, plain):
        drafting._draft_costs = Flat()
        expected = side_by_side(plain, [COPYING["code"], COPYING["text"]])[1][0]
        monkeypatch.setattr(BatchDecoder, "_decode", stop_the_first_while_checking)
        (_, cut_report), (text, report) = side_by_side(
            drafting, [COPYING["code"], COPYING["text"]], stops
        )
        assert not stops  # a step with drafts came, and the Stop was pressed in it
        assert report.draft_kept > 0
        assert text == expected  # the other reply lost one step, not its text
        assert cut_report.reply_tokens < report.reply_tokens
        assert drafting.batch is not None
        for sequence in drafting.batch.sequences:
            assert sequence.in_step()  # the aborted step's rows, drafts too, were cut back


# --------------------------------------------------------------------- a draft model


@pytest.fixture(scope="module")
def drafting_with_itself(model_path: Path) -> Iterator[LlamaBackend]:
    """The bundled model with itself as its draft model: every greedy guess is its own.

    As large as the model, it drafts slower than none here, so its gate would pause it: the
    gate's pause is made nothing, to test what drafting does (the gate is tested above).
    """
    opened = open_llama(model_path, replace(WHOLE, draft_model=model_path))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(draft_model, "PAUSE_TOKENS", 0)  # the gate never pauses it here
        yield opened
    opened.close()


@pytest.fixture(scope="module")
def plain_whole(model_path: Path) -> Iterator[LlamaBackend]:
    """The plain loop beside it, its prompts read as it reads them, and the same replies."""
    opened = open_llama(model_path, WHOLE)
    yield opened
    opened.close()


@pytest.mark.model
@pytest.mark.parametrize("name", ["code", "story"])
def test_the_model_as_its_own_draft_keeps_every_greedy_guess(
    drafting_with_itself: LlamaBackend, plain_whole: LlamaBackend, name: str
) -> None:
    backend = drafting_with_itself
    assert backend.info.draft_model == backend.info.path
    assert backend.info.draft_problem is None
    content = {**COPYING, **OPEN}[name]
    text, report = reply(backend, content)
    assert text == reply(plain_whole, content)[0]
    # It writes what the model writes: each draft goes on while it is confident, and all of
    # what it proposed is kept (on text that copies nothing too).
    assert report.drafted > report.reply_tokens / 3
    assert report.draft_kept == report.drafted
    assert backend._sequence.in_step()


@pytest.mark.model
def test_a_draft_model_in_a_batch_drafts_for_each_sequence(
    model_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(draft_model, "PAUSE_TOKENS", 0)  # as above: drafting, not its gate
    with batches(model_path, draft_model=model_path) as (drafting, plain):
        ours = side_by_side(drafting, [COPYING["code"], OPEN["story"]])
        theirs = side_by_side(plain, [COPYING["code"], OPEN["story"]])
        assert [text for text, _ in ours] == [text for text, _ in theirs]
        for _, report in ours:
            assert report.batch_peak == 2
            assert report.drafted > 0
            assert report.draft_kept == report.drafted


@pytest.mark.model
def test_stop_while_the_draft_model_writes_ends_the_reply_at_once(
    drafting_with_itself: LlamaBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = drafting_with_itself
    assert backend.draft_model is not None
    stop = StopSignal()
    propose = type(backend.draft_model).propose

    prompt: list[int] = []

    def stop_while_drafting(self: Any, seq_id: int, context: Any, most: int) -> list[int]:
        prompt.append(prompt[0] if prompt else len(context))
        if len(context) > prompt[0] + 4:
            stop.set()  # raised before the draft's decode: the shared abort flag ends it
        return propose(self, seq_id, context, most)

    monkeypatch.setattr(type(backend.draft_model), "propose", stop_while_drafting)
    _, report = reply(backend, OPEN["story"], stop=stop)
    assert stop.is_set()
    assert report.finish == "stopped"
    assert report.reply_tokens < 20
    assert backend._sequence.in_step()
    monkeypatch.undo()
    # The next reply drafts again, from a draft sequence cut back to what it shares.
    _, again = reply(backend, COPYING["code"])
    assert again.draft_kept == again.drafted > 0


@pytest.mark.model
def test_a_draft_model_of_another_vocabulary_is_refused_with_a_sentence(
    model_path: Path, other_tokens: Path
) -> None:
    options = EngineOptions(n_threads=1, cache_ram_mb=0, draft_model=other_tokens)
    backend = open_llama(model_path, options)
    try:
        assert backend.draft_model is None
        assert backend.info.draft_model is None
        problem = str(backend.info.draft_problem)
        assert "Other-Tokens.gguf cannot guess ahead for" in problem
        assert "vocabularies differ (token 300 is another piece of text)" in problem
        text, report = reply(backend, "Say hello.", GenerationSettings(temperature=0, max_tokens=8))
        assert text  # the model itself writes as ever
        assert report.drafted == 0
    finally:
        backend.close()


@pytest.mark.model
def test_a_draft_model_that_cannot_be_loaded_leaves_the_model_open(
    model_path: Path, tmp_path: Path
) -> None:
    broken = tmp_path / "Broken.gguf"
    broken.write_bytes(model_path.read_bytes()[: 4 * 1024 * 1024])
    backend = open_llama(model_path, EngineOptions(n_threads=1, cache_ram_mb=0, draft_model=broken))
    try:
        assert backend.draft_model is None
        assert "The draft model Broken.gguf could not be opened" in str(backend.info.draft_problem)
        assert reply(backend, "Say hello.", GenerationSettings(temperature=0, max_tokens=4))[0]
    finally:
        backend.close()


@pytest.fixture(scope="module")
def other_tokens(model_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled model with two tokens' texts swapped: loadable, of another vocabulary."""
    from gguf import GGUFReader

    tokens = [str(t) for t in GGUFReader(model_path).fields["tokenizer.ggml.tokens"].contents()]
    tokens[300], tokens[301] = tokens[301], tokens[300]
    target = tmp_path_factory.mktemp("other") / "Other-Tokens.gguf"
    return copy_model(model_path, target, {"tokenizer.ggml.tokens": tokens})


@pytest.mark.model
def test_the_window_says_which_draft_model_writes_ahead_or_why_none_does(
    loop: Loop, model_path: Path, other_tokens: Path
) -> None:
    options = EngineOptions(n_ctx=1024, cache_ram_mb=0, draft_model=model_path)
    session = ChatSession(open_llama, options=options)
    states: list[str] = []
    session.state_changed.connect(lambda _state, text: states.append(text))
    session.open_model(model_path)
    run_until(loop, lambda: session.state is ModelState.READY, 60)
    name = readable_name(model_path)
    assert states[-1] == f"{name} is ready; {name} writes ahead for it."
    notices: list[str] = []
    session.notice.connect(notices.append)
    session.use_settings(Settings(n_ctx=1024, draft_model=str(other_tokens)))
    session.open_model(model_path)
    run_until(loop, lambda: bool(notices) and session.state is ModelState.READY, 60)
    assert states[-1] == f"{name} is ready."
    assert any("Other-Tokens.gguf cannot guess ahead for" in n for n in notices)
    assert session.send("Say hello.")  # the model itself answers as ever
    run_until(loop, lambda: not session.generating, 60)
    assert session.conversation.messages[-1].content
    loop.run_until_complete(session.close())
