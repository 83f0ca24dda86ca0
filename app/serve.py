"""``floodgate serve``: the local API server without a window, for scripts and headless machines.

The same parts as the window's: the model host and its worker thread (so the same FIFO queue,
prompt cache and native abort), the API server on a thread of its own, and a Qt core event
loop (no widgets, no display) for the worker's signals. Ctrl+C (SIGINT) or SIGTERM stops the
running reply and the queued ones, and the process exits within a second.

A native crash is recorded as the window's is (:mod:`app.crash_record`), in a folder of the
data folder's own (``serve/``), and the next ``floodgate serve`` says what happened. Several
servers may run at once (on other ports): the one holding ``serve/record.lock`` keeps the record.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import qasync
from PySide6.QtCore import QCoreApplication, QLockFile

from app.crash_record import CRASH_RECORD
from app.engine import EngineOptions, GenerationSettings
from app.engine.llama import open_llama
from app.flow.model_host import ModelHost, ModelState
from app.flow.options import (
    add_compute_arguments,
    compute_from_command_line,
    engine_options,
    generation_settings,
)
from app.flow.preferences import PreferencesKeeper
from app.flow.requests import RequestBoard
from app.flow.serving import Starter
from app.flow.termination import PoliteEnd
from app.flow.words import say_sentence
from app.sentence import Sentence
from app.server.api import DEFAULT_PORT, ServerConfig
from app.server.local import LocalServer, ServerStartError
from app.store.database import database_path
from app.store.media_sweep import sweep_unreferenced
from app.store.paths import data_dir, default_model_path, prompt_cache_dir
from app.store.preferences import ApiServerPreferences
from app.store.thread_choices import ThreadChoices

API_KEY_VARIABLE = "FLOODGATE_API_KEY"
"""Where ``floodgate serve`` reads the API key (not the command line: others can read that)."""

RECORD_FOLDER = "serve"
"""The servers' crash record, in the data folder (the window's is the data folder's own)."""


