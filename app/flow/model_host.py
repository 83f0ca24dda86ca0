"""The model host: opens, switches and frees the model, local or on a server."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from enum import StrEnum
from pathlib import Path

from PySide6.QtCore import QObject, Signal, Slot

from app.engine import Backend, BackendOpener, EngineOptions, ModelInfo
from app.engine.model_card import NO_PROJECTOR, ProjectorChoice
from app.engine.model_file import readable_name
from app.engine.prompt_cache import CacheStats
from app.engine.remote import RemoteEndpoint, RemoteError
from app.flow.decode_threads import ThreadReport
from app.flow.remote_model import RemoteModel
from app.flow.words import say, say_sentence
from app.flow.worker import GpuMemory, InferenceWorker, ReplyJob, ReplyProducer
from app.sentence import QT_TRANSLATE_NOOP, Sentence
from app.store.thread_choices import ThreadChoices


class ModelState(StrEnum):
    """What the status line says about the model."""

    NONE = "no model"
    LOADING = "loading"
    READY = "ready"
    GENERATING = "generating"
    ERROR = "error"


class ModelHost(QObject):
    """Owns the inference worker (and the local model on it) and the server connection.

    Replies go to :attr:`producer`: the server's model while one is connected, the local
    worker otherwise. Lives on the UI thread.

    Signals:
        state_changed(ModelState, str): the model's state and a sentence for the user.
        model_changed(ModelInfo): a model finished loading (or a server was connected).
        notice(str): something the user should know that is not an error.
        device_memory(GpuMemory): the GPU's memory in use (after each load and reply).
        threads_changed(ThreadReport): the local model's thread counts (after each load and
            each measurement of its decode threads).

    Args:
        below_window: steps of ``nice`` the decode threads run below the UI thread (a
            window's host: :data:`~app.flow.decode_threads.BELOW_WINDOW`; 0 without one).
    """

    state_changed = Signal(ModelState, str)
    model_changed = Signal(ModelInfo)
    notice = Signal(str)
    threads_changed = Signal(ThreadReport)
    device_memory = Signal(GpuMemory)

    def __init__(
        self,
        opener: BackendOpener,
        options: EngineOptions,
        parent: QObject | None = None,
        thread_choices: ThreadChoices | None = None,
        *,
        below_window: int = 0,
    ) -> None:
        super().__init__(parent)
        self.options = options
        self.projector_for: Callable[[Path], ProjectorChoice] = lambda _model: None
        """The projector chosen by hand for a model file (a file, none, or None: the one
        beside it, if any); the composition root reads it from the preferences."""
        self.model: ModelInfo | None = None
        self.threads: ThreadReport | None = None
        """The local model's thread counts (None: no local model yet)."""
        self.state = ModelState.NONE
        self.replying = False
        """A reply is on its way (set by the reply runner): a finished load then says so."""
        self._sentence = self._ready_text()
        self._remote: RemoteModel | None = None
        self._closing: set[asyncio.Future[None]] = set()
        self._worker = InferenceWorker(opener, thread_choices, below_window=below_window)
        self._worker.threads_measuring.connect(self._on_threads_measuring)
        self._worker.threads_chosen.connect(self._on_threads_chosen)
        self._worker.device_memory.connect(self._on_device_memory)
        self._worker.model_loaded.connect(self._on_model_loaded)
        self._worker.model_failed.connect(self._on_model_failed)
        self._worker.reply_computing.connect(self._on_reply_computing)
        self._worker.start()

    @property
    def producer(self) -> ReplyProducer:
        """Where the next reply comes from."""
        return self._remote if self._remote is not None else self._worker

    @property
    def remote(self) -> bool:
        """Whether replies come from a server."""
        return self._remote is not None

    @property
    def served_model(self) -> ModelInfo | None:
        """The local model the API server shares (None: none open, or a server answers).

        Read from the API server's thread: one attribute read, never torn.
        """
        return None if self._remote is not None else self.model

    def produce_local(self, job: ReplyJob) -> None:
        """Queue ``job`` for the local model's worker, in the one FIFO queue of its jobs.

        Thread-safe: the API server calls it from its own thread. Like the window's replies,
        it ends a decode-thread measurement rather than wait behind it (the worker sees to it).
        """
        self._worker.produce(job)

    def open_model(self, path: Path) -> None:
        """Load ``path`` on the worker (the caller stops a reply in progress first)."""
        self._drop_remote()
        self.set_state(
            ModelState.LOADING,
            Sentence(
                QT_TRANSLATE_NOOP("Floodgate", "Loading {name}…"), {"name": readable_name(path)}
            ),
        )
        chosen = self.projector_for(path)
        options = self.options
        if chosen == NO_PROJECTOR:
            options = replace(options, projector=None, projector_beside=False)
        elif chosen is not None:
            # Remembered for this model: if it cannot be opened now, the model opens for text.
            options = replace(options, projector=chosen, projector_fallback=True)
        self._worker.load(path, options)

    def measure_threads(self) -> None:
        """Measure the local model's decode threads again (a few seconds, on its thread)."""
        self._worker.measure_threads()

    def stop_measuring(self) -> None:
        """End a decode-thread measurement at once (Stop, or a prompt sent meanwhile)."""
        self._worker.stop_measuring()

    def with_backend(self, action: Callable[[Backend], None]) -> None:
        """Run ``action`` on the local model, on the worker's thread, after what is queued."""
        self._worker.with_backend(action)

    def cache_stats(self) -> CacheStats | None:
        """What the local model's prompt cache holds (None: no local model, or no cache)."""
        return self._worker.cache_stats()

    async def connect_remote(self, endpoint: RemoteEndpoint) -> bool:
        """Use a model on a server from the next reply on.

        The server is asked for its models first, so a wrong address or key is reported here
        rather than at the first prompt.
        """
        remote = RemoteModel(endpoint)
        self.set_state(
            ModelState.LOADING,
            Sentence(
                QT_TRANSLATE_NOOP("Floodgate", "Connecting to {url}…"), {"url": endpoint.base_url}
            ),
        )
        try:
            offered = await remote.models()
        except RemoteError as exc:
            await remote.close()
            self.set_state(ModelState.ERROR, exc.sentence)
            return False
        if endpoint.model and endpoint.model not in offered:
            await remote.close()
            self.set_state(
                ModelState.ERROR,
                Sentence(
                    QT_TRANSLATE_NOOP(
                        "Floodgate",
                        "The server at {url} does not offer “{model}”; it has: {offered}.",
                    ),
                    {
                        "url": endpoint.base_url,
                        "model": endpoint.model,
                        "offered": ", ".join(offered),
                    },
                ),
            )
            return False
        self._drop_remote()
        self._remote = remote
        self._on_model_loaded(remote.info)
        return True

    def _drop_remote(self) -> None:
        if self._remote is not None:
            remote, self._remote = self._remote, None
            closing = asyncio.ensure_future(remote.close())
            self._closing.add(closing)
            closing.add_done_callback(self._closing.discard)

    async def close(self) -> None:
        """Let the worker free the model and wait for its thread to end (no reply running)."""
        self._drop_remote()
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)
        self._worker.finish()
        # The abort callback makes this milliseconds; poll so the loop stays live meanwhile.
        while not self._worker.wait(0):
            await asyncio.sleep(0.005)

    # -- state ----------------------------------------------------------------------------------

    def describe_state(self) -> str:
        """The model's state as a sentence, in the current language."""
        return say_sentence(self._sentence)

    def set_state(self, state: ModelState, sentence: Sentence) -> None:
        """Change the state and say so."""
        self.state = state
        self._sentence = sentence
        self.state_changed.emit(state, say_sentence(sentence))

    def reply_began(self) -> None:
        """A reply was sent: say it is being answered, unless the model is still loading."""
        self.replying = True
        if self.state is ModelState.LOADING:
            self.notice.emit(
                say(
                    QT_TRANSLATE_NOOP(
                        "Floodgate",
                        "The model is still loading; your prompt will be answered next.",
                    )
                )
            )
        elif self.remote:
            self.set_state(ModelState.GENERATING, self.answering_text())

    def reply_ended(self) -> None:
        """The reply is over: back to ready."""
        self.replying = False
        if self.state is ModelState.GENERATING:
            self.set_state(ModelState.READY, self._ready_text())

    def answering_text(self) -> Sentence:
        """What the status line says while a reply is computed."""
        if self.model is None:
            return Sentence(QT_TRANSLATE_NOOP("Floodgate", "Answering…"))
        return Sentence(
            QT_TRANSLATE_NOOP("Floodgate", "Answering with {name}…"), {"name": self.model.name}
        )

    def _ready_text(self) -> Sentence:
        if self.model is None:
            return Sentence(QT_TRANSLATE_NOOP("Floodgate", "No model is loaded."))
        draft = self.model.draft_model
        if draft is not None:
            return Sentence(
                QT_TRANSLATE_NOOP("Floodgate", "{name} is ready; {draft} writes ahead for it."),
                {"name": self.model.name, "draft": readable_name(draft)},
            )
        return Sentence(
            QT_TRANSLATE_NOOP("Floodgate", "{name} is ready."), {"name": self.model.name}
        )

    # -- worker reports (queued from the worker thread) -----------------------------------------

    @Slot(ModelInfo)
    def _on_model_loaded(self, info: ModelInfo) -> None:
        self.model = info
        self.model_changed.emit(info)
        if not info.has_chat_template:
            self.notice.emit(
                say(
                    QT_TRANSLATE_NOOP(
                        "Floodgate",
                        "{name} has no chat template; Floodgate uses the generic '{format}' "
                        "format, so its replies may be poor.",
                    ),
                    name=info.name,
                    format=info.chat_format,
                )
            )
        placement = info.placement
        if placement is not None and placement.note is not None:
            # A GPU load that fell back, a driver that failed, a GPU no longer there.
            self.notice.emit(say_sentence(placement.note))
        for problem in (info.projector_problem, info.draft_problem):
            if problem is not None:
                self.notice.emit(say_sentence(problem))
        if self.replying:
            self.set_state(ModelState.GENERATING, self.answering_text())
        else:
            self.set_state(ModelState.READY, self._ready_text())

    @Slot(int, object)
    def _on_threads_measuring(self, n_threads: int, rate: float | None) -> None:
        if self.state is not ModelState.READY or self.replying:
            return
        if rate is None:
            sentence = Sentence(
                QT_TRANSLATE_NOOP(
                    "Floodgate", "Measuring decode speed on this machine: thread count {n}…"
                ),
                {"n": n_threads},
            )
        else:
            sentence = Sentence(
                QT_TRANSLATE_NOOP(
                    "Floodgate",
                    "Measuring decode speed on this machine: thread count {n}, {rate} tokens/s…",
                ),
                {"n": n_threads, "rate": f"{rate:.0f}"},
            )
        self.set_state(ModelState.READY, sentence)

    @Slot(ThreadReport)
    def _on_threads_chosen(self, report: ThreadReport) -> None:
        self.threads = report
        self.threads_changed.emit(report)
        if self.state is ModelState.READY and not self.replying:
            self.set_state(ModelState.READY, self._ready_text())

    @Slot(GpuMemory)
    def _on_device_memory(self, memory: GpuMemory) -> None:
        self.device_memory.emit(memory)

    @Slot(Sentence)
    def _on_model_failed(self, sentence: Sentence) -> None:
        self.model = None
        self.set_state(ModelState.ERROR, sentence)

    @Slot()
    def _on_reply_computing(self) -> None:
        self.set_state(ModelState.GENERATING, self.answering_text())
