"""The reply runner: one reply's queue, frame pump, stop signal, progress and saving."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import QObject, Signal

from app.documents import Attachment, content_with_attachments
from app.engine import ChatMessage, GenerationReport, GenerationSettings, ModelInfo, StopSignal
from app.engine.pictures import Picture
from app.engine.prompt_cache import CacheStats
from app.engine.sounds import Sound
from app.flow.library import ConversationLibrary
from app.flow.metrics import FlowMetrics
from app.flow.pacing import Throttle
from app.flow.piece_queue import PieceQueue
from app.flow.pump import FramePump
from app.flow.words import say, say_sentence
from app.flow.worker import ReplyJob, ReplyProducer
from app.sentence import QT_TRANSLATE_NOOP
from app.store.conversation import Message, Status
from app.store.media_files import picture_path, sound_path
from app.store.text import storable_text


class TextReaders:
    """Who reads a reply's text as it is shown: plain calls on the UI thread, once a frame.

    It is connected to like a signal (``connect``, ``disconnect``), but :meth:`emit` calls its
    readers directly. A Qt signal into a Python slot costs the UI thread a meta-call and two
    string conversions on every frame, and on a machine whose cores all decode, every
    microsecond of the UI thread is taken from the model; the text never leaves the UI thread,
    so nothing needs Qt's queueing.
    """

    def __init__(self) -> None:
        self._readers: tuple[Callable[[str], object], ...] = ()

    def connect(self, reader: Callable[[str], object]) -> None:
        """Call ``reader`` with each frame's text from now on."""
        self._readers = (*self._readers, reader)

    def disconnect(self, reader: Callable[[str], object]) -> None:
        """Stop calling ``reader`` (connected earlier; ValueError if it is not)."""
        readers = list(self._readers)
        readers.remove(reader)
        self._readers = tuple(readers)

    def emit(self, text: str) -> None:
        """Give ``text`` to every reader, in the order they connected.

        As with a signal, a reader disconnected by another during this call is not called.
        """
        readers = self._readers
        for reader in readers:
            if readers is self._readers or reader in self._readers:
                reader(text)


SAVE_EVERY = 1.0
"""Seconds between saves of a reply while it streams: a crash loses at most this much."""

FIGURES_EVERY = 0.25
"""Seconds between live-figure updates (a number that changes 60 times a second cannot be
read); prompt progress is said as often, which is at least twice a second."""

PROGRESS_AFTER = 0.3
"""Seconds of prompt processing before progress is shown: a prompt answered from the cache,
or a short one, says nothing."""


@dataclass(frozen=True)
class ReplyEnd:
    """How a reply ended.

    Attributes:
        status: its final status (``complete``, ``stopped``, ``length`` or ``error``).
        note: a note for the user (empty: nothing to say).
    """

    status: Status
    note: str


@dataclass
class _ActiveReply:
    job: ReplyJob
    prompt: Message
    message: Message
    task: asyncio.Task[None]


