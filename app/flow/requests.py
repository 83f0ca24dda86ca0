"""The requests of the local API server, as the flow sees them: waiting, running, ended.

The server (``app/server/``) is a face of the flow, as the window is: it turns an HTTP request
into a :class:`~app.flow.worker.ReplyJob` and hands it to the same worker, in the same FIFO
queue as the window's own replies. The :class:`RequestBoard` is where it keeps each request's
record, so that the window can show them and stop any of them without knowing the server
(and the server without knowing the window). Every method is thread-safe: the server writes
from its own thread, the window reads a few times a second from the UI thread.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from app import defaults
from app.engine import GenerationReport, ModelInfo
from app.flow.worker import ReplyJob
from app.sentence import QT_TRANSLATE_NOOP, Sentence

RECENT = 200
"""Ended requests kept for the window's panel (older ones are forgotten)."""


class SharedModel(Protocol):
    """The open model as the server shares it with the window (the model host)."""

    @property
    def served_model(self) -> ModelInfo | None:
        """The local model requests are answered with (None: none is open)."""
        ...

    def produce_local(self, job: ReplyJob) -> None:
        """Queue ``job`` for the local model's worker, after everything queued before it."""
        ...


@dataclass
class ServedRequest:
    """One request to the API server, from arrival to its end.

    Attributes:
        id: a number, counting from 1 in this run.
        client: the client's address (``host:port``).
        endpoint: the path asked for.
        job: the reply job (None until the request was admitted to the queue).
        received_at: ``time.time()`` when it arrived (shown as a time of day).
        started_at: ``time.perf_counter()`` when it arrived (durations are measured from it).
        ended_at: ``time.perf_counter()`` when its response ended (None while it runs).
        outcome: how it ended: ``"done"``, ``"length"``, ``"client left"``, ``"stopped"``
            (from the window), ``"failed"``, ``"refused"`` (None while it runs).
        reason: why it failed or was refused, for the panel.
        stopped_by_window: the window's Stop ended it.
    """

    id: int
    client: str
    endpoint: str
    job: ReplyJob | None = None
    received_at: float = field(default_factory=time.time)
    started_at: float = field(default_factory=time.perf_counter)
    ended_at: float | None = None
    outcome: str | None = None
    reason: str = ""
    stopped_by_window: bool = False

    @property
    def waiting(self) -> bool:
        """Admitted, and still waiting for the worker (not stopped)."""
        job = self.job
        return (
            self.outcome is None
            and job is not None
            and job.began_at is None
            and not job.stop.is_set()
        )

    @property
    def running(self) -> bool:
        """The worker is computing its reply (or the response is still being written)."""
        job = self.job
        return self.outcome is None and job is not None and job.began_at is not None

    def status(self) -> str:
        """Where the request is, in words for the panel (English: a technical log)."""
        job = self.job
        if self.outcome is not None:
            if self.outcome == "failed" or self.outcome == "refused":
                return f"{self.outcome}: {self.reason}" if self.reason else self.outcome
            return self.outcome
        if job is None:
            return "received"
        if job.began_at is None:
            return "leaving" if job.stop.is_set() else "queued"
        report = job.report
        if report.prefill_ended_at is None:
            return f"reading the prompt {report.prefill_done} / {report.prompt_tokens}"
        if report.paused and report.compute_ended_at is None:
            # Its client reads slower than the model writes: it waits out of the batch.
            return "paused"
        return "streaming"

    def side_by_side(self) -> int:
        """Replies decoded with this one at its last step, itself counted.

        Once it ended, the most there were; 0: not decoded side by side, or not begun.
        """
        job = self.job
        if job is None or job.began_at is None:
            return 0
        return job.report.batch_size if self.outcome is None else job.report.batch_peak

    def tokens_per_second(self) -> float:
        """The reply's rate since its first token (0 before the second one)."""
        job = self.job
        if job is None or job.report.prefill_ended_at is None or job.report.reply_tokens < 2:
            return 0.0
        end = job.report.compute_ended_at or time.perf_counter()
        elapsed = end - job.report.prefill_ended_at
        return job.report.reply_tokens / elapsed if elapsed > 0 else 0.0

    def duration(self) -> float:
        """Seconds from arrival to the end (or to now)."""
        return (self.ended_at or time.perf_counter()) - self.started_at


def holds_place(report: GenerationReport) -> bool:
    """Whether the reply of ``report`` holds a place in the batch now: begun, not ended."""
    return report.prefill_started_at is not None and report.compute_ended_at is None


