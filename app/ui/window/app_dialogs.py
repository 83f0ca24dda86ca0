"""The application's dialogs: settings, the model library, and connecting to a server.

They change what the whole application uses (its settings, its model), so they are wired
here, between the window's menus, the session and the preferences keeper, rather than in the
window itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import replace
from pathlib import Path
from typing import Protocol

from PySide6.QtCore import QObject, Slot
from PySide6.QtWidgets import QFileDialog
from shiboken6 import isValid

from app.engine import ModelInfo
from app.engine.errors import ModelLoadError
from app.engine.model_card import (
    NO_PROJECTOR,
    ModelCard,
    ProjectorChoice,
    find_models,
    projector_senses,
    read_gguf_header,
    read_model_card,
    senses,
)
from app.engine.placement import gpu_budget
from app.engine.remote import RemoteEndpoint, RemoteError
from app.flow.hub_downloads import DownloadRow, HubDownloads
from app.flow.options import CommandLineSettings
from app.flow.preferences import PreferencesKeeper
from app.flow.remote_model import RemoteModel
from app.flow.words import say, say_sentence
from app.sentence import QT_TRANSLATE_NOOP
from app.store.paths import PROJECT_DIR, data_dir
from app.store.secrets import load_api_key, save_api_key
from app.store.settings import Settings
from app.ui.dialogs.chat_dialogs import choose_model_file
from app.ui.dialogs.model_library import ModelLibrary
from app.ui.dialogs.remote_dialog import RemoteDialog
from app.ui.dialogs.settings_dialog import SettingsDialog
from app.ui.look.style import follow_theme
from app.ui.window.main_window import MainWindow
from app.ui.window.model_header import RemoteChoice, card_label


class AppDialogs(QObject):
    """Opens the File menu's dialogs and applies what they choose.

    Args:
        window: the main window (its menus ask for the dialogs).
        keeper: the preferences, where chosen settings, models and servers are remembered.
        command_line: the settings the command line gave for this run (none: none).
    """

    def __init__(
        self,
        window: MainWindow,
        keeper: PreferencesKeeper,
        command_line: CommandLineSettings | None = None,
    ) -> None:
        super().__init__(window)
        self._window = window
        self._session = window.session
        self._keeper = keeper
        self._command_line = command_line or CommandLineSettings()
        self._tasks: set[asyncio.Future[object]] = set()
        self._hub: HubDownloads | None = None
        self._library: ModelLibrary | None = None
        window.menus.settings_requested.connect(self.open_settings)
        window.menus.models_requested.connect(self.open_library)
        window.menus.server_requested.connect(self.open_server_dialog)
        self._session.model_changed.connect(self._remember_model)
        self._session.host.projector_for = self.projector_for
        self._scanning = False
        header = window.header
        header.menu_opening.connect(self.fill_picker)
        header.remote_chosen.connect(self._connect_remembered)
        header.draft_chosen.connect(self._choose_draft)
        self.fill_picker()
        # Downloads an earlier run left unfinished come back now, not when the library first
        # opens: the ones that were running go on, and the status line shows them.
        self.hub_downloads()

    # -- settings -------------------------------------------------------------------------------

    @Slot()
    def open_settings(self) -> None:
        """The settings dialog; OK applies and remembers the settings."""
        model = self._session.model
        placement = model.placement if model is not None else None
        dialog = SettingsDialog(
            self._command_line.apply(self._keeper.preferences.settings),  # what is in force
            self._window,
            threads=self._session.metrics.threads,
            devices=[(d.name, d.description) for d in placement.devices] if placement else (),
            placement=say_sentence(placement.details()) if placement else "",
            parallel=model.parallel if model is not None else 0,
            drafts=self._drafts(),
            from_command_line=frozenset(self._command_line.given),
        )
        dialog.settings_chosen.connect(self._choose_settings)
        dialog.measure_threads.connect(self._session.measure_threads)
        dialog.finished.connect(dialog.deleteLater)
        dialog.open()

    def _drafts(self) -> list[tuple[str, str]]:
        """The models found (the picker's) that can draft for the open one: its vocabulary's."""
        return [(str(card.path), card_label(card)) for card in self._window.header.drafts()]

    @Slot(str)
    def _choose_draft(self, path: str) -> None:
        """The picker's Draft model: the setting of that name, applied and remembered."""
        in_force = self._command_line.apply(self._keeper.preferences.settings)
        self._choose_settings(replace(in_force, draft_model=path))

    def _choose_settings(self, chosen: Settings) -> None:
        """Apply ``chosen`` (edited from what is in force) and save what is the user's."""
        command_line = self._command_line
        settings = command_line.to_save(self._keeper.preferences.settings, chosen)
        self._keeper.preferences.settings = settings
        self._keeper.save()
        session = self._session
        if session.use_settings(command_line.apply(settings)) and session.model:
            session.open_model(session.model.path)  # context and threads apply on load

    # -- models ---------------------------------------------------------------------------------

    @Slot()
    def open_library(self) -> None:
        """The model library, filled as each file's header is read off the UI thread."""
        session = self._session
        library = ModelLibrary(
            session.model.path if session.model else None, self._window, self.hub_downloads()
        )
        library.open_requested.connect(session.open_model)
        library.add_requested.connect(lambda: choose_model_file(self._window, session))
        library.projector_requested.connect(self._ask_for_projector)
        library.no_projector_requested.connect(lambda m: self.set_projector(m, NO_PROJECTOR))
        library.projector_reset_requested.connect(lambda m: self.set_projector(m, None))
        library.finished.connect(library.deleteLater)
        library.open()
        self._library = library
        self._spawn(describe_models(library, *self._model_files(), self.projector_for))

    def projector_for(self, model: Path) -> ProjectorChoice:
        """The projector chosen by hand for ``model`` (None: the one beside it, if any)."""
        chosen = self._keeper.preferences.projectors.get(str(model.resolve()))
        if chosen is None:
            return None
        return Path(chosen) if chosen else NO_PROJECTOR

    @Slot(Path)
    def _ask_for_projector(self, model: Path) -> None:
        dialog = QFileDialog(
            self._library,
            self.tr("Choose the projector for {name}").format(name=model.name),
            str(model.parent),
            self.tr("Projectors (mmproj*.gguf);;GGUF files (*.gguf);;All files (*)"),
        )
        dialog.setFileMode(QFileDialog.FileMode.ExistingFile)
        dialog.fileSelected.connect(lambda name: self.choose_projector(model, Path(name)))
        follow_theme(dialog)
        dialog.open()

    def choose_projector(self, model: Path, projector: Path) -> None:
        """Pair ``projector`` with ``model`` if it is one (its header is read off the UI thread).

        The pair is remembered; the library shows it; the model, if open, opens again with it.
        Anything else is said in the library, and nothing changes.
        """

        async def check() -> None:
            try:
                header = await asyncio.to_thread(read_gguf_header, projector, with_tensors=False)
            except ModelLoadError as exc:
                self._say_in_library(say_sentence(exc.sentence))
                return
            if senses(header.metadata) == (False, False):
                self._say_in_library(
                    say(
                        QT_TRANSLATE_NOOP(
                            "Floodgate",
                            "{name} is not a projector: choose the model's mmproj file, the "
                            "one its download page names for it.",
                        ),
                        name=projector.name,
                    )
                )
                return
            self.set_projector(model, projector.resolve())

        self._spawn(check())

    def set_projector(self, model: Path, choice: ProjectorChoice) -> None:
        """Remember ``choice`` for ``model`` (None: forget it, the one beside it counts again).

        The library shows the model anew; the model, if open, opens again with it.
        """
        chosen = self._keeper.preferences.projectors
        key = str(model.resolve())
        if choice is None:
            chosen.pop(key, None)
        else:
            chosen[key] = "" if choice == NO_PROJECTOR else str(choice)
        self._keeper.save()
        library = self._library
        if library is not None and isValid(library):
            self._spawn(describe_models(library, [], [model], self.projector_for))
        session = self._session
        if session.model is not None and session.model.path.resolve() == model.resolve():
            session.open_model(model)

    def _say_in_library(self, sentence: str) -> None:
        library = self._library
        if library is not None and isValid(library):
            library.add_problem(sentence)

    def _model_files(self) -> tuple[list[Path], list[Path]]:
        """Where the library looks for models, and the models opened lately."""
        folders = [PROJECT_DIR / "models", data_dir() / "models"]
        return folders, [Path(p) for p in self._keeper.preferences.recent_models]

    @Slot()
    def fill_picker(self) -> None:
        """Give the header's picker the library's models (read off the UI thread) and servers."""
        servers = self._keeper.preferences.remotes
        self._window.header.set_remotes([RemoteChoice(s.url, s.model) for s in servers])
        if self._scanning:
            return
        self._scanning = True

        async def scan() -> None:
            try:
                await describe_models(self._window.header, *self._model_files(), self.projector_for)
            finally:
                self._scanning = False

        self._spawn(scan())

    @Slot(RemoteChoice)
    def _connect_remembered(self, server: RemoteChoice) -> None:
        """The server picked in the header: with the key the keyring keeps for it."""

        async def connect() -> None:
            key = await asyncio.to_thread(load_api_key, server.url)
            self._connect(RemoteEndpoint(server.url, server.model, key or ""))

        self._spawn(connect())

    def hub_downloads(self) -> HubDownloads:
        """The Hub and the downloads, made when the app starts.

        Kept for the app's life: downloads go on with the library closed, and the status
        line shows them.
        """
        if self._hub is None:
            hub = HubDownloads(data_dir() / "models", self._keeper.preferences.settings.n_ctx, self)
            hub.changed.connect(self._download_moved)
            hub.finished.connect(self._downloaded)
            # The running transfer stops with the window; what arrived waits for a resume.
            self._window.closed.connect(hub.close)
            self._hub = hub
            self._spawn(hub.restore())  # what an earlier run left half-way (off the UI thread)
        return self._hub

    @Slot(DownloadRow)
    def _download_moved(self, _row: DownloadRow) -> None:
        if self._hub is not None:
            self._window.status_line.show_downloads(self._hub.status_text())

    @Slot(Path)
    def _downloaded(self, path: Path) -> None:
        """A model arrived, verified: it joins the library's table, ready to open."""
        self._window.statusBar().showMessage(
            say(
                QT_TRANSLATE_NOOP("Floodgate", "{name} is downloaded and ready to open."),
                name=path.name,
            ),
            8000,
        )
        library = self._library
        if library is not None and isValid(library):
            self._spawn(describe_models(library, [], [path], self.projector_for))

    @Slot(ModelInfo)
    def _remember_model(self, info: ModelInfo) -> None:
        if info.chat_format != "remote":
            # By the path it was opened at: a link reopens beside its projector.
            self._keeper.remember_model(str(info.path.absolute()))
            if info.path.resolve() not in self._window.header.cards:
                # Opened from outside the library (the command line, a file dialog): its
                # card (the size the header shows, the drafts it lists) is read now.
                header = self._window.header
                self._spawn(describe_models(header, [], [info.path], self.projector_for))
        if info.placement is not None and self._hub is not None:
            # What the Hub's "fits the GPU" weighs: the GPU models load on now.
            settings = self._keeper.preferences.settings
            self._hub.gpu_budget = gpu_budget(
                info.placement, settings.compute, settings.gpu_memory_mb
            )

    # -- servers --------------------------------------------------------------------------------

    @Slot()
    def open_server_dialog(self) -> None:
        """Connect to a server: its address, key and model; the key goes to the keyring."""
        last = self._keeper.preferences.last_remote
        url, model = (last.url, last.model) if last is not None else ("", "")
        dialog = RemoteDialog(url, model, self._window)
        dialog.finished.connect(dialog.deleteLater)
        dialog.models_requested.connect(lambda endpoint: self._spawn(_list(dialog, endpoint)))
        dialog.connect_requested.connect(self._connect)
        dialog.open()
        self._spawn(_fill_key(dialog))

    def _connect(self, endpoint: RemoteEndpoint) -> None:
        self._keeper.preferences.remember_remote(endpoint.base_url, endpoint.model)
        self._keeper.save()
        self._spawn(self._keep_key(endpoint))
        self._spawn(self._session.connect_remote(endpoint))

    async def _keep_key(self, endpoint: RemoteEndpoint) -> None:
        kept = await asyncio.to_thread(save_api_key, endpoint.base_url, endpoint.api_key)
        if endpoint.api_key and not kept:
            self._window.view.add_note(
                say(
                    QT_TRANSLATE_NOOP(
                        "Floodgate",
                        "There is no system keyring, so the API key is kept only until "
                        "Floodgate closes.",
                    )
                )
            )

    def _spawn(self, coroutine: Coroutine[object, object, object]) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)  # strong references: the loop keeps only weak ones
        task.add_done_callback(self._tasks.discard)


