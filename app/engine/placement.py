"""Where a model runs: which device, how many layers on it, and why.

Before a load, :func:`plan_placement` chooses the device (the user's "Compute" setting: Auto,
CPU only, or one GPU by name) and the layers to offload (:func:`app.engine.fit.plan_offload`
over the GGUF header and the device's free memory, or the user's "GPU layers"). The load
itself (:func:`app.engine.llama.open_llama`) tries that plan, then fewer layers, then the CPU,
and records what it got as a :class:`Placement`, which the header, Settings, the diagnostics
panel and the bench show.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, replace
from pathlib import Path

import psutil

from app.engine.backend import EngineOptions, Placement
from app.engine.devices import (
    ComputeDevice,
    DeviceProbe,
    device_memory,
    list_devices,
    load_backends,
    probe_devices,
)
from app.engine.errors import ModelLoadError
from app.engine.fit import OffloadPlan, choose_parallel, margin, model_sizes, plan_offload
from app.engine.model_card import read_gguf_header
from app.sentence import QT_TRANSLATE_NOOP, Sentence

log = logging.getLogger(__name__)

AUTO = "auto"
"""The "Compute" setting that lets Floodgate choose: the GPU with the most free memory."""

CPU = "cpu"
"""The "Compute" setting that keeps every layer and every operation on the CPU."""


@dataclass(frozen=True)
class PlacementPlan:
    """What to try when loading: a device and the attempts, most offloaded first.

    Attributes:
        device: the GPU (None: the CPU alone).
        attempts: ``(n_gpu_layers, n_ctx)`` in the order to try; the last is the CPU's.
        offload: the fit's plan for the first attempt (None on the CPU alone).
        note: what the user should know already (see :attr:`Placement.note`).
        seen: the GPUs listed (see :attr:`Placement.devices`).
    """

    device: ComputeDevice | None
    attempts: tuple[tuple[int, int], ...]
    offload: OffloadPlan | None
    note: Sentence | None = None
    seen: tuple[ComputeDevice, ...] = ()


_EVERY_LAYER = 9999
"""``n_gpu_layers`` past any model's layer count: llama.cpp offloads them all."""

_probe_lock = threading.Lock()
_probe: DeviceProbe | None = None


def devices(*, start_gpu: bool = True) -> DeviceProbe:
    """The GPUs, listed once per process in a child (see :func:`probe_devices`).

    After a clean listing, and with ``start_gpu``, the GPU backend is loaded into this
    process too and the list is read again here, with the memory free now; without it (the
    CPU only), the child's list is returned and this process never starts the GPU's driver.
    Blocks the first time: call it off the UI thread.
    """
    global _probe
    with _probe_lock:
        if _probe is None:
            _probe = probe_devices()
        probe = _probe
        usable = bool(probe.backend) and probe.problem is None
        load_backends(gpu=usable and start_gpu)
    if usable and start_gpu:
        return replace(probe, devices=list_devices())
    return probe


def _chosen_device(
    compute: str, probe: DeviceProbe
) -> tuple[ComputeDevice | None, Sentence | None]:
    """The GPU the setting asks for, and a note if it asked for one that is not there."""
    if compute == CPU:
        return None, None
    if not probe.devices:
        return None, probe.problem or (_missing(compute) if compute != AUTO else None)
    if compute == AUTO:
        # A discrete GPU before an integrated one, then the most free memory (GPT4All and
        # Jan prefer a discrete GPU; llama.cpp would split across all of them).
        return max(probe.devices, key=lambda d: (not d.integrated, d.free)), None
    for device in probe.devices:
        if device.name == compute:
            return device, None
    best = max(probe.devices, key=lambda d: (not d.integrated, d.free))
    return best, _missing(compute)


def _missing(name: str) -> Sentence:
    return Sentence(
        QT_TRANSLATE_NOOP(
            "Floodgate", "The GPU {name} chosen in Settings is not there now; Auto was used."
        ),
        {"name": name},
    )


def plan_placement(path: Path, options: EngineOptions) -> PlacementPlan:
    """Where ``path`` should run with ``options``, and what to try if that fails.

    Raises:
        ModelLoadError: the file's header cannot be read.
    """
    # "CPU only" never starts the GPU's driver in this process (the child lists the GPUs,
    # for Settings): only the CPU backend is loaded.
    probe = devices(start_gpu=options.compute != CPU)
    device, note = _chosen_device(options.compute, probe)
    cpu_attempt = (0, options.n_ctx)
    seen = probe.devices
    if device is None:
        return PlacementPlan(None, (cpu_attempt,), None, note, seen)
    header = read_gguf_header(path, with_tensors=True)
    sizes = model_sizes(header, path.stat().st_size)
    # The draft model goes wholly on the same device, first: the model fits beside it.
    weights, kv_per_token = draft_need(options.draft_model)
    budget = max(0, _budget(device, options.gpu_memory_mb) - weights - kv_per_token * options.n_ctx)
    n_ubatch = min(options.n_batch, options.n_ctx)
    if sizes is None:
        # A header without what the fit needs: the user's layers, or every layer, and the
        # load's own fallback if that is too much.
        layers = options.gpu_layers if options.gpu_layers is not None else _EVERY_LAYER
        attempts = _attempts(layers, options.n_ctx, options.n_ctx)
        return PlacementPlan(device, attempts, None, note, seen)
    offload = plan_offload(sizes, options.n_ctx, n_ubatch, budget, options.gpu_layers)
    # On the CPU the context asked for fits again.
    attempts = _attempts(offload.n_gpu_layers, offload.n_ctx, options.n_ctx)
    return PlacementPlan(device, attempts, offload, note, seen)


