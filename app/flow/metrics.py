"""Figures the app measures about its own flow, for the diagnostics panel and the bench."""

from __future__ import annotations

import asyncio
import itertools
import math
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final, NamedTuple

from app.engine import GenerationReport, StopSignal
from app.sentence import QT_TRANSLATE_NOOP, Sentence
from app.trace import TRACE


class Distribution:
    """The recent samples of one figure (milliseconds), summarised as percentiles.

    Args:
        keep: how many recent samples to keep; older ones fall off so memory stays flat.
    """

    def __init__(self, keep: int = 20_000) -> None:
        self._samples: deque[float] = deque(maxlen=keep)
        self.count = 0

    def add(self, value: float) -> None:
        """Record one sample."""
        self._samples.append(value)
        self.count += 1

    def extend(self, values: Iterable[float]) -> None:
        """Record several samples."""
        added = values if isinstance(values, list) else list(values)
        self._samples.extend(added)
        self.count += len(added)

    def since(self, count: int) -> list[float]:
        """The samples added after the :attr:`count` was ``count`` (newest first).

        As far as they are still kept: a reader that falls far behind gets the newest ones.
        """
        new = min(self.count - count, len(self._samples))
        if new <= 0:
            return []
        return list(itertools.islice(reversed(self._samples), new))

    @property
    def last(self) -> float | None:
        """The newest sample, if any."""
        return self._samples[-1] if self._samples else None

    def percentile(self, q: float) -> float:
        """The ``q``-th percentile (nearest rank) of the kept samples; NaN when empty."""
        if not self._samples:
            return math.nan
        return _nearest_rank(sorted(self._samples), q)

    def summary(self) -> dict[str, float]:
        """``{"p50", "p95", "p99", "max", "n"}`` of the kept samples."""
        if not self._samples:
            return {"p50": math.nan, "p95": math.nan, "p99": math.nan, "max": math.nan, "n": 0}
        ordered = sorted(self._samples)
        return {
            "p50": _nearest_rank(ordered, 50),
            "p95": _nearest_rank(ordered, 95),
            "p99": _nearest_rank(ordered, 99),
            "max": ordered[-1],
            "n": len(ordered),
        }


def _nearest_rank(ordered: list[float], q: float) -> float:
    return ordered[max(1, math.ceil(q / 100 * len(ordered))) - 1]


@dataclass
class ReplyFigures:
    """Live figures of the reply being streamed (or the last one)."""

    sent_at: float = 0.0
    first_shown_at: float | None = None
    last_shown_at: float | None = None
    first_produced_at: float | None = None
    last_produced_at: float | None = None
    pieces_shown: int = 0
    frames: int = 0
    wakes: int = 0
    """How many times the frame pump woke the UI thread (a frame's clock, a piece's arrival)."""

    @property
    def time_to_first_piece_ms(self) -> float | None:
        """From Send to the first piece on screen."""
        if self.first_shown_at is None:
            return None
        return (self.first_shown_at - self.sent_at) * 1000

    @property
    def tokens_per_s(self) -> float | None:
        """Pieces produced per second, from the first piece to the latest."""
        return _rate(self.pieces_shown, self.first_produced_at, self.last_produced_at)

    @property
    def shown_per_s(self) -> float | None:
        """Pieces shown per second, from the first on screen to the latest (what the user sees)."""
        return _rate(self.pieces_shown, self.first_shown_at, self.last_shown_at)


def _rate(count: int, first: float | None, last: float | None) -> float | None:
    if first is None or last is None or count < 2 or last <= first:
        return None
    return (count - 1) / (last - first)


REPLY_START: Final = QT_TRANSLATE_NOOP("Floodgate", "reply start")
FIRST_TOKEN: Final = QT_TRANSLATE_NOOP("Floodgate", "first token")
PROMPT_PROCESSING: Final = QT_TRANSLATE_NOOP("Floodgate", "prompt processing")
PROMPT_PROCESSED: Final = QT_TRANSLATE_NOOP("Floodgate", "prompt processed")
STOP_PRESSED: Final = QT_TRANSLATE_NOOP("Floodgate", "stop pressed")
COMPUTATION_ENDED: Final = QT_TRANSLATE_NOOP("Floodgate", "computation ended")
REPLY_END: Final = QT_TRANSLATE_NOOP("Floodgate", "reply end")
"""The moments of a reply the timeline marks (the names are also the words shown)."""

