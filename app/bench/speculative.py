"""The ``speculative`` section: drafts from the context (prompt lookup) against plain loops.

Everything here runs with flash attention, Floodgate and the references alike: without it,
llama.cpp's CPU attention gives a token checked within a call of several other logits than
the token decoded alone; with it, the same bits at one thread only (ARCHITECTURE.md,
"Drafts"). So the drafts are off by default, and ``same_text`` counts what that changes.

- ``grounded`` and ``open``: replies that copy from their input (code to edit or repeat, a
  text to quote) and replies that do not. Greedy, no repeat penalty, so every loop writes
  the same tokens. For each prompt, in rounds of alternating order: Floodgate's engine with
  drafts, the same engine without (its plain loop), and llama.cpp's plain native loop in the
  bare child. ``ratio``: tok/s with drafts over the native loop's, the median over prompts
  and rounds with a bootstrap interval; ``plain_ratio``: over Floodgate's own plain loop;
  ``acceptance``: proposed tokens kept over those checked.
- ``same_text``: the share of replies, over a set of at least 50 prompts of both kinds,
  whose text with drafts is the plain loop's (1: all of them), and the count that differ.
- ``side_by_side``: two replies that copy, decoded together in one batch (a context of two
  sequences), each checking its own drafts in the batch's calls, against the same batch
  without drafts, in rounds of alternating order. ``ratio``: the pair's tokens per second
  (both replies' tokens over the time from the first step to the last) with drafts over
  without, the median with an interval; ``same_text``: whether every reply was the plain
  batch's.
- ``peer``: llama-cpp-python's ``Llama(draft_model=LlamaPromptLookupDecoding(10))`` on the
  same prompts in the bare child: its tok/s over the native loop's, and whether its text
  is the plain loop's.

Floodgate's rate is the engine's: tokens after the first over the time from the prompt's
end to the reply's (the native loop's, from its first token's text to its last).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any

from app.bench.bare import BareLoops
from app.bench.engine_drive import EngineThread, filler
from app.bench.plan import Setup
from app.bench.stats import median_with_ci
from app.engine import ChatMessage, GenerationReport, GenerationSettings, StopSignal
from app.engine.batch import BatchedReply
from app.engine.llama import LlamaBackend
from app.engine.placement import CPU

CODE = """def parse_config(path, defaults, strict):
    values = dict(defaults)
    errors = []
    with open(path) as handle:
        for number, line in enumerate(handle, start=1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if "=" not in line:
                errors.append((number, "no equals sign"))
                continue
            name, value = line.split("=", 1)
            name = name.strip().lower()
            value = value.strip()
            if strict and name not in defaults:
                errors.append((number, "unknown setting " + name))
                continue
            if value.isdigit():
                value = int(value)
            elif value.lower() in ("true", "false"):
                value = value.lower() == "true"
            values[name] = value
    return values, errors


def merge(first, second):
    merged = dict(first)
    for name, value in second.items():
        if name in merged and isinstance(merged[name], dict):
            merged[name] = merge(merged[name], value)
        else:
            merged[name] = value
    return merged


def report(errors, out):
    for number, message in errors:
        out.write("line " + str(number) + ": " + message + "\\n")
    return len(errors)
"""

GROUNDED = (
    f"Add type hints to this code and show the whole code:\n\n{CODE}",
    f"Repeat this code exactly, in a Python code block:\n\n{CODE}",
    f"Rename the function parse_config to read_config and show the whole code:\n\n{CODE}",
)
"""Replies grounded in their input: the code is 60 lines."""

OPEN = (
    "Tell me a story about a dragon who learns to paint.",
    "Explain how rain forms, step by step.",
    "Write a letter to a friend about a trip to the mountains.",
)


def _same_text_prompts(count: int) -> list[str]:
    """``count`` prompts, half that copy (quote or repeat a text), half that do not."""
    prompts: list[str] = []
    asks = (
        "Copy this text word for word:\n\n{text}",
        "Quote the first two sentences of this text:\n\n{text}",
        "Repeat the last sentence of this text:\n\n{text}",
    )
    topics = ("the sea", "a city at night", "bread", "a library", "winter", "a bicycle", "bees")
    for i in range(count):
        if i % 2 == 0:
            prompts.append(asks[(i // 2) % len(asks)].format(text=filler(900 + i, 120)))
        else:
            prompts.append(f"Write a short paragraph about {topics[(i // 2) % len(topics)]}.")
    return prompts


def _engine_rate(report: GenerationReport) -> float:
    started, ended = report.prefill_ended_at, report.compute_ended_at
    if started is None or ended is None or ended <= started or report.reply_tokens < 2:
        raise RuntimeError("the reply was too short to have a rate")
    return (report.reply_tokens - 1) / (ended - started)


def _workload(
    setup: Setup,
    engine: EngineThread,
    drafting: LlamaBackend,
    plain: LlamaBackend,
    loops: BareLoops,
    prompts: tuple[str, ...],
    threads: int,
) -> dict[str, Any]:
    settings = GenerationSettings(
        temperature=0.0, repeat_penalty=1.0, max_tokens=setup.plan.speculative_tokens
    )
    over_native: list[float] = []
    over_plain: list[float] = []
    peer_over_native: list[float] = []
    drafted = kept = 0
    peer_same = True
    for round_ in range(setup.plan.speculative_rounds):
        for i, prompt in enumerate(prompts):
            messages: list[ChatMessage] = [{"role": "user", "content": prompt}]
            tokens = loops.prompt_tokens(messages)
            order = [0, 1, 2] if (round_ + i) % 2 == 0 else [2, 1, 0]
            rates: dict[int, float] = {}
            texts: dict[int, str] = {}
            for which in order:
                if which == 2:
                    rates[2] = loops.native_run(tokens, threads)
                    continue
                backend = drafting if which == 0 else plain
                reply = engine.reply(backend, messages, settings, conversation="")
                rates[which], texts[which] = _engine_rate(reply.report), reply.text
                if which == 0:
                    drafted += reply.report.drafted
                    kept += reply.report.draft_kept
            over_native.append(rates[0] / rates[2])
            over_plain.append(rates[0] / rates[1])
            peer_rate, peer_text = loops.lookup_run(messages, threads)
            peer_over_native.append(peer_rate / rates[2])
            peer_same = peer_same and peer_text == texts[1]
    ratio, interval = median_with_ci(over_native)
    plain_ratio, plain_interval = median_with_ci(over_plain)
    peer_ratio, peer_interval = median_with_ci(peer_over_native)
    return {
        "ratio": ratio,
        "ratio_ci95": interval,
        "plain_ratio": plain_ratio,
        "plain_ratio_ci95": plain_interval,
        "acceptance": round(kept / drafted, 4) if drafted else 0.0,
        "drafted": drafted,
        "kept": kept,
        "peer_ratio": peer_ratio,
        "peer_ratio_ci95": peer_interval,
        "peer_same_text": peer_same,
        "runs": len(over_native),
    }


_PairRun = tuple[float, list[str], list[GenerationReport]]


def _pair(
    backend: LlamaBackend, prompts: tuple[str, str], settings: GenerationSettings
) -> _PairRun:
    """Two replies in ``backend``'s batch, stepped to their ends: (tok/s, texts, reports)."""
    batch = backend.batch
    assert batch is not None
    texts: list[list[str]] = [[], []]
    reports = [GenerationReport(), GenerationReport()]
    for prompt, pieces, report in zip(prompts, texts, reports, strict=True):
        messages: list[ChatMessage] = [{"role": "user", "content": prompt}]
        batch.place(
            BatchedReply(messages, settings, StopSignal(), report, _reader(pieces), lambda: None)
        )
    started = ended = 0.0
    while batch.busy:
        batch.step()
        if not started and all(r.prefill_ended_at for r in reports):
            started = time.perf_counter()
    ended = time.perf_counter()
    tokens = sum(r.reply_tokens for r in reports)
    rate = tokens / (ended - started) if started and ended > started else 0.0
    return rate, ["".join(t) for t in texts], reports


def _reader(into: list[str]) -> Callable[[str], bool]:
    """A reader with room for every piece (the bench measures decoding, not reading)."""

    def offer(text: str) -> bool:
        into.append(text)
        return True

    return offer


def _side_by_side(
    setup: Setup, engine: EngineThread, drafting: LlamaBackend, plain: LlamaBackend
) -> dict[str, Any]:
    settings = GenerationSettings(
        temperature=0.0, repeat_penalty=1.0, max_tokens=setup.plan.speculative_tokens
    )
    pairs = [(GROUNDED[i], GROUNDED[(i + 1) % len(GROUNDED)]) for i in range(len(GROUNDED))]
    ratios: list[float] = []
    same = True
    drafted = kept = 0
    for round_ in range(setup.plan.speculative_rounds):
        for i, pair in enumerate(pairs):
            order = (drafting, plain) if (round_ + i) % 2 == 0 else (plain, drafting)
            runs: dict[int, _PairRun] = {}
            for backend in order:
                runs[id(backend)] = engine.call(partial(_pair, backend, pair, settings))
            (ours, our_texts, reports), (theirs, their_texts, _) = (
                runs[id(drafting)],
                runs[id(plain)],
            )
            if ours and theirs:
                ratios.append(ours / theirs)
            same = same and our_texts == their_texts
            drafted += sum(r.drafted for r in reports)
            kept += sum(r.draft_kept for r in reports)
    ratio, interval = median_with_ci(ratios)
    return {
        "ratio": ratio,
        "ratio_ci95": interval,
        "acceptance": round(kept / drafted, 4) if drafted else 0.0,
        "drafted": drafted,
        "same_text": same,
        "runs": len(ratios),
    }


def _same_text(
    setup: Setup,
    engine: EngineThread,
    drafting: LlamaBackend,
    plain: LlamaBackend,
    timed: LlamaBackend,
) -> dict[str, Any]:
    """How often drafts change a greedy reply, and how often the prompt's chunking does.

    ``drafting`` and ``plain`` read prompts in chunks of ``n_batch`` tokens, so that the
    replies differ only by what drafting changes; ``timed`` is the plain loop with the app's
    chunks sized by the time they take, compared with ``plain``: chunks of other sizes give
    the prompt's last logits other low bits, and a greedy reply can then take another word.
    """
    settings = GenerationSettings(temperature=0.0, max_tokens=setup.plan.speculative_same_tokens)
    prompts = _same_text_prompts(setup.plan.speculative_same_prompts)
    differ = drafted = differ_drafted = timed_differ = 0
    for prompt in prompts:
        messages: list[ChatMessage] = [{"role": "user", "content": prompt}]
        ours = engine.reply(drafting, messages, settings, conversation="")
        theirs = engine.reply(plain, messages, settings, conversation="")
        by_time = engine.reply(timed, messages, settings, conversation="")
        changed = ours.text != theirs.text
        differ += changed
        drafted += ours.report.drafted > 0
        differ_drafted += changed and ours.report.drafted > 0
        timed_differ += by_time.text != theirs.text
    return {
        "same_text": round(1 - differ / len(prompts), 4),
        "same_text_prompts": len(prompts),
        "same_text_differ": differ,
        "same_text_with_drafts": drafted,
        "same_text_differ_drafted": differ_drafted,
        "timed_chunks_same_text": round(1 - timed_differ / len(prompts), 4),
        "timed_chunks_differ": timed_differ,
    }


def speculative(setup: Setup) -> dict[str, Any]:
    """The ``speculative`` section of the bench."""
    options = replace(setup.options, flash_attn=True, cache_ram_mb=0, cache_disk_mb=0)
    threads = options.n_threads
    # On a GPU (the headless GPU check), the native loop offloads every layer too.
    gpu_layers = -1 if options.compute != CPU else 0
    loops = BareLoops(setup.model, options, setup.plan.speculative_tokens, n_gpu_layers=gpu_layers)
    try:
        with EngineThread() as engine:
            drafting = engine.open(setup.model, replace(options, prompt_lookup=True))
            plain = engine.open(setup.model, options)
            try:
                setup.log("  replies that copy from their input…")
                grounded = _workload(setup, engine, drafting, plain, loops, GROUNDED, threads)
                setup.log(
                    f"  grounded: {grounded['ratio']} of the native loop, "
                    f"{grounded['acceptance']} kept"
                )
                setup.log("  replies that do not…")
                open_ = _workload(setup, engine, drafting, plain, loops, OPEN, threads)
                setup.log(f"  open: {open_['ratio']} of the native loop")
            finally:
                engine.close(drafting)
                engine.close(plain)
            setup.log(f"  {setup.plan.speculative_same_prompts} prompts, with drafts and without…")
            # New engines, whose prompts go in chunks of n_batch: the replies then differ only
            # where drafting changes them (see _same_text).
            whole = replace(options, prefill_chunk_seconds=0)
            drafting = engine.open(setup.model, replace(whole, prompt_lookup=True))
            plain = engine.open(setup.model, whole)
            timed = engine.open(setup.model, options)
            try:
                same = _same_text(setup, engine, drafting, plain, timed)
            finally:
                for backend in (drafting, plain, timed):
                    engine.close(backend)
            setup.log("  two replies that copy, side by side in one batch…")
            pair_options = replace(options, parallel=2)
            drafting = engine.open(setup.model, replace(pair_options, prompt_lookup=True))
            plain = engine.open(setup.model, pair_options)
            try:
                side_by_side = _side_by_side(setup, engine, drafting, plain)
            finally:
                engine.close(drafting)
                engine.close(plain)
            setup.log(f"  side by side: {side_by_side['ratio']} of the plain batch")
    finally:
        loops.close()
    return {
        "grounded": grounded,
        "open": open_,
        "side_by_side": side_by_side,
        **same,
        "threads": threads,
        "tokens": setup.plan.speculative_tokens,
        "rounds": setup.plan.speculative_rounds,
    }
