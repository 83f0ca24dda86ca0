"""The chat session: a conversation, the worker that answers it, and the flow between them."""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from PySide6.QtCore import QObject, Signal, Slot

from app.engine import (
    QT_TRANSLATE_NOOP,
    BackendOpener,
    ChatMessage,
    EngineOptions,
    GenerationSettings,
    ModelInfo,
    Sentence,
    StopSignal,
)
from app.flow.metrics import FlowMetrics, ReplyFigures
from app.flow.pump import FramePump
from app.flow.queue import PieceQueue
from app.flow.words import say, say_sentence
from app.flow.worker import InferenceWorker, ReplyJob
from app.store.conversation import Conversation, Message, Status

DEFAULT_QUEUE_BOUND = 64
"""Pieces the queue holds before the worker waits: about a second of a fast model's output,
so a busy frame or two never pauses inference, while a stalled window pauses it quickly."""

FIGURES_EVERY = 0.25
"""Seconds between live-figure updates for the status line (a number that changes 60 times a
second cannot be read)."""


class ModelState(StrEnum):
    """What the status line says about the model."""

    NONE = "no model"
    LOADING = "loading"
    READY = "ready"
    GENERATING = "generating"
    ERROR = "error"


@dataclass
class _ActiveReply:
    job: ReplyJob
    prompt: Message
    message: Message
    task: asyncio.Task[None]


