"""What every engine offers the worker: open a model, stream a reply, honour Stop."""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, NotRequired, Protocol, TypedDict

from app import defaults
from app.engine.devices import ComputeDevice
from app.engine.fit import Why
from app.engine.pictures import Picture
from app.engine.prompt_cache import CacheStats
from app.engine.sounds import Sound
from app.engine.stop import StopSignal
from app.roles import Role
from app.sentence import QT_TRANSLATE_NOOP, Sentence, size_text

FinishReason = Literal["done", "length", "stopped", "error"]


class ChatMessage(TypedDict):
    """One turn as the model's chat template receives it."""

    role: Role
    content: str
    pictures: NotRequired[tuple[Picture, ...]]
    """Pictures shown with the turn (for a model that sees), placed before its text."""
    sounds: NotRequired[tuple[Sound, ...]]
    """Sounds played with the turn (for a model that hears), placed after its pictures and
    before its text."""


@dataclass(frozen=True)
class EngineOptions:
    """How a model is opened.

    Attributes:
        n_ctx: context window in tokens.
        n_threads: CPU threads that decode (0: every physical core; the app then measures
            the fastest count, :mod:`app.engine.threads`).
        n_threads_batch: CPU threads that process prompts (0: every physical core).
        n_batch: prompt tokens evaluated per llama_decode call during prefill, at most.
        cache_ram_mb: megabytes of processed prompts (KV cache states) kept in RAM, one per
            conversation, least recently used dropped first; 0 (and no ``cache_dir``): none.
        cache_disk_mb: megabytes of them kept in ``cache_dir``.
        cache_dir: the folder for processed prompts that cost 2 s or more to compute (None:
            RAM only). The app passes ``<data dir>/prompt-cache``.
        prefill_chunk_seconds: how long one chunk of prompt processing should take (chunks
            are sized from the measured rate), so that progress is reported at least that
            often; 0 processes ``n_batch`` tokens per call, as llama-cpp-python does.
        compute: where models run: ``auto``, ``cpu`` or a GPU's name (see
            :mod:`app.engine.placement`).
        gpu_layers: layers offloaded to the GPU (None: as many as fit).
        gpu_memory_mb: the most GPU memory a model may take (0: what is free, less a margin).
        parallel: replies decoded side by side, each in a sequence of its own with a KV cache
            of ``n_ctx`` tokens (:mod:`app.engine.batch`); 0 chooses from the memory the
            caches need and the memory there is (:func:`~app.engine.fit.choose_parallel`);
            1 decodes one reply at a time.
        reuse_reply_tokens: keep a reply's tokens in the KV cache for the next prompt, so a
            follow-up does not process the reply again (about 1 s per 200 reply tokens with
            the default model on a CPU, tens of seconds with a 7B one), as llama.cpp's
            server, Ollama and LM Studio do. llama.cpp computes a token on its own (as while
            replying) slightly differently from the same token within a batch of the prompt,
            so a follow-up's reply can differ from the one a fresh context gives; off (the
            exact mode, for tests that compare with a fresh context), the reply's tokens are
            processed again with the next prompt.
        prompt_lookup: speculative decoding from the context itself: proposed tokens are
            checked beside the one decoded when that pays on this machine and this text
            (:mod:`app.engine.draft`). Off by default: llama.cpp's CPU attention gives a
            token checked within a call of several other logits than the same token decoded
            alone (up to 0.8 apart with the bundled model), so a reply with drafts is not
            always the plain loop's. Measured: the same bits only with ``flash_attn`` and one
            decode thread; with two threads its single-token path splits the cache between
            them and sums in another order (README, the ``speculative`` section).
        flash_attn: llama.cpp's flash attention (off: llama-cpp-python's default; on this
            2-core CPU it decodes about 16 % slower at a 1,000-token context).
        projector: the model's projector (``mmproj-*.gguf``), which lets it see pictures or
            hear sounds (None: text only).
        projector_fallback: a ``projector`` that cannot be opened leaves the model open for
            text, and the model's info says why (a projector remembered for the model in the
            library); off, it fails the load with its sentence (one asked for on purpose).
        projector_beside: with no ``projector`` asked for, open an ``mmproj*.gguf`` found
            beside the model (off: the model opens for text only, its projector chosen as
            none in the library).
        draft_model: a smaller model of the same vocabulary that writes ahead for this one
            (speculative decoding, :mod:`app.engine.draft_model`; None: none). One of another
            vocabulary is not opened, and the model's info says why.
    """

    n_ctx: int = defaults.N_CTX
    n_threads: int = defaults.DECODE_THREADS
    n_threads_batch: int = defaults.PROMPT_THREADS
    n_batch: int = defaults.N_BATCH
    cache_ram_mb: int = defaults.CACHE_RAM_MB
    cache_disk_mb: int = defaults.CACHE_DISK_MB
    cache_dir: Path | None = None
    prefill_chunk_seconds: float = 0.4
    compute: str = defaults.COMPUTE
    gpu_layers: int | None = defaults.GPU_LAYERS
    gpu_memory_mb: int = defaults.GPU_MEMORY_MB
    parallel: int = 1
    reuse_reply_tokens: bool = True
    prompt_lookup: bool = defaults.PROMPT_LOOKUP
    flash_attn: bool = False
    projector: Path | None = None
    projector_fallback: bool = False
    projector_beside: bool = True
    draft_model: Path | None = None