async def _list(dialog: RemoteDialog, endpoint: RemoteEndpoint) -> None:
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


async def _fill_key(dialog: RemoteDialog) -> None:
    key = await asyncio.to_thread(load_api_key, dialog.url.text())
    if key and isValid(dialog) and not dialog.key.text():
        dialog.key.setText(key)


class ModelShelf(Protocol):
    """What shows the models found: the library's table, the header's picker."""

    def add_card(self, card: ModelCard) -> None:
        """Show one model."""

    def add_problem(self, sentence: str) -> None:
        """Say that a file could not be described."""


async def describe_models(
    library: ModelShelf,
    folders: list[Path],
    recent: list[Path],
    projector_for: Callable[[Path], ProjectorChoice] = lambda _model: None,
) -> None:
    """Fill the model library (or the picker), reading each file's header on a worker thread.

    A model with a projector chosen by hand (``projector_for``) is shown with that one.
    """
    for path in await asyncio.to_thread(find_models, folders, recent):
        try:
            card = await asyncio.to_thread(read_model_card, path)
            chosen = projector_for(path)
            if chosen == NO_PROJECTOR:
                card = replace(card, projector=None, sees=False, hears=False)
            elif chosen is not None:
                sees, hears = await asyncio.to_thread(projector_senses, chosen)
                card = replace(card, projector=chosen, sees=sees, hears=hears)
        except ModelLoadError as exc:
            if isValid(library):
                library.add_problem(say_sentence(exc.sentence))
            continue
        if not isValid(library):
            return  # closed before every file was read
        if card.is_projector:
            continue  # a model's projector is shown with its model (an eye), not as a model
        library.add_card(card)
