"""Prompt processing: Floodgate's engine against llama-cpp-python, and the cost of progress.

Three ways to process the same prompt on an empty KV cache, interleaved in pairs:
llama-cpp-python's ``Llama.eval`` (``n_batch`` tokens per call), Floodgate's engine with
chunked prefill and progress reports (as the app runs it), and Floodgate's engine processing
``n_batch`` tokens per call (no progress between them).
"""

from __future__ import annotations

import statistics
from dataclasses import replace
from typing import Any

from app.bench.engine_drive import filler, reply_on_thread
from app.bench.loops import LlamaLoops
from app.bench.plan import Setup
from app.bench.stats import interleaved_pairs
from app.engine import ChatMessage, GenerationSettings
from app.engine.llama import LlamaBackend, open_llama

ONE_TOKEN = GenerationSettings(temperature=0.0, max_tokens=1)


def _engine_rate(engine: LlamaBackend, messages: list[ChatMessage]) -> float:
    engine.sequence.clear()  # an empty cache, as llama-cpp-python's side gets
    reply = reply_on_thread(engine, messages, ONE_TOKEN, "prefill")
    return reply.prefill_tok_s


async def prefill(setup: Setup, loops: LlamaLoops) -> dict[str, Any]:
    """``prefill.ratio`` (with progress, over llama-cpp-python) and the progress cost."""
    messages: list[ChatMessage] = [{"role": "user", "content": filler(7, setup.plan.prefill_words)}]
    tokens = loops.prompt_tokens(messages)
    no_cache = replace(setup.options, cache_ram_mb=0, cache_dir=None)
    shown = open_llama(setup.model, no_cache)
    quiet = open_llama(setup.model, replace(no_cache, prefill_chunk_seconds=0.0))
    try:
        for engine in (shown, quiet):  # warm up, and let the chunks be sized from a rate
            _engine_rate(engine, messages)
        loops.prefill_run(tokens)

        async def raw() -> float:
            return loops.prefill_run(tokens)

        async def without_progress() -> float:
            return _engine_rate(quiet, messages)

        async def with_progress() -> float:
            return _engine_rate(shown, messages)

        pairs = await interleaved_pairs(
            setup.plan.prefill_pairs,
            {"raw": raw, "quiet": without_progress},
            with_progress,
            setup.log,
        )
        report_tokens = reply_on_thread(shown, messages, ONE_TOKEN, "check").report.prompt_tokens
    finally:
        shown.close()
        quiet.close()
    cost = pairs["quiet"].figures("without_progress", prefix="progress_cost_")
    return {
        "prompt_tokens": len(tokens),
        "engine_prompt_tokens": report_tokens,
        **pairs["raw"].figures("raw"),
        "app_tok_s": round(statistics.median(pairs["raw"].app + pairs["quiet"].app), 2),
        **cost,
    }
