"""Loading a GGUF model with llama.cpp, and what opens beside it.

The planned attempts (most offloaded first), a context for several sequences, what llama.cpp
says it allocated, and what opens beside the model: the prompt cache, the projector, the
draft model. The engine that the model becomes is :class:`~app.engine.llama.LlamaBackend`
(:func:`~app.engine.llama.open_llama` opens one).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import llama_cpp
from llama_cpp import mtmd_cpp

from app.engine.backend import EngineOptions, Placement
from app.engine.draft_model import DraftModel, mismatch_sentence, vocabulary_difference
from app.engine.errors import ModelLoadError
from app.engine.kv_record import DISK_WORTHY_SECONDS
from app.engine.model_card import find_projector, projector_senses
from app.engine.placement import PlacementPlan, fell_back, free_now, measured_use
from app.engine.projector import Projector, ProjectorError
from app.engine.prompt_cache import ModelIdentity, PromptCache
from app.engine.threads import physical_cores
from app.sentence import QT_TRANSLATE_NOOP, Sentence

# The engine's log, as before it was split up: ``floodgate --debug`` shows llama.cpp's lines.
log = logging.getLogger("app.engine.llama")

_MIB = 1024 * 1024


def _forward_native_log(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
    # llama.cpp logs at ERROR on every aborted decode ("removing memory module entries"),
    # which is what Stop is meant to do; its real failures reach us as exceptions. So its log
    # goes to Python logging at DEBUG (``floodgate --debug`` shows it), not to the terminal.
    line = text.decode("utf-8", "replace").rstrip()
    if _BUFFERS.recording:
        _BUFFERS.read(line)
    log.debug("llama.cpp: %s", line)


class _BufferLog:
    """llama.cpp's own account of what a load allocated, by buffer, from its log.

    While a model loads, llama.cpp logs each buffer it allocates ("Vulkan0 model buffer
    size = 93.55 MiB", the KV cache, the compute buffer): what the model takes on a device
    as llama.cpp counts it, also where the device does not report its free memory (lavapipe).
    Only the loading thread records, and only while it loads.
    """

    _LINE = re.compile(r"(\S+)\s+(?:model|KV|compute|output|RS) buffer size =\s*([\d.]+) MiB")

    def __init__(self) -> None:
        self.recording = False
        self.by_buffer: dict[str, int] = {}

    def read(self, line: str) -> None:
        found = self._LINE.search(line)
        if found is not None:
            name = found.group(1)
            self.by_buffer[name] = self.by_buffer.get(name, 0) + int(float(found.group(2)) * _MIB)

    def start(self) -> None:
        self.by_buffer = {}
        self.recording = True

    def on(self, device: str) -> int:
        """Bytes allocated on ``device`` since :meth:`start` (its name, as ggml's buffers say)."""
        self.recording = False
        return sum(size for name, size in self.by_buffer.items() if name == device)


_BUFFERS = _BufferLog()


# Installed once, at import; the module keeps the callback object alive.
_native_log_callback = llama_cpp.llama_log_callback(_forward_native_log)
llama_cpp.llama_log_set(_native_log_callback, ctypes.c_void_p(0))
# libmtmd (the projector) logs on its own; its lines go the same way.
mtmd_cpp.mtmd_helper_log_set(_native_log_callback, ctypes.c_void_p(0))


def open_projector(
    llm: llama_cpp.Llama, path: Path, options: EngineOptions, placement: Placement
) -> tuple[Projector | None, Sentence | None]:
    """Open the model's projector: the one asked for, else an ``mmproj*.gguf`` beside it.

    A projector asked for that fails closes the model too, with its sentence, unless
    ``options.projector_fallback``: then the model opens for text and the sentence comes
    back to be shown. One found beside the model that fails leaves the model open for text,
    and its sentence comes back too: the library listed the model as one that sees or hears,
    and the user is told why it does not.
    """
    chosen = options.projector
    found = chosen or (find_projector(path) if options.projector_beside else None)
    if found is None or (chosen is None and projector_senses(found) == (False, False)):
        return None, None
    threads = options.n_threads_batch or physical_cores()
    kept = options.cache_dir.with_name("picture-cache") if options.cache_dir else None
    try:
        projector = Projector(found, llm.model, threads, use_gpu=placement.on_gpu, cache_dir=kept)
    except ProjectorError as exc:
        if chosen is None or options.projector_fallback:
            log.warning("Projector %s for %s not opened: %s", found.name, path.name, exc)
            return None, exc.sentence
        llm.close()
        raise ModelLoadError(exc.sentence.template, **exc.sentence.fields) from None
    return projector, None


def load_model(
    path: Path, options: EngineOptions, plan: PlacementPlan
) -> tuple[llama_cpp.Llama, Placement]:
    """Load ``path`` by the plan's attempts, most offloaded first; the CPU's failure raises."""
    cores = physical_cores()
    device = plan.device
    failed: tuple[int, str] | None = None
    for layers, n_ctx in plan.attempts:
        free_before = free_now(device) if layers else None
        _BUFFERS.start()
        try:
            with for_sequences(options.parallel):
                llm = llama_cpp.Llama(
                    model_path=str(path),
                    n_ctx=n_ctx,
                    n_threads=options.n_threads or cores,
                    n_threads_batch=options.n_threads_batch or cores,
                    n_batch=options.n_batch,
                    n_ubatch=n_ubatch(options),
                    n_gpu_layers=layers,
                    # One device, or none: "CPU only" must mean that (with main_gpu -1 llama.cpp
                    # gives the model no GPU at all, so no operation is sent to one either).
                    split_mode=llama_cpp.LLAMA_SPLIT_MODE_NONE,
                    main_gpu=device.index if layers and device is not None else -1,
                    op_offload=bool(layers),
                    flash_attn=options.flash_attn,
                    verbose=False,
                )
        except (ValueError, RuntimeError, OSError) as exc:
            if layers == 0:
                raise ModelLoadError(
                    QT_TRANSLATE_NOOP(
                        "Floodgate",
                        "{name} could not be loaded: the file may be truncated, damaged, or "
                        "made for a newer llama.cpp. ({reason})",
                    ),
                    name=path.name,
                    reason=exc,
                ) from exc
            log.warning("Loading %s with %d GPU layers failed: %s", path.name, layers, exc)
            failed = failed or (layers, str(exc))
            continue
        # The plan's figures describe its first attempt only.
        offload = plan.offload if failed is None else None
        gpu = device if device is not None and layers > 0 else None
        placement = Placement(
            device=gpu.name if gpu is not None else "",
            description=gpu.description if gpu is not None else "",
            layers=layers if gpu is not None else 0,
            all_layers=int(llama_cpp.llama_model_n_layer(llm.model)) + 1,
            why=offload.why if offload is not None else None,
            need=offload.need if offload is not None else 0,
            used=measured_use(gpu.name, free_before) if gpu is not None else None,
            allocated=_BUFFERS.on(gpu.name) if gpu is not None else 0,
            budget=plan.offload.budget if plan.offload is not None else 0,
            n_ctx_asked=options.n_ctx // options.parallel if n_ctx != options.n_ctx else None,
            note=plan.note if failed is None else fell_back(failed[0], layers, failed[1]),
            devices=plan.seen,
            asked=options.compute,
            fell_back=failed is not None,
        )
        return llm, placement
    raise AssertionError("the plan's last attempt is the CPU's, which raises when it fails")


@contextlib.contextmanager
def for_sequences(n_seq: int) -> Iterator[None]:
    """While a ``Llama`` is made on this thread: a context for ``n_seq`` sequences.

    llama-cpp-python's ``Llama`` takes no ``n_seq_max``; it starts from
    ``llama_context_default_params()``, so the defaults it reads meanwhile carry it. Each
    sequence gets an equal part of the context and a KV cache stream of its own
    (``kv_unified`` off, as llama.cpp advises for sequences that share no long prefix).
    """
    if n_seq <= 1:
        yield
        return
    module = llama_cpp.llama_cpp
    defaults = module.llama_context_default_params

    def with_sequences() -> Any:
        params = defaults()
        params.n_seq_max = n_seq
        params.kv_unified = False
        return params

    module.llama_context_default_params = with_sequences
    try:
        yield
    finally:
        module.llama_context_default_params = defaults


def open_prompt_cache(
    path: Path, llm: llama_cpp.Llama, options: EngineOptions
) -> PromptCache | None:
    """The prompt cache ``options`` ask for, for ``llm`` loaded from ``path`` (None: none)."""
    if options.cache_ram_mb <= 0 and options.cache_dir is None:
        return None
    try:
        # A sequence's state is the same whatever the places beside it.
        identity = ModelIdentity.of(path, int(llama_cpp.llama_n_ctx_seq(llm.ctx)))
    except OSError as exc:  # the file was readable a moment ago; run without a cache
        log.warning("Prompt cache off: %s", exc)
        return None
    return PromptCache(
        identity,
        ram_budget=options.cache_ram_mb * _MIB,
        disk_dir=options.cache_dir,
        disk_budget=options.cache_disk_mb * _MIB,
        disk_min_seconds=DISK_WORTHY_SECONDS,
    )


def open_draft_model(
    path: Path,
    llm: llama_cpp.Llama,
    model: Path,
    abort: tuple[Any, Any],
    options: EngineOptions,
    placement: Placement,
) -> tuple[DraftModel | None, Sentence | None]:
    """Open ``path`` as the draft model of ``llm`` (loaded from ``model``).

    On the model's device, with its threads, for its sequences, stopped by its abort
    callback (``abort``: the callback and its data). A draft model that cannot be loaded, or
    whose vocabulary is not the model's, is not used: None comes back, and why.
    """
    ctx = llm.ctx
    on_gpu = placement.on_gpu
    device = next((d for d in placement.devices if d.name == placement.device), None)
    problem: Sentence | None = None
    try:
        with for_sequences(int(llama_cpp.llama_n_seq_max(ctx))):
            draft = llama_cpp.Llama(
                model_path=str(path),
                n_ctx=int(llama_cpp.llama_n_ctx(ctx)),
                n_threads=int(llama_cpp.llama_n_threads(ctx)),
                n_threads_batch=int(llama_cpp.llama_n_threads_batch(ctx)),
                n_batch=options.n_batch,
                n_ubatch=n_ubatch(options),
                n_gpu_layers=-1 if on_gpu else 0,  # all of it on the model's device
                split_mode=llama_cpp.LLAMA_SPLIT_MODE_NONE,
                main_gpu=device.index if on_gpu and device is not None else -1,
                op_offload=on_gpu,
                flash_attn=options.flash_attn,
                verbose=False,
            )
    except (ValueError, RuntimeError, OSError) as exc:
        problem = Sentence(
            QT_TRANSLATE_NOOP(
                "Floodgate",
                "The draft model {draft} could not be opened, so {model} writes without "
                "it. ({reason})",
            ),
            {"draft": path.name, "model": model.name, "reason": str(exc)},
        )
    else:
        how = vocabulary_difference(
            llama_cpp.llama_model_get_vocab(llm.model),
            llama_cpp.llama_model_get_vocab(draft.model),
        )
        if how is None:
            return DraftModel(draft, path, abort), None
        draft.close()
        problem = mismatch_sentence(path, model, how)
    log.warning("Draft model %s not used: %s", path.name, problem)
    return None, problem


def n_ubatch(options: EngineOptions) -> int:
    """The micro-batch a context is made with: llama-cpp-python's 512, within the batch."""
    return min(options.n_batch, _N_UBATCH)


_N_UBATCH = 512
