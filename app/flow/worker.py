"""The inference worker: the one thread that owns the local model.

A reply reaches the window from a *producer*: this worker for a local model, or
:class:`~app.flow.remote_model.RemoteModel` for a model on a server. Both take a
:class:`ReplyJob` through the same :class:`ReplyProducer` interface, and both wrap their work in
:func:`producing`, the one place that stamps when a reply's computation ended and why it ended.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import queue
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

from PySide6.QtCore import QThread, Signal

from app.crash_record import CRASH_RECORD
from app.engine import (
    Backend,
    BackendOpener,
    ChatMessage,
    EngineOptions,
    GenerationReport,
    GenerationSettings,
    ModelInfo,
    ModelLoadError,
    StopSignal,
)
from app.engine.batch import BatchDecoder, BatchedReply
from app.engine.context import PromptTooLongError, fit_to_context
from app.engine.devices import device_memory
from app.engine.prompt_cache import CacheStats
from app.flow.decode_threads import DecodeThreads, ThreadReport, lower_this_thread
from app.flow.piece_queue import PieceQueue
from app.sentence import QT_TRANSLATE_NOOP, Sentence
from app.store.thread_choices import ThreadChoices
from app.trace import TRACE


@dataclass
class ReplyJob:
    """One reply for a producer to generate into ``pieces``.

    Attributes:
        messages: the conversation as the model should see it.
        settings: how to sample.
        stop: the reply's stop signal.
        pieces: the bounded queue the frame pump drains.
        conversation: the conversation's id (the engine keeps processed prompts per id).
        report: filled in by the engine and by :func:`producing`.
        prompt: a plain text to continue instead of ``messages`` (the API's completions).
        origin: who asked: the window, or a client of the local API server. Only the
            window's replies change what the status line says about the model.
        began_at: ``time.perf_counter()`` when the worker took the job from its queue
            (None while it waits behind others).
        last_piece_at: ``time.perf_counter()`` when the worker queued the reply's last piece
            (None before the first).
    """

    messages: list[ChatMessage]
    settings: GenerationSettings
    stop: StopSignal
    pieces: PieceQueue
    conversation: str = ""
    report: GenerationReport = field(default_factory=GenerationReport)
    prompt: str | None = None
    origin: Literal["window", "server"] = "window"
    began_at: float | None = None
    last_piece_at: float | None = None


class ReplyProducer(Protocol):
    """Something that turns a :class:`ReplyJob` into pieces in its queue."""

    def produce(self, job: ReplyJob) -> None:
        """Start producing ``job``'s reply; the queue is ended whatever happens."""
        ...


@contextlib.contextmanager
def producing(job: ReplyJob) -> Iterator[None]:
    """Around a producer's work on one reply: the one place that closes its books.

    On the way out it ends the report (:meth:`GenerationReport.end`, the one owner of when the
    computation ended and whether Stop ended it: an engine that called it where its
    computation ended keeps its stamp; for the others, the end is here), turns a bug into a
    sentence instead of a dead thread, and ends the queue so the frame pump finishes.
    """
    report = job.report
    # The queue ends as the computation does (an engine that says so before tidying up, as
    # llama.cpp's keeping its KV state, lets the window show the end at once).
    report.on_end = job.pieces.end
    try:
        yield
    except Exception as exc:  # the engine reports its own errors; this catches the rest
        if report.error is None:
            report.finish = "error"
            report.error = Sentence(
                QT_TRANSLATE_NOOP("Floodgate", "Generation failed unexpectedly: {reason}"),
                {"reason": exc},
            )
        else:
            # The engine already said what went wrong (a server that died mid-reply); what its
            # tear-down raised after that must not replace the sentence.
            log.warning("After %s: %r", report.error, exc)
    finally:
        report.end(job.stop.is_set())
        job.pieces.end()


@dataclass(frozen=True)
class _LoadJob:
    path: Path
    options: EngineOptions


@dataclass(frozen=True)
class _BackendCall:
    """Something to do with the open model on its own thread (forget a conversation…)."""

    action: Callable[[Backend], None]


@dataclass(frozen=True)
class _CountJob:
    """Count a text's tokens with the open model's tokenizer (None: no model)."""

    text: str
    result: concurrent.futures.Future[int | None]


@dataclass(frozen=True)
class _MeasureJob:
    """Measure the open model's decode threads again (Settings > Measure again)."""


class _QuitJob:
    pass


class _Wake:
    """Nothing to do but look again: a reader took held text, or a reply was stopped."""


_WAKE = _Wake()

_Job = ReplyJob | _LoadJob | _BackendCall | _CountJob | _MeasureJob | _QuitJob | _Wake


@dataclass
class _Done:
    """What one look at the jobs waiting did."""

    did: bool = False
    woke: bool = False
    quit: bool = False


@dataclass(frozen=True)
class GpuMemory:
    """The GPU's memory as its driver reports it.

    Attributes:
        device: ggml's name of the GPU.
        used: bytes in use (by every program, this one's model among them).
        total: bytes it has.
    """

    device: str
    used: int
    total: int


log = logging.getLogger(__name__)

NO_MODEL = Sentence(
    QT_TRANSLATE_NOOP(
        "Floodgate", "No model is loaded. Open a model with File > Open model…, then send again."
    )
)


class InferenceWorker(QThread):
    """Runs model loading and generation, one job at a time, off the UI thread.

    Jobs run in the order they are submitted, so a prompt sent while the model loads waits
    for the load, and the window's replies and the API server's requests wait for each other
    in one FIFO queue. The model is created, used and freed on this thread only (llama.cpp's
    OpenMP thread team belongs to the thread that calls it: a second calling thread would
    halve the speed of both). The worker decides when each job runs; :class:`_OpenModel`
    does it with the model, and :class:`~app.flow.decode_threads.DecodeThreads` chooses its
    decode threads.

    Signals:
        model_loaded(ModelInfo): a load finished.
        model_failed(Sentence): a load failed; the sentence is for the user.
        reply_computing(): the worker started computing the current reply.
        threads_measuring(int, float | None): the decode-thread measurement tries a count
            (rate None) or finished a try at it (its tokens per second).
        threads_chosen(ThreadReport): the threads the open model computes with (after each
            load and each measurement).
        device_memory(GpuMemory): the GPU's memory after a load and after each reply, when
            the open model runs on one.

    Args:
        below_window: steps of ``nice`` this thread, and so its decode threads, run below
            the window's UI thread (see :func:`~app.flow.decode_threads.lower_this_thread`).
    """

    model_loaded = Signal(ModelInfo)
    model_failed = Signal(Sentence)
    reply_computing = Signal()
    # The rate is a float or None: a Signal(int, float) could not carry None.
    threads_measuring = Signal(int, object)
    threads_chosen = Signal(ThreadReport)
    device_memory = Signal(GpuMemory)

    def __init__(
        self,
        opener: BackendOpener,
        thread_choices: ThreadChoices | None = None,
        *,
        below_window: int = 0,
    ) -> None:
        super().__init__()
        self.setObjectName("InferenceWorker")
        self._below_window = below_window
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._model = _OpenModel(self, opener, thread_choices)
        self._served = True  # False once the thread stopped serving jobs
        self._serving = threading.Lock()

    def load(self, path: Path, options: EngineOptions) -> None:
        """Open ``path`` (after the jobs already submitted), replacing the open model."""
        self._jobs.put(_LoadJob(path, options))

    def produce(self, job: ReplyJob) -> None:
        """Generate a reply (after the jobs already submitted).

        Any thread may call this (the window's, the API server's). A decode-thread measurement
        in progress ends at once, and one about to begin (after a model opens) is skipped:
        every physical core decodes the reply instead.
        """
        self._model.threads.reply_queued()
        self._jobs.put(job)
        self.stop_measuring()

    def with_backend(self, action: Callable[[Backend], None]) -> None:
        """Run ``action`` on the open model, on this thread (nothing happens without one)."""
        self._jobs.put(_BackendCall(action))

    def count_tokens(self, text: str) -> int | None:
        """The open model's token count of ``text``; None when no model is open or at quit.

        Counted on this worker's thread, after the jobs already submitted (the tokenizer
        belongs to the model, which is loaded and freed there). Blocks the calling thread
        until then: call it from a thread of its own (the attachment reader), never from the
        UI thread.
        """
        job = _CountJob(text, concurrent.futures.Future())
        with self._serving:
            if not self._served:
                return None
            self._jobs.put(job)
        return job.result.result()

    def cache_stats(self) -> CacheStats | None:
        """The open model's prompt-cache figures (thread-safe: read from any thread)."""
        backend = self._model.backend
        return backend.cache_stats() if backend is not None else None

    def measure_threads(self) -> None:
        """Measure the open model's decode threads again (after the jobs already submitted)."""
        self._jobs.put(_MeasureJob())

    def stop_measuring(self) -> None:
        """End a decode-thread measurement in progress at once (any thread may call this)."""
        self._model.threads.stop()

    def finish(self) -> None:
        """Free the model and end the thread once the jobs submitted so far are done."""
        self._jobs.put(_QuitJob())

    def run(self) -> None:
        """Serve jobs until :meth:`finish`; the model is freed here, on this thread.

        A model opened for several replies side by side (its ``batch``) decodes every reply
        placed in it one step at a time, and the jobs that come meanwhile are looked at
        between steps; otherwise a reply runs to its end before the next job. Either way the
        window's replies go before the API server's that wait, and a load, a measurement or
        the end waits for the replies taken before it.
        """
        TRACE.name_thread("worker")
        lower_this_thread(self._below_window)  # before llama.cpp starts its OpenMP team
        model = self._model
        waiting: list[_Job] = []
        try:
            while True:
                done = self._do_jobs(waiting)
                if done.quit:
                    return
                batch = model.batch()
                if batch is not None and batch.busy and (batch.computing or done.woke):
                    model.step(batch)
                    self._take_jobs(waiting, block=False)
                else:
                    self._take_jobs(waiting, block=not done.did)
        finally:
            batch = model.batch()
            if batch is not None:
                _abandon(batch, None)
            with self._serving:
                self._served = False
            model.close()
            # Nobody will serve what is still queued: a count waiting for it gets None.
            self._take_jobs(waiting, block=False)
            for left in waiting:
                if isinstance(left, _CountJob):
                    left.result.set_result(None)

    def _take_jobs(self, waiting: list[_Job], *, block: bool) -> None:
        """Move the submitted jobs to ``waiting``; wait for one first if ``block``."""
        if block:
            waiting.append(self._jobs.get())
        jobs = self._jobs
        while not jobs.empty():  # this thread alone takes from it: not empty stays so
            waiting.append(jobs.get_nowait())

    def _wake(self) -> None:
        self._jobs.put(_WAKE)

    def _do_jobs(self, waiting: list[_Job]) -> _Done:
        """Do what can be done now of ``waiting``, in order; replies when they can begin.

        Counting tokens and calls on the model are done at once. A load, a measurement or
        the end waits until every reply before it has ended. Replies before such a job begin
        as places are free (one at a time without a batch), the window's first.
        """
        done = _Done()
        if not waiting:
            return done
        model = self._model
        i = 0
        while i < len(waiting):
            job = waiting[i]
            if isinstance(job, ReplyJob):
                i += 1
                continue
            if isinstance(job, _Wake):
                done.woke = True
            elif isinstance(job, _BackendCall):
                if model.backend is not None:
                    job.action(model.backend)
            elif isinstance(job, _CountJob):
                model.count(job)
            else:
                batch = model.batch()
                if i > 0 or (batch is not None and batch.busy):
                    break  # after the replies taken before it
                if isinstance(job, _QuitJob):
                    del waiting[i]
                    done.quit = True
                    return done
                if isinstance(job, _LoadJob):
                    model.load(job)
                else:
                    model.choose_threads(remeasure=True)
            del waiting[i]
            done.did = True
        replies = sorted(
            (job for job in waiting[:i] if isinstance(job, ReplyJob)),
            key=lambda job: job.origin != "window",
        )
        for job in replies:
            batch = model.batch()
            if batch is not None and not batch.free:
                break
            waiting.remove(job)
            done.did = True
            model.threads.reply_began()
            job.began_at = time.perf_counter()
            if batch is None:
                model.run_alone(job)
                break  # what came meanwhile is looked at first
            model.place(batch, job, self._wake)
        return done


class _OpenModel:
    """What the worker does with the model on its thread: open it, compute with it, free it.

    Everything here runs on the worker's thread, but for reading :attr:`backend` and
    ``threads.stop()``/``threads.reply_queued()``, which any thread may do. It tells the
    window through the worker's signals.
    """

    def __init__(
        self, worker: InferenceWorker, opener: BackendOpener, thread_choices: ThreadChoices | None
    ) -> None:
        self._worker = worker
        self._opener = opener
        self.backend: Backend | None = None
        self.threads = DecodeThreads(
            thread_choices, worker.threads_chosen.emit, worker.threads_measuring.emit
        )
        """The decode threads: chosen after each load, refined by the window's replies."""
        self._options = EngineOptions()
        self._path: Path | None = None

    def batch(self) -> BatchDecoder | None:
        """The open model's batch, if it decodes several replies side by side."""
        batch: BatchDecoder | None = getattr(self.backend, "batch", None)
        return batch

    def run_alone(self, job: ReplyJob) -> None:
        """One reply from its prompt to its end, nothing else computing meanwhile."""
        with producing(job), TRACE.span("compute reply", cat="worker", by=job.origin):
            self._generate(job)
        self._note_streaming(job)
        self._read_device()

    def place(self, batch: BatchDecoder, job: ReplyJob, wake: Callable[[], None]) -> None:
        """Put ``job`` in the batch; it ends (``producing`` closes it) when its reply does.

        ``wake`` has the worker look again when a reader took held text or Stop was pressed.
        """
        books = producing(job)
        books.__enter__()
        removers: list[Callable[[], None]] = []

        def ended() -> None:
            for remove in removers:
                remove()
            books.__exit__(None, None, None)
            if job.report.batch_peak <= 1:
                self._note_streaming(job)  # decoded alone: its rate says what its threads do
            self._read_device()

        def offer(text: str) -> bool:
            if job.pieces.offer(text, wake):
                job.last_piece_at = time.perf_counter()
                return True
            return False

        try:
            messages = self._begin(job)
            if messages is None:
                books.__exit__(None, None, None)
                return
            CRASH_RECORD.doing("decode", conversation=job.conversation)
            removers.append(job.stop.add_listener(wake))
            reply = BatchedReply(
                messages,
                job.settings,
                job.stop,
                job.report,
                offer,
                ended,
                conversation=job.conversation,
                plain=job.prompt,
            )
            if not batch.place(reply):  # the caller saw a free place: a bug if none is
                raise RuntimeError("no free place in the batch")
        except Exception:
            for remove in removers:
                remove()
            books.__exit__(*sys.exc_info())

    def step(self, batch: BatchDecoder) -> None:
        """One step of the batch; a bug there ends its replies with a sentence, not the thread."""
        try:
            batch.step()
        except Exception as exc:
            log.exception("A step of the batch failed")
            _abandon(batch, exc)
        if not batch.busy:
            CRASH_RECORD.doing("idle")

    def count(self, job: _CountJob) -> None:
        """Count ``job``'s text with the open model's tokenizer (None without a model)."""
        backend = self.backend
        try:
            job.result.set_result(backend.count_tokens(job.text) if backend is not None else None)
        except Exception as exc:  # the caller hears of it; the worker goes on
            job.result.set_exception(exc)

    def close(self) -> None:
        """Free the open model, if any."""
        if self.backend is not None:
            self.backend.close()
            self.backend = None

    def load(self, job: _LoadJob) -> None:
        """Open ``job``'s model in place of the open one, and choose its decode threads."""
        # Free the old model first: two models in memory at once is what users of other apps
        # see as memory that grows with every switch.
        self.close()
        CRASH_RECORD.doing("loading", model=job.path.name, conversation="")
        try:
            self.backend = self._opener(job.path, job.options)
        except ModelLoadError as exc:
            self._worker.model_failed.emit(exc.sentence)
        except Exception as exc:  # a bug or an engine surprise must not kill the thread
            self._worker.model_failed.emit(
                Sentence(
                    QT_TRANSLATE_NOOP(
                        "Floodgate", "The model {name} could not be opened: {reason}"
                    ),
                    {"name": job.path.name, "reason": exc},
                )
            )
        else:
            self._options, self._path = job.options, job.path
            self._worker.model_loaded.emit(self.backend.info)
            self._read_device()
            self.choose_threads(remeasure=False)
        finally:
            info = self.backend.info if self.backend is not None else None
            CRASH_RECORD.doing("idle", system_info=info.build if info is not None else "")

    def choose_threads(self, *, remeasure: bool) -> None:
        """Choose the open model's decode threads (measured again if ``remeasure``)."""
        self.threads.choose(self.backend, self._path, self._options, remeasure=remeasure)

    def _read_device(self) -> None:
        """Say how full the GPU is, if the open model runs on one (a driver call of µs)."""
        placement = self.backend.info.placement if self.backend is not None else None
        if placement is None or not placement.on_gpu:
            return
        memory = device_memory(placement.device)
        if memory is not None:
            free, total = memory
            self._worker.device_memory.emit(GpuMemory(placement.device, total - free, total))

    def _note_streaming(self, job: ReplyJob) -> None:
        """Let a reply's decode rate refine the decode threads (see ``DecodeThreads``)."""
        self.threads.note_streaming(
            self.backend,
            job.report,
            job.last_piece_at,
            window=job.origin == "window",
            held_back=bool(job.pieces.backpressure_waits),
        )

    def _begin(self, job: ReplyJob) -> list[ChatMessage] | None:
        """The turns to compute ``job``'s reply from, or None if it ends before it begins.

        A reply stopped before it began just ends (``producing`` records it); one without a
        model, or whose prompt does not fit the context, ends with a sentence.
        """
        backend = self.backend
        if job.stop.is_set():
            return None
        if backend is None:
            job.report.finish = "error"
            job.report.error = NO_MODEL
            return None
        messages = _fit(backend, job) if job.prompt is None else job.messages
        if messages is None:
            return None
        if job.origin == "window":
            self._worker.reply_computing.emit()
        return messages

    def _generate(self, job: ReplyJob) -> None:
        messages = self._begin(job)
        if messages is None or self.backend is None:
            return
        # What a native crash will be reported as doing (app/crash_record.py).
        CRASH_RECORD.doing("prefill", conversation=job.conversation)
        stream = self.backend.stream_reply(
            messages,
            job.settings,
            job.stop,
            job.report,
            conversation=job.conversation,
            prompt=job.prompt,
        )
        decoding = False
        try:
            for text in stream:
                if not decoding:
                    decoding = True
                    CRASH_RECORD.doing("decode")
                if not job.pieces.put(text):
                    break
                job.last_piece_at = time.perf_counter()
        finally:
            stream.close()
            CRASH_RECORD.doing("idle")


def _abandon(batch: BatchDecoder, exc: Exception | None) -> None:
    """End every reply in the batch (the worker is going, or a step failed)."""
    for reply in batch.placed:
        if exc is not None:
            reply.report.finish = "error"
            reply.report.error = Sentence(
                QT_TRANSLATE_NOOP("Floodgate", "Generation failed unexpectedly: {reason}"),
                {"reason": exc},
            )
        else:
            reply.stop.set()
    batch.end_all()


def _fit(backend: Backend, job: ReplyJob) -> list[ChatMessage] | None:
    """The turns that fit the context (oldest left out), or None if the prompt cannot."""
    n_ctx = backend.info.n_ctx
    # Room for the answer: the token limit, but never more than a quarter of the context.
    budget = n_ctx - min(job.settings.max_tokens, n_ctx // 4)
    try:
        # A model that sees says what a picture takes, one that hears what a sound does
        # (others have none to count: they are left out of its turns).
        per_picture = int(getattr(backend, "picture_tokens", 0))
        messages, dropped = fit_to_context(
            job.messages,
            backend.count_tokens,
            budget,
            per_picture,
            sound_tokens=getattr(backend, "sound_tokens", None),
        )
    except PromptTooLongError as exc:
        job.report.finish = "error"
        job.report.error = Sentence(
            QT_TRANSLATE_NOOP(
                "Floodgate",
                "Your message is about {tokens} tokens long, more than the {budget} tokens "
                "this model's context of {n_ctx} leaves for it. Shorten it, or open the "
                "model with a larger context (--ctx).",
            ),
            {"tokens": exc.tokens, "budget": exc.budget, "n_ctx": n_ctx},
        )
        return None
    job.report.dropped_turns = dropped
    return messages