SIDE_BY_SIDE: Final = QT_TRANSLATE_NOOP("Floodgate", "side by side")
PAUSED: Final = QT_TRANSLATE_NOOP("Floodgate", "paused")
RESUMED: Final = QT_TRANSLATE_NOOP("Floodgate", "resumed")
"""The moments of a reply decoded beside others (:mod:`app.engine.batch`): the replies in its
steps changed; it left the batch to wait for its reader (the window), and came back. Seen
when the figures are read (a few times a second while the timeline is shown, and at the
reply's end), so they are marked then, not at the step."""

_TRACE_NAMES: Final = {REPLY_END: "reply shown ended"}
"""Where a trace calls a moment something more precise than the timeline's short label."""

EVENTS_KEPT: Final = 256
"""Moments kept for the timeline: a few dozen replies' worth, far more than 30 s show."""


PROMPT_DETAIL: Final = QT_TRANSLATE_NOOP("Floodgate", "{tokens} tokens")
PROMPT_CACHED_DETAIL: Final = QT_TRANSLATE_NOOP("Floodgate", "{tokens} tokens, {cached} cached")
PROMPT_RATE_DETAIL: Final = QT_TRANSLATE_NOOP("Floodgate", "{rate} tokens/s")
SIDE_BY_SIDE_DETAIL: Final = QT_TRANSLATE_NOOP("Floodgate", "{n} replies")
ALONE_DETAIL: Final = QT_TRANSLATE_NOOP("Floodgate", "alone")


class FlowEvent(NamedTuple):
    """A moment in the flow: when (``time.perf_counter()``), what, and a detail to show.

    ``name`` is one of the names above (its English text, translated where shown); the
    detail, if any, is a sentence with figures.
    """

    at: float
    name: str
    detail: Sentence | None = None


class PieceRate:
    """Pieces shown per second over a short window, read from a :class:`ReplyFigures` count.

    Follows the count across replies (a new :class:`ReplyFigures` starts again from zero) so
    the rate does not jump when a reply ends and the next begins.

    Args:
        window: seconds the rate is averaged over.
    """

    def __init__(self, window: float = 0.5) -> None:
        self.window = window
        self._reply: ReplyFigures | None = None
        self._seen = 0
        self._total = 0
        self._totals: deque[tuple[float, int]] = deque()

    def update(self, reply: ReplyFigures, now: float) -> float:
        """The rate now, given the reply's figures."""
        if reply is not self._reply:
            self._reply, self._seen = reply, 0
        self._total += max(0, reply.pieces_shown - self._seen)
        self._seen = reply.pieces_shown
        totals = self._totals
        totals.append((now, self._total))
        while len(totals) > 2 and totals[1][0] <= now - self.window:
            totals.popleft()
        began, before = totals[0]
        return (self._total - before) / (now - began) if now > began else 0.0


@dataclass
class CacheFigures:
    """The engine's cache of processed prompts, as the diagnostics panel shows it.

    Filled in by whoever reads the engine's cache statistics; all zero while unknown.
    """

    entries: int = 0
    megabytes: float = 0.0
    hits: int = 0
    misses: int = 0
    seconds_saved: float = 0.0