def resolve_parallel(path: Path, options: EngineOptions) -> EngineOptions:
    """``options`` for the whole context: ``parallel`` chosen if 0, ``n_ctx`` for every sequence.

    "Parallel replies" on Auto (0) is chosen from what one sequence's KV cache takes at the
    context asked for (the GGUF header) and the memory there is: free RAM, or on a GPU its
    room beside the weights (:func:`~app.engine.fit.choose_parallel`). Each sequence gets
    the context asked for, so the whole context is ``n_ctx`` times ``parallel``.

    Raises:
        ModelLoadError: the file's header cannot be read (only when choosing).
    """
    parallel = options.parallel
    if parallel <= 0:
        sizes = model_sizes(read_gguf_header(path, with_tensors=True), path.stat().st_size)
        if sizes is None:
            parallel = 1
        else:
            # A draft model's weights and its cache per sequence are counted beside the model's.
            draft_weights, draft_kv_per_token = draft_need(options.draft_model)
            per_sequence = sizes.shape.kv_cache_bytes(options.n_ctx)
            per_sequence += draft_kv_per_token * options.n_ctx
            available = psutil.virtual_memory().available
            if options.compute != CPU:
                device, _ = _chosen_device(options.compute, devices(start_gpu=True))
                if device is not None:
                    room = _budget(device, options.gpu_memory_mb)
                    available = max(0, room - sizes.weights_on_gpu(sizes.all_layers))
            parallel = choose_parallel(per_sequence, max(0, available - draft_weights))
    return replace(options, parallel=parallel, n_ctx=options.n_ctx * parallel)


def draft_need(draft: Path | None) -> tuple[int, int]:
    """A draft model's weights and its KV cache's bytes per token (0, 0: none, or unread).

    Read from its header; one that cannot be read needs nothing here (its load then fails
    with its own sentence, and the model opens without it).
    """
    if draft is None:
        return 0, 0
    try:
        sizes = model_sizes(read_gguf_header(draft, with_tensors=True), draft.stat().st_size)
    except (ModelLoadError, OSError):
        return 0, 0
    if sizes is None:
        return 0, 0
    return sizes.weights_on_gpu(sizes.all_layers), sizes.shape.kv_cache_bytes(1)


def gpu_budget(placement: Placement, compute: str, cap_mb: int) -> int:
    """Bytes the GPU that ``compute`` chooses could give a model (0: the CPU alone).

    From the devices as they were before the open model was loaded (its own memory is
    given back when another model replaces it).
    """
    device, _ = _chosen_device(compute, DeviceProbe(placement.devices, backend="listed"))
    return _budget(device, cap_mb) if device is not None else 0


def _budget(device: ComputeDevice, cap_mb: int) -> int:
    """Bytes the model may take on ``device``: free memory less the margin, or the cap."""
    room = max(0, device.free - margin(device.total))
    if cap_mb > 0:
        return min(room, cap_mb * 1024 * 1024)
    return room


def _attempts(layers: int, n_ctx: int, cpu_ctx: int) -> tuple[tuple[int, int], ...]:
    """The plan's layers, then half of them, then none (the CPU, at ``cpu_ctx``)."""
    tries = [(layers, n_ctx), (layers // 2, n_ctx), (0, cpu_ctx)]
    return tuple(dict.fromkeys(attempt for attempt in tries if attempt[0] or attempt is tries[-1]))


def fell_back(tried: int, got: int, reason: str) -> Sentence:
    """The sentence for a GPU load that failed and was tried again with fewer layers."""
    if got == 0:
        return Sentence(
            QT_TRANSLATE_NOOP(
                "Floodgate",
                "Loading {tried} layers on the GPU failed ({reason}), probably for want of "
                "GPU memory; the model runs on the CPU.",
            ),
            {"tried": tried, "reason": reason},
        )
    return Sentence(
        QT_TRANSLATE_NOOP(
            "Floodgate",
            "Loading {tried} layers on the GPU failed ({reason}), probably for want of GPU "
            "memory; {got} layers were loaded there instead.",
        ),
        {"tried": tried, "got": got, "reason": reason},
    )


def measured_use(device: str, free_before: int | None) -> int | None:
    """Bytes the device reports in use since ``free_before`` (None when it does not say)."""
    if not device or free_before is None:
        return None
    now = device_memory(device)
    if now is None:
        return None
    used = free_before - now[0]
    return used if used > 0 else None


def free_now(device: ComputeDevice | None) -> int | None:
    """The device's free bytes now (None for the CPU or a device that does not say)."""
    if device is None:
        return None
    now = device_memory(device.name)
    return now[0] if now is not None else None
