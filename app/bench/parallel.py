"""Replies side by side: several streams decoded in one ``llama_decode`` per step.

Floodgate's side is driven in-process through its worker, as the API server drives it: a
:class:`~app.flow.model_host.ModelHost` (the worker thread that owns the model, opened with
``EngineOptions.parallel``) takes :class:`~app.flow.worker.ReplyJob` s, and their
:class:`~app.flow.piece_queue.PieceQueue` s are read with ``take_async`` on an asyncio loop of a
thread of its own, as the server's responses read them (the window shows one reply at a
time, and a client per stream in processes of their own would take the two cores' time from
the model). The times are the worker's: each piece's ``produced_at``. The slow reader and the
peer go through Floodgate's API server instead (a socket read 100 bytes a second, and the
``openai`` client), as a real client does.

Every stream continues a count (``"1, 2, 3, …, 12,"``, each from its own number) greedily,
without repeat penalty: a reply that does not end before its token limit.

- ``aggregate_ratio.N``: total tokens per second of N streams at once over one stream, for
  N = 2, 4, 8, the engine opened with ``parallel`` = N each time (one stream: ``parallel``
  = 1, one reply at a time as before). Total tokens per second is counted while every
  stream decodes: from the moment the last stream had its first token to the moment the
  first one had its last (a newcomer's prompt is read beside the others' decoding, so the
  streams start a few steps apart). Rounds over every N, in alternating order; each ratio
  is the median of its rounds' ratios, with a bootstrap interval.
- ``native_ratio``: Floodgate's total at 4 streams over a lean loop over llama.cpp's C API
  that decodes the same four prompts in one batch (``llama_batch_init``, a greedy sampler
  per sequence, a context with ``n_seq_max`` = 4), in the bench's bare child process
  (:meth:`app.bench.loops.LlamaLoops.batch_run`), in pairs interleaved with those rounds.
- ``gap_ms``: each stream's time between pieces while all four decode (from those rounds).
- ``prefill_stall_ratio``: three streams decode; a newcomer brings a prompt of about 2,000
  tokens, read beside them, and is stopped at a random point of it. The three's p99 gap
  between pieces while it is read, over their p99 gap in the windows between newcomers.
- ``stop_ms``: those Stops during the newcomer's prompt, and Stops of a fourth stream at a
  random moment of its reply, three others streaming: ``compute_ended_at`` less
  ``StopSignal.set_at``, as the bench's other stops.
- ``slow_reader``: three streams decode while a fourth, through the API server, is read 100
  bytes a second from its socket (as the ``server`` section's slow reader): the three's
  total rate once the slow reply waits out of the batch, over their rate without it (from a
  window before and one after, as long: :func:`interpolated_rate`), in rounds, each with a
  slow reader of its own: the median ratio and its interval; the process's RSS growth
  meanwhile (psutil, the largest of the rounds). The server's send buffer is 4 KiB here
  (:data:`SEND_BUFFER`).
- ``peer``: the same four clients, through the official ``openai`` client in a process of
  their own, sent 50 ms apart, against Floodgate's API server (``parallel`` = 4) and
  against llama-cpp-python's own (``python -m llama_cpp.server``, which serves one request
  at a time; ``--interrupt_requests False``, or each request would cut off the one before):
  total tokens per second, from the first request to the last token, and the fourth
  client's time to its first token.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import json
import statistics
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import httpx
import psutil

from app.bench.bare import BareLoops
from app.bench.engine_drive import filler
from app.bench.local_api import SLOW_READ_BYTES, _open_stream
from app.bench.measure import until
from app.bench.plan import Setup
from app.bench.remote import _free_port, _start_server, _until_serving
from app.bench.stats import Pairs, median_with_ci, summary
from app.defaults import QUEUE_BOUND
from app.engine import GenerationSettings, StopSignal
from app.engine.llama import open_llama
from app.engine.remote import RemoteEndpoint
from app.flow.metrics import Distribution
from app.flow.model_host import ModelHost, ModelState
from app.flow.piece_queue import PieceQueue
from app.flow.words import say_sentence
from app.flow.worker import ReplyJob
from app.server.api import ServerConfig
from app.server.local import LocalServer

COUNTED = 12
"""Numbers in a counting prompt."""

STREAMS = (2, 4, 8)
"""The numbers of streams decoded at once whose total is held against one stream's."""

