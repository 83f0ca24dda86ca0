"""One bench run: every section in turn, gathered into the JSON document."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from PySide6.QtWidgets import QApplication

from app.bench.bare import BareLoops
from app.bench.designs import designs
from app.bench.download import download
from app.bench.gpu import gpu
from app.bench.large_messages import large_messages_apart
from app.bench.local_api import local_api
from app.bench.long_reply import long_reply, shapes
from app.bench.machine import machine_facts
from app.bench.measure import (
    app_threads,
    close_app,
    diagnostics_cost,
    firehose,
    firehose_pieces,
    loop_lag,
    open_app,
    throughput,
    trace_cost,
)
from app.bench.parallel import parallel
from app.bench.plan import FIREHOSE_RATE, FRAME, Setup
from app.bench.prefill import prefill
from app.bench.remote import remote
from app.bench.speculative import speculative
from app.bench.stops import stops
from app.bench.thread_counts import thread_counts
from app.bench.ttft import ttft
from app.bench.vision import vision
from app.bench.window_cost import window_cost_section
from app.bench.window_floor import window_floor
from app.engine.llama import open_llama
from app.engine.threads import physical_cores
from app.flow.event_loop import finalize_async_generators_on
from app.flow.session import DEFAULT_QUEUE_BOUND
from app.store.thread_choices import ThreadChoices
from app.ui.window.main_window import MainWindow


async def _app_sections(setup: Setup, loops: BareLoops) -> dict[str, Any]:
    """The sections that run in the app over the real model.

    The app's session keeps its decode-thread measurement in a folder of its own, so its
    worker measures and chooses as it does for a user (unless ``--threads`` set the count).
    """
    with tempfile.TemporaryDirectory(prefix="floodgate-bench-threads-") as folder:
        setup.log("opening the app (its worker measures its decode threads)…")
        window = await open_app(setup, open_llama, setup.greedy, ThreadChoices(Path(folder)))
        try:
            threads, tp = await _threads_and_throughput(setup, window, loops)
            setup.log("the window's floor (no text shown, one line, all of it; the native loop)…")
            floor = await window_floor(setup, window, loops)
            setup.log("loop lag (5 ms heartbeat while streaming)…")
            lag = await loop_lag(setup, window)
            setup.log("stop during decoding and prefill…")
            stopped = await stops(setup, window)
            setup.log("what the window's threads cost the decode threads…")
            cost = await window_cost_section(setup, window)
            setup.log(f"  {cost}")
            setup.log("diagnostics panel shown vs hidden…")
            diag = await diagnostics_cost(setup, window)
            setup.log("recording a flow trace vs not…")
            trace = await trace_cost(setup, window)
            # The replies refined the choice as they streamed (next_decode_threads): where
            # it ended, and the rates the window's replies decoded at.
            final = app_threads(window)
            threads["app"]["after_replies"] = {
                "n_threads": final.n_threads,
                "streaming": {str(n): round(r, 2) for n, r in sorted(final.streaming.items())},
            }
            setup.log(f"  after the replies: {final.n_threads} decode threads, {final.streaming}")
        finally:
            await close_app(window)
    return {
        "threads": threads,
        "throughput": tp,
        "loop_lag_ms": lag,
        "stops": stopped,
        "diagnostics_panel": diag,
        "trace": trace,
        "window_cost": cost,
        "window_floor": floor,
    }


async def _threads_and_throughput(
    setup: Setup, window: MainWindow, loops: BareLoops
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``threads`` rows, then the throughput pairs against the native loop at its best."""
    chosen = app_threads(window)
    setup.log(f"  the app chose {chosen.n_threads} decode threads ({chosen.source})")
    # The engines the bench opens later decode as the app's worker does.
    setup.options = replace(
        setup.options,
        n_threads=chosen.n_threads,
        n_threads_batch=chosen.n_threads_batch,
    )
    setup.log("decode and prompt speed at every thread count…")
    threads = await thread_counts(setup, window, loops, chosen)
    setup.log(f"throughput (raw, native and app interleaved, {setup.plan.pairs} pairs each)…")
    tp = await throughput(setup, window, loops, threads["native_best"])
    return threads, tp


def _in_the_app_alone(
    what: str, section: Callable[[Setup, MainWindow], Awaitable[dict[str, Any]]]
) -> Callable[[Setup], Awaitable[dict[str, Any]]]:
    """One of the sections that run in the app, alone: the app opened as the whole run does."""

    async def alone(setup: Setup) -> dict[str, Any]:
        with tempfile.TemporaryDirectory(prefix="floodgate-bench-threads-") as folder:
            setup.log("opening the app…")
            threads = ThreadChoices(Path(folder))
            window = await open_app(setup, open_llama, setup.greedy, threads)
            try:
                setup.log(f"{what}…")
                return await section(setup, window)
            finally:
                await close_app(window)

    return alone


