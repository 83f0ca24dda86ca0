"""Prompt processing: Floodgate's engine against llama-cpp-python, and the cost of progress.

Three ways to process the same prompt on an empty KV cache, interleaved in pairs:
llama-cpp-python's ``Llama.eval`` (``n_batch`` tokens per call, in a bare child process, at
the app's prompt threads and at its own best count), Floodgate's engine with chunked prefill
and progress reports (as the app runs it, on one engine thread), and Floodgate's engine
processing ``n_batch`` tokens per call (no progress between them).
"""

from __future__ import annotations

import statistics
from dataclasses import replace
from typing import Any

from app.bench.bare import BareLoops
from app.bench.engine_drive import EngineThread, filler
from app.bench.plan import Setup
from app.bench.stats import Rate, faster_count, interleaved_pairs
from app.engine import ChatMessage, GenerationSettings
from app.engine.llama import LlamaBackend

ONE_TOKEN = GenerationSettings(temperature=0.0, max_tokens=1)


def prefill_messages(setup: Setup) -> list[ChatMessage]:
    """The prompt every prompt-processing figure processes."""
    return [{"role": "user", "content": filler(7, setup.plan.prefill_words)}]


async def prefill(
    setup: Setup, loops: BareLoops, threads_batch: int, best_eval_threads: int
) -> dict[str, Any]:
    """``prefill.ratio`` and ``prefill.best_ratio`` (with progress, over ``Llama.eval``).

    Args:
        setup: the bench run.
        loops: the references' child process.
        threads_batch: the app's prompt threads (``Llama.eval`` gets the same for ``ratio``).
        best_eval_threads: the count at which the ``threads`` rows found ``Llama.eval``
            fastest (``rows_best_eval_threads``); ``best_ratio`` is over whichever of it and
            ``threads_batch`` ran faster in the pairs (``best_eval_threads``).
    """
    messages = prefill_messages(setup)
    tokens = loops.prompt_tokens(messages)
    no_cache = replace(setup.options, cache_ram_mb=0, cache_dir=None)
    with EngineThread() as thread:
        shown = thread.open(setup.model, no_cache)
        quiet = thread.open(setup.model, replace(no_cache, prefill_chunk_seconds=0.0))

        def engine_rate(engine: LlamaBackend) -> float:
            thread.call(engine.sequence.clear)  # an empty cache, as Llama.eval's side gets
            return thread.reply(engine, messages, ONE_TOKEN, "prefill").prefill_tok_s

        try:
            for engine in (shown, quiet):  # warm up, and let the chunks be sized from a rate
                engine_rate(engine)
            loops.prefill_run(tokens, threads_batch)

            async def raw() -> float:
                return loops.prefill_run(tokens, threads_batch)

            async def best() -> float:
                return loops.prefill_run(tokens, best_eval_threads)

            async def without_progress() -> float:
                return engine_rate(quiet)

            async def with_progress() -> float:
                return engine_rate(shown)

            references: dict[str, Rate] = {"raw": raw, "quiet": without_progress}
            if best_eval_threads != threads_batch:
                references["best"] = best
            pairs = await interleaved_pairs(
                setup.plan.prefill_pairs, references, with_progress, setup.log
            )
            engine_tokens = thread.reply(shown, messages, ONE_TOKEN, "check").report.prompt_tokens
        finally:
            thread.close(shown)
            thread.close(quiet)
    cost = pairs["quiet"].figures("without_progress", prefix="progress_cost_")
    best_name = faster_count(pairs, "raw", "best")
    best_pairs = pairs[best_name]
    return {
        "prompt_tokens": len(tokens),
        "engine_prompt_tokens": engine_tokens,
        "threads_batch": threads_batch,
        **pairs["raw"].figures("raw"),
        "best_eval_threads": best_eval_threads if best_name == "best" else threads_batch,
        "rows_best_eval_threads": best_eval_threads,
        **best_pairs.figures("best_eval", prefix="best_"),
        "app_tok_s": round(statistics.median(pairs["raw"].app + pairs["quiet"].app), 2),
        **cost,
    }