BESIDE = 3
"""Streams that decode while a newcomer comes, is stopped, or is read slowly."""

SHORT_CTX = 512
"""Each sequence's context in the aggregate rounds (a counting prompt and its reply)."""

LONG_CTX = 4096
"""Each sequence's context beside the long newcomer, the slow reader and the peer."""

POLL = 0.01
"""How often the bench looks at a report it waits on (seconds)."""

SEND_BUFFER = 4096
"""The kernel's send buffer of the section's API server. The app's 64 KiB holds about 400
pieces of a stream: behind a reader of 100 bytes a second, a minute of a reply on this
machine before the backpressure reaches the worker. What is measured once it has is the same
with a smaller buffer: a reply that waits out of the batch."""

STAGGER = 0.05
"""Between two of the peer clients' requests (seconds): the fourth is the fourth."""


def counting(start: int) -> str:
    """A plain text the model continues by counting on: ``"7, 8, …, 18,"``."""
    return ", ".join(str(n) for n in range(start, start + COUNTED)) + ","


def together_rate(times: Sequence[Sequence[float]]) -> tuple[float, int]:
    """Total tokens per second while every stream decoded, and how many tokens that counts.

    The window runs from the moment the last stream had its first token to the moment the
    first one had its last; every token stamped after its start and up to its end counts.
    One stream: its rate from its first token to its last.

    Raises:
        ValueError: no window (a stream too short, or one that ended before another began).
    """
    if not times or any(len(t) < 2 for t in times):
        raise ValueError("every stream needs two tokens at least")
    start = max(t[0] for t in times)
    end = min(t[-1] for t in times)
    if end <= start:
        raise ValueError("the streams never decoded all at once")
    count = sum(1 for t in times for stamp in t if start < stamp <= end)
    return count / (end - start), count


def rate_within(times: Sequence[Sequence[float]], start: float, end: float) -> float:
    """Tokens per second stamped in ``(start, end]``, every stream together."""
    count = sum(1 for t in times for stamp in t if start < stamp <= end)
    return count / (end - start)


def interpolated_rate(
    first: tuple[float, float],
    first_rate: float,
    second: tuple[float, float],
    second_rate: float,
    at: tuple[float, float],
) -> float:
    """The rate at the middle of the window ``at``, from a window before it and one after.

    Decoding slows as the streams' contexts grow, about linearly in the time per token: so
    the time per token is interpolated linearly between the two windows' middles.
    """
    t1, t2, t = (sum(first) / 2, sum(second) / 2, sum(at) / 2)
    per_token = 1 / first_rate + (1 / second_rate - 1 / first_rate) * (t - t1) / (t2 - t1)
    return 1 / per_token


def gaps_within(times: Sequence[float], start: float, end: float) -> list[float]:
    """Milliseconds between consecutive tokens both stamped in ``[start, end]``."""
    inside = [stamp for stamp in times if start <= stamp <= end]
    return [(b - a) * 1000 for a, b in itertools.pairwise(inside)]


@dataclass
class Stream:
    """One reply as its reader saw it: each piece's ``produced_at``, and when it ended."""

    job: ReplyJob
    times: list[float] = field(default_factory=list)
    chars: int = 0
    done: concurrent.futures.Future[None] = field(default_factory=concurrent.futures.Future)

    def check(self) -> None:
        """Raise if the engine reported an error."""
        error = self.job.report.error
        if error is not None:
            raise RuntimeError(f"a stream failed: {say_sentence(error)}")