@dataclass
class FlowMetrics:
    """Everything the diagnostics panel shows; distributions cover recent replies.

    Besides the figures the frame pump and the session write, it keeps the reply's moments
    (:attr:`events`, for the timeline and the trace) and its prompt-processing figures, read
    from the reply's :class:`GenerationReport` by :meth:`observe` on the UI thread.
    """

    frame_cost_ms: Distribution = field(default_factory=Distribution)
    token_to_screen_ms: Distribution = field(default_factory=Distribution)
    arrivals: list[float] | None = None
    """When a list (the bench's), every piece shown adds when it was produced."""
    loop_lag_ms: Distribution = field(default_factory=Distribution)
    """How late each frame tick woke (the bench adds a finer 5 ms heartbeat of its own)."""
    stop_latency_ms: Distribution = field(default_factory=Distribution)
    reply: ReplyFigures = field(default_factory=ReplyFigures)
    queue_depth: int = 0
    queue_bound: int = 0
    queue_max: int = 0
    backpressure_waits: int = 0
    backpressure_ms: float = 0.0
    events: deque[FlowEvent] = field(default_factory=lambda: deque(maxlen=EVENTS_KEPT))
    """The flow's recent moments, oldest first (see :meth:`mark`)."""
    prompt_tokens: int = 0
    """Tokens in the current (or last) reply's prompt, 0 until the engine knows."""
    cached_tokens: int = 0
    """Of those, how many came from the cache and were not processed again."""
    prefill_done: int = 0
    """Prompt tokens processed so far, counting the cached ones."""
    prefill_started_at: float | None = None
    prefill_ended_at: float | None = None
    python_ms_per_token: float = 0.0
    """The worker's own Python time per generated token (0 when the engine does not say)."""
    drafted: int = 0
    """Tokens guessed ahead and checked in the reply so far (speculative decoding)."""
    draft_kept: int = 0
    """Of those, the ones the model wrote too (each saved a call of the model)."""
    cache: CacheFigures = field(default_factory=CacheFigures)
    threads: str = ""
    """The local model's thread counts and how they were chosen, in words ("" before a model)."""
    placement: str = ""
    """Where the local model runs, in words ("GPU · 31 of 31 layers · 222 MB"; "" for none)."""
    gpu_memory: tuple[int, int] | None = None
    """Bytes in use on the model's GPU and the bytes it has, as its driver last said."""
    report: GenerationReport | None = None
    """The current (or last) reply's report, which :meth:`observe` reads."""
    stop_signal: StopSignal | None = None
    """The current (or last) reply's stop signal, whose ``set_at`` is when Stop was pressed."""
    _observed: ReplyFigures | None = field(default=None, init=False, repr=False)
    _marked: set[str] = field(default_factory=set, init=False, repr=False)
    _batch_seen: int = field(default=0, init=False, repr=False)
    _paused_seen: bool = field(default=False, init=False, repr=False)
    _traced_rate: PieceRate = field(default_factory=PieceRate, init=False, repr=False)

    def trace_frame(self, depth: int, lag_ms: float) -> None:
        """The frame's counters for a trace being recorded: queue, loop lag, tokens/s.

        For the frame pump, once a frame (it costs one attribute read while not recording).

        Args:
            depth: pieces the frame drained (the queue's depth when it woke).
            lag_ms: how late the frame woke.
        """
        if not TRACE.recording:
            return
        TRACE.counter("queue", depth=depth, bound=self.queue_bound)
        TRACE.counter("loop lag", ms=lag_ms)
        rate = self._traced_rate.update(self.reply, time.perf_counter())
        TRACE.counter("tokens/s", rate=rate)

    def mark(self, name: str, at: float | None = None, detail: Sentence | None = None) -> None:
        """Note a moment of the flow for the timeline, and in the trace when one is recorded.

        Args:
            name: what happened, one of the names above (or any short English phrase).
            at: when, as ``time.perf_counter()``; now if omitted (for moments measured
                elsewhere, such as the engine's ``compute_ended_at``).
            detail: figures shown with the marker, such as :data:`PROMPT_DETAIL`.
        """
        when = time.perf_counter() if at is None else at
        self.events.append(FlowEvent(when, name, detail))
        if TRACE.recording:
            trace_name = _TRACE_NAMES.get(name, name)
            if detail is not None:
                TRACE.instant_at(trace_name, when, cat="reply", **detail.fields)
            else:
                TRACE.instant_at(trace_name, when, cat="reply")

    def begin_reply(
        self, report: GenerationReport | None = None, stop: StopSignal | None = None
    ) -> ReplyFigures:
        """Start the figures of a new reply (Send pressed now) and mark its start.

        Args:
            report: the reply's report, which :meth:`observe` reads prompt figures from.
            stop: the reply's stop signal, so the moment Stop was pressed is marked.

        Returns:
            The new :attr:`reply`.
        """
        self.reply = ReplyFigures(sent_at=time.perf_counter())
        self.report = report
        self.stop_signal = stop
        self.observe()
        return self.reply

    def observe(self) -> None:
        """Catch up with the reply: copy the report's prompt figures, mark what happened.

        Cheap (a few attribute reads) and idempotent: each moment is marked once, at the time
        it happened (the engine's and the stop signal's own clock readings), however late this
        runs. Call it on the UI thread: the timeline does, a few times a second while shown,
        and :meth:`end_reply` does, so the moments are kept while the panel is closed too.
        """
        reply = self.reply
        if reply is not self._observed:
            # A new reply (set by begin_reply, or assigned directly by older code).
            self._observed = reply
            self._marked = set()
            self._batch_seen, self._paused_seen = 0, False
            self.prompt_tokens = self.cached_tokens = self.prefill_done = 0
            self.drafted = self.draft_kept = 0
            self.prefill_started_at = self.prefill_ended_at = None
            if reply.sent_at:
                self._mark_once(REPLY_START, reply.sent_at)
        report = self.report
        if report is not None:
            self.prompt_tokens = report.prompt_tokens
            self.cached_tokens = report.cached_tokens
            self.prefill_done = report.prefill_done
            self.prefill_started_at = report.prefill_started_at
            self.prefill_ended_at = report.prefill_ended_at
            self.python_ms_per_token = report.python_ms_per_token
            self.drafted = report.drafted
            self.draft_kept = report.draft_kept
            started = report.prefill_started_at
            if started is not None and (report.prompt_tokens or report.prefill_ended_at):
                # Marked once the prompt's length is known (the engine says so as processing
                # begins), so the marker can say it.
                detail = None
                if report.prompt_tokens:
                    detail = Sentence(
                        PROMPT_CACHED_DETAIL if report.cached_tokens else PROMPT_DETAIL,
                        {"tokens": report.prompt_tokens, "cached": report.cached_tokens},
                    )
                self._mark_once(PROMPT_PROCESSING, started, detail)
            if report.prefill_ended_at is not None:
                rate = self.prefill_rate
                detail = Sentence(PROMPT_RATE_DETAIL, {"rate": round(rate)}) if rate else None
                self._mark_once(PROMPT_PROCESSED, report.prefill_ended_at, detail)
        if reply.first_shown_at is not None:
            self._mark_once(FIRST_TOKEN, reply.first_shown_at)
        stop = self.stop_signal
        if stop is not None and stop.set_at is not None:
            self._mark_once(STOP_PRESSED, stop.set_at)
        if report is not None:
            self._observe_batch(report)
        if report is not None and report.compute_ended_at is not None:
            self._mark_once(COMPUTATION_ENDED, report.compute_ended_at)

    def _observe_batch(self, report: GenerationReport) -> None:
        """Mark the replies beside this one when they change, and its pauses for its reader."""
        size = report.batch_size
        if size and size != self._batch_seen and (self._batch_seen or size > 1):
            alone = size == 1
            detail = Sentence(ALONE_DETAIL) if alone else Sentence(SIDE_BY_SIDE_DETAIL, {"n": size})
            self.mark(SIDE_BY_SIDE, detail=detail)
        if size:
            self._batch_seen = size
        if report.paused != self._paused_seen:
            self._paused_seen = report.paused
            self.mark(PAUSED if report.paused else RESUMED)

    def end_reply(self) -> None:
        """The reply is over and shown: mark what is left to mark, and its end (now)."""
        self.observe()
        self._mark_once(REPLY_END, time.perf_counter())

    def _mark_once(self, name: str, at: float, detail: Sentence | None = None) -> None:
        if name not in self._marked:
            self._marked.add(name)
            self.mark(name, at, detail)

    @property
    def guesses_per_s(self) -> tuple[float, float] | None:
        """Tokens guessed ahead and kept per second of the reply's writing; None: no guess."""
        report = self.report
        started = self.prefill_ended_at
        if not self.drafted or report is None or started is None:
            return None
        end = report.compute_ended_at
        seconds = (end if end is not None else time.perf_counter()) - started
        if seconds <= 0:
            return None
        return self.drafted / seconds, self.draft_kept / seconds

    @property
    def prefill_fraction(self) -> float | None:
        """How much of the prompt is processed (0 to 1), or None before it is known."""
        if not self.prompt_tokens:
            return None
        return min(1.0, self.prefill_done / self.prompt_tokens)

    @property
    def prefilling(self) -> bool:
        """The prompt is being processed now."""
        return self.prefill_started_at is not None and self.prefill_ended_at is None

    @property
    def prefill_seconds(self) -> float | None:
        """How long prompt processing took (or has taken so far)."""
        if self.prefill_started_at is None:
            return None
        end = self.prefill_ended_at
        if end is None:
            end = time.perf_counter()
        return max(0.0, end - self.prefill_started_at)

    @property
    def prefill_rate(self) -> float | None:
        """Prompt tokens processed per second, the cached ones not counted."""
        seconds = self.prefill_seconds
        processed = self.prefill_done - self.cached_tokens
        if seconds is None or seconds <= 0 or processed <= 0:
            return None
        return processed / seconds