def _long_reply(setup: Setup) -> dict[str, Any]:
    setup.log("long reply, and its hostile shapes…")
    long = long_reply(setup.plan)
    long["shapes"] = shapes(setup.plan, setup.log)
    return long


def _large_messages(setup: Setup) -> dict[str, Any]:
    setup.log("one large message built, streamed, cleared and sent…")
    return large_messages_apart(setup.plan.large_chars, setup.log)


async def _prompt_sections(setup: Setup, loops: BareLoops, eval_best: int) -> dict[str, Any]:
    """Prompt processing against llama-cpp-python, and the time to first token."""
    setup.log("prompt processing (llama-cpp-python, with and without progress)…")
    pre = await prefill(setup, loops, setup.options.n_threads_batch, eval_best)
    setup.log("time to first token over a long conversation…")
    first = ttft(setup, loops.count_tokens)
    section = {
        "history_tokens": first.pop("history_tokens"),
        "long_reply_tokens": first.pop("long_reply_tokens"),
        "runs": first.pop("runs"),
        "runs_without_cache": first.pop("runs_without_cache"),
        **first,
        "prefill_progress_cost": pre["progress_cost_ratio"],
        "prefill_progress_cost_ci": pre["progress_cost_ratio_ci"],
    }
    return {"prefill": pre, "ttft_ms": section}


async def _server_alone(setup: Setup) -> Any:
    setup.log("Floodgate as a local API server…")
    return await local_api(setup)


async def _download_alone(setup: Setup) -> Any:
    setup.log("downloads (Floodgate's queue vs a plain httpx stream, fake Hub on loopback)…")
    return await download(setup)


async def _ttft_alone(setup: Setup) -> Any:
    cores = setup.options.n_threads or physical_cores()
    setup.options = replace(setup.options, n_threads=cores, n_threads_batch=cores)
    loops = BareLoops(setup.model, setup.options, setup.plan.max_tokens)
    try:
        setup.log("time to first token over a long conversation…")
        return ttft(setup, loops.count_tokens)
    finally:
        loops.close()


async def _gpu_alone(setup: Setup) -> Any:
    setup.log("the GPU: layers offloaded, llama-cpp-python on it, Stop, the fit…")
    return gpu(setup)


async def _long_reply_alone(setup: Setup) -> Any:
    return _long_reply(setup)


async def _large_messages_alone(setup: Setup) -> Any:
    return _large_messages(setup)


async def _parallel_alone(setup: Setup) -> Any:
    cores = setup.options.n_threads or physical_cores()
    batch = setup.options.n_threads_batch or physical_cores()
    setup.options = replace(setup.options, n_threads=cores, n_threads_batch=batch)
    setup.log("replies side by side (one llama_decode per step for all)…")
    return await parallel(setup)


async def _speculative_alone(setup: Setup) -> Any:
    cores = setup.options.n_threads or physical_cores()
    setup.options = replace(setup.options, n_threads=cores, n_threads_batch=cores)
    setup.log("drafts from the context (prompt lookup) against the plain loops…")
    return speculative(setup)


def _in_the_app_with_loops_alone(
    what: str, section: Callable[[Setup, MainWindow, BareLoops], Awaitable[dict[str, Any]]]
) -> Callable[[Setup], Awaitable[dict[str, Any]]]:
    """A section that runs in the app beside the bare child's loops, alone."""

    async def alone(setup: Setup) -> dict[str, Any]:
        loops = BareLoops(setup.model, setup.options, setup.plan.max_tokens)
        try:
            in_the_app = _in_the_app_alone(
                what, lambda setup, window: section(setup, window, loops)
            )
            return await in_the_app(setup)
        finally:
            loops.close()

    return alone


async def _throughput_with_rows(
    setup: Setup, window: MainWindow, loops: BareLoops
) -> dict[str, Any]:
    threads, tp = await _threads_and_throughput(setup, window, loops)
    return {**tp, "threads": threads}


async def _vision_alone(setup: Setup) -> Any:
    setup.log("pictures: the projector, read once, Stop in the encoder…")
    quick = setup.plan.speculative_rounds < 2
    return vision(setup, *((2, 3) if quick else ()))


