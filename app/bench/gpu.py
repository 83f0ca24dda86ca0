"""The ``gpu`` section: the model on a GPU, against llama-cpp-python on the same GPU.

Run whenever a GPU is listed (a CPU-type Vulkan device such as lavapipe only when
``GGML_VK_VISIBLE_DEVICES`` names it: ggml skips those otherwise), by ``floodgate bench --only
gpu``, and by ``make gpu-check`` without a window (:mod:`app.bench.gpu_check`):

- decode and prompt tokens/s with no layer, half the layers and every layer offloaded,
  through Floodgate's engine (its loop, its chunks sized by device time);
- ``native_ratio``: Floodgate's decode rate with every layer offloaded over llama-cpp-python's
  leanest loop with ``Llama(n_gpu_layers=-1)``, in the bare child process;
- Stop in the middle of prompt processing and of a reply, every layer offloaded: p95;
- the fit: the memory it planned against what the device reported, and what llama.cpp
  allocated on it.

Everything here drives the engine on one engine thread, as the app's worker does.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any

from app.bench.bare import BareLoops
from app.bench.engine_drive import EngineThread, filler
from app.bench.plan import Setup
from app.bench.stats import summary
from app.engine import ChatMessage, GenerationReport, GenerationSettings, StopSignal
from app.engine.devices import probe_devices
from app.engine.llama import LlamaBackend
from app.engine.threads import physical_cores
from app.flow.metrics import Distribution
from app.install.gpu_probe import vulkan_devices

GREEDY = GenerationSettings(temperature=0.0, max_tokens=1024)


def gpu(setup: Setup) -> dict[str, Any]:
    """The section's figures (``{"present": false}`` without a GPU)."""
    probe = probe_devices()
    if probe.problem is not None:
        return {"present": False, "problem": str(probe.problem)}
    if not probe.devices:
        return {"present": False, "backend": probe.backend or None}
    device = max(probe.devices, key=lambda d: (not d.integrated, d.free))
    plan = setup.plan
    prompt = [ChatMessage(role="user", content=filler(7, plan.gpu_prompt_words))]
    options = replace(setup.options, compute=device.name, cache_ram_mb=0, cache_dir=None)
    rows: dict[str, dict[str, Any]] = {}
    stops: dict[str, Any] = {}
    fit: dict[str, Any] = {}
    every = 0
    with EngineThread() as engine:
        for label in ("all", "half", "none"):
            layers = {"all": None, "half": every // 2, "none": 0}[label]
            setup.log(f"  GPU: {label} layers on {device.description}…")
            backend = engine.open(setup.model, replace(options, gpu_layers=layers))
            try:
                placement = backend.info.placement
                assert placement is not None
                if label == "all":  # the first load
                    # A device builds a pipeline for each new shape on first use (the first
                    # replies took 4-6 s on an H200 through Vulkan): not part of the rates.
                    # The warm-up is another prompt of the same length (the KV cache would
                    # keep this one).
                    warm = [ChatMessage(role="user", content=filler(8, plan.gpu_prompt_words))]
                    engine.call(partial(_rates, backend, warm, 2))
                every = every or placement.all_layers
                rates = engine.call(partial(_rates, backend, prompt, plan.gpu_decode_tokens))
                rows[label] = {"layers": placement.layers, **rates}
                if label == "all":
                    fit = _fit(placement)
                    seconds = rates["prompt_tokens"] / rates["prompt_tok_s"]
                    stops = _stops(setup, engine, backend, prompt, seconds)
            finally:
                engine.close(backend)
    tokens_for_native = engine_free_tokens(setup, prompt)
    loops = BareLoops(setup.model, setup.options, plan.gpu_decode_tokens, n_gpu_layers=-1)
    try:
        native = loops.native_run(tokens_for_native, setup.options.n_threads or physical_cores())
    finally:
        loops.close()
    decode = rows["all"]["decode_tok_s"]
    kinds = {name: kind for kind, name in vulkan_devices()} if probe.backend == "vulkan" else {}
    return {
        "present": True,
        "device": device.name,
        "description": device.description,
        # As the Vulkan loader says (lavapipe: "cpu"); other backends list GPUs only.
        "device_type": kinds.get(device.description, "gpu"),
        "memory_total": device.total,
        "layers": every,
        "rates": rows,
        "native_decode_tok_s": round(native, 2),
        "native_ratio": round(decode / native, 3) if native > 0 else math.nan,
        **stops,
        "fit": fit,
    }


def engine_free_tokens(setup: Setup, prompt: list[ChatMessage]) -> list[int]:
    """The prompt's tokens as llama-cpp-python reads it, for the native loop."""
    loops = BareLoops(setup.model, setup.options, setup.plan.gpu_decode_tokens)
    try:
        return loops.prompt_tokens(prompt)
    finally:
        loops.close()


def _rates(backend: LlamaBackend, prompt: list[ChatMessage], tokens: int) -> dict[str, Any]:
    """Prompt and decode tokens/s of one greedy reply (on the engine thread)."""
    report = GenerationReport()
    times: list[float] = []
    settings = replace(GREEDY, max_tokens=tokens)
    for _piece in backend.stream_reply(prompt, settings, StopSignal(), report):
        times.append(time.perf_counter())
    assert report.prefill_started_at is not None
    assert report.prefill_ended_at is not None
    prefill = report.prompt_tokens / (report.prefill_ended_at - report.prefill_started_at)
    decode = (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 else math.nan
    return {
        "prompt_tokens": report.prompt_tokens,
        "prompt_tok_s": round(prefill, 2),
        "decode_tok_s": round(decode, 2),
    }


def _stops(
    setup: Setup,
    engine: EngineThread,
    backend: LlamaBackend,
    prompt: list[ChatMessage],
    prefill_seconds: float,
) -> dict[str, Any]:
    """Stop at random moments of prompt processing and of a reply: latency, milliseconds.

    Args:
        setup: the run.
        engine: the engine thread.
        backend: the model, every layer offloaded.
        prompt: the prompt (not cached: each run processes it whole).
        prefill_seconds: how long processing it took (the random moments fall within).
    """
    prefill, decode = Distribution(), Distribution()
    for trial in range(setup.plan.gpu_stops):
        # A prompt of the same length, new each time: the KV cache holds none of it.
        fresh = [ChatMessage(role="user", content=filler(100 + trial, setup.plan.gpu_prompt_words))]
        at = setup.rng.uniform(0.1, 0.9) * prefill_seconds
        stopped = engine.reply(backend, fresh, GREEDY, "", stop_when=_after(at))
        _record(stopped.report, stopped.stop_set_at, prefill, "prefill")
        wait = setup.rng.uniform(0.0, 0.2)
        stopped = engine.reply(backend, prompt, GREEDY, "", stop_when=_into_reply(wait))
        _record(stopped.report, stopped.stop_set_at, decode, "decode")
    return {"stop_prefill_ms": summary(prefill), "stop_decode_ms": summary(decode)}


def _after(at: float) -> Callable[[GenerationReport, float], bool]:
    """Stop ``at`` seconds after the reply was asked for."""
    return lambda _report, seconds: seconds >= at


def _into_reply(wait: float) -> Callable[[GenerationReport, float], bool]:
    """Stop ``wait`` seconds after the reply's first piece."""
    first: list[float] = []

    def due(report: GenerationReport, _seconds: float) -> bool:
        if report.pieces and not first:
            first.append(time.perf_counter())
        return bool(first) and time.perf_counter() >= first[0] + wait

    return due


def _record(report: GenerationReport, set_at: float | None, into: Distribution, phase: str) -> None:
    """One stop's latency, if it landed in ``phase`` (a stop that came late is not counted)."""
    if set_at is None or report.compute_ended_at is None:
        return
    in_prefill = report.prefill_ended_at is None or report.prefill_ended_at > set_at
    if (phase == "prefill") == in_prefill:
        into.add((report.compute_ended_at - set_at) * 1000)


def _fit(placement: Any) -> dict[str, Any]:
    """The fit's plan against what the device and llama.cpp said after the load."""
    return {
        "estimate_bytes": placement.need,
        "device_reported_bytes": placement.used,
        "llama_cpp_allocated_bytes": placement.allocated,
        "estimate_over_allocated": (
            round(placement.need / placement.allocated, 3) if placement.allocated else None
        ),
        "budget_bytes": placement.budget,
        "why": placement.why.value if placement.why is not None else None,
    }