class Readers:
    """The streams' readers: ``take_async`` on an asyncio loop of a thread of their own."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="bench readers")
        self._thread.start()

    def read(self, stream: Stream) -> None:
        """Read ``stream`` until its reply ends; ``stream.done`` is then set."""
        running = asyncio.run_coroutine_threadsafe(self._read(stream), self._loop)

        def finished(future: concurrent.futures.Future[None]) -> None:
            error = future.exception()
            if error is not None:
                stream.done.set_exception(error)
            else:
                stream.done.set_result(None)

        running.add_done_callback(finished)

    @staticmethod
    async def _read(stream: Stream) -> None:
        pieces = stream.job.pieces
        while True:
            taken = await pieces.take_async()
            for piece in taken:
                stream.times.append(piece.produced_at)
                stream.chars += len(piece.text)
            if not taken:
                if pieces.finished:
                    return
                # Stopped, nothing waiting: take_async no longer waits; wait for the end.
                await asyncio.sleep(0.002)

    def close(self) -> None:
        """End the readers' loop and thread."""
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()


async def _poll(predicate: Callable[[], bool], timeout: float = 300.0) -> None:
    """Wait until ``predicate`` holds, looking every :data:`POLL` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("the bench waited too long for a stream")
        await asyncio.sleep(POLL)


class _Rig:
    """The model host, the readers, and the streams sent to them."""

    def __init__(self, setup: Setup, host: ModelHost, readers: Readers) -> None:
        self.setup = setup
        self.host = host
        self.readers = readers
        self.base = host.options
        self.count = 0

    async def open(self, parallel: int, n_ctx: int) -> None:
        """Open the model for ``parallel`` replies side by side of ``n_ctx`` tokens each."""
        host = self.host
        host.options = replace(self.base, parallel=parallel, n_ctx=n_ctx)
        host.open_model(self.setup.model)
        await until(lambda: host.state in (ModelState.READY, ModelState.ERROR), 300)
        if host.state is ModelState.ERROR:
            raise SystemExit(host.describe_state())

    def start(self, prompt: str, max_tokens: int) -> Stream:
        """Queue a greedy reply continuing ``prompt`` for the worker, read as it comes."""
        self.count += 1
        stop = StopSignal()
        settings = GenerationSettings(temperature=0.0, max_tokens=max_tokens, repeat_penalty=1.0)
        job = ReplyJob(
            [{"role": "user", "content": prompt}],
            settings,
            stop,
            PieceQueue(QUEUE_BOUND, stop),
            conversation=f"bench-parallel-{self.count}",
            prompt=prompt,
            origin="server",
        )
        stream = Stream(job)
        self.readers.read(stream)
        self.host.produce_local(job)
        return stream

    @staticmethod
    async def finish(streams: Sequence[Stream]) -> None:
        """Wait until every one of ``streams`` has ended."""
        await asyncio.gather(*(asyncio.wrap_future(s.done) for s in streams))
        for stream in streams:
            stream.check()

    async def run(self, prompts: Sequence[str], max_tokens: int) -> list[list[float]]:
        """``prompts`` at once, to their end: each stream's token times."""
        streams = [self.start(prompt, max_tokens) for prompt in prompts]
        await self.finish(streams)
        return [s.times for s in streams]

    async def beside(self, max_tokens: int) -> list[Stream]:
        """:data:`BESIDE` long streams, once each has begun its reply."""
        self.count += 1
        streams = [
            self.start(counting(10_000 * (i + 1) + self.count), max_tokens) for i in range(BESIDE)
        ]
        await _poll(lambda: all(s.job.report.reply_tokens > 0 for s in streams))
        return streams

    async def stop(self, streams: Sequence[Stream]) -> None:
        """Stop ``streams`` and wait for their end."""
        for stream in streams:
            stream.job.stop.set()
        await self.finish(streams)


def _stop_ms(stream: Stream) -> float | None:
    report, stop = stream.job.report, stream.job.stop
    if report.finish != "stopped" or report.compute_ended_at is None or stop.set_at is None:
        return None
    return (report.compute_ended_at - stop.set_at) * 1000


