"""The composition root: parses the command line, wires the layers, runs the one event loop."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import importlib.metadata
import logging
import os
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import qasync
from PySide6.QtWidgets import QApplication

from app.crash_record import CRASH_RECORD, LastEnd
from app.flow.options import (
    CommandLineSettings,
    add_compute_arguments,
    compute_from_command_line,
)
from app.sentence import QT_TRANSLATE_NOOP, Sentence
from app.store.paths import MODEL_VARIABLE, data_dir, default_model_path, prompt_cache_dir
from app.store.settings import Settings
from app.trace import TRACE
from app.ui.window.single_instance import LaunchArguments, SingleInstance

if TYPE_CHECKING:
    from app.flow.archive import Archive
    from app.flow.preferences import PreferencesKeeper
    from app.flow.serving import ApiServing
    from app.flow.session import ChatSession
    from app.ui.look.appearance import Appearance
    from app.ui.window.api_server_panel import ApiServerFace
    from app.ui.window.main_window import MainWindow

log = logging.getLogger(__name__)

SHUTDOWN_SECONDS = 0.8
"""How long closing may wait for the model's thread before the process ends without it."""

Driver = Callable[["MainWindow"], Awaitable[None]]
"""Acts on the window like a user would (scripts and end-to-end tests)."""


MISSING_TRANSLATION = (
    "The Chinese translation is not built (app/ui/i18n/*.qm); run `make run` to build it. "
    "The interface stays in English."
)


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The ``floodgate`` command line."""
    parser = argparse.ArgumentParser(
        prog="floodgate",
        description="Chat with a local language model (a GGUF file).",
        epilog=(
            "setup:\n"
            "  floodgate --self-test   check that llama.cpp runs on this CPU: load the model\n"
            "                          and process a prompt in a child process (make run and\n"
            "                          make test end their setup with it)\n\n"
            "subcommands:\n"
            "  floodgate bench   measure the flow beside its baselines "
            "(floodgate bench --help)\n"
            "  floodgate soak    random Send/Stop/regenerate/switch cycles with the real model\n"
            "                    (floodgate soak --help)\n"
            "  floodgate serve   an OpenAI-compatible API over a model, without a window\n"
            "                    (floodgate serve --help)\n\n"
            "  floodgate pull REPO[:FILE or QUANT]\n"
            "                    download a GGUF model from the Hugging Face Hub, resumable\n"
            "                    (floodgate pull --help)\n\n"
            "environment:\n"
            "  FLOODGATE_HOME    the data directory (history, preferences, prompt cache)\n"
            "  FLOODGATE_MODEL   the model opened when --model is not given (without either,\n"
            "                    the model used last, or the bundled one the first time)\n"
            "  HF_ENDPOINT       the Hugging Face Hub or a mirror of it (floodgate pull)\n"
            "  HTTPS_PROXY       a proxy for the Hub"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    parser.add_argument("--model", type=Path, default=None, help="GGUF file to open")
    # Without these, the values saved in the settings dialog are used (see File > Settings).
    parser.add_argument(
        "--threads",
        type=_positive_int,
        default=None,
        help="CPU threads that decode (default: the fastest count, measured once per model)",
    )
    parser.add_argument("--ctx", type=_positive_int, default=None, help="context size in tokens")
    add_compute_arguments(parser)
    parser.add_argument(
        "--queue-bound",
        type=_positive_int,
        default=None,
        help="pieces buffered between the model and the window before inference pauses",
    )
    parser.add_argument(
        "--trace",
        type=Path,
        metavar="FILE",
        default=None,
        help="record the flow as a Chrome trace (opens in Perfetto and chrome://tracing), "
        "written to FILE when the window closes",
    )
    parser.add_argument(
        "--self-test",
        action="store_true",
        help="load the model (--model, or the default) and process a prompt in a child "
        "process; say what failed if llama.cpp crashes, then exit",
    )
    parser.add_argument(
        "--debug",
        action="store_true",
        help="log what Floodgate and llama.cpp do (llama.cpp's own log included) to stderr",
    )
    return parser


def _version() -> str:
    try:
        return importlib.metadata.version("floodgate")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree not installed
        return "unknown"


def settings_from_command_line(args: argparse.Namespace) -> CommandLineSettings:
    """The settings the command line gives for this run (where it says something)."""
    given = {
        "decode_threads": args.threads,
        "n_ctx": args.ctx,
        "queue_bound": args.queue_bound,
        "draft_model": str(args.draft_model) if args.draft_model is not None else None,
    }
    chosen = {k: v for k, v in given.items() if v is not None}
    return CommandLineSettings({**chosen, **compute_from_command_line(args)})


def with_command_line(settings: Settings, args: argparse.Namespace) -> Settings:
    """The saved settings, with what the command line says instead where it says something."""
    return settings_from_command_line(args).apply(settings)


async def run_window(
    app: QApplication,
    args: argparse.Namespace,
    driver: Driver | None = None,
    instance: SingleInstance | None = None,
    last_end: LastEnd | None = None,
) -> None:
    """Show the window and serve it until it is closed, then shut down in order.

    Args:
        app: the application.
        args: the parsed command line.
        driver: optional coroutine run alongside the window, acting as the user.
        instance: this data folder's one Floodgate: later launches hand it their model.
        last_end: how the previous session ended, if it ended unexpectedly.
    """
    from app.flow.archive import Archive
    from app.flow.event_loop import finalize_async_generators_on
    from app.flow.preferences import PreferencesKeeper
    from app.flow.termination import PoliteEnd
    from app.flow.words import say_sentence
    from app.ui.look.appearance import Appearance
    from app.ui.window.app_dialogs import AppDialogs
    from app.ui.window.main_window import MainWindow

    frame_interval = _frame_interval(app)
    finalize_async_generators_on(asyncio.get_running_loop())
    TRACE.name_thread("UI")
    # Disk work never runs on the UI thread.
    keeper = await PreferencesKeeper.load()
    archive, archive_problem = await Archive.open()
    session = _new_session(archive, frame_interval)
    settings = keeper.preferences.settings
    command_line = settings_from_command_line(args)
    session.use_settings(command_line.apply(settings))
    session.conversation.system_prompt = settings.system_prompt
    appearance = Appearance(app, keeper)
    window = MainWindow(session)
    AppDialogs(window, keeper, command_line)
    serving, server_face = _wire_api_server(session, window, keeper)
    _wire_appearance(appearance, window)
    if archive_problem is not None:
        window.view.add_note(say_sentence(archive_problem), error=True)
    closed = _closing(window)
    # A logout, `kill` or Ctrl+C closes the window as Ctrl+Q does: the reply saved, no crash.
    termination = PoliteEnd(window.close)
    termination.install()
    window.show()
    # What was built at start lives as long as the app: keep it out of the collector's scans,
    # whose pauses grow with the heap (tens of ms with a large conversation on screen).
    gc.freeze()
    if instance is not None:
        _listen_for_launches(instance, window)
    if args.trace is not None:
        window.trace_recording.start(args.trace)
    await _open_first_model(session, window, keeper, args.model, last_end)
    window.spawn(server_face.start())
    driving = asyncio.ensure_future(driver(window)) if driver is not None else None
    try:
        await closed
    finally:
        termination.remove()
    if driving is not None and not driving.done():
        driving.cancel()
    window.hide()
    # Its requests stop (their computation aborts) before the worker is asked to end.
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(serving.close(), SHUTDOWN_SECONDS)
    await shut_down(session, archive, keeper)
    window.deleteLater()


def _frame_interval(app: QApplication) -> float:
    """Seconds between two frames of the primary screen (60 a second when it does not say)."""
    screen = app.primaryScreen()
    refresh = screen.refreshRate() if screen is not None else 60.0
    return 1 / (refresh if refresh > 0 else 60.0)


def _new_session(archive: Archive, frame_interval: float) -> ChatSession:
    """The session over llama.cpp, its history kept in ``archive``."""
    from app.engine import EngineOptions
    from app.engine.llama import open_llama
    from app.flow.session import ChatSession
    from app.store.thread_choices import ThreadChoices

    return ChatSession(
        open_llama,
        options=EngineOptions(cache_dir=prompt_cache_dir()),
        frame_interval=frame_interval,
        archive=archive,
        # Decode threads are measured once per model and machine, and kept here.
        thread_choices=ThreadChoices(data_dir()),
    )


def _wire_api_server(
    session: ChatSession, window: MainWindow, keeper: PreferencesKeeper
) -> tuple[ApiServing, ApiServerFace]:
    """The local API server: a face of the flow beside the window, off unless Settings say so.

    Returns:
        The server's serving (closed at the end, before the worker) and its face in the
        window (started once the window shows).
    """
    from app.flow.serving import ApiServing
    from app.serve import api_starter
    from app.ui.window.api_server_panel import ApiServerFace

    serving = ApiServing(
        api_starter(session.host, lambda: session.settings, lambda: session.queue_bound), window
    )
    return serving, ApiServerFace(window, serving, keeper)


def model_to_open(
    recent_models: Sequence[str], last_end: LastEnd | None
) -> tuple[Path, Sentence | None]:
    """The model a launch opens when the command line names none (it reads the disk).

    ``$FLOODGATE_MODEL`` if set; else the model used last, if its file is still there; else
    the bundled default. The model used last is passed over, with a sentence saying so, when
    the last session ended unexpectedly while loading it: opening it again would most likely
    end the same way, at every launch.
    """
    default = default_model_path()
    if os.environ.get(MODEL_VARIABLE) or not recent_models:
        return default, None
    last = Path(recent_models[0])
    if not last.is_file():
        return default, None
    if last_end is not None and last_end.activity == "loading" and last_end.model == last.name:
        return default, Sentence(
            QT_TRANSLATE_NOOP(
                "Floodgate",
                "Floodgate opened {default} rather than {model}, the model it was loading when "
                "it ended. The model picker above the chat opens {model} again.",
            ),
            {"default": default.name, "model": last.name},
        )
    return last, None


async def _open_first_model(
    session: ChatSession,
    window: MainWindow,
    keeper: PreferencesKeeper,
    model: Path | None,
    last_end: LastEnd | None,
) -> None:
    """Open ``model`` (the command line's), else the one :func:`model_to_open` picks.

    After a session that ended unexpectedly (``last_end``, from the crash record), the
    conversation it cut off is shown with a note, and a model it was loading is passed over.
    """
    from app.flow.words import say_sentence

    if last_end is not None:
        window.spawn(_tell_last_end(session, window, last_end))
    if model is None:
        recent = keeper.preferences.recent_models
        found = await asyncio.to_thread(model_to_open, recent, last_end)
        model, passed_over = found  # (unpacked apart: mypy narrows ``model`` only so)
        if passed_over is not None:
            window.view.add_note(say_sentence(passed_over))
    session.open_model(model)


async def _tell_last_end(session: ChatSession, window: MainWindow, last_end: LastEnd) -> None:
    """Show the conversation a crash cut off (its reply marked interrupted), and say so."""
    from app.flow.words import say_sentence

    if last_end.conversation:
        conversation = await session.library.load(last_end.conversation)
        if conversation is not None:
            session.library.show(conversation)
            # The transcript is drawn over frames: the note goes under it, not inside it.
            while window.rendering:
                await asyncio.sleep(0.01)
    window.view.add_note(say_sentence(last_end.sentence()), error=True)


def _closing(window: MainWindow) -> asyncio.Future[None]:
    """A future that is done when the user closes the window."""
    closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def on_closed() -> None:
        if not closed.done():
            closed.set_result(None)

    window.closed.connect(on_closed)
    return closed


def _listen_for_launches(instance: SingleInstance, window: MainWindow) -> None:
    """Later launches on this data folder hand their model to this window."""
    from app.flow.words import say_sentence

    instance.arguments_received.connect(lambda launch: _come_forward(window, launch))
    if instance.problem is not None:
        window.view.add_note(say_sentence(instance.problem), error=True)


def _come_forward(window: MainWindow, launch: LaunchArguments) -> None:
    """Another launch asked for this Floodgate: open its model, and show the window."""
    if launch.model is not None:
        window.open_model(launch.model)
    window.showNormal()
    window.raise_()
    window.activateWindow()


def _wire_appearance(appearance: Appearance, window: MainWindow) -> None:
    """The View menu's theme and language choices, applied and remembered."""
    window.menus.show_choices(appearance.theme, appearance.language)
    window.menus.theme_chosen.connect(appearance.choose_theme)

    def choose_language(choice: str) -> None:
        if not appearance.choose_language(choice):
            window.view.add_note(MISSING_TRANSLATION, error=True)

    window.menus.language_chosen.connect(choose_language)
    if appearance.translation_missing:
        window.view.add_note(MISSING_TRANSLATION, error=True)


async def shut_down(session: ChatSession, archive: Archive, keeper: PreferencesKeeper) -> None:
    """Stop the reply, save it, free the model and close the history, in under a second.

    Each step normally takes milliseconds (the native abort ends llama.cpp at once). A thread
    stuck in a blocking call (a model file on a hung network drive, say) must not hold the
    exit: past :data:`SHUTDOWN_SECONDS` the reply on screen is saved as it is and the process
    ends without waiting for that thread.
    """
    deadline = time.monotonic() + SHUTDOWN_SECONDS
    try:
        await asyncio.wait_for(session.close(), deadline - time.monotonic())
    except TimeoutError:
        log.warning("The worker did not end within %.1f s; exiting without it", SHUTDOWN_SECONDS)
        session.runner.abandon()  # saves what the reply has so far
        await archive.close(timeout=max(0.1, deadline - time.monotonic()))
        await _flush_preferences(keeper)
        _exit_now()
    # A disk that stopped answering holds the archive's (non-daemon) thread: exit without it.
    if not await archive.close(timeout=max(0.2, deadline - time.monotonic())):
        log.warning("The history did not finish writing within %.1f s", SHUTDOWN_SECONDS)
        await _flush_preferences(keeper)
        _exit_now()
    await keeper.flush()


async def _flush_preferences(keeper: PreferencesKeeper) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(keeper.flush(), 0.1)


def _exit_now() -> NoReturn:
    """End the process without joining a thread stuck in a blocking call."""
    CRASH_RECORD.end()  # a deliberate exit, not a crash
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def main(argv: Sequence[str] | None = None, driver: Driver | None = None) -> int:
    """Run the app (``floodgate`` without a subcommand; see :mod:`app.cli`).

    Args:
        argv: the command line after the program's name.
        driver: optional coroutine run alongside the window, acting as the user.
    """
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.self_test:
        from app.install.self_test import self_test

        return self_test(args.model or default_model_path())
    if args.debug:
        logging.basicConfig(
            level=logging.DEBUG, format="%(relativeCreated)8.0f %(name)s: %(message)s"
        )
    app = QApplication.instance() or QApplication([sys.argv[0]])
    assert isinstance(app, QApplication)
    app.setApplicationName("Floodgate")
    _show_as_floodgate(app)
    # The window's close hands shutdown to run_window; Qt must not end the loop under it.
    app.setQuitOnLastWindowClosed(False)
    instance = SingleInstance(data_dir())
    if not instance.claim():
        return _hand_over(instance, args)
    # Only the Floodgate that owns the data folder keeps its crash record.
    last_end = CRASH_RECORD.begin(data_dir())
    try:
        with asyncio.Runner(loop_factory=lambda: qasync.QEventLoop(app)) as runner:
            runner.run(run_window(app, args, driver, instance, last_end))
    finally:
        instance.release()
    CRASH_RECORD.end()
    return 0


def _show_as_floodgate(app: QApplication) -> None:
    """The app's icon on its windows, and the name docks match them to its desktop entry by."""
    from app.install.launcher import APP_ID
    from app.ui.look.app_icon import app_icon

    app.setDesktopFileName(APP_ID)
    app.setWindowIcon(app_icon())


def _hand_over(instance: SingleInstance, args: argparse.Namespace) -> int:
    """Another Floodgate has this data folder: give it the model to open, or say why not."""
    from PySide6.QtGui import QGuiApplication
    from PySide6.QtWidgets import QMessageBox

    from app.flow.words import say_sentence

    model = args.model.absolute() if args.model is not None else None
    problem = instance.hand_over(LaunchArguments(model=model))
    if problem is None:
        return 0  # the running Floodgate opens it and comes forward
    text = say_sentence(problem)
    print(text, file=sys.stderr)
    if QGuiApplication.platformName() not in ("offscreen", "minimal"):
        QMessageBox.warning(None, "Floodgate", text)
    return 1