@dataclass(frozen=True)
class GenerationSettings:
    """Sampling settings for one reply. ``temperature == 0`` means greedy.

    Attributes:
        frequency_penalty: subtracted from a token's logit once per time it occurred in the
            last tokens (OpenAI's ``frequency_penalty``; llama.cpp's ``penalty_freq``).
        presence_penalty: subtracted once from the logit of a token that occurred at all
            (OpenAI's ``presence_penalty``; llama.cpp's ``penalty_present``).
        stop: strings that end the reply (besides the chat template's own), never shown.
        grammar: a GBNF grammar (root rule ``root``) the reply must follow: llama.cpp's
            grammar sampler in the same chain leaves only the tokens it allows. None: free.
    """

    temperature: float = defaults.TEMPERATURE
    top_p: float = defaults.TOP_P
    top_k: int = defaults.TOP_K
    min_p: float = defaults.MIN_P
    repeat_penalty: float = defaults.REPEAT_PENALTY
    max_tokens: int = defaults.MAX_TOKENS
    seed: int | None = defaults.SEED
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    stop: tuple[str, ...] = ()
    grammar: str | None = None


@dataclass(frozen=True)
class Placement:
    """Where the open model runs.

    Attributes:
        device: ggml's name of the GPU ("Vulkan0"; ``""``: the CPU alone).
        description: the GPU's product name.
        layers: layers on the GPU (0 on the CPU).
        all_layers: the model's layers, its output layer counted.
        why: why that many (None: the CPU by choice or for want of a GPU).
        need: bytes the plan expected on the GPU (weights, KV cache, compute buffer).
        used: bytes the GPU reported in use by the model after the load (None: the device
            did not say, or the model is on the CPU).
        allocated: bytes llama.cpp allocated on the GPU for it (weights, KV cache, compute
            buffer), by its own account.
        budget: bytes the GPU could give when the plan was made.
        n_ctx_asked: the context asked for, when a smaller one was opened to fit the GPU.
        note: what the user should know: a failed GPU load that fell back, a driver that
            crashed while the devices were listed, a GPU setting that named a missing GPU.
        devices: the GPUs seen when the model was loaded (what Settings offers).
        asked: the "Run models on" setting it was loaded with (``auto``, ``cpu``, a name).
        fell_back: a GPU load failed and this is what was loaded instead.
    """

    device: str = ""
    description: str = ""
    layers: int = 0
    all_layers: int = 0
    why: Why | None = None
    need: int = 0
    used: int | None = None
    allocated: int = 0
    budget: int = 0
    n_ctx_asked: int | None = None
    note: Sentence | None = None
    devices: tuple[ComputeDevice, ...] = ()
    asked: str = "auto"
    fell_back: bool = False

    @property
    def on_gpu(self) -> bool:
        """Whether any layer runs on a GPU."""
        return bool(self.device) and self.layers > 0

    def summary(self) -> Sentence:
        """Where it runs, short, for the header: "GPU · 31 of 31 layers · 180 MB" or "CPU"."""
        if not self.on_gpu:
            if self.why is Why.NONE_FIT:
                return Sentence(QT_TRANSLATE_NOOP("Floodgate", "CPU (too little GPU memory free)"))
            return Sentence(QT_TRANSLATE_NOOP("Floodgate", "CPU"))
        fields = {
            "layers": self.layers,
            "all": self.all_layers,
            "cpu": self.all_layers - self.layers,
            "size": size_text(self.on_device),
        }
        if self.layers < self.all_layers and self.why is not Why.SET:
            return Sentence(
                QT_TRANSLATE_NOOP(
                    "Floodgate",
                    "GPU · {layers} of {all} layers ({cpu} on the CPU: too little GPU memory) "
                    "· {size}",
                ),
                fields,
            )
        return Sentence(
            QT_TRANSLATE_NOOP("Floodgate", "GPU · {layers} of {all} layers · {size}"), fields
        )

    @property
    def on_device(self) -> int:
        """Bytes the model takes on the GPU: as reported, allocated, or estimated.

        The device's own report where it gives one, else llama.cpp's account of what it
        allocated there, else the fit's estimate.
        """
        return self.used if self.used is not None else self.allocated or self.need

    def details(self) -> Sentence:
        """Where it runs and why, for Settings, the diagnostics panel and the header's tooltip."""
        if not self.on_gpu:
            return self._cpu_details()
        fields: dict[str, object] = {
            "gpu": self.description or self.device,
            "layers": self.layers,
            "all": self.all_layers,
            "need": size_text(self.need),
            "cpu": self.all_layers - self.layers,
            "budget": size_text(self.budget),
            "asked": f"{self.n_ctx_asked or 0:,}",
        }
        if self.why is Why.PARTIAL:
            template = QT_TRANSLATE_NOOP(
                "Floodgate",
                "On {gpu}: {layers} of {all} layers; {cpu} stay on the CPU, since the GPU has "
                "{budget} free for this model (it would need more for all of them).",
            )
        elif self.why is Why.CONTEXT:
            template = QT_TRANSLATE_NOOP(
                "Floodgate",
                "On {gpu}: every layer, with the context reduced from {asked} tokens so that "
                "it fits the {budget} the GPU has free.",
            )
        elif self.why is Why.SET:
            template = QT_TRANSLATE_NOOP(
                "Floodgate", "On {gpu}: {layers} of {all} layers, as set in Settings."
            )
        else:
            template = QT_TRANSLATE_NOOP("Floodgate", "On {gpu}: {layers} of {all} layers.")
        if self.need and (self.used is not None or self.allocated):
            measured = QT_TRANSLATE_NOOP(
                "Floodgate", "{where} {used} in use on the GPU ({need} estimated)."
            )
            fields["used"] = size_text(self.on_device)
            return Sentence(measured, {**fields, "where": Sentence(template, fields)})
        if self.need:
            estimated = QT_TRANSLATE_NOOP("Floodgate", "{where} About {need} on the GPU.")
            return Sentence(estimated, {**fields, "where": Sentence(template, fields)})
        return Sentence(template, fields)

    def _cpu_details(self) -> Sentence:
        if self.fell_back:
            return Sentence(
                QT_TRANSLATE_NOOP("Floodgate", "On the CPU: loading it on the GPU failed.")
            )
        if self.why is Why.NONE_FIT:
            return Sentence(
                QT_TRANSLATE_NOOP(
                    "Floodgate",
                    "On the CPU: not one layer fits the {budget} the GPU has free for it.",
                ),
                {"budget": size_text(self.budget)},
            )
        if self.asked == "cpu" or self.why is Why.SET:
            return Sentence(QT_TRANSLATE_NOOP("Floodgate", "On the CPU, as set."))
        return Sentence(QT_TRANSLATE_NOOP("Floodgate", "On the CPU (no GPU was found)."))