def build_parser() -> argparse.ArgumentParser:
    """The ``floodgate serve`` command line."""
    parser = argparse.ArgumentParser(
        prog="floodgate serve",
        description=(
            "Serve a local model through an OpenAI-compatible API (/v1/models, "
            "/v1/chat/completions, /v1/completions), without a window."
        ),
        epilog=(
            "environment:\n"
            f"  {API_KEY_VARIABLE}  the API key clients must send (required to listen on an\n"
            "                     address other than loopback)"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--model", type=Path, default=None, help="GGUF file to serve")
    parser.add_argument("--host", default="127.0.0.1", help="address (default: 127.0.0.1)")
    parser.add_argument(
        "--port", type=_port, default=DEFAULT_PORT, help=f"port (default: {DEFAULT_PORT})"
    )
    parser.add_argument("--threads", type=_positive_int, default=None, help="CPU threads")
    parser.add_argument("--ctx", type=_positive_int, default=None, help="context size in tokens")
    add_compute_arguments(parser)
    parser.add_argument("--debug", action="store_true", help="log to stderr")
    return parser


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _port(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is between 0 and 65535, not {value}")
    return value


def main(argv: Sequence[str]) -> int:
    """Entry point of ``floodgate serve``."""
    args = build_parser().parse_args(list(argv))
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.WARNING)
    qt = QCoreApplication.instance() or QCoreApplication([sys.argv[0]])
    # Taken over before the record begins: a SIGTERM while the model loads, or just after the
    # server says where it listens, is a deliberate exit, not a crash to report next time.
    stop = asyncio.Event()  # bound to the loop when first awaited, inside the runner
    signals = PoliteEnd(stop.set, (signal.SIGINT, signal.SIGTERM))
    signals.install()
    try:
        lock = _record_crashes()
        try:
            with asyncio.Runner(loop_factory=lambda: qasync.QEventLoop(qt)) as runner:
                return runner.run(serve(args, stop))
        finally:
            if lock is not None:
                CRASH_RECORD.end()  # a deliberate exit, not a crash
                lock.unlock()
    finally:
        signals.remove()


def _record_crashes() -> QLockFile | None:
    """Keep this server's crash record, unless another server keeps one; say how the last ended.

    Returns the lock held while recording (None: another server records, or the data folder
    cannot be written, which only loses the record).
    """
    folder = data_dir() / RECORD_FOLDER
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    lock = QLockFile(str(folder / "record.lock"))
    lock.setStaleLockTime(0)  # stale only when its process is gone, however long it served
    if not lock.tryLock(0):
        return None
    last = CRASH_RECORD.begin(folder)
    if last is not None:
        print(last.server_sentence(), file=sys.stderr, flush=True)
    return lock


async def serve(args: argparse.Namespace, stop: asyncio.Event) -> int:
    """Open the model, serve until ``stop`` is set (by a signal), then stop everything."""
    settings = (await PreferencesKeeper.load()).preferences.settings
    options = engine_options(settings, prompt_cache_dir())
    options = with_command_line(options, args)
    path: Path = args.model or default_model_path()
    config = ServerConfig(
        host=args.host,
        port=args.port,
        api_key=os.environ.get(API_KEY_VARIABLE) or None,
        queue_bound=settings.queue_bound,
        sampling=generation_settings(settings),
    )
    # Decode threads measured once per model and machine, kept with the window's choices.
    host = ModelHost(open_llama, options, thread_choices=ThreadChoices(data_dir()))
    try:
        host.open_model(path)
        while host.state is ModelState.LOADING:
            if stop.is_set():
                return 0
            await asyncio.sleep(0.02)
        if host.state is not ModelState.READY:
            print(host.describe_state(), file=sys.stderr)
            return 1
        server = LocalServer(config, host)
        try:
            server.start()
        except ServerStartError as exc:
            print(exc, file=sys.stderr)
            return 2
        print(f"Serving {path.name} at {server.base_url} (Ctrl+C stops)", flush=True)
        # The pictures and sounds of earlier requests, which no conversation refers to, go as
        # they do when the window starts (not waited for; a file under an hour old stays).
        sweep = asyncio.get_running_loop().run_in_executor(
            None, sweep_unreferenced, database_path()
        )
        if host.model is not None and host.model.parallel > 1:
            print(f"Replies side by side: {host.model.parallel}", flush=True)
        placement = host.model.placement if host.model is not None else None
        if placement is not None:  # where it runs, and a fallback or a driver that failed
            print(say_sentence(placement.details()), flush=True)
            if placement.note is not None:
                print(say_sentence(placement.note), file=sys.stderr, flush=True)
        model = host.model
        if model is not None and model.draft_model is not None:
            print(f"Draft model: {model.draft_model.name}", flush=True)
        if model is not None and model.draft_problem is not None:
            print(say_sentence(model.draft_problem), file=sys.stderr, flush=True)
        try:
            await stop.wait()
        finally:
            server.stop()
            sweep.cancel()  # only if it has not begun
    finally:
        await host.close()
    return 0


def api_starter(
    host: ModelHost, sampling: Callable[[], GenerationSettings], queue_bound: Callable[[], int]
) -> Starter:
    """How the window starts its API server over ``host``'s model (see :class:`ApiServing`).

    Args:
        host: the model host the server shares with the window.
        sampling: the app's sampling settings now (what requests that say nothing get).
        queue_bound: the app's queue bound now.
    """

    def start(
        preferences: ApiServerPreferences, api_key: str | None, board: RequestBoard
    ) -> LocalServer | Sentence:
        config = ServerConfig(
            host=preferences.host,
            port=preferences.port,
            api_key=api_key or None,
            cors_origins=preferences.origins(),
            queue_bound=queue_bound(),
            sampling=sampling(),
        )
        server = LocalServer(config, host, board)
        try:
            server.start()
        except ServerStartError as exc:
            return exc.sentence
        return server

    return start


def with_command_line(options: EngineOptions, args: argparse.Namespace) -> EngineOptions:
    """The options from the saved settings, with what the command line says instead."""
    given = {"n_threads": args.threads, "n_ctx": args.ctx, "draft_model": args.draft_model}
    chosen = {k: v for k, v in given.items() if v is not None}
    return replace(options, **chosen, **compute_from_command_line(args))
