"""``floodgate bench``: the flow measured by the app itself, beside baselines, in one run.

Runs the real pipeline (worker thread, bounded queue, frame pump, chat view in the main
window) offscreen on a GGUF model, next to llama-cpp-python's own streaming loop and to the
designs other chat apps use, and prints a table and writes JSON. See README, "Measured".
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import platform
import random
import re
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from importlib import metadata
from pathlib import Path
from typing import Any

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import httpx
import qasync
from PySide6.QtCore import QCoreApplication, QObject, Signal, Slot
from PySide6.QtGui import QTextCursor
from PySide6.QtWidgets import QApplication, QTextBrowser

from app.defaults import default_threads
from app.engine import (
    ChatMessage,
    EngineOptions,
    GenerationReport,
    GenerationSettings,
    StopSignal,
)
from app.engine.llama import LlamaBackend, open_llama
from app.engine.remote import RemoteEndpoint, stream_chat
from app.engine.scripted import ScriptedBackend, scripted_opener
from app.flow.event_loop import finalize_async_generators_on
from app.flow.metrics import Distribution, watch_loop_lag
from app.flow.session import DEFAULT_QUEUE_BOUND, ChatSession, ModelState
from app.store.conversation import Conversation
from app.store.paths import default_model_path
from app.ui.chat_view import ChatView
from app.ui.main_window import MainWindow

FRAME = 1 / 60
STORY = "Write a long story about a dragon who learns to read."
CHECK = "What is the capital of France?"
LONG_PROMPT = "The quick brown fox jumps over the lazy dog. " * 150  # about 1,500 tokens
FIREHOSE_RATE = 5000
LONG_SECTION = """## A section of a long answer

