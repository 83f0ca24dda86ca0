"""The chat session: a conversation, the worker that answers it, and the flow between them."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from enum import StrEnum
from pathlib import Path
from typing import ParamSpec, TypeVar

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
from app.engine.remote import RemoteEndpoint, RemoteError
from app.flow.archive import Archive
from app.flow.metrics import FlowMetrics, ReplyFigures
from app.flow.pump import FramePump
from app.flow.queue import PieceQueue
from app.flow.remote import RemoteModel
from app.flow.words import say, say_sentence
from app.flow.worker import InferenceWorker, ReplyJob
from app.store.conversation import Conversation, Message, Status
from app.store.database import ConversationSummary
from app.store.exchange import NotAConversationError, from_json, to_json, to_markdown
from app.store.settings import SAMPLING, Settings, with_overrides

P = ParamSpec("P")
T = TypeVar("T")

DEFAULT_QUEUE_BOUND = 64
"""Pieces the queue holds before the worker waits: about a second of a fast model's output,
so a busy frame or two never pauses inference, while a stalled window pauses it quickly."""

SAVE_EVERY = 1.0
"""Seconds between saves of a reply while it streams."""

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
        conversation_loaded(): another conversation (or another branch of this one) is shown:
            render :attr:`conversation` again from scratch.
        conversations_changed(): the list of saved conversations changed (a new one, a new
            title, a deletion, a newer update time).
    """

    state_changed = Signal(str, str)
    model_changed = Signal(object)
    notice = Signal(str)
    reply_started = Signal()
    reply_text = Signal(str)
    reply_ended = Signal(str, str)
    figures_changed = Signal()
    conversation_loaded = Signal()
    conversations_changed = Signal()
    _archive_failed = Signal(object)

    def __init__(
        self,
        opener: BackendOpener,
        *,
        options: EngineOptions | None = None,
        settings: GenerationSettings | None = None,
        frame_interval: float = 1 / 60,
        queue_bound: int = DEFAULT_QUEUE_BOUND,
        archive: Archive | None = None,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.options = options or EngineOptions()
        self.settings = settings or GenerationSettings()
        self.frame_interval = frame_interval
        self.queue_bound = queue_bound
        self.conversation = Conversation()
        self.default_system_prompt = ""
        self.archive = archive
        """Where conversations are saved; None keeps them in memory only (tests, the bench)."""
        if archive is not None:
            # Called on the archive's thread: the signal carries it to this one.
            archive.on_failure = self._archive_failed.emit
            self._archive_failed.connect(self._on_archive_failed)
        self._saved_at = 0.0
        self.metrics = FlowMetrics(queue_bound=queue_bound)
        self.model: ModelInfo | None = None
        self.state = ModelState.NONE
        self._state_sentence = self._ready_text()
        self._reply: _ActiveReply | None = None
        self._remote: RemoteModel | None = None
        self._remote_task: asyncio.Future[None] | None = None
        self._closing: set[asyncio.Future[None]] = set()
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
        self._drop_remote()
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
        self._start_reply(prompt)
        return True

    def regenerate(self) -> bool:
        """Ask again for the last reply; the earlier one stays as a variant to flip back to."""
        messages = self.conversation.messages
        if self._reply is not None or len(messages) < 2 or messages[-1].role != "assistant":
            return False
        prompt = messages[-2]
        self._show_path_to(prompt.parent_id)
        self.conversation.leaf_id = prompt.id
        self._start_reply(prompt)
        return True

    def edit_and_resend(self, message: Message, text: str) -> bool:
        """Send an edited prompt in place of ``message``; the old branch stays reachable."""
        if self._reply is not None or message.role != "user" or not text.strip():
            return False
        self._show_path_to(message.parent_id)
        prompt = self.conversation.add("user", text, parent_id=message.parent_id, after_leaf=False)
        self._start_reply(prompt)
        return True

    def show_variant(self, message: Message) -> bool:
        """Show another variant of a turn (and the turns that followed it)."""
        if self._reply is not None:
            return False
        self.conversation.show_variant(message)
        self._save_conversation()
        self.conversation_loaded.emit()
        return True

    def _show_path_to(self, leaf_id: str | None) -> None:
        # The view shows the turns before the new prompt; reply_started then adds the rest.
        self.conversation.leaf_id = leaf_id
        self.conversation_loaded.emit()

    def _start_reply(self, prompt: Message) -> None:
        conversation = self.conversation
        messages = [ChatMessage(role=r, content=c) for r, c in conversation.history()]
        message = conversation.add("assistant", "", "streaming")
        if self.model is not None:
            message.model = self.model.name
            conversation.model = str(self.model.path)
        self._save_conversation(prompt, message)
        self._saved_at = time.monotonic()
        stop = StopSignal()
        job = ReplyJob(messages, self.reply_settings(), stop, PieceQueue(self.queue_bound, stop))
        self.metrics.reply = ReplyFigures(sent_at=time.perf_counter())
        self.metrics.queue_bound = self.queue_bound
        task = asyncio.ensure_future(self._stream(job))
        self._reply = _ActiveReply(job, prompt, message, task)
        if self._remote is not None:
            self._remote_task = asyncio.ensure_future(self._remote.run(job))
            self._set_state(ModelState.GENERATING, self._answering_text())
        else:
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

    def stop(self) -> bool:
        """Stop the reply in progress. False if there is none or Stop was already pressed."""
        if self._reply is None:
            return False
        return self._reply.job.stop.set()

    async def stop_and_wait(self) -> None:
        """Stop the reply in progress, if any, and wait until it is shown and saved."""
        reply = self._reply
        if reply is not None:
            reply.job.stop.set()
            with contextlib.suppress(asyncio.CancelledError):
                await reply.task

    async def connect_remote(self, endpoint: RemoteEndpoint) -> bool:
        """Use a model on a server from the next reply on (a reply in progress is stopped).

        The server is asked for its models first, so a wrong address or key is reported here
        rather than at the first prompt.
        """
        await self.stop_and_wait()
        remote = RemoteModel(endpoint)
        self._set_state(
            ModelState.LOADING,
            Sentence(
                QT_TRANSLATE_NOOP("Floodgate", "Connecting to {url}…"), {"url": endpoint.base_url}
            ),
        )
        try:
            offered = await remote.models()
        except RemoteError as exc:
            await remote.close()
            self._set_state(ModelState.ERROR, exc.sentence)
            return False
        if endpoint.model and endpoint.model not in offered:
            await remote.close()
            self._set_state(
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
        """Stop any reply, let the worker free the model, and wait for its thread to end."""
        await self.stop_and_wait()
        self._drop_remote()
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)
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
        if self.archive is not None and time.monotonic() - self._saved_at >= SAVE_EVERY:
            # Saved as it streams: a crash loses at most the last second of the reply.
            self._saved_at = time.monotonic()
            self._save_messages(self._reply.message)
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
        self._save_conversation(reply.prompt, reply.message)
        if self.state is ModelState.GENERATING:
            self._set_state(ModelState.READY, self._ready_text())
        self.figures_changed.emit()
        self.reply_ended.emit(status, note)
        if report.dropped_turns:
            self.notice.emit(
                say(
                    QT_TRANSLATE_NOOP(
                        "Floodgate",
                        "The {n} oldest messages were left out of what the model saw: the "
                        "conversation no longer fits its context of {n_ctx} tokens.",
                    ),
                    n=report.dropped_turns,
                    n_ctx=self.model.n_ctx if self.model else 0,
                )
            )

    # -- saving -------------------------------------------------------------------------------

    def _save_messages(self, *messages: Message) -> None:
        if self.archive is None or not messages:
            return
        # Copies: the archive's thread writes them while this thread goes on changing replies.
        snapshot = [replace(m) for m in messages]
        self.archive.submit(self.archive.database.save_messages, self.conversation.id, snapshot)

    def _save_conversation(self, *messages: Message) -> None:
        """Save the conversation's own fields, and ``messages``; announces the change."""
        conversation = self.conversation
        if self.archive is None or not conversation.nodes:
            return  # a new chat is saved with its first prompt, not before
        conversation.updated_at = time.time()
        self.archive.submit(
            self.archive.database.save_conversation, replace(conversation, nodes={})
        )
        self._save_messages(*messages)
        self.conversations_changed.emit()

    @Slot(object)
    def _on_archive_failed(self, sentence: Sentence) -> None:
        self.notice.emit(say_sentence(sentence))

    # -- conversations ------------------------------------------------------------------------

    async def new_conversation(self) -> None:
        """Start a new, empty chat (the reply in progress is stopped and saved first)."""
        await self.stop_and_wait()
        self.conversation = Conversation(system_prompt=self.default_system_prompt)
        self.conversation_loaded.emit()

    async def open_conversation(self, conversation_id: str) -> bool:
        """Show a saved conversation; its model is opened if it is another one."""
        if self.archive is None:
            return False
        await self.stop_and_wait()
        if conversation_id == self.conversation.id:
            return True
        conversation = await self.archive.call(self.archive.database.load, conversation_id)
        if conversation is None:
            return False
        for message in conversation.nodes.values():
            if message.status == "streaming":
                # Floodgate was killed while this reply streamed: what was saved is kept.
                message.status = "stopped"
                message.note = say(
                    QT_TRANSLATE_NOOP(
                        "Floodgate", "Interrupted: Floodgate closed before this reply ended."
                    )
                )
        self.conversation = conversation
        self.conversation_loaded.emit()
        wanted = Path(conversation.model) if conversation.model else None
        current = self.model.path if self.model is not None else None
        if wanted is not None and wanted != current and await self.archive.call(wanted.is_file):
            self.open_model(wanted)
        return True

    async def list_conversations(self, query: str = "") -> list[ConversationSummary]:
        """Saved conversations, newest first, or those matching ``query``."""
        if self.archive is None:
            return []
        return await self.archive.call(self.archive.database.list_conversations, query)

    def rename(self, conversation_id: str, title: str) -> None:
        """Give a conversation a new title."""
        title = " ".join(title.split())
        if not title:
            return
        if conversation_id == self.conversation.id:
            self.conversation.title = title
        if self.archive is not None:
            self.archive.submit(self.archive.database.rename, conversation_id, title)
        self.conversations_changed.emit()

    async def delete(self, conversation_id: str) -> None:
        """Delete a conversation; :meth:`undelete` brings it back for a while."""
        if conversation_id == self.conversation.id:
            await self.new_conversation()
        if self.archive is not None:
            self.archive.submit(self.archive.database.delete, conversation_id)
        self.conversations_changed.emit()

    def undelete(self, conversation_id: str) -> None:
        """Bring back a deleted conversation."""
        if self.archive is not None:
            self.archive.submit(self.archive.database.undelete, conversation_id)
        self.conversations_changed.emit()

    def sampling(self) -> tuple[Settings, Settings]:
        """The app's sampling settings, and this conversation's (its own values over them)."""
        base = Settings(**{f.name: getattr(self.settings, f.name) for f in fields(self.settings)})
        return base, with_overrides(base, self.conversation.settings)

    def reply_settings(self) -> GenerationSettings:
        """What the next reply is sampled with."""
        _, own = self.sampling()
        return replace(self.settings, **{name: getattr(own, name) for name in SAMPLING})

    def set_conversation_settings(self, own: dict[str, object]) -> None:
        """Give this conversation its own sampling settings (empty: the app's)."""
        self.conversation.settings = dict(own)
        self._save_conversation()

    def set_system_prompt(self, text: str) -> None:
        """The system prompt of this conversation (and of new ones, as their default)."""
        self.conversation.system_prompt = text
        self.default_system_prompt = text
        self._save_conversation()

    async def export_conversation(self, path: Path, kind: str) -> None:
        """Write the conversation to ``path`` as ``"markdown"`` or ``"json"``."""
        text = to_json(self.conversation) if kind == "json" else to_markdown(self.conversation)
        await _off_the_ui_thread(self.archive, _write_text, path, text)

    async def import_conversation(self, path: Path) -> bool:
        """Read a conversation exported as JSON, save it, and show it."""
        try:
            text = await _off_the_ui_thread(self.archive, path.read_text, encoding="utf-8")
            conversation = from_json(text)
        except (OSError, UnicodeDecodeError, NotAConversationError) as exc:
            self.notice.emit(
                say(
                    QT_TRANSLATE_NOOP("Floodgate", "{name} could not be imported: {reason}"),
                    name=path.name,
                    reason=exc,
                )
            )
            return False
        await self.stop_and_wait()
        self.conversation = conversation
        if self.archive is not None:
            await self.archive.call(self.archive.database.save_all, conversation)
        self.conversation_loaded.emit()
        self.conversations_changed.emit()
        return True

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


def _write_text(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")


async def _off_the_ui_thread(
    archive: Archive | None, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs
) -> T:
    """Run file work on the archive's thread, or a spare one when there is no archive."""
    if archive is not None:
        return await archive.call(fn, *args, **kwargs)
    return await asyncio.to_thread(fn, *args, **kwargs)
