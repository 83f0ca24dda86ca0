"""The composition root: parses the command line, wires the layers, runs the one event loop."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import fields, replace
from pathlib import Path
from typing import TYPE_CHECKING

import qasync
from PySide6.QtWidgets import QApplication

from app.engine import EngineOptions, GenerationSettings
from app.flow.session import ChatSession
from app.store.paths import PROJECT_DIR, default_model_path
from app.store.settings import Settings

if TYPE_CHECKING:
    from app.ui.main_window import MainWindow
    from app.ui.model_library import ModelLibrary

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
        prog="floodgate", description="Chat with a local language model (a GGUF file)."
    )
    parser.add_argument("--model", type=Path, default=None, help="GGUF file to open")
    # Without these, the values saved in the settings dialog are used (see File > Settings).
    parser.add_argument(
        "--threads", type=_positive_int, default=None, help="CPU threads (default: half the cores)"
    )
    parser.add_argument("--ctx", type=_positive_int, default=None, help="context size in tokens")
    parser.add_argument(
        "--queue-bound",
        type=_positive_int,
        default=None,
        help="pieces buffered between the model and the window before inference pauses",
    )
    return parser


def with_command_line(settings: Settings, args: argparse.Namespace) -> Settings:
    """The saved settings, with what the command line says instead where it says something."""
    given = {"n_threads": args.threads, "n_ctx": args.ctx, "queue_bound": args.queue_bound}
    return replace(settings, **{k: v for k, v in given.items() if v is not None})


def engine_options(settings: Settings) -> EngineOptions:
    """How the engine opens models, from the settings (the fields they share by name)."""
    return EngineOptions(**{f.name: getattr(settings, f.name) for f in fields(EngineOptions)})


def generation_settings(settings: Settings) -> GenerationSettings:
    """How replies are sampled, from the settings (the fields they share by name)."""
    return GenerationSettings(
        **{f.name: getattr(settings, f.name) for f in fields(GenerationSettings)}
    )


def apply_settings(session: ChatSession, settings: Settings) -> bool:
    """Use ``settings`` from the next reply on.

    Returns:
        Whether the engine options changed (they apply when the model is opened again).
    """
    session.settings = generation_settings(settings)
    session.queue_bound = settings.queue_bound
    session.default_system_prompt = settings.system_prompt
    options = engine_options(settings)
    changed = options != session.options
    session.options = options
    return changed


async def run_window(
    app: QApplication, args: argparse.Namespace, driver: Driver | None = None
) -> None:
    """Show the window and serve it until it is closed, then shut down in order.

    Args:
        app: the application.
        args: the parsed command line.
        driver: optional coroutine run alongside the window, acting as the user.
    """
    from shiboken6 import isValid

    from app.engine import ModelInfo
    from app.engine.llama import open_llama
    from app.engine.remote import RemoteEndpoint, RemoteError
    from app.flow.archive import Archive
    from app.flow.event_loop import finalize_async_generators_on
    from app.flow.remote import RemoteModel
    from app.flow.words import say, say_sentence
    from app.sentence import QT_TRANSLATE_NOOP
    from app.store.paths import data_dir
    from app.store.preferences import Preferences, load_preferences, save_preferences
    from app.store.secrets import load_api_key, save_api_key
    from app.ui.appearance import Appearance
    from app.ui.main_window import MainWindow
    from app.ui.model_library import ModelLibrary
    from app.ui.server_dialog import ServerDialog
    from app.ui.settings_dialog import SettingsDialog

    screen = app.primaryScreen()
    refresh = screen.refreshRate() if screen is not None else 60.0
    loop = asyncio.get_running_loop()
    finalize_async_generators_on(loop)
    # Disk work never runs on the UI thread.
    preferences = await loop.run_in_executor(None, load_preferences)
    archive, archive_problem = await Archive.open()
    session = ChatSession(
        open_llama,
        frame_interval=1 / (refresh if refresh > 0 else 60.0),
        archive=archive,
    )
    apply_settings(session, with_command_line(preferences.settings, args))
    session.conversation.system_prompt = preferences.settings.system_prompt
    pending_saves: set[asyncio.Future[None]] = set()

    def save(preferences: Preferences) -> None:
        # A copy: the UI thread may change the preferences while the write is under way.
        saving = loop.run_in_executor(None, save_preferences, replace(preferences))
        pending_saves.add(saving)
        saving.add_done_callback(pending_saves.discard)

    appearance = Appearance(app, preferences, save)
    window = MainWindow(session)

    def open_settings() -> None:
        dialog = SettingsDialog(appearance.preferences.settings, window)
        dialog.settings_chosen.connect(choose_settings)
        dialog.open()

    def choose_settings(settings: Settings) -> None:
        current = appearance.preferences
        current.settings = settings
        save(current)
        if apply_settings(session, with_command_line(settings, args)) and session.model:
            session.open_model(session.model.path)  # context and threads apply on load

    window.settings_requested.connect(open_settings)
    library_tasks: set[asyncio.Future[None]] = set()

    def open_library() -> None:
        current = session.model.path if session.model else None
        library = ModelLibrary(current, window)
        library.open_requested.connect(window.open_model)
        library.add_requested.connect(window.choose_model_file)
        library.finished.connect(library.deleteLater)
        library.open()
        folders = [PROJECT_DIR / "models", data_dir() / "models"]
        recent = [Path(p) for p in appearance.preferences.recent_models]
        task = asyncio.ensure_future(describe_models(library, folders, recent))
        library_tasks.add(task)
        task.add_done_callback(library_tasks.discard)

    def remember_model(info: ModelInfo) -> None:
        current = appearance.preferences
        current.remember_model(str(info.path.resolve()))
        save(current)

    window.models_requested.connect(open_library)

    def open_server_dialog() -> None:
        current = appearance.preferences
        dialog = ServerDialog(current.server_url, current.server_model, window)
        dialog.finished.connect(dialog.deleteLater)

        async def list_models(endpoint: RemoteEndpoint) -> None:
            remote = RemoteModel(endpoint)
            try:
                offered = await remote.models()
            except RemoteError as exc:
                if isValid(dialog):
                    dialog.set_problem(say_sentence(exc.sentence))
                return
            finally:
                await remote.close()
            if isValid(dialog):
                dialog.set_models(offered)

        async def fill_key() -> None:
            key = await asyncio.to_thread(load_api_key, dialog.url.text())
            if key and isValid(dialog) and not dialog.key.text():
                dialog.key.setText(key)

        async def keep_key(endpoint: RemoteEndpoint) -> None:
            kept = await asyncio.to_thread(save_api_key, endpoint.base_url, endpoint.api_key)
            if endpoint.api_key and not kept:
                window.view.add_note(
                    say(
                        QT_TRANSLATE_NOOP(
                            "Floodgate",
                            "There is no system keyring, so the API key is kept only until "
                            "Floodgate closes.",
                        )
                    )
                )

        def connect(endpoint: RemoteEndpoint) -> None:
            remembered = appearance.preferences
            remembered.server_url, remembered.server_model = endpoint.base_url, endpoint.model
            save(remembered)
            window.spawn(keep_key(endpoint))
            window.spawn(session.connect_remote(endpoint))

        dialog.models_requested.connect(lambda endpoint: window.spawn(list_models(endpoint)))
        dialog.connect_requested.connect(connect)
        dialog.open()
        window.spawn(fill_key())

    window.server_requested.connect(open_server_dialog)
    session.model_changed.connect(remember_model)
    window.show_choices(appearance.theme, appearance.language)
    window.theme_chosen.connect(appearance.choose_theme)

    def choose_language(choice: str) -> None:
        if not appearance.choose_language(choice):
            window.view.add_note(MISSING_TRANSLATION, error=True)

    window.language_chosen.connect(choose_language)
    if appearance.translation_missing:
        window.view.add_note(MISSING_TRANSLATION, error=True)
    if archive_problem is not None:
        window.view.add_note(say_sentence(archive_problem), error=True)
    closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def on_closed() -> None:
        if not closed.done():
            closed.set_result(None)

    window.closed.connect(on_closed)
    window.show()
    session.open_model(args.model or default_model_path())
    driving = asyncio.ensure_future(driver(window)) if driver is not None else None
    await closed
    if driving is not None and not driving.done():
        driving.cancel()
    await session.close()  # stops the reply; it is saved before this returns
    await archive.close()
    if pending_saves:
        await asyncio.gather(*pending_saves, return_exceptions=True)
    window.deleteLater()


async def describe_models(library: ModelLibrary, folders: list[Path], recent: list[Path]) -> None:
    """Fill the model library, reading each file's header on a worker thread."""
    from shiboken6 import isValid

    from app.engine.errors import ModelLoadError
    from app.engine.model_card import find_models, read_model_card
    from app.flow.words import say_sentence

    for path in await asyncio.to_thread(find_models, folders, recent):
        try:
            card = await asyncio.to_thread(read_model_card, path)
        except ModelLoadError as exc:
            if isValid(library):
                library.add_problem(say_sentence(exc.sentence))
            continue
        if not isValid(library):
            return  # closed before every file was read
        library.add_card(card)


def main(argv: Sequence[str] | None = None, driver: Driver | None = None) -> int:
    """Entry point of ``floodgate`` and ``python -m app``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["bench"]:
        from app.bench import main as bench_main

        return bench_main(argv[1:])
    args = build_parser().parse_args(argv)
    app = QApplication.instance() or QApplication([sys.argv[0]])
    assert isinstance(app, QApplication)
    app.setApplicationName("Floodgate")
    # The window's close hands shutdown to run_window; Qt must not end the loop under it.
    app.setQuitOnLastWindowClosed(False)
    with asyncio.Runner(loop_factory=lambda: qasync.QEventLoop(app)) as runner:
        runner.run(run_window(app, args, driver))
    return 0
