"""The local model's decode threads: chosen after each load, measured, refined by replies.

The inference worker owns a :class:`DecodeThreads` and calls it on its own thread (llama.cpp's
threads are set where the model computes). The user's count wins; otherwise a measurement
(:func:`~app.engine.threads.calibrate`) is made once per model and machine and kept, and the
window's replies then refine it (:func:`~app.engine.threads.next_decode_threads`). Each
choice is told as a :class:`ThreadReport`.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from app.engine import Backend, EngineOptions, GenerationReport, StopSignal
from app.engine.threads import (
    STREAMED_CONTEXT,
    STREAMED_TOKENS,
    ThreadChoice,
    calibrate,
    machine_fingerprint,
    next_decode_threads,
    physical_cores,
)
from app.sentence import QT_TRANSLATE_NOOP, Sentence
from app.store.thread_choices import Measured, ThreadChoices
from app.trace import TRACE

log = logging.getLogger(__name__)

BELOW_WINDOW = 10
"""How many steps of Linux's ``nice`` the window's decode threads run below its UI thread.

With every core decoding, a piece's wake-up of the UI thread waited for a decode thread to
leave its core: at the same priority the kernel (EEVDF, Linux 6.18, 2-core VM) left the UI
thread waiting up to 3.7 ms (p95) and a piece's time to the screen reached 14-15 ms p95. With
the decode threads 10 below, the wait fell to 0.3 ms and the time to the screen to 11.9-12.1 ms,
at the same decode rate (the UI thread uses the same CPU time either way, now without delay).
Steps 2, 4 and 5 gave no steady gain. The threads of one process share its scheduling group
(an autogroup, or the app's cgroup on a systemd desktop), so this orders the app's own
threads; it does not hand the model's share to other programs unless they run in the same
group (a shell that launched both)."""


def lower_this_thread(steps: int) -> None:
    """Lower the calling thread's priority by ``steps`` of ``nice`` (Linux only; 0: none).

    Threads it starts later inherit it: llama.cpp's OpenMP team, which the worker's thread
    creates at its first computation.
    """
    if steps <= 0 or not sys.platform.startswith("linux"):
        return  # elsewhere PRIO_PROCESS with a thread's id is not that thread
    tid = threading.get_native_id()
    try:
        os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + steps)
    except OSError as exc:  # a sandbox may forbid it: the threads run as they are
        log.info("decode threads keep their priority: %s", exc)


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


class DecodeThreads:
    """Chooses the open model's decode threads; called on the worker's thread.

    A measurement never keeps a reply waiting: a reply queued during one ends it at once
    (:meth:`stop`), and one queued before it begins skips it (:meth:`reply_queued`).

    Args:
        choices: where measurements are kept (None: nothing is measured).
        chosen: told each choice (after a load, a measurement, and a reply that refines it).
        measuring: told each count as its try starts (rate None) and ends (its rate).
    """

    def __init__(
        self,
        choices: ThreadChoices | None,
        chosen: Callable[[ThreadReport], None],
        measuring: Callable[[int, float | None], None],
    ) -> None:
        self._choices = choices
        self._chosen = chosen
        self._on_progress = measuring
        self._measuring: StopSignal | None = None
        # The decode-thread measurement in use, its key and prompt threads (None: the count
        # is the user's, or nothing is measured); replies refine it (note_streaming).
        self._measured: tuple[str, Measured, int] | None = None
        # Replies queued and not yet begun: a measurement never keeps one waiting.
        self._replies_waiting = 0
        self._waiting_lock = threading.Lock()

    def reply_queued(self) -> None:
        """A reply was queued, on any thread: a measurement about to begin is skipped."""
        with self._waiting_lock:
            self._replies_waiting += 1

    def reply_began(self) -> None:
        """The worker took a queued reply to compute it."""
        with self._waiting_lock:
            self._replies_waiting -= 1

    def stop(self) -> None:
        """End a measurement in progress at once (any thread may call this)."""
        measuring = self._measuring
        if measuring is not None:
            measuring.set()

    def choose(
        self,
        backend: Backend | None,
        path: Path | None,
        options: EngineOptions,
        *,
        remeasure: bool,
    ) -> None:
        """Decode threads: the user's count, or measured once per model and machine and kept.

        Without a place to keep measurements (tests, the bench), nothing is measured: every
        physical core decodes. A measurement ended by Stop or Send keeps that default.
        """
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
        if options.n_threads or self._choices is None or on_gpu:
            source = "set" if options.n_threads else "default"
            self._chosen(ThreadReport(options.n_threads or physical_cores(), batch, source))
            return
        choices = self._choices
        key = ThreadChoices.key(path, machine_fingerprint(), backend.info.build)
        kept = None if remeasure else choices.get(key)
        if kept is not None:
            backend.set_threads(kept.n_threads, batch)
            self._measured = (key, kept, batch)
            self._chosen(ThreadReport(kept.n_threads, batch, "kept", kept.rates, kept.streaming))
            return
        chosen = self._measure(backend, batch)
        if chosen is None:
            backend.set_threads(physical_cores(), batch)
            self._chosen(ThreadReport(physical_cores(), batch, "default"))
            return
        measured = Measured(chosen.n_threads, chosen.rates)
        choices.put(key, measured)
        self._measured = (key, measured, batch)
        self._chosen(ThreadReport(chosen.n_threads, batch, "measured", chosen.rates))

    def note_streaming(
        self,
        backend: Backend | None,
        report: GenerationReport,
        last_piece_at: float | None,
        *,
        window: bool,
        held_back: bool,
    ) -> None:
        """Count a window reply's decode rate for its thread count; change count if it says so.

        The calibration decodes with the window idle; this measures in the app's real
        conditions, the window streaming the reply (see
        :func:`~app.engine.threads.next_decode_threads`). Only the window's replies count
        (an API client reads at its own pace), and only those that decoded enough tokens,
        near the start of a conversation (as the calibration does: decoding slows as the
        context grows), with nothing holding the worker back (a full queue pauses decoding),
        at the count chosen here (not one set meanwhile by other means).

        Args:
            backend: the open model.
            report: the reply's report.
            last_piece_at: ``time.perf_counter()`` when the worker queued its last piece.
            window: whether the window asked for the reply.
            held_back: whether the reply's queue ever made the worker wait.
        """
        measured = self._measured
        if (
            backend is None
            or measured is None
            or not window
            or report.reply_tokens < STREAMED_TOKENS
            or report.prompt_tokens + report.reply_tokens // 2 > STREAMED_CONTEXT
            or report.prefill_ended_at is None
            or last_piece_at is None
            or held_back
        ):
            return
        key, kept, batch = measured
        n = kept.n_threads
        # To the last piece: what the engine does after it (keeping the processed prompt for
        # the next turn) is not decoding.
        seconds = last_piece_at - report.prefill_ended_at
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
        if self._choices is not None:
            self._choices.put(key, updated)
        self._chosen(ThreadReport(chosen, batch, "kept", kept.rates, streaming))

    def _measure(self, backend: Backend, batch: int) -> ThreadChoice | None:
        stop = StopSignal()
        self._measuring = stop  # set before the count is read: a reply queued sees one or the other
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
                    on_progress=self._on_progress,
                )
        except Exception:  # a measurement must never cost the model
            log.exception("Measuring decode threads failed")
            return None
        finally:
            self._measuring = None