class FlowSample(NamedTuple):
    """One reading of the flow for the timeline.

    Attributes:
        at: when, as ``time.perf_counter()``.
        tokens_per_s: pieces shown per second over the last half second or so.
        queue_depth: pieces waiting at the latest frame; the bound when the worker waited
            for space since the previous reading (the queue was full in between).
        queue_bound: the queue's bound then.
        frame_cost_ms: the costliest frame since the previous reading (NaN: none applied).
        loop_lag_ms: the latest frame wake-up at worst since the previous reading (NaN: no
            frames).
        prefill: the share of the prompt processed while it is being processed, else NaN.
        gpu_mb: megabytes in use on the model's GPU, else NaN.
        guessed_per_s: tokens guessed ahead and checked per second since the previous
            reading (speculative decoding; 0 without guesses).
        kept_per_s: of those, the ones the model wrote too, per second.
    """

    at: float
    tokens_per_s: float
    queue_depth: int
    queue_bound: int
    frame_cost_ms: float
    loop_lag_ms: float
    prefill: float
    gpu_mb: float = math.nan
    guessed_per_s: float = 0.0
    kept_per_s: float = 0.0


class FlowSampler:
    """Reads :class:`FlowMetrics` into a series of :class:`FlowSample`, for a live timeline.

    The flow writes nothing for it: each :meth:`sample` looks at what changed since the last
    one (pieces shown, new frame costs and lags, backpressure waits), so sampling costs the
    flow nothing and stops costing anything when nobody samples.

    Args:
        metrics: what to read.
        keep_seconds: how much history to keep.
        rate_window: seconds the token rate is averaged over.
    """

    def __init__(
        self, metrics: FlowMetrics, keep_seconds: float = 40.0, rate_window: float = 0.5
    ) -> None:
        self.metrics = metrics
        self.keep_seconds = keep_seconds
        self.rate_window = rate_window
        self.samples: deque[FlowSample] = deque()
        self._rate = PieceRate(rate_window)
        self._frames_seen = metrics.frame_cost_ms.count
        self._lags_seen = metrics.loop_lag_ms.count
        self._waits_seen = metrics.backpressure_waits
        self._guesses_seen: tuple[object, float, int, int] = (None, 0.0, 0, 0)

    def _guesses(self, now: float) -> tuple[float, float]:
        """Guessed and kept tokens per second since the previous reading."""
        m = self.metrics
        report, at, drafted, kept = self._guesses_seen
        if m.report is not report:
            drafted = kept = 0
        self._guesses_seen = (m.report, now, m.drafted, m.draft_kept)
        if not at or now <= at:
            return 0.0, 0.0
        return (m.drafted - drafted) / (now - at), (m.draft_kept - kept) / (now - at)

    def sample(self, now: float | None = None) -> FlowSample:
        """Take a reading now (also catching up with the reply's moments) and keep it."""
        m = self.metrics
        now = time.perf_counter() if now is None else now
        m.observe()
        rate = self._rate.update(m.reply, now)
        frames = m.frame_cost_ms.since(self._frames_seen)
        self._frames_seen = m.frame_cost_ms.count
        lags = m.loop_lag_ms.since(self._lags_seen)
        self._lags_seen = m.loop_lag_ms.count
        depth = m.queue_depth
        if m.backpressure_waits != self._waits_seen:
            # The worker waited for space since the last reading, so the queue was full:
            # a reading between frames would otherwise miss the moment it hit the bound.
            depth = max(depth, m.queue_bound)
        self._waits_seen = m.backpressure_waits
        fraction = m.prefill_fraction
        guessed, kept = self._guesses(now)
        sample = FlowSample(
            at=now,
            tokens_per_s=rate,
            queue_depth=depth,
            queue_bound=m.queue_bound,
            frame_cost_ms=max(frames) if frames else math.nan,
            loop_lag_ms=max(lags) if lags else math.nan,
            prefill=fraction if m.prefilling and fraction is not None else math.nan,
            gpu_mb=m.gpu_memory[0] / 2**20 if m.gpu_memory is not None else math.nan,
            guessed_per_s=guessed,
            kept_per_s=kept,
        )
        self.samples.append(sample)
        while self.samples and self.samples[0].at < now - self.keep_seconds:
            self.samples.popleft()
        return sample


async def watch_loop_lag(into: Distribution, interval: float = 0.005) -> None:
    """Record, until cancelled, how late a heartbeat of ``interval`` seconds wakes up.

    Lateness is the time the event loop was busy with something else: what a user feels as
    a sluggish window.
    """
    while True:
        began = time.perf_counter()
        await asyncio.sleep(interval)
        into.add(max(0.0, (time.perf_counter() - began - interval) * 1000))