async def _aggregate(setup: Setup, rig: _Rig, loops: BareLoops) -> dict[str, Any]:
    """The rounds over every N, with the native loop's pairs at four streams."""
    plan, log = setup.plan, setup.log
    tokens, threads = plan.parallel_tokens, setup.options.n_threads
    single: list[float] = []
    totals: dict[int, list[float]] = {n: [] for n in STREAMS}
    windows: dict[int, list[int]] = {n: [] for n in STREAMS}
    native = Pairs()
    gaps = Distribution()
    for round_ in range(plan.parallel_rounds):
        order = (1, *STREAMS) if round_ % 2 == 0 else (*reversed(STREAMS), 1)
        for n in order:
            prompts = [counting(1 + 100 * i + 7 * round_) for i in range(n)]
            await rig.open(n, SHORT_CTX)
            await rig.run(prompts, 8)  # warm-up: the first steps pay for allocations
            if n == 4 and round_ % 2 == 0:
                native.reference.append(_native(loops, prompts, tokens, threads))
            times = await rig.run(prompts, tokens)
            rate, counted = together_rate(times)
            if n == 1:
                single.append(rate)
                log(f"  round {round_ + 1}: one stream {rate:.1f} tok/s")
                continue
            totals[n].append(rate)
            windows[n].append(counted)
            log(f"  round {round_ + 1}: {n} streams {rate:.1f} tok/s ({counted} tokens counted)")
            if n == 4:
                start = max(t[0] for t in times)
                end = min(t[-1] for t in times)
                for t in times:
                    gaps.extend(gaps_within(t, start, end))
                native.app.append(rate)
                if round_ % 2 == 1:
                    native.reference.append(_native(loops, prompts, tokens, threads))
                log(f"    native batch loop {native.reference[-1]:.1f} tok/s")
    figures: dict[str, Any] = {}
    for n in STREAMS:
        ratios = [total / one for total, one in zip(totals[n], single, strict=True)]
        figures[str(n)], figures[f"{n}_ci"] = median_with_ci(ratios)
        figures[f"{n}_rounds"] = [round(r, 4) for r in ratios]
    return {
        "aggregate_ratio": figures,
        "aggregate_tok_s": {
            "1": round(statistics.median(single), 2),
            **{str(n): round(statistics.median(totals[n]), 2) for n in STREAMS},
        },
        "aggregate_tokens_counted": {str(n): min(windows[n]) for n in STREAMS},
        **native.figures("native", prefix="native_"),
        "gap_ms": summary(gaps),
    }


def _native(loops: BareLoops, prompts: Sequence[str], tokens: int, threads: int) -> float:
    """The lean batched loop over the same prompts, in the bare child: total tokens/s."""
    prompt_tokens = [loops.plain_tokens(p) for p in prompts]
    return together_rate(loops.batch_run(prompt_tokens, tokens, SHORT_CTX, threads))[0]


async def _newcomer(setup: Setup, rig: _Rig, seed: int) -> Stream:
    """A long prompt read beside the others, stopped at a random point of it."""
    newcomer = rig.start(filler(seed, setup.plan.parallel_prompt_words), 16)
    report = newcomer.job.report
    await _poll(lambda: report.prompt_tokens > 0 or newcomer.done.done())
    share = setup.rng.uniform(0.2, 0.8)
    await _poll(
        lambda: (
            report.prefill_done >= share * report.prompt_tokens
            or report.prefill_ended_at is not None
            or newcomer.done.done()
        )
    )
    await rig.stop([newcomer])
    return newcomer


async def _stopped_reply(setup: Setup, rig: _Rig, start: int) -> Stream:
    """A fourth reply, stopped at a random moment once it has begun."""
    fourth = rig.start(counting(start), LONG_CTX - 256)
    await _poll(lambda: fourth.job.report.reply_tokens > 0 or fourth.done.done())
    await asyncio.sleep(setup.rng.uniform(0.1, 0.6))
    await rig.stop([fourth])
    return fourth