_ALONE: dict[str, Callable[[Setup], Awaitable[Any]]] = {
    "server": _server_alone,
    "download": _download_alone,
    "ttft_ms": _ttft_alone,
    "gpu": _gpu_alone,
    "window_cost": _in_the_app_alone(
        "what the window's threads cost the decode threads", window_cost_section
    ),
    "window_floor": _in_the_app_with_loops_alone(
        "the window's floor (no text shown, one line, all of it; the native loop)", window_floor
    ),
    "throughput": _in_the_app_with_loops_alone(
        "the thread counts, then the throughput pairs", _throughput_with_rows
    ),
    "diagnostics_panel": _in_the_app_alone("diagnostics panel shown vs hidden", diagnostics_cost),
    "long_reply": _long_reply_alone,
    "large_messages": _large_messages_alone,
    "parallel": _parallel_alone,
    "speculative": _speculative_alone,
    "vision": _vision_alone,
}
"""How ``--only`` runs each section alone: its figures, under the section's key in the JSON."""

SECTIONS = tuple(_ALONE)
"""Sections ``floodgate bench --only`` can run alone (the rest share their setup).

Alone, ``window_cost``, ``window_floor``, ``throughput`` and ``diagnostics_panel`` open the
app as the whole run does (its worker measures its decode threads first, unless ``--threads``
sets them); ``throughput`` runs the ``threads`` rows first, as the whole run does, to find the
native loop's best count (its JSON holds them under ``throughput.threads``); ``ttft_ms`` runs
at ``--threads`` (default: every physical core) rather than at the count the app's worker
would measure, and without the prefill pairs' progress cost; ``parallel`` decodes at
``--threads`` too (default: every physical core).
"""


async def run(setup: Setup, only: str | None = None) -> dict[str, Any]:
    """Measure everything (or only one section); returns the JSON document.

    llama-cpp-python's references run in a bare child process; in this process llama.cpp is
    called from one thread at a time (the app's worker, or the engine thread of a section).
    """
    finalize_async_generators_on(asyncio.get_running_loop())
    if only is not None and only in _ALONE:
        return {only: await _ALONE[only](setup), "machine": machine(setup)}
    return await _everything(setup)


async def _everything(setup: Setup) -> dict[str, Any]:
    """Every section, in the order that shares their setup best."""
    loops = BareLoops(setup.model, setup.options, setup.plan.max_tokens)
    try:
        app = await _app_sections(setup, loops)
        prompt = await _prompt_sections(setup, loops, app["threads"]["eval_best"])
    finally:
        loops.close()
    tp = app["throughput"]
    setup.log("fire hose…")
    hose = await firehose(setup)
    long = _long_reply(setup)
    large = _large_messages(setup)
    setup.log("a model on a server (llama_cpp.server on loopback)…")
    server = await remote(setup)
    setup.log("Floodgate as a local API server…")
    local = await local_api(setup)
    setup.log("replies side by side (one llama_decode per step for all)…")
    side_by_side = await parallel(setup)
    setup.log("drafts from the context (prompt lookup) against the plain loops…")
    at_best = replace(setup.options, n_threads=app["threads"]["eval_best"])
    drafts = speculative(replace(setup, options=at_best))
    setup.log("pictures: the projector, read once, Stop in the encoder…")
    seen = vision(setup)
    setup.log("downloads (Floodgate's queue vs a plain httpx stream, fake Hub on loopback)…")
    fetched = await download(setup)
    setup.log("the GPU, if there is one…")
    on_gpu = gpu(setup)
    setup.log("baselines…")
    hose_pieces = firehose_pieces(setup.plan.firehose_seconds)
    baselines = await designs(
        setup.real_pieces, tp["app_tok_s"], hose_pieces, FIREHOSE_RATE, setup.log
    )
    return {
        "throughput": {k: v for k, v in tp.items() if not k.endswith("_ms")},
        "threads": app["threads"],
        "loop_lag_ms": app["loop_lag_ms"],
        "token_to_screen_ms": tp["token_to_screen_ms"],
        "frame_cost_ms": tp["frame_cost_ms"],
        **app["stops"],
        "firehose": hose,
        "long_reply": long,
        "large_messages": large,
        "diagnostics_panel": app["diagnostics_panel"],
        "trace": app["trace"],
        "window_cost": app["window_cost"],
        "window_floor": app["window_floor"],
        "baselines": baselines,
        "remote": server,
        "server": local,
        "parallel": side_by_side,
        "speculative": drafts,
        "vision": seen,
        "download": fetched,
        "gpu": on_gpu,
        **prompt,
        "machine": machine(setup),
    }


def machine(setup: Setup) -> dict[str, Any]:
    """What the figures were measured on, with the window's side of it."""
    return {
        **machine_facts(setup, ("llama-cpp-python", "PySide6-Essentials", "qasync")),
        "qt_platform": QApplication.platformName(),
        "frame_ms": round(FRAME * 1000, 2),
        "queue_bound": DEFAULT_QUEUE_BOUND,
    }