@dataclass(frozen=True)
class ModelInfo:
    """What the window shows about the open model."""

    path: Path
    name: str
    n_ctx: int
    has_chat_template: bool
    chat_format: str
    build: str = ""
    """What the engine runs on: llama.cpp's system info (its instruction sets), if local."""
    placement: Placement | None = None
    """Where the model runs (None: not a local llama.cpp model)."""
    parallel: int = 0
    """Replies it decodes side by side: the places in its batch (1: one at a time; 0: not
    said, as for a server's model)."""
    projector: Path | None = None
    """The projector opened with the model (None: none)."""
    sees: bool = False
    """Whether the model reads pictures (its projector has a vision encoder)."""
    hears: bool = False
    """Whether the model reads sound (its projector has an audio encoder)."""
    projector_problem: Sentence | None = None
    """Why the projector asked for was not opened, the model opened for text (None: none)."""
    draft_model: Path | None = None
    """The draft model that writes ahead for it (None: none)."""
    draft_problem: Sentence | None = None
    """Why the draft model asked for was not opened (None: it was, or none was asked for)."""


@dataclass
class GenerationReport:
    """Filled in by the engine while a reply is generated; read by the flow.

    The worker thread writes these plain fields while the UI thread reads them once a frame
    (prompt progress, live figures): each is a single int or float assignment, so a reader
    sees an old or a new value, never a torn one.

    Attributes:
        finish: why the reply ended.
        error: a sentence for the user when ``finish == "error"``.
        pieces: text pieces yielded (about one per token).
        reply_tokens: tokens sampled for the reply (the end-of-generation token not counted).
        compute_ended_at: ``time.perf_counter()`` when the reply's computation ended (the
            stop latency is measured to it); set once, by :meth:`end`.
        dropped_turns: older turns left out because the conversation outgrew the context.
        prompt_tokens: tokens in the prompt as the model reads it (0 until known).
        cached_tokens: of those, how many were already in the KV cache (reused, restored
            from memory or disk, or kept from a stopped prompt), so were not processed again.
        prefill_done: prompt tokens processed so far, counting the cached ones.
        prefill_started_at: ``time.perf_counter()`` when prompt processing began.
        prefill_ended_at: ``time.perf_counter()`` when the prompt was fully processed.
        python_ms_per_token: the worker's own Python time per generated token (decode loop
            bookkeeping, not llama.cpp's computation), 0 when not measured.
        prefix_source: where the ``cached_tokens`` came from: ``""`` (none), ``"kept"``
            (already in the KV cache: the same conversation, or a stopped prompt),
            ``"memory"`` or ``"disk"`` (the prompt cache), ``"shift"`` (kept while the
            oldest turns were shifted out).
        saved_seconds: what processing the ``cached_tokens`` would have cost, as far as the
            engine knows (the prompt cache's estimate for a restored state).
        batch_size: replies in the batch at this reply's last step (1: decoded alone; 0:
            not decoded side by side, :mod:`app.engine.batch`).
        batch_peak: the most replies decoded side by side with this one, itself counted.
        paused: it waits out of the batch for its reader to take what it has (live).
        paused_seconds: how long it waited so, in all.
        drafted: tokens proposed and checked beside a decoded one (speculative decoding,
            :mod:`app.engine.draft`; live).
        draft_kept: of those, the ones the model sampled too: each saved a call.
        looking: the model's projector is encoding a picture of the prompt now (live).
        listening: the model's projector is encoding a sound of the prompt now (live).
        pictures_encoded: pictures of the prompt encoded for this reply (the others were
            kept from before, encoded or in the KV cache).
        sounds_encoded: sounds of the prompt encoded for this reply, each counted once
            whatever its 30-second windows (the others were kept from before).
        on_end: called once, on the producer's thread, when :meth:`end` first runs: the
            worker ends the reply's queue there, so the window shows the end at once and not
            after what the engine does once its computation is over (keeping the KV state
            for the prompt cache: a copy of tens of MB, 80-160 ms on a 2-core VM).
    """

    finish: FinishReason = "done"
    error: Sentence | None = None
    pieces: int = 0
    reply_tokens: int = 0
    compute_ended_at: float | None = None
    dropped_turns: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    prefill_done: int = 0
    prefill_started_at: float | None = None
    prefill_ended_at: float | None = None
    python_ms_per_token: float = 0.0
    prefix_source: str = ""
    saved_seconds: float = 0.0
    batch_size: int = 0
    batch_peak: int = 0
    paused: bool = False
    paused_seconds: float = 0.0
    drafted: int = 0
    draft_kept: int = 0
    looking: bool = False
    listening: bool = False
    pictures_encoded: int = 0
    sounds_encoded: int = 0
    on_end: Callable[[], None] | None = field(default=None, repr=False, compare=False)

    def end(self, stopped: bool) -> None:
        """The reply's computation ended: the one place that says when, and whether Stop ended it.

        The first call stamps :attr:`compute_ended_at`; later ones leave it. The engine calls
        this where its computation ends (after waiting for the device): the true end, which
        the stop latency is measured to. The worker calls it on every reply's way out (its
        ``producing()``), for the producers that do not (a remote, the scripted stand-in).

        Args:
            stopped: whether the reply's Stop is set; its finish is then "stopped", unless the
                reply ended in an error.
        """
        first = self.compute_ended_at is None
        if first:
            self.compute_ended_at = time.perf_counter()
        if stopped and self.finish != "error":
            self.finish = "stopped"
        if first and self.on_end is not None:
            self.on_end()