async def _newcomers(setup: Setup, rig: _Rig) -> dict[str, Any]:
    """Long prompts read beside three streams, and Stops in prompts and in replies."""
    plan = setup.plan
    beside = await rig.beside(LONG_CTX - 256)
    quiet: list[tuple[float, float]] = []
    stalled: list[tuple[float, float]] = []
    prompt_stops, decode_stops = Distribution(), Distribution()
    prompt_tokens = 0
    for cycle in range(plan.parallel_cycles):
        began = time.perf_counter()
        await asyncio.sleep(plan.parallel_window_s)
        quiet.append((began, time.perf_counter()))
        newcomer = await _newcomer(setup, rig, 7_000 + cycle)
        report = newcomer.job.report
        prompt_tokens = max(prompt_tokens, report.prompt_tokens)
        stop_at = newcomer.job.stop.set_at
        if report.prefill_started_at is not None and stop_at is not None:
            end = stop_at if report.prefill_ended_at is None else report.prefill_ended_at
            stalled.append((report.prefill_started_at, end))
        latency = _stop_ms(newcomer)
        if latency is not None and report.prefill_ended_at is None:
            prompt_stops.add(latency)
        latency = _stop_ms(await _stopped_reply(setup, rig, 90_000 + 100 * cycle))
        if latency is not None:
            decode_stops.add(latency)
    await rig.stop(beside)
    quiet_gaps, stalled_gaps = Distribution(), Distribution()
    for into, windows in ((quiet_gaps, quiet), (stalled_gaps, stalled)):
        for start, end in windows:
            for stream in beside:
                into.extend(gaps_within(stream.times, start, end))
    quiet_p99, stalled_p99 = quiet_gaps.percentile(99), stalled_gaps.percentile(99)
    setup.log(
        f"  gaps p99 {quiet_p99:.1f} ms, {stalled_p99:.1f} ms while a prompt of "
        f"{prompt_tokens} tokens was read; stops p95 {prompt_stops.percentile(95):.2f} ms "
        f"in a prompt, {decode_stops.percentile(95):.2f} ms in a reply"
    )
    return {
        "prefill_stall_ratio": round(stalled_p99 / quiet_p99, 4),
        "prefill_stall": {
            "newcomer_prompt_tokens": prompt_tokens,
            "gap_ms_without": summary(quiet_gaps),
            "gap_ms_while_read": summary(stalled_gaps),
            "seconds_read": round(sum(end - start for start, end in stalled), 2),
        },
        "stop_ms": {"prompt": summary(prompt_stops), "decode": summary(decode_stops)},
    }


def _rss_mb() -> float:
    return float(psutil.Process().memory_info().rss) / 2**20


async def _slow_reader(setup: Setup, rig: _Rig, server: LocalServer) -> dict[str, Any]:
    """Three streams with and without a fourth read 100 bytes a second through the server.

    Rounds of a window without, a slow reader's window, and a window without again (each
    round's last window the next one's first): each round's ratio, their median and interval.
    """
    plan = setup.plan
    seconds = plan.parallel_slow_seconds
    beside = await rig.beside(LONG_CTX - 256)
    times = [s.times for s in beside]

    async def window() -> tuple[float, float]:
        began = time.perf_counter()
        await asyncio.sleep(seconds)
        return began, time.perf_counter()

    before = await window()
    ratios: list[float] = []
    rounds: list[dict[str, Any]] = []
    growth = 0.0
    for _ in range(plan.parallel_slow_rounds):
        slow = await _slow_window(server, seconds)
        after = await window()
        rate_before, rate_after = (rate_within(times, *w) for w in (before, after))
        without = interpolated_rate(before, rate_before, after, rate_after, slow.window)
        with_slow = rate_within(times, *slow.window)
        ratios.append(with_slow / without)
        growth = max(growth, slow.rss_growth_mb)
        setup.log(
            f"  the others {without:.1f} tok/s alone, {with_slow:.1f} beside a slow reader "
            f"(paused after {slow.filled_tokens} tokens); RSS {slow.rss_growth_mb:+.2f} MB"
        )
        rounds.append(
            {
                "ratio": round(with_slow / without, 4),
                "others_tok_s_without": round(without, 2),
                "others_tok_s_before": round(rate_before, 2),
                "others_tok_s_after": round(rate_after, 2),
                "others_tok_s_with": round(with_slow, 2),
                "worker_paused": slow.paused,
                "tokens_before_paused": slow.filled_tokens,
                "slow_tokens_meanwhile": slow.tokens_meanwhile,
            }
        )
        before = after
    await rig.stop(beside)
    ratio, interval = median_with_ci(ratios)
    return {
        "ratio": ratio,
        "ratio_ci95": interval,
        "rss_growth_mb": round(growth, 2),
        "worker_paused": all(r["worker_paused"] for r in rounds),
        "seconds": seconds,
        "rounds": rounds,
    }


