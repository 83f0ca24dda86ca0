"""The ``threads`` section: decode and prompt speed at every thread count, and the app's choice.

At each count from 1 to the physical cores, in alternating order over a few rounds: the
native decode loop and ``Llama.eval`` in the bare child process (:mod:`app.bench.bare`), and
the app's real engine on its worker's thread, streaming through the window (decode) and
processing a prompt sent from it (prefill). The app's own choice of decode threads is the one
its worker made when the model opened (:func:`app.engine.threads.calibrate`, as for a user:
the bench's session keeps its measurement in a folder of its own).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from app.bench.bare import BareLoops
from app.bench.measure import app_rate, app_threads, ask
from app.bench.plan import STORY, Setup
from app.bench.prefill import prefill_messages
from app.engine import Backend, ChatMessage, GenerationSettings
from app.engine.llama import LlamaBackend
from app.engine.threads import physical_cores
from app.flow.decode_threads import ThreadReport
from app.ui.window.main_window import MainWindow

ONE_TOKEN = GenerationSettings(temperature=0.0, max_tokens=1)


def _set_threads(window: MainWindow, n_threads: int, n_threads_batch: int) -> None:
    """The app's thread counts from its next job on (set on the worker's thread, in order)."""

    def action(backend: Backend) -> None:
        backend.set_threads(n_threads, n_threads_batch)

    window.session.host.with_backend(action)


def _empty_kv(backend: Backend) -> None:
    backend.clear_cache()  # the prompt cache would restore the same prompt kept before
    if isinstance(backend, LlamaBackend):
        backend.sequence.clear()


async def app_prefill_rate(window: MainWindow, text: str) -> tuple[float, int]:
    """The app's prompt tokens per second, and how many it processed, from one prompt sent.

    One prompt sent in the window, one token of reply.

    The KV cache and the prompt cache are emptied first (on the worker's thread), as
    ``Llama.eval``'s cache is: the engine would otherwise reuse the same prompt sent before in
    another conversation.
    """
    session = window.session
    session.host.with_backend(_empty_kv)
    kept = session.settings
    session.settings = ONE_TOKEN
    try:
        await ask(window, text)
    finally:
        session.settings = kept
    metrics = session.metrics
    rate = metrics.prefill_rate
    assert rate is not None, "the prompt was not processed"
    return rate, metrics.prefill_done - metrics.cached_tokens


def _medians(runs: dict[int, list[float]]) -> dict[str, float]:
    return {str(n): round(statistics.median(rates), 2) for n, rates in sorted(runs.items())}


def _fastest(medians: dict[str, float]) -> int:
    return int(max(medians, key=lambda n: medians[n]))


_Measure = Callable[[int], Any]
"""One side's measure: its rate at a thread count (a coroutine)."""


async def _rounds(
    setup: Setup, counts: list[int], sides: list[tuple[str, _Measure]]
) -> dict[str, dict[int, list[float]]]:
    """Each side's rates at each count, over the plan's rounds, in alternating order."""
    runs: dict[str, dict[int, list[float]]] = {name: {n: [] for n in counts} for name, _ in sides}
    for round_ in range(setup.plan.thread_rounds):
        order = counts if round_ % 2 == 0 else counts[::-1]
        for n in order:
            # Each pair of sides back to back, the one first alternating by round.
            for pair in (sides[:2], sides[2:]):
                for name, measure in pair if round_ % 2 == 0 else pair[::-1]:
                    runs[name][n].append(await measure(n))
            setup.log(
                f"  round {round_ + 1}, {n} threads: "
                + ", ".join(f"{name} {runs[name][n][-1]:.1f}" for name, _ in sides)
            )
    return runs


async def thread_counts(
    setup: Setup, window: MainWindow, loops: BareLoops, chosen: ThreadReport
) -> dict[str, Any]:
    """The ``threads`` section; leaves the app on the counts its worker holds at the end.

    The rows' replies at the worker's own decode count are window replies like any other, so
    they may refine its choice meanwhile (:func:`~app.engine.threads.next_decode_threads`):
    the app is left where its worker's choice stands then, not where it stood at ``chosen``
    (the worker, which counts only replies at the count it chose, would otherwise stop
    counting any).
    """
    counts = list(range(1, physical_cores() + 1))
    story: list[ChatMessage] = [{"role": "user", "content": STORY}]
    decode_tokens = loops.prompt_tokens(story)
    messages = prefill_messages(setup)
    prefill_tokens = loops.prompt_tokens(messages)
    text = messages[0]["content"]
    processed: list[int] = []

    async def native(n: int) -> float:
        return loops.native_run(decode_tokens, n)

    async def app_decode(n: int) -> float:
        _set_threads(window, n, chosen.n_threads_batch)
        return await app_rate(window)

    async def eval_prefill(n: int) -> float:
        return loops.prefill_run(prefill_tokens, n)

    async def app_prefill(n: int) -> float:
        _set_threads(window, chosen.n_threads, n)
        rate, tokens = await app_prefill_rate(window, text)
        processed.append(tokens)
        return rate

    sides: list[tuple[str, _Measure]] = [
        ("native", native),
        ("app", app_decode),
        ("eval", eval_prefill),
        ("app_prefill", app_prefill),
    ]
    await app_decode(counts[-1])  # warm the app's path up (the references are warm)
    try:
        runs = await _rounds(setup, counts, sides)
    finally:
        now = app_threads(window)
        _set_threads(window, now.n_threads, now.n_threads_batch)
    decode = {side: _medians(runs[side]) for side in ("native", "app")}
    prefill = {"eval": _medians(runs["eval"]), "app": _medians(runs["app_prefill"])}
    return {
        "physical_cores": physical_cores(),
        "counts": counts,
        "rounds": setup.plan.thread_rounds,
        "decode_tok_s": decode,
        "prefill_tok_s": prefill,
        "prefill_prompt_tokens": len(prefill_tokens),
        "prefill_app_processed_tokens": min(processed),
        "native_best": _fastest(decode["native"]),
        "eval_best": _fastest(prefill["eval"]),
        "app": {
            "n_threads": chosen.n_threads,
            "n_threads_batch": chosen.n_threads_batch,
            "source": chosen.source,
            "rates": {str(n): round(rate, 2) for n, rate in sorted(chosen.rates.items())},
        },
        "bare_child": {"pid": loops.pid, "qt_loaded": loops.qt_loaded},
    }