class ReplyRunner(QObject):
    """Runs one reply at a time from a producer to the view, and saves it as it streams.

    Signals:
        reply_started(): a reply began (its prompt is the conversation's second-last turn).
        prompt_progress(str): how far the model is in reading the prompt (empty: done).
        reply_ended(ReplyEnd): the reply's final status and a note for the user.
        figures_changed(): :attr:`metrics` moved on (a few times a second while streaming).
        notice(str): something the user should know about the reply that just ended.

    Attributes:
        reply_text: who reads the text to append to the reply, at most once a frame
            (:class:`TextReaders`: connected to like a signal).
    """

    reply_started = Signal()
    prompt_progress = Signal(str)
    reply_ended = Signal(ReplyEnd)
    figures_changed = Signal()
    notice = Signal(str)

    def __init__(
        self,
        library: ConversationLibrary,
        metrics: FlowMetrics,
        frame_interval: float,
        cache_stats: Callable[[], CacheStats | None] = lambda: None,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self._library = library
        self._cache_stats = cache_stats
        self.metrics = metrics
        self.frame_interval = frame_interval
        self.frames_on_clock = False
        """Pace the frames by a clock (the bench's baseline: see :class:`FramePump`)."""
        self._reply: _ActiveReply | None = None
        self._saving = Throttle(SAVE_EVERY)
        self._figures = Throttle(FIGURES_EVERY)
        self._progress_said = False
        self._n_ctx = 0
        self.reply_text = TextReaders()

    @property
    def generating(self) -> bool:
        """A reply is on its way (or waiting for the model)."""
        return self._reply is not None

    @property
    def report(self) -> GenerationReport | None:
        """The report of the reply on its way."""
        return self._reply.job.report if self._reply is not None else None

    def start(
        self,
        producer: ReplyProducer,
        prompt: Message,
        settings: GenerationSettings,
        queue_bound: int,
        model: ModelInfo | None,
    ) -> None:
        """Answer ``prompt``, the conversation's newest turn, with the turns before it."""
        conversation = self._library.conversation
        messages = [
            with_media(ChatMessage(role=r, content=c), source)
            for r, c, source in conversation.history_turns(prompt_for_model)
        ]
        message = conversation.add("assistant", "", "streaming")
        self._n_ctx = model.n_ctx if model is not None else 0
        if model is not None:
            message.model = model.name
            conversation.model = str(model.path)
        self._library.save_conversation(prompt, message)
        self._saving.restart()
        stop = StopSignal()
        pieces = PieceQueue(queue_bound, stop)
        job = ReplyJob(messages, settings, stop, pieces, conversation=conversation.id)
        self.metrics.begin_reply(job.report, stop)
        self.metrics.queue_bound = queue_bound
        self._progress_said = False
        task = asyncio.ensure_future(self._stream(job))
        self._reply = _ActiveReply(job, prompt, message, task)
        producer.produce(job)
        self.reply_started.emit()

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

    def abandon(self) -> None:
        """Save the reply as it is now, stopped, without waiting for its producer to end.

        For an exit that cannot wait (the producer is stuck in a blocking call).
        """
        reply = self._reply
        if reply is None:
            return
        reply.job.stop.set()
        reply.message.status = "stopped"
        reply.message.note = say(QT_TRANSLATE_NOOP("Floodgate", "Stopped."))
        self._library.save_conversation(reply.prompt, reply.message)

    # -- the flow -------------------------------------------------------------------------------

    async def _stream(self, job: ReplyJob) -> None:
        pump = FramePump(
            self.frame_interval, self._show, self.metrics, on_clock=self.frames_on_clock
        )
        await pump.run(job.pieces, on_frame=self._each_frame)
        self._finish()

    def _show(self, text: str) -> None:
        reply = self._reply
        assert reply is not None
        if self._progress_said:
            self._progress_said = False
            self.prompt_progress.emit("")
        # A server's JSON can carry lone surrogates ("\ud800"); they could never be saved.
        text = storable_text(text).text
        reply.message.content += text
        self.reply_text.emit(text)
        if self._library.archive is not None and self._saving.ready():
            self._library.save_messages(reply.message)

    def _each_frame(self) -> None:
        reply = self._reply
        if reply is None or not self._figures.ready():
            return
        report = reply.job.report
        self.metrics.observe()
        self._read_cache_figures()
        if reply.message.content == "" and not reply.job.stop.is_set():
            progress = prompt_progress_text(report, time.perf_counter())
            if progress:
                self._progress_said = True
                self.prompt_progress.emit(progress)
        self.figures_changed.emit()

    def _finish(self) -> None:
        reply = self._reply
        assert reply is not None
        self._reply = None
        if self._progress_said:
            self._progress_said = False
            self.prompt_progress.emit("")
        self.metrics.queue_depth = 0  # everything produced is on screen
        report = reply.job.report
        stop_at = reply.job.stop.set_at
        if stop_at is not None and report.compute_ended_at is not None:
            self.metrics.stop_latency_ms.add(max(0.0, report.compute_ended_at - stop_at) * 1000)
        self.metrics.end_reply()
        self._read_cache_figures()
        status, note = self._outcome(reply, report)
        reply.message.status, reply.message.note = status, note
        self._library.save_conversation(reply.prompt, reply.message)
        self.figures_changed.emit()
        self.reply_ended.emit(ReplyEnd(status, note))
        if report.dropped_turns:
            self.notice.emit(
                say(
                    QT_TRANSLATE_NOOP(
                        "Floodgate",
                        "The {n} oldest messages were left out of what the model saw: the "
                        "conversation no longer fits its context of {n_ctx} tokens.",
                    ),
                    n=report.dropped_turns,
                    n_ctx=self._n_ctx,
                )
            )

    def _read_cache_figures(self) -> None:
        stats = self._cache_stats()
        if stats is not None:
            figures = self.metrics.cache
            figures.entries = stats.entries + stats.disk_entries
            figures.megabytes = (stats.bytes + stats.disk_bytes) / 2**20
            figures.hits, figures.misses = stats.hits, stats.misses
            figures.seconds_saved = stats.saved_seconds

    @staticmethod
    def _outcome(reply: _ActiveReply, report: GenerationReport) -> tuple[Status, str]:
        if report.finish == "error":
            if not reply.message.content:
                # Nothing came back: leave the prompt out of the history; the window gives its
                # text back to the composer so nothing typed is lost.
                reply.prompt.status = "error"
            return "error", say_sentence(report.error) if report.error else ""
        if report.finish == "stopped":
            return "stopped", say(QT_TRANSLATE_NOOP("Floodgate", "Stopped."))
        if report.finish == "length":
            return "length", say(
                QT_TRANSLATE_NOOP("Floodgate", "The reply reached the limit of {n} tokens."),
                n=reply.job.settings.max_tokens,
            )
        if not reply.message.content.strip():
            # An end-of-text first: an empty row under the model's name reads as a fault.
            return "complete", say(
                QT_TRANSLATE_NOOP(
                    "Floodgate", "The model ended its reply without writing anything."
                )
            )
        return "complete", ""


def prompt_for_model(message: Message) -> str:
    """A prompt as the model reads it: each attached file fenced, then the question.

    Built from the attachments as the conversation keeps them, so the text is the same, byte
    for byte, on every later turn: the engine's reuse of the processed prompt (and the prompt
    cache) then spares reading the files again for a follow-up question.
    """
    return content_with_attachments(attachments_of(message), message.content)


def attachments_of(message: Message) -> list[Attachment]:
    """A kept message's attachment rows as the engine's data: the one reader of those rows.

    A row that is not well formed is left out (the store checks what it keeps, so that is a
    file written by something else).
    """
    attachments = []
    for data in message.attachments:
        try:
            attachments.append(Attachment.from_dict(data))
        except ValueError:
            continue
    return attachments


def with_media(turn: ChatMessage, message: Message | None) -> ChatMessage:
    """``turn`` with the pictures and sounds ``message`` has (kept in the data folder by digest)."""
    if message is None:
        return turn
    attachments = attachments_of(message)
    pictures = [a.digest for a in attachments if a.is_picture and a.digest]
    if pictures:
        turn["pictures"] = tuple(Picture(d, picture_path(d)) for d in pictures)
    sounds = [a.digest for a in attachments if a.is_sound and a.digest]
    if sounds:
        turn["sounds"] = tuple(Sound(d, sound_path(d)) for d in sounds)
    return turn


def prompt_progress_text(report: GenerationReport, now: float) -> str:
    """Prompt progress for the user ("Reading the conversation… 640 / 1,215 tokens, …").

    Nothing is said before the engine knows the prompt's size, once the prompt is processed,
    or during the first moments (a prompt answered from the cache never shows progress).
    """
    if report.looking:
        return say(QT_TRANSLATE_NOOP("Floodgate", "Looking at the picture…"))
    if report.listening:
        return say(QT_TRANSLATE_NOOP("Floodgate", "Listening to the sound…"))
    began = report.prefill_started_at
    total = report.prompt_tokens
    if began is None or report.prefill_ended_at is not None or total <= 0:
        return ""
    elapsed = now - began
    if elapsed < PROGRESS_AFTER:
        return ""
    done = report.prefill_done
    processed = done - report.cached_tokens
    if processed <= 0 or elapsed <= 0:
        return say(
            QT_TRANSLATE_NOOP("Floodgate", "Reading the conversation… {done} / {total} tokens"),
            done=f"{done:,}",
            total=f"{total:,}",
        )
    left = (total - done) / (processed / elapsed)
    return say(
        QT_TRANSLATE_NOOP(
            "Floodgate", "Reading the conversation… {done} / {total} tokens, about {left} s left"
        ),
        done=f"{done:,}",
        total=f"{total:,}",
        left=max(1, round(left)),
    )