@dataclass(frozen=True)
class BatchUse:
    """How the open model's places for replies side by side are used now.

    Attributes:
        places: replies it can decode side by side (1: one at a time).
        in_use: replies holding a place: reading their prompt, decoding, or paused.
        paused: of those, the ones waiting out of the batch for a slow reader.
    """

    places: int
    in_use: int
    paused: int

    @property
    def decoding(self) -> int:
        """Replies computed in each step now (those in use and not paused)."""
        return self.in_use - self.paused

    def sentence(self) -> Sentence:
        """The batch in words, for the server panel's header."""
        if self.paused:
            template = QT_TRANSLATE_NOOP(
                "Floodgate",
                "Batch: {used} of {places} places in use · {decoding} decoding side by side "
                "· {paused} paused (slow reader)",
            )
        else:
            template = QT_TRANSLATE_NOOP(
                "Floodgate",
                "Batch: {used} of {places} places in use · {decoding} decoding side by side",
            )
        return Sentence(
            template,
            {
                "used": self.in_use,
                "places": self.places,
                "decoding": self.decoding,
                "paused": self.paused,
            },
        )


class RequestBoard:
    """The server's requests: the bound on those waiting, the recent ones, Stop for each.

    Args:
        max_waiting: how many admitted requests may wait for the worker at once; one more is
            refused (the server answers 503 with ``Retry-After``).
    """

    def __init__(self, max_waiting: int = defaults.API_SERVER_MAX_WAITING) -> None:
        self.max_waiting = max_waiting
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._live: dict[int, ServedRequest] = {}
        self._ended: deque[ServedRequest] = deque(maxlen=RECENT)

    def receive(self, client: str, endpoint: str) -> ServedRequest:
        """Record a request that arrived (not yet admitted to the queue)."""
        with self._lock:
            request = ServedRequest(next(self._ids), client, endpoint)
            self._live[request.id] = request
        return request

    def admit(self, request: ServedRequest, job: ReplyJob) -> bool:
        """Attach ``job`` to ``request`` unless :attr:`max_waiting` requests already wait.

        Requests whose client left while they waited do not count: the worker drops them
        without computing when it reaches them.
        """
        with self._lock:
            waiting = sum(1 for r in self._live.values() if r.waiting)
            if waiting >= self.max_waiting:
                return False
            request.job = job
            return True

    def end(self, request: ServedRequest, outcome: str, reason: str = "") -> None:
        """The request's response is over (or it was refused)."""
        with self._lock:
            if request.outcome is not None:
                return
            if outcome == "client left" and request.stopped_by_window:
                outcome = "stopped"
            request.outcome, request.reason = outcome, reason
            request.ended_at = time.perf_counter()
            self._live.pop(request.id, None)
            self._ended.append(request)

    def stop(self, request_id: int) -> bool:
        """Stop a request from the window (queued: it is dropped; running: aborted)."""
        with self._lock:
            request = self._live.get(request_id)
            if request is None:
                return False
            request.stopped_by_window = True
            job = request.job
        return job.stop.set() if job is not None else False

    def stop_all(self) -> None:
        """Stop every request (the server is closing)."""
        with self._lock:
            jobs = [r.job for r in self._live.values() if r.job is not None]
        for job in jobs:
            job.stop.set()

    def counts(self) -> tuple[int, int]:
        """How many requests wait for the worker, and how many are running."""
        with self._lock:
            live = list(self._live.values())
        return sum(r.waiting for r in live), sum(r.running for r in live)

    def batch_use(self, places: int, others: Iterable[GenerationReport | None] = ()) -> BatchUse:
        """How the batch's ``places`` are used by the running requests and ``others``.

        Args:
            places: the open model's places (:attr:`~app.engine.ModelInfo.parallel`).
            others: the reports of the replies the window computes on the same model (None:
                none now), which take places as requests do.
        """
        with self._lock:
            reports = [r.job.report for r in self._live.values() if r.job is not None]
        reports.extend(r for r in others if r is not None)
        held = [r for r in reports if holds_place(r)]
        return BatchUse(places, len(held), sum(1 for r in held if r.paused))

    def recent(self) -> list[ServedRequest]:
        """Running requests and the recently ended ones, oldest first."""
        with self._lock:
            return sorted([*self._ended, *self._live.values()], key=lambda r: r.id)