The model explains something at length here, with **bold words**, some `inline code`, and a
[link to the docs](https://example.com/docs). Paragraphs like this one are what most replies
are made of, so they are most of what the long reply streams.

- a first point, short
- a second point that runs a little longer than the first one
- a third point with `code` in it

```python
def area(width: float, height: float) -> float:
    '''The area of a rectangle.'''
    return width * height
```

| name | value |
| --- | --- |
| width | 3 |
| height | 4 |

A closing paragraph sums the section up before the next one begins, in two sentences. It
ends with a full stop.

"""

TARGETS: list[tuple[str, str, float]] = [
    # (figure path, comparison, target)
    ("throughput.ratio", ">=", 0.97),
    ("loop_lag_ms.p99", "<=", 16.7),
    ("loop_lag_ms.max", "<=", 50.0),
    ("token_to_screen_ms.p95", "<=", 16.7),
    ("stop_decode_ms.p95", "<=", 10.0),
    ("stop_prefill_ms.p95", "<=", 25.0),
    ("next_reply_consistent", "==", 1.0),
    ("firehose.lost", "==", 0.0),
    ("firehose.loop_lag_ms.p99", "<=", 16.7),
    ("firehose.queue_headroom", ">=", 0.0),
    ("long_reply.ratio", "<=", 1.5),
]


@dataclass(frozen=True)
class Plan:
    """How much to measure: the full bench, or a short ``--quick`` run for tests."""

    pairs: int
    max_tokens: int
    decode_stops: int
    prefill_stops: int
    firehose_seconds: float
    long_pieces: int

    @staticmethod
    def make(quick: bool) -> Plan:
        """The full plan, or the quick one."""
        if quick:
            return Plan(1, 24, 3, 2, 1.0, 1_000)
        # Nine pairs: on a 2-core machine single pairs spread over +-6 %, and the median of
        # five moved by 2 % between runs of the same code.
        return Plan(9, 256, 20, 10, 10.0, 8_000)


def _rss_mb() -> float:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:  # not Linux: growth is reported as NaN rather than guessed
        return math.nan


def _summary(dist: Distribution) -> dict[str, float]:
    return {k: round(v, 3) if isinstance(v, float) else v for k, v in dist.summary().items()}


@contextlib.asynccontextmanager
async def _heartbeat() -> AsyncIterator[Distribution]:
    """A 5 ms heartbeat on the UI loop for the duration of the block; yields its lateness."""
    lag = Distribution()
    task = asyncio.ensure_future(watch_loop_lag(lag))
    try:
        yield lag
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def _firehose_pieces(seconds: float) -> list[str]:
    """The fire hose's stream, the same for Floodgate and the baselines: digits, lines."""
    return [f"{i % 10}" + (" " if i % 7 else "\n") for i in range(int(FIREHOSE_RATE * seconds))]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _until_serving(client: httpx.AsyncClient, endpoint: RemoteEndpoint) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if (await client.get(endpoint.url("models"))).is_success:
                return
        except httpx.HTTPError:
            pass
        await asyncio.sleep(0.2)
    raise TimeoutError("llama_cpp.server did not start")


def _shown_per_s(window: MainWindow) -> float:
    rate = window.session.metrics.reply.shown_per_s
    assert rate is not None, "the reply was too short to have a rate"
    return rate


async def _until(predicate: Callable[[], bool], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("the bench waited too long for the app")
        await asyncio.sleep(0.002)


class Bench:
    """One bench run; :meth:`run` returns the JSON document."""

    def __init__(self, model: Path, plan: Plan, threads: int) -> None:
        self.model = model
        self.plan = plan
        self.options = EngineOptions(n_threads=threads)
        self.greedy = GenerationSettings(temperature=0.0, max_tokens=plan.max_tokens)
        self.rng = random.Random(1234)
        self.real_pieces: list[str] = []
        self.log: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True)

    # -- the app under test ---------------------------------------------------------------------

    async def _open_app(self, opener: Any, settings: GenerationSettings) -> MainWindow:
        session = ChatSession(opener, options=self.options, settings=settings, frame_interval=FRAME)
        window = MainWindow(session)
        window.show()
        session.open_model(self.model)
        await _until(lambda: session.state in (ModelState.READY, ModelState.ERROR))
        if session.state is ModelState.ERROR:
            raise SystemExit(window.state_label.text())
        return window

    async def _ask(self, window: MainWindow, prompt: str) -> None:
        session = window.session
        session.conversation = Conversation()  # each measurement starts a new chat
        assert session.send(prompt)
        await _until(lambda: not session.generating)

    # -- throughput, loop lag, token to screen ------------------------------------------------

    def _raw_run(self, raw: LlamaBackend) -> tuple[float, list[str]]:
        """llama-cpp-python's own streaming loop, nothing else: the ceiling for the app.

        Returns its tokens per second and the pieces it streamed.
        """
        times: list[float] = []
        pieces: list[str] = []
        for chunk in raw._llm.create_chat_completion(
            messages=[{"role": "user", "content": STORY}],
            stream=True,
            temperature=0.0,
            max_tokens=self.plan.max_tokens,
        ):
            text: str | None = chunk["choices"][0]["delta"].get("content")  # type: ignore[index,union-attr,assignment]
            if text:
                times.append(time.perf_counter())
                pieces.append(text)
        return (len(times) - 1) / (times[-1] - times[0]), pieces

    async def throughput(self, window: MainWindow, raw: LlamaBackend) -> dict[str, Any]:
        """Raw and app runs interleaved; the median of per-pair ratios."""
        metrics = window.session.metrics
        # Warm both (first runs pay for allocations and page faults); the warm-up's pieces are
        # the real token stream the baselines replay.
        _, self.real_pieces = self._raw_run(raw)
        await self._ask(window, STORY)
        metrics.token_to_screen_ms, metrics.frame_cost_ms = Distribution(), Distribution()

        async def raw_rate() -> float:
            return self._raw_run(raw)[0]

        return {
            **await self._pairs(window, "raw", raw_rate),
            "token_to_screen_ms": _summary(metrics.token_to_screen_ms),
            "frame_cost_ms": _summary(metrics.frame_cost_ms),
        }

    async def _pairs(
        self, window: MainWindow, name: str, reference: Callable[[], Awaitable[float]]
    ) -> dict[str, Any]:
        """The reference and the app interleaved; the median of the per-pair ratios."""
        reference_rates, app_rates, ratios = [], [], []
        for pair in range(self.plan.pairs):
            ref = await reference()
            await self._ask(window, STORY)
            app = _shown_per_s(window)
            reference_rates.append(ref)
            app_rates.append(app)
            ratios.append(app / ref)
            self.log(f"  pair {pair + 1}: {name} {ref:.1f} tok/s, app {app:.1f} tok/s")
        return {
            f"{name}_tok_s": round(statistics.median(reference_rates), 2),
            "app_tok_s": round(statistics.median(app_rates), 2),
            "ratio": round(statistics.median(ratios), 4),
            "pairs": [round(r, 4) for r in ratios],
        }

    async def loop_lag(self, window: MainWindow) -> dict[str, float]:
        """A 5 ms heartbeat on the UI loop while the app streams at full speed.

        Run apart from the throughput pairs: the heartbeat is the bench's instrument (200
        wake-ups a second), not something the app runs while a user chats.
        """
        async with _heartbeat() as lag:
            for _ in range(max(1, self.plan.pairs // 2)):
                await self._ask(window, STORY)
        return _summary(lag)

    async def diagnostics_cost(self, window: MainWindow) -> dict[str, Any]:
        """The same generation with the diagnostics panel shown and hidden, interleaved."""
        metrics = window.session.metrics
        rates: dict[bool, list[float]] = {False: [], True: []}
        lags: dict[bool, Distribution] = {False: Distribution(), True: Distribution()}
        for _ in range(max(1, self.plan.pairs)):
            for shown in (False, True):
                window.diagnostics_dock.setVisible(shown)
                metrics.loop_lag_ms = lags[shown]  # the frame timer's lateness, as the app sees it
                await self._ask(window, STORY)
                rates[shown].append(_shown_per_s(window))
        window.diagnostics_dock.hide()
        return {
            "tok_s_hidden": round(statistics.median(rates[False]), 2),
            "tok_s_shown": round(statistics.median(rates[True]), 2),
            "ratio": round(statistics.median(rates[True]) / statistics.median(rates[False]), 4),
            "loop_lag_ms_hidden": _summary(lags[False]),
            "loop_lag_ms_shown": _summary(lags[True]),
        }

    # -- stop -----------------------------------------------------------------------------------

    async def stops(self, window: MainWindow) -> dict[str, Any]:
        """Stop at random moments during decoding and during prefill; check the next reply."""
        session = window.session
        check_settings = GenerationSettings(temperature=0.0, max_tokens=32)
        fresh = open_llama(self.model, self.options)
        try:
            check: list[ChatMessage] = [{"role": "user", "content": CHECK}]
            expected = "".join(
                fresh.stream_reply(check, check_settings, StopSignal(), GenerationReport())
            )
        finally:
            fresh.close()
        decode, prefill = Distribution(), Distribution()
        consistent = True
        for kind, count, prompt in (
            ("decode", self.plan.decode_stops, STORY),
            ("prefill", self.plan.prefill_stops, LONG_PROMPT),
        ):
            into = decode if kind == "decode" else prefill
            for _ in range(count):
                session.conversation = Conversation()
                session.settings = GenerationSettings(temperature=0.0, max_tokens=1024)
                session.send(prompt)
                if kind == "decode":
                    await _until(lambda: session.metrics.reply.pieces_shown > 0)
                    await asyncio.sleep(self.rng.uniform(0.0, 1.0))
                else:
                    await _until(lambda: session.state is ModelState.GENERATING)
                    await asyncio.sleep(self.rng.uniform(0.05, 3.0))
                if not session.generating:
                    continue  # finished before the stop moment; draw again next round
                stopped_pieces = session.metrics.reply.pieces_shown
                session.stop()
                await _until(lambda: not session.generating)
                latency = session.metrics.stop_latency_ms.last
                assert latency is not None
                if kind == "prefill" and stopped_pieces:
                    continue  # prefill had already ended; not a prefill stop
                into.add(latency)
                session.settings = check_settings
                await self._ask(window, CHECK)
                got = session.conversation.messages[-1].content
                if got != expected:
                    consistent = False
                    self.log(f"  inconsistent after {kind} stop: {got!r} != {expected!r}")
            self.log(f"  {kind}: {into.count} stops, p95 {into.percentile(95):.2f} ms")
        session.settings = self.greedy
        return {
            "stop_decode_ms": _summary(decode),
            "stop_prefill_ms": _summary(prefill),
            "next_reply_consistent": consistent,
        }

    # -- the fire hose, and the baselines -----------------------------------------------------

    async def firehose(self) -> dict[str, Any]:
        """The scripted backend at 5,000 pieces/s through the same queue, pump and view."""
        pieces = _firehose_pieces(self.plan.firehose_seconds)
        backend = ScriptedBackend(pieces, rate=FIREHOSE_RATE)
        window = await self._open_app(scripted_opener(backend), self.greedy)
        session = window.session
        rss_before = _rss_mb()
        began = time.perf_counter()
        # The same 5 ms heartbeat as the baselines' fire hose, so the two compare like for like.
        async with _heartbeat() as lag:
            await self._ask(window, "fire")
        elapsed = time.perf_counter() - began
        shown = session.metrics.reply.pieces_shown
        result = {
            "pieces_sent": len(pieces),
            "pieces_shown": shown,
            "lost": len(pieces) - shown,
            "text_intact": session.conversation.messages[-1].content == "".join(pieces),
            "queue_max": session.metrics.queue_max,
            "queue_bound": session.queue_bound,
            "queue_headroom": session.queue_bound - session.metrics.queue_max,
            "updates_per_s": round(window.view.updates / elapsed, 1),
            "loop_lag_ms": _summary(lag),
            "rss_growth_mb": round(_rss_mb() - rss_before, 2),
        }
        await session.close()
        window.deleteLater()
        return result

    async def baseline(self, mode: str, pieces: list[str], rate: float) -> dict[str, Any]:
        """A design other apps use: one queued signal per piece, no frame batching."""
        # The other apps' view: one QTextDocument holding the whole reply.
        view = QTextBrowser()
        view.resize(800, 600)
        view.show()
        receiver = _PerPieceReceiver(view, mode)
        async with _heartbeat() as lag:
            producer = threading.Thread(target=receiver.produce, args=(pieces, rate), daemon=True)
            producer.start()
            # The stream's length plus two seconds' grace to show what is still queued; what
            # is not on screen by then counts as lost. Without a deadline the per-piece
            # designs take minutes to work through a ten-second fire hose.
            receiver.deadline = time.perf_counter() + len(pieces) / rate + 2.0
            await _until(
                lambda: receiver.shown == len(pieces) or time.perf_counter() > receiver.deadline,
                timeout=600,
            )
            producer.join()
        shown = receiver.shown
        receiver.discard_pending()
        view.deleteLater()
        return {
            "loop_lag_ms": _summary(lag),
            "token_to_screen_ms": _summary(receiver.to_screen),
            "lost": len(pieces) - shown,
        }

    # -- a long reply ---------------------------------------------------------------------------

    def long_reply(self) -> dict[str, Any]:
        """The cost of one update (Markdown render + paint) early in a reply and after many pieces.

        The reply repeats one Markdown section (heading, paragraphs, a list, a code block), so
        the late updates show the same kind of content as the early ones: only the position in
        the reply differs.
        """
        view = ChatView()
        view.resize(800, 600)
        view.show()
        view.begin_reply()
        per_update = 4  # pieces joined into one frame's update at a typical rate
        section = _markdown_pieces(LONG_SECTION)
        late_start = math.ceil(self.plan.long_pieces / len(section)) * len(section)
        pieces = section * (late_start // len(section) + 2)

        def measure(start: int, count: int) -> list[float]:
            costs = []
            for i in range(start, start + count * per_update, per_update):
                began = time.perf_counter()
                view.append_to_reply("".join(pieces[i : i + per_update]))
                view.viewport().repaint()
                costs.append((time.perf_counter() - began) * 1000)
            return costs

        count = len(section) // per_update
        early = measure(0, count)
        i = count * per_update
        while i < late_start:
            view.append_to_reply("".join(pieces[i : i + per_update]))
            i += per_update
        late = measure(late_start, count)
        rows = len(view.stack.rows)
        view.deleteLater()
        early_ms, late_ms = statistics.median(early), statistics.median(late)
        return {
            "pieces": late_start,
            "rows": rows,
            "early_update_ms": round(early_ms, 4),
            "late_update_ms": round(late_ms, 4),
            "ratio": round(late_ms / early_ms, 3),
            "markdown": True,
        }

    # -- a model on a server ---------------------------------------------------------------------

    async def remote(self) -> dict[str, Any]:
        """The same generation through llama-cpp-python's server on loopback.

        Floodgate (remote engine, queue, pump, view) against a plain client reading the same
        server's stream, interleaved; then Stop at random moments of a streaming reply.
        """
        port = _free_port()
        server = subprocess.Popen(
            [
                sys.executable, "-m", "llama_cpp.server", "--model", str(self.model),
                "--model_alias", "bench", "--host", "127.0.0.1", "--port", str(port),
                "--n_ctx", str(self.options.n_ctx), "--n_threads", str(self.options.n_threads),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        endpoint = RemoteEndpoint(f"http://127.0.0.1:{port}/v1", model="bench")
        session = ChatSession(
            scripted_opener(ScriptedBackend()), settings=self.greedy, frame_interval=FRAME
        )
        window = MainWindow(session)
        window.show()
        try:
            async with httpx.AsyncClient() as client:
                await _until_serving(client, endpoint)
                if not await session.connect_remote(endpoint):
                    raise SystemExit(window.state_label.text())
                await self._plain_run(client, endpoint)  # warm-up
                throughput = await self._pairs(
                    window, "plain", lambda: self._plain_run(client, endpoint)
                )
                stop_ms = Distribution()
                # Long replies, so that every Stop lands in the middle of one.
                session.settings = replace(self.greedy, max_tokens=2048)
                for _ in range(max(3, self.plan.decode_stops // 2)):
                    session.conversation = Conversation()
                    assert session.send(STORY)
                    await _until(lambda: session.metrics.reply.pieces_shown > 0)
                    await asyncio.sleep(self.rng.uniform(0.1, 1.0))
                    pressed = time.perf_counter()
                    assert session.stop(), "the reply ended before Stop"
                    await _until(lambda: not session.generating)
                    stop_ms.add((time.perf_counter() - pressed) * 1000)
        finally:
            await session.close()
            window.deleteLater()
            server.terminate()
            server.wait(10)
        return {"throughput": throughput, "stop_ms": _summary(stop_ms)}

    async def _plain_run(self, client: httpx.AsyncClient, endpoint: RemoteEndpoint) -> float:
        """A plain client reading the server's stream, nothing else: pieces per second."""
        messages = [ChatMessage(role="user", content=STORY)]
        times = []
        report = GenerationReport()
        async for _ in stream_chat(client, endpoint, messages, self.greedy, report):
            times.append(time.perf_counter())
        assert report.error is None, str(report.error)
        return (len(times) - 1) / (times[-1] - times[0])

    # -- all of it ------------------------------------------------------------------------------

    async def run(self) -> dict[str, Any]:
        """Measure everything; returns the JSON document."""
        finalize_async_generators_on(asyncio.get_running_loop())
        raw = open_llama(self.model, self.options)
        window = await self._open_app(open_llama, self.greedy)
        try:
            self.log("throughput (raw and app interleaved)…")
            tp = await self.throughput(window, raw)
            self.log("loop lag (5 ms heartbeat while streaming)…")
            lag = await self.loop_lag(window)
            self.log("stop during decoding and prefill…")
            stops = await self.stops(window)
            self.log("diagnostics panel shown vs hidden…")
            diag = await self.diagnostics_cost(window)
        finally:
            await window.session.close()
            window.deleteLater()
            raw.close()
        self.log("fire hose…")
        hose = await self.firehose()
        self.log("long reply…")
        long = self.long_reply()
        self.log("a model on a server (llama_cpp.server on loopback)…")
        remote = await self.remote()
        self.log("baselines…")
        hose_pieces = _firehose_pieces(self.plan.firehose_seconds)
        baselines: dict[str, Any] = {}
        for mode in ("per_piece_set_text", "per_piece_insert"):
            # The real model's token pieces at the app's rate, then the same fire hose.
            normal = await self.baseline(mode, self.real_pieces, tp["app_tok_s"])
            fire = await self.baseline(mode, hose_pieces, FIREHOSE_RATE)
            baselines[mode] = {
                "loop_lag_ms": normal["loop_lag_ms"],
                "token_to_screen_ms": normal["token_to_screen_ms"],
                "firehose": {"lost": fire["lost"], "loop_lag_ms": fire["loop_lag_ms"]},
            }
            self.log(f"  {mode}: fire hose loop lag p99 {fire['loop_lag_ms']['p99']} ms")
        return {
            "throughput": {k: tp[k] for k in ("raw_tok_s", "app_tok_s", "ratio", "pairs")},
            "loop_lag_ms": lag,
            "token_to_screen_ms": tp["token_to_screen_ms"],
            "frame_cost_ms": tp["frame_cost_ms"],
            **stops,
            "firehose": hose,
            "long_reply": long,
            "diagnostics_panel": diag,
            "baselines": baselines,
            "remote": remote,
            "machine": self.machine(),
        }

    def machine(self) -> dict[str, Any]:
        """What the figures were measured on."""
        versions: dict[str, str | None] = {}
        for dist in ("llama-cpp-python", "PySide6-Essentials", "qasync"):
            try:
                versions[dist] = metadata.version(dist)
            except metadata.PackageNotFoundError:
                versions[dist] = None
        return {
            "cores": os.cpu_count(),
            "threads": self.options.n_threads,
            "model": self.model.name,
            "model_bytes": self.model.stat().st_size,
            "python": platform.python_version(),
            "platform": platform.platform(),
            "qt_platform": QApplication.platformName(),
            "frame_ms": round(FRAME * 1000, 2),
            "queue_bound": DEFAULT_QUEUE_BOUND,
            "packages": versions,
        }


class _PerPieceReceiver(QObject):
    """The baselines' design: one queued Qt signal per piece, applied as it arrives."""

    piece = Signal(str, float)

    def __init__(self, view: QTextBrowser, mode: str) -> None:
        super().__init__()
        self.view = view
        self.cursor = QTextCursor(view.document())
        self.mode = mode
        self.text = ""
        self.shown = 0
        self.deadline = math.inf
        self.to_screen = Distribution()
        self.piece.connect(self.on_piece)

    def produce(self, pieces: Sequence[str], rate: float) -> None:
        start = time.perf_counter()
        for i, text in enumerate(pieces):
            delay = start + i / rate - time.perf_counter()
            if delay > 0.001:
                time.sleep(delay)
            self.piece.emit(text, time.perf_counter())

    @Slot(str, float)
    def on_piece(self, text: str, produced_at: float) -> None:
        if time.perf_counter() > self.deadline:
            return  # past the grace period: counted as not shown, not rendered
        if self.mode == "per_piece_set_text":
            self.text += text
            self.view.setPlainText(self.text)
        else:
            self.cursor.movePosition(QTextCursor.MoveOperation.End)
            self.cursor.insertText(text)
        self.shown += 1
        self.to_screen.add((time.perf_counter() - produced_at) * 1000)

    def discard_pending(self) -> None:
        self.piece.disconnect(self.on_piece)
        QCoreApplication.removePostedEvents(self)


def _markdown_pieces(text: str) -> list[str]:
    """Text cut the way a tokenizer cuts it: words with their leading space, about 4 characters."""
    pieces: list[str] = []
    for word in re.findall(r"\s*\S+|\s+", text):
        while len(word) > 6:
            pieces.append(word[:4])
            word = word[4:]
        pieces.append(word)
    return pieces


def _figure(doc: dict[str, Any], path: str) -> float:
    value: Any = doc
    for key in path.split("."):
        value = value[key]
    return float(value)


def table(doc: dict[str, Any]) -> str:
    """The bench's figures against their targets, as a Markdown table."""
    lines = ["| figure | Floodgate | target | met |", "| --- | --- | --- | --- |"]
    for path, op, target in TARGETS:
        value = _figure(doc, path)
        met = {">=": value >= target, "<=": value <= target, "==": value == target}[op]
        lines.append(f"| {path} | {value:g} | {op} {target:g} | {'yes' if met else 'NO'} |")
    lines += [
        "",
        "| same stream, design | loop lag p99 / max | token→screen p95 "
        "| fire hose loop lag p99 | fire hose not shown |",
        "| --- | --- | --- | --- | --- |",
    ]
    hose = doc["firehose"]
    designs = {"Floodgate (frame pump)": doc, **doc["baselines"]}
    for name, d in designs.items():
        lag, t2s, fire = d["loop_lag_ms"], d["token_to_screen_ms"], d["firehose"]
        lines.append(
            f"| {name} | {lag['p99']:.1f} / {lag['max']:.1f} ms | {t2s['p95']:.1f} ms "
            f"| {fire['loop_lag_ms']['p99']:.1f} ms | {fire['lost']} |"
        )
    tp, panel, long = doc["throughput"], doc["diagnostics_panel"], doc["long_reply"]
    lines += [
        "",
        f"raw {tp['raw_tok_s']} tok/s, app {tp['app_tok_s']} tok/s "
        f"({doc['machine']['threads']} threads); diagnostics panel shown/hidden tok/s ratio "
        f"{panel['ratio']}; one update {long['early_update_ms']} ms early, "
        f"{long['late_update_ms']} ms after {long['pieces']} pieces; fire hose "
        f"{hose['updates_per_s']} updates/s, RSS +{hose['rss_growth_mb']} MB",
    ]
    remote = doc["remote"]
    rtp, rstop = remote["throughput"], remote["stop_ms"]
    lines += [
        "",
        f"server (llama_cpp.server on loopback): plain client {rtp['plain_tok_s']} tok/s, "
        f"Floodgate {rtp['app_tok_s']} tok/s, remote.throughput.ratio {rtp['ratio']}; "
        f"remote.stop_ms p50 {rstop['p50']}, p95 {rstop['p95']}, max {rstop['max']} "
        f"(n={rstop['n']})",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str]) -> int:
    """``floodgate bench [--quick] [--model PATH] [--json PATH] [--threads N]``."""
    parser = argparse.ArgumentParser(prog="floodgate bench", description=__doc__)
    parser.add_argument("--model", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    parser.add_argument("--quick", action="store_true", help="a short run (checks the shape)")
    parser.add_argument("--threads", type=int, default=default_threads())
    args = parser.parse_args(list(argv))
    app = QApplication.instance() or QApplication([sys.argv[0]])
    assert isinstance(app, QApplication)
    bench = Bench(args.model or default_model_path(), Plan.make(args.quick), args.threads)
    with asyncio.Runner(loop_factory=lambda: qasync.QEventLoop(app)) as runner:
        doc = runner.run(bench.run())
    print(table(doc))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(doc, indent=2, allow_nan=True) + "\n")
    return 0