@dataclass
class _SlowWindow:
    """What one slow reader's window saw."""

    window: tuple[float, float]
    paused: bool
    filled_tokens: int
    tokens_meanwhile: int
    rss_growth_mb: float


async def _slow_window(server: LocalServer, seconds: float) -> _SlowWindow:
    """A completion read 100 bytes a second, once its reply waits out of the batch."""
    recent = server.board.recent()
    last_id = recent[-1].id if recent else 0
    body = {"prompt": counting(50_000), "max_tokens": LONG_CTX - 256, "temperature": 0}
    body["frequency_penalty"] = 0  # (and so no repeat penalty: the count goes on)
    sock = _open_stream(server.port, body, receive_buffer=4096, path="/v1/completions")
    try:

        def admitted() -> bool:
            newest = server.board.recent()
            return bool(newest) and newest[-1].id > last_id and newest[-1].job is not None

        await _poll(admitted)
        job = server.board.recent()[-1].job
        assert job is not None
        # The kernel's buffers fill first; then the worker holds the reply out of the batch.
        await _poll(lambda: job.pieces.backpressure_waits > 0 or job.pieces.finished)
        paused = job.pieces.backpressure_waits > 0
        filled_tokens = job.report.reply_tokens
        rss_before = peak = _rss_mb()
        sock.setblocking(False)
        began = time.perf_counter()
        deadline = began + seconds
        while time.perf_counter() < deadline:
            with contextlib.suppress(BlockingIOError):  # nothing came this second
                sock.recv(SLOW_READ_BYTES)
            await asyncio.sleep(1.0)
            peak = max(peak, _rss_mb())
        window = (began, time.perf_counter())
    finally:
        sock.close()
    await _poll(lambda: job.pieces.finished)
    return _SlowWindow(
        window, paused, filled_tokens, job.report.reply_tokens - filled_tokens, peak - rss_before
    )