class ChatSession(QObject):
    """Sends prompts to the worker and streams its replies into the conversation.

    Lives on the UI thread. Widgets call :meth:`send`, :meth:`stop` and :meth:`open_model`
    and render what the signals say; they never touch the worker or the queue.

    Signals:
        state_changed(str, str): a :class:`ModelState` value and a sentence for the user.
        model_changed(ModelInfo): a model finished loading.
        notice(str): something the user should know that is not an error.
        reply_started(): a reply began (its prompt is the conversation's second-last turn).
        reply_text(str): text to append to the reply; at most once per frame.
        reply_ended(str, str): the reply's final :data:`Status` and a note for the user.
        figures_changed(): :attr:`metrics` moved on (a few times a second while streaming).
    """

    state_changed = Signal(str, str)
    model_changed = Signal(object)
    notice = Signal(str)
    reply_started = Signal()
    reply_text = Signal(str)
    reply_ended = Signal(str, str)
    figures_changed = Signal()

    def __init__(
        self,
        opener: BackendOpener,
        *,
        options: EngineOptions | None = None,
        settings: GenerationSettings | None = None,
        frame_interval: float = 1 / 60,
        queue_bound: int = DEFAULT_QUEUE_BOUND,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.options = options or EngineOptions()
        self.settings = settings or GenerationSettings()
        self.frame_interval = frame_interval
        self.queue_bound = queue_bound
        self.conversation = Conversation()
        self.metrics = FlowMetrics(queue_bound=queue_bound)
        self.model: ModelInfo | None = None
        self.state = ModelState.NONE
        self._state_sentence = self._ready_text()
        self._reply: _ActiveReply | None = None
        self._figures_at = 0.0
        self._worker = InferenceWorker(opener)
        self._worker.model_loaded.connect(self._on_model_loaded)
        self._worker.model_failed.connect(self._on_model_failed)
        self._worker.reply_computing.connect(self._on_reply_computing)
        self._worker.start()

    # -- what the window asks for -------------------------------------------------------------

    @property
    def generating(self) -> bool:
        """A reply is on its way (or waiting for the model)."""
        return self._reply is not None

    def open_model(self, path: Path) -> None:
        """Load ``path`` on the worker; a reply in progress is stopped first."""
        self.stop()
        self._set_state(
            ModelState.LOADING,
            Sentence(QT_TRANSLATE_NOOP("Floodgate", "Loading {name}…"), {"name": path.name}),
        )
        self._worker.load(path, self.options)

    def send(self, text: str) -> bool:
        """Send a prompt with the conversation so far.

        Returns:
            False, and nothing is sent, if the prompt is blank or a reply is still streaming.
        """
        if not text.strip() or self._reply is not None:
            return False
        prompt = self.conversation.add("user", text)
        messages = [ChatMessage(role=r, content=c) for r, c in self.conversation.history()]
        message = self.conversation.add("assistant", "", "streaming")
        stop = StopSignal()
        job = ReplyJob(messages, self.settings, stop, PieceQueue(self.queue_bound, stop))
        self.metrics.reply = ReplyFigures(sent_at=time.perf_counter())
        self.metrics.queue_bound = self.queue_bound
        task = asyncio.ensure_future(self._stream(job))
        self._reply = _ActiveReply(job, prompt, message, task)
        self._worker.generate(job)
        self.reply_started.emit()
        if self.state is ModelState.LOADING:
            self.notice.emit(
                say(
                    QT_TRANSLATE_NOOP(
                        "Floodgate",
                        "The model is still loading; your prompt will be answered next.",
                    )
                )
            )
        return True

    def stop(self) -> bool:
        """Stop the reply in progress. False if there is none or Stop was already pressed."""
        if self._reply is None:
            return False
        return self._reply.job.stop.set()

    async def close(self) -> None:
        """Stop any reply, let the worker free the model, and wait for its thread to end."""
        reply = self._reply
        if reply is not None:
            reply.job.stop.set()
            with contextlib.suppress(asyncio.CancelledError):
                await reply.task
        self._worker.finish()
        # The abort callback makes this milliseconds; poll so the loop stays live meanwhile.
        while not self._worker.wait(0):
            await asyncio.sleep(0.005)

    # -- the flow -----------------------------------------------------------------------------

    async def _stream(self, job: ReplyJob) -> None:
        await FramePump(self.frame_interval, self._show, self.metrics).run(job.pieces)
        self._finish()

    def _show(self, text: str) -> None:
        assert self._reply is not None
        self._reply.message.content += text
        self.reply_text.emit(text)
        now = time.perf_counter()
        if now - self._figures_at >= FIGURES_EVERY:
            self._figures_at = now
            self.figures_changed.emit()

    def _finish(self) -> None:
        reply = self._reply
        assert reply is not None
        self._reply = None
        self.metrics.queue_depth = 0  # everything produced is on screen
        report = reply.job.report
        stop_at = reply.job.stop.set_at
        if stop_at is not None and report.compute_ended_at is not None:
            self.metrics.stop_latency_ms.add(max(0.0, report.compute_ended_at - stop_at) * 1000)
        status: Status
        if report.finish == "error":
            status = "error"
            note = say_sentence(report.error) if report.error else ""
            if not reply.message.content:
                # Nothing came back: leave the prompt out of the history; the window gives its
                # text back to the composer so nothing typed is lost.
                reply.prompt.status = "error"
        elif report.finish == "stopped":
            status, note = "stopped", say(QT_TRANSLATE_NOOP("Floodgate", "Stopped."))
        elif report.finish == "length":
            status = "length"
            note = say(
                QT_TRANSLATE_NOOP("Floodgate", "The reply reached the limit of {n} tokens."),
                n=self.settings.max_tokens,
            )
        else:
            status, note = "complete", ""
        reply.message.status, reply.message.note = status, note
        if self.state is ModelState.GENERATING:
            self._set_state(ModelState.READY, self._ready_text())
        self.figures_changed.emit()
        self.reply_ended.emit(status, note)

    # -- worker reports (queued from the worker thread) ---------------------------------------

    @Slot(object)
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
        if self._reply is not None:
            self._set_state(ModelState.GENERATING, self._answering_text())
        else:
            self._set_state(ModelState.READY, self._ready_text())

    @Slot(object)
    def _on_model_failed(self, sentence: Sentence) -> None:
        self.model = None
        self._set_state(ModelState.ERROR, sentence)

    @Slot()
    def _on_reply_computing(self) -> None:
        self._set_state(ModelState.GENERATING, self._answering_text())

    def _answering_text(self) -> Sentence:
        if self.model is None:
            return Sentence(QT_TRANSLATE_NOOP("Floodgate", "Answering…"))
        return Sentence(
            QT_TRANSLATE_NOOP("Floodgate", "Answering with {name}…"), {"name": self.model.name}
        )

    def _ready_text(self) -> Sentence:
        if self.model is None:
            return Sentence(QT_TRANSLATE_NOOP("Floodgate", "No model is loaded."))
        return Sentence(
            QT_TRANSLATE_NOOP("Floodgate", "{name} is ready."), {"name": self.model.name}
        )

    def describe_state(self) -> str:
        """The model's state as a sentence, in the current language."""
        return say_sentence(self._state_sentence)

    def _set_state(self, state: ModelState, sentence: Sentence) -> None:
        self.state = state
        self._state_sentence = sentence
        self.state_changed.emit(state.value, say_sentence(sentence))