class Backend(Protocol):
    """An open model that streams replies. Used by one thread only: the worker."""

    @property
    def info(self) -> ModelInfo:
        """Metadata of the open model."""
        ...

    def count_tokens(self, text: str) -> int:
        """How many tokens ``text`` is for this model."""
        ...

    def stream_reply(
        self,
        messages: Sequence[ChatMessage],
        settings: GenerationSettings,
        stop: StopSignal,
        report: GenerationReport,
        *,
        conversation: str = "",
        prompt: str | None = None,
    ) -> Generator[str, None, None]:
        """Yield the reply to ``messages`` piece by piece.

        Ends early, without raising, once ``stop`` is set (also in the middle of prompt
        processing). Errors are recorded in ``report`` rather than raised.

        Args:
            messages: the turns to answer, oldest first.
            settings: how to sample.
            stop: the reply's stop signal.
            report: filled in as the reply goes.
            conversation: the conversation's id, so an engine that keeps processed prompts
                can keep them per conversation (and forget them when it is deleted).
            prompt: a plain text to continue instead of ``messages`` rendered through the
                chat template (the API's ``/v1/completions``).
        """
        ...

    def forget(self, conversation: str) -> None:
        """Drop what is kept of ``conversation`` (its processed prompt), in RAM and on disk."""
        ...

    def set_threads(self, n_threads: int, n_threads_batch: int) -> None:
        """Compute with ``n_threads`` while decoding and ``n_threads_batch`` for prompts."""
        ...

    @property
    def threads(self) -> tuple[int, int]:
        """The threads that decode and that process prompts now."""
        ...

    def clear_cache(self) -> None:
        """Drop every processed prompt kept, in RAM and on disk."""
        ...

    def cache_stats(self) -> CacheStats | None:
        """What the prompt cache holds and has saved (None: the engine keeps none)."""
        ...

    def close(self) -> None:
        """Free the model. The backend is unusable afterwards."""
        ...


BackendOpener = Callable[[Path, EngineOptions], Backend]
"""Opens a model file; raises :class:`ModelLoadError` with a sentence for the user."""
