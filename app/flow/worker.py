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
    ModelLoadError,
    StopSignal,
)
from app.engine.batch import BatchDecoder, BatchedReply
from app.engine.context import PromptTooLongError, fit_to_context
from app.engine.devices import device_memory
from app.engine.prompt_cache import CacheStats
from app.engine.threads import (
    STREAMED_CONTEXT,
    STREAMED_TOKENS,
    ThreadChoice,
    calibrate,
    machine_fingerprint,
    next_decode_threads,
    physical_cores,
)
from app.flow.piece_queue import PieceQueue
from app.sentence import QT_TRANSLATE_NOOP, Sentence
from app.store.thread_choices import Measured, ThreadChoices
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

    On the way out it stamps when the computation ended (the stop latency is measured to
    here), records Stop as the reason the reply ended unless an error did, turns a bug into a
    sentence instead of a dead thread, and ends the queue so the frame pump finishes.
    """
    report = job.report
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
        report.compute_ended_at = time.perf_counter()
        if job.stop.is_set() and report.finish != "error":
            report.finish = "stopped"
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


@dataclass(frozen=True)
class ThreadReport:
    """The threads the open model computes with, and where the decode count came from.

    Attributes:
        n_threads: threads that decode.
        n_threads_batch: threads that process prompts (every physical core unless set).
        source: ``measured`` (just now), ``kept`` (measured before, on this machine),
            ``set`` (the user's setting), ``default`` (not measured: every physical core).
        rates: tokens per second at each count measured (empty unless measured or kept).
        streaming: tokens per second of the window's replies at each count they were
            decoded with (see :func:`~app.engine.threads.next_decode_threads`).
    """

    n_threads: int
    n_threads_batch: int
    source: str
    rates: dict[int, float] = field(default_factory=dict)
    streaming: dict[int, float] = field(default_factory=dict)

    def sentence(self) -> Sentence:
        """The threads in words, e.g. for the settings dialog and the diagnostics panel."""
        how = {
            "measured": QT_TRANSLATE_NOOP("Floodgate", "measured now"),
            "kept": QT_TRANSLATE_NOOP("Floodgate", "measured before on this machine"),
            "set": QT_TRANSLATE_NOOP("Floodgate", "as set"),
            "default": QT_TRANSLATE_NOOP("Floodgate", "every physical core, not measured"),
        }[self.source]
        rates = ", ".join(f"{n}: {rate:.0f}" for n, rate in sorted(self.rates.items()))
        streamed = ", ".join(f"{n}: {rate:.0f}" for n, rate in sorted(self.streaming.items()))
        fields = {"decode": self.n_threads, "how": Sentence(how), "prompt": self.n_threads_batch}
        if streamed:
            return Sentence(
                QT_TRANSLATE_NOOP(
                    "Floodgate",
                    "Decode threads: {decode} ({how}; tokens/s at {rates}; while replies "
                    "streamed at {streamed}); prompt threads: {prompt}",
                ),
                {**fields, "rates": rates, "streamed": streamed},
            )
        if not rates:
            return Sentence(
                QT_TRANSLATE_NOOP(
                    "Floodgate", "Decode threads: {decode} ({how}); prompt threads: {prompt}"
                ),
                fields,
            )
        return Sentence(
            QT_TRANSLATE_NOOP(
                "Floodgate",
                "Decode threads: {decode} ({how}; tokens/s at {rates}); prompt threads: {prompt}",
            ),
            {**fields, "rates": rates},
        )


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
    halve the speed of both).

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
    """

    model_loaded = Signal(object)
    model_failed = Signal(object)
    reply_computing = Signal()
    threads_measuring = Signal(int, object)
    threads_chosen = Signal(object)
    device_memory = Signal(object)

    def __init__(self, opener: BackendOpener, thread_choices: ThreadChoices | None = None) -> None:
        super().__init__()
        self.setObjectName("InferenceWorker")
        self._opener = opener
        self._thread_choices = thread_choices
        self._measuring: StopSignal | None = None
        # The decode-thread measurement in use, its key and prompt threads (None: the count
        # is the user's, or nothing is measured); replies refine it (_note_streaming).
        self._measured: tuple[str, Measured, int] | None = None
        # Replies queued and not yet begun: a measurement never keeps one waiting.
        self._replies_waiting = 0
        self._waiting_lock = threading.Lock()
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._backend: Backend | None = None
        self._options = EngineOptions()
        self._path: Path | None = None
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
        with self._waiting_lock:
            self._replies_waiting += 1
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
        backend = self._backend
        return backend.cache_stats() if backend is not None else None

    def measure_threads(self) -> None:
        """Measure the open model's decode threads again (after the jobs already submitted)."""
        self._jobs.put(_MeasureJob())

    def stop_measuring(self) -> None:
        """End a decode-thread measurement in progress at once (any thread may call this)."""
        measuring = self._measuring
        if measuring is not None:
            measuring.set()

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
        waiting: list[_Job] = []
        try:
            while True:
                done = self._do_jobs(waiting)
                if done.quit:
                    return
                batch = self._batch()
                if batch is not None and batch.busy and (batch.computing or done.woke):
                    self._step(batch)
                    self._take_jobs(waiting, block=False)
                else:
                    self._take_jobs(waiting, block=not done.did)
        finally:
            batch = self._batch()
            if batch is not None:
                self._abandon(batch, None)
            with self._serving:
                self._served = False
            self._close_backend()
            # Nobody will serve what is still queued: a count waiting for it gets None.
            self._take_jobs(waiting, block=False)
            for left in waiting:
                if isinstance(left, _CountJob):
                    left.result.set_result(None)

    def _batch(self) -> BatchDecoder | None:
        """The open model's batch, if it decodes several replies side by side."""
        batch: BatchDecoder | None = getattr(self._backend, "batch", None)
        return batch

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
        i = 0
        while i < len(waiting):
            job = waiting[i]
            if isinstance(job, ReplyJob):
                i += 1
                continue
            if isinstance(job, _Wake):
                done.woke = True
            elif isinstance(job, _BackendCall):
                if self._backend is not None:
                    job.action(self._backend)
            elif isinstance(job, _CountJob):
                self._count(job)
            else:
                batch = self._batch()
                if i > 0 or (batch is not None and batch.busy):
                    break  # after the replies taken before it
                if isinstance(job, _QuitJob):
                    del waiting[i]
                    done.quit = True
                    return done
                if isinstance(job, _LoadJob):
                    self._load(job)
                else:
                    self._choose_threads(remeasure=True)
            del waiting[i]
            done.did = True
        replies = sorted(
            (job for job in waiting[:i] if isinstance(job, ReplyJob)),
            key=lambda job: job.origin != "window",
        )
        for job in replies:
            batch = self._batch()
            if batch is not None and not batch.free:
                break
            waiting.remove(job)
            done.did = True
            with self._waiting_lock:
                self._replies_waiting -= 1
            job.began_at = time.perf_counter()
            if batch is None:
                self._run_alone(job)
                break  # what came meanwhile is looked at first
            self._place(batch, job)
        return done

    def _run_alone(self, job: ReplyJob) -> None:
        """One reply from its prompt to its end, nothing else computing meanwhile."""
        with producing(job), TRACE.span("compute reply", cat="worker", by=job.origin):
            self._generate(job)
        self._note_streaming(job)
        self._read_device()

    def _place(self, batch: BatchDecoder, job: ReplyJob) -> None:
        """Put ``job`` in the batch; it ends (``producing`` closes it) when its reply does."""
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
            if job.pieces.offer(text, self._wake):
                job.last_piece_at = time.perf_counter()
                return True
            return False

        try:
            backend = self._backend
            if job.stop.is_set():
                books.__exit__(None, None, None)
                return
            if backend is None:
                job.report.finish = "error"
                job.report.error = NO_MODEL
                books.__exit__(None, None, None)
                return
            messages = self._fit(backend, job) if job.prompt is None else job.messages
            if messages is None:
                books.__exit__(None, None, None)
                return
            if job.origin == "window":
                self.reply_computing.emit()
            CRASH_RECORD.doing("decode", conversation=job.conversation)
            removers.append(job.stop.add_listener(self._wake))
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

    def _step(self, batch: BatchDecoder) -> None:
        """One step of the batch; a bug there ends its replies with a sentence, not the thread."""
        try:
            batch.step()
        except Exception as exc:
            log.exception("A step of the batch failed")
            self._abandon(batch, exc)
        if not batch.busy:
            CRASH_RECORD.doing("idle")

    @staticmethod
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

    def _count(self, job: _CountJob) -> None:
        backend = self._backend
        try:
            job.result.set_result(backend.count_tokens(job.text) if backend is not None else None)
        except Exception as exc:  # the caller hears of it; the worker goes on
            job.result.set_exception(exc)

    def _close_backend(self) -> None:
        if self._backend is not None:
            self._backend.close()
            self._backend = None

    def _load(self, job: _LoadJob) -> None:
        # Free the old model first: two models in memory at once is what users of other apps
        # see as memory that grows with every switch.
        self._close_backend()
        CRASH_RECORD.doing("loading", model=job.path.name, conversation="")
        try:
            self._backend = self._opener(job.path, job.options)
        except ModelLoadError as exc:
            self.model_failed.emit(exc.sentence)
        except Exception as exc:  # a bug or an engine surprise must not kill the thread
            self.model_failed.emit(
                Sentence(
                    QT_TRANSLATE_NOOP(
                        "Floodgate", "The model {name} could not be opened: {reason}"
                    ),
                    {"name": job.path.name, "reason": exc},
                )
            )
        else:
            self._options, self._path = job.options, job.path
            self.model_loaded.emit(self._backend.info)
            self._read_device()
            self._choose_threads(remeasure=False)
        finally:
            info = self._backend.info if self._backend is not None else None
            CRASH_RECORD.doing("idle", system_info=info.build if info is not None else "")

    def _read_device(self) -> None:
        """Say how full the GPU is, if the open model runs on one (a driver call of µs)."""
        placement = self._backend.info.placement if self._backend is not None else None
        if placement is None or not placement.on_gpu:
            return
        memory = device_memory(placement.device)
        if memory is not None:
            free, total = memory
            self.device_memory.emit(GpuMemory(placement.device, total - free, total))

    def _choose_threads(self, *, remeasure: bool) -> None:
        """Decode threads: the user's count, or measured once per model and machine and kept.

        Without a place to keep measurements (tests, the bench), nothing is measured: every
        physical core decodes. A measurement ended by Stop or Send keeps that default.
        """
        backend, path, options = self._backend, self._path, self._options
        self._measured = None
        if backend is None or path is None:
            return
        batch = options.n_threads_batch or physical_cores()
        placement = backend.info.placement
        # With every layer on a GPU the CPU threads barely compute: nothing to measure (and a
        # GPU as slow as lavapipe would take minutes to).
        on_gpu = (
            placement is not None
            and placement.on_gpu
            and (placement.layers == placement.all_layers)
        )
        if options.n_threads or self._thread_choices is None or on_gpu:
            source = "set" if options.n_threads else "default"
            self.threads_chosen.emit(
                ThreadReport(options.n_threads or physical_cores(), batch, source)
            )
            return
        choices = self._thread_choices
        key = ThreadChoices.key(path, machine_fingerprint(), backend.info.build)
        kept = None if remeasure else choices.get(key)
        if kept is not None:
            backend.set_threads(kept.n_threads, batch)
            self._measured = (key, kept, batch)
            self.threads_chosen.emit(
                ThreadReport(kept.n_threads, batch, "kept", kept.rates, kept.streaming)
            )
            return
        chosen = self._measure(backend, batch)
        if chosen is None:
            backend.set_threads(physical_cores(), batch)
            self.threads_chosen.emit(ThreadReport(physical_cores(), batch, "default"))
            return
        measured = Measured(chosen.n_threads, chosen.rates)
        choices.put(key, measured)
        self._measured = (key, measured, batch)
        self.threads_chosen.emit(ThreadReport(chosen.n_threads, batch, "measured", chosen.rates))

    def _note_streaming(self, job: ReplyJob) -> None:
        """Count a window reply's decode rate for its thread count; change count if it says so.

        The calibration decodes with the window idle; this measures in the app's real
        conditions, the window streaming the reply (see
        :func:`~app.engine.threads.next_decode_threads`). Only the window's replies count
        (an API client reads at its own pace), and only those that decoded enough tokens,
        near the start of a conversation (as the calibration does: decoding slows as the
        context grows), with nothing holding the worker back (a full queue pauses decoding),
        at the count chosen here (not one set meanwhile by other means).
        """
        backend, measured = self._backend, self._measured
        report = job.report
        if (
            backend is None
            or measured is None
            or job.origin != "window"
            or report.reply_tokens < STREAMED_TOKENS
            or report.prompt_tokens + report.reply_tokens // 2 > STREAMED_CONTEXT
            or report.prefill_ended_at is None
            or job.last_piece_at is None
            or job.pieces.backpressure_waits
        ):
            return
        key, kept, batch = measured
        n = kept.n_threads
        # To the last piece: what the engine does after it (keeping the processed prompt for
        # the next turn) is not decoding.
        seconds = job.last_piece_at - report.prefill_ended_at
        if backend.threads[0] != n or seconds <= 0:
            return
        rate = report.reply_tokens / seconds
        streaming = dict(kept.streaming)
        before = streaming.get(n)
        # Smoothed: a quarter of each reply's rate, so a passing disturbance (another
        # program, a slow reply or two) does not start a try of another count by itself.
        streaming[n] = rate if before is None else before + (rate - before) / 4
        chosen = next_decode_threads(kept.rates, streaming, n)
        updated = Measured(chosen, kept.rates, streaming)
        self._measured = (key, updated, batch)
        if chosen != n:
            backend.set_threads(chosen, batch)
        if self._thread_choices is not None:
            self._thread_choices.put(key, updated)
        self.threads_chosen.emit(ThreadReport(chosen, batch, "kept", kept.rates, streaming))

    def _measure(self, backend: Backend, batch: int) -> ThreadChoice | None:
        stop = StopSignal()
        self._measuring = stop  # set before the count is read: produce() sees one or the other
        with self._waiting_lock:
            if self._replies_waiting:
                stop.set()
        try:
            with TRACE.span("measure decode threads", cat="worker"):
                return calibrate(
                    backend,
                    range(1, physical_cores() + 1),
                    batch,
                    stop,
                    on_progress=self.threads_measuring.emit,
                )
        except Exception:  # a measurement must never cost the model
            log.exception("Measuring decode threads failed")
            return None
        finally:
            self._measuring = None

    @staticmethod
    def _fit(backend: Backend, job: ReplyJob) -> list[ChatMessage] | None:
        """The turns that fit the context (oldest left out), or None if the prompt cannot."""
        n_ctx = backend.info.n_ctx
        # Room for the answer: the token limit, but never more than a quarter of the context.
        budget = n_ctx - min(job.settings.max_tokens, n_ctx // 4)
        try:
            # A model that sees says what a picture takes (others have no pictures to count).
            per_picture = int(getattr(backend, "picture_tokens", 0))
            messages, dropped = fit_to_context(
                job.messages, backend.count_tokens, budget, per_picture
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

    def _generate(self, job: ReplyJob) -> None:
        if job.stop.is_set():
            return  # stopped before it began: producing() records it
        if self._backend is None:
            job.report.finish = "error"
            job.report.error = NO_MODEL
            return
        messages = self._fit(self._backend, job) if job.prompt is None else job.messages
        if messages is None:
            return
        if job.origin == "window":
            self.reply_computing.emit()
        # What a native crash will be reported as doing (app/crash_record.py).
        CRASH_RECORD.doing("prefill", conversation=job.conversation)
        stream = self._backend.stream_reply(
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