async def _clients(url: str, prompts: list[str], tokens: int, extra: dict[str, Any]) -> list[Any]:
    """The four ``openai`` clients in a process of their own: each one's timing."""
    spec = {
        "url": url,
        "prompts": prompts,
        "max_tokens": tokens,
        "stagger": STAGGER,
        "extra_body": extra,
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "app.bench.openai_clients",
        json.dumps(spec),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    if (await process.stdout.readline()).strip() != b"ready":
        raise RuntimeError("the bench's openai clients did not start")
    process.stdin.write(b"go\n")
    await process.stdin.drain()
    out = await process.stdout.read()
    if await process.wait() != 0:
        raise RuntimeError(f"the bench's openai clients failed ({process.returncode})")
    runs: list[Any] = json.loads(out)
    return runs


def _client_figures(runs: list[Any]) -> dict[str, float]:
    if any(r["first_at"] is None for r in runs):
        raise RuntimeError("a client got no text")
    tokens = sum(int(r["tokens"]) for r in runs)
    seconds = max(r["last_at"] for r in runs) - min(r["sent_at"] for r in runs)
    return {
        "total_tok_s": tokens / seconds,
        "fourth_ttft_ms": (runs[3]["first_at"] - runs[3]["sent_at"]) * 1000,
        "tokens": tokens,
    }


async def _peer(setup: Setup, server: LocalServer) -> dict[str, Any]:
    """The same four openai clients against Floodgate's server and llama_cpp.server."""
    plan, log = setup.plan, setup.log
    port = _free_port()
    process = _start_server(setup, port, ("--interrupt_requests", "False"))
    endpoint = RemoteEndpoint(f"http://127.0.0.1:{port}/v1", model="bench")
    found: dict[str, list[dict[str, float]]] = {"floodgate": [], "peer": []}
    try:
        async with httpx.AsyncClient() as client:
            await _until_serving(client, endpoint)
        urls = {"floodgate": server.base_url, "peer": endpoint.base_url}
        # llama_cpp.server's completions default to a repeat penalty of 1.1 (Floodgate's
        # turns it off when frequency_penalty is given): the same greedy count on both.
        extras: dict[str, dict[str, Any]] = {
            "floodgate": {"frequency_penalty": 0},
            "peer": {"frequency_penalty": 0, "repeat_penalty": 1.0},
        }
        for round_ in range(plan.parallel_peer_rounds):
            prompts = [counting(300 + 100 * i + 7 * round_) for i in range(4)]
            order = ("floodgate", "peer") if round_ % 2 == 0 else ("peer", "floodgate")
            for name in order:
                runs = await _clients(urls[name], prompts, plan.parallel_tokens, extras[name])
                figures = _client_figures(runs)
                found[name].append(figures)
                log(
                    f"  round {round_ + 1}: {name} {figures['total_tok_s']:.1f} tok/s in all, "
                    f"the fourth's first token after {figures['fourth_ttft_ms']:.0f} ms"
                )
    finally:
        process.terminate()
        process.wait(10)

    def median(name: str, key: str) -> float:
        return round(statistics.median(f[key] for f in found[name]), 2)

    ratios = [
        f["total_tok_s"] / p["total_tok_s"]
        for f, p in zip(found["floodgate"], found["peer"], strict=True)
    ]
    return {
        "server": "llama_cpp.server",
        "clients": 4,
        "rounds": plan.parallel_peer_rounds,
        "floodgate_tok_s": median("floodgate", "total_tok_s"),
        "peer_tok_s": median("peer", "total_tok_s"),
        "throughput_ratio": round(statistics.median(ratios), 4),
        "floodgate_fourth_ttft_ms": median("floodgate", "fourth_ttft_ms"),
        "peer_fourth_ttft_ms": median("peer", "fourth_ttft_ms"),
    }


async def parallel(setup: Setup) -> dict[str, Any]:
    """The ``parallel`` section of the bench."""
    threads = setup.options.n_threads
    host = ModelHost(open_llama, setup.options)
    readers = Readers()
    loops = BareLoops(setup.model, setup.options, setup.plan.parallel_tokens)
    server: LocalServer | None = None
    rig = _Rig(setup, host, readers)
    try:
        setup.log("  rounds of 1, 2, 4 and 8 streams, and the native batched loop at 4…")
        figures = await _aggregate(setup, rig, loops)
        await rig.open(4, LONG_CTX)
        setup.log("  newcomers' long prompts read beside three streams, and Stops…")
        figures |= await _newcomers(setup, rig)
        config = ServerConfig(port=0, sampling=setup.greedy, send_buffer_bytes=SEND_BUFFER)
        server = LocalServer(config, host)
        server.start()
        setup.log("  a reader of 100 bytes a second beside three streams…")
        figures["slow_reader"] = await _slow_reader(setup, rig, server)
        setup.log("  four openai clients: Floodgate's server, then llama_cpp.server…")
        figures["peer"] = await _peer(setup, server)
    finally:
        loops.close()
        if server is not None:
            server.stop()
        await host.close()
        readers.close()
    return {
        "streams_per_round": [1, *STREAMS],
        "tokens_per_stream": setup.plan.parallel_tokens,
        "rounds": setup.plan.parallel_rounds,
        "threads": threads,
        **figures,
    }
