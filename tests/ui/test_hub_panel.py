"""The model library's Hub tab: search, a repository's models, downloads with their controls."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import keyring
import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLineEdit, QProgressBar
from pytestqt.qtbot import QtBot

from app.downloads.download_queue import DownloadQueue, DownloadStatus, State
from app.downloads.hub import Hub
from app.downloads.transfer import RemoteFile
from app.flow.hub_downloads import HubDownloads
from app.flow.session import ChatSession, ModelState
from app.standins.fake_hub import FakeFile, FakeHub, FakeRepo
from app.standins.scripted import ScriptedBackend, scripted_opener
from app.store.paths import data_dir
from app.ui.dialogs.hub_panel import HubPanel
from app.ui.dialogs.model_library import ModelLibrary
from app.ui.window.app_dialogs import AppDialogs
from app.ui.window.main_window import MainWindow
from tests.support.hub_repos import tiny, tiny_repo
from tests.support.keyring import MemoryKeyring
from tests.support.loop import Loop, run_until
from tests.support.preferences import Saved


@pytest.fixture
def downloads(loop: Loop, floodgate_home: Path) -> Iterator[HubDownloads]:
    hub = HubDownloads(floodgate_home / "models", n_ctx=1024)
    yield hub
    hub.close()


def shown_window(qtbot: QtBot) -> tuple[ChatSession, MainWindow, AppDialogs]:
    """A window on a scripted model, shown, with the app's dialogs (and downloads) wired."""
    session = ChatSession(scripted_opener(ScriptedBackend(["Hi"])))
    window = MainWindow(session)
    qtbot.addWidget(window)
    window.show()
    return session, window, AppDialogs(window, Saved())


def cell(table: object, row: int, column: int) -> str:
    item = table.item(row, column)  # type: ignore[attr-defined]
    return item.text() if item is not None else ""


def search(loop: Loop, panel: HubPanel, text: str) -> None:
    panel.query.setText(text)
    panel.search_button.click()
    run_until(loop, lambda: panel.search_button.isEnabled() and panel.results.rowCount() > 0)


def test_search_choose_download_and_open(
    qtbot: QtBot, loop: Loop, fake_hub: FakeHub, downloads: HubDownloads
) -> None:
    for i in range(23):
        fake_hub.add(FakeRepo(f"maker/Other{i:02}-GGUF", {}, downloads=i))
    fake_hub.add(tiny_repo(downloads=1000, license="<b>bold</b> licence"))
    library = ModelLibrary(None, hub=downloads)
    qtbot.addWidget(library)
    panel = library.hub_panel
    assert panel is not None
    assert library.tabs.count() == 2

    search(loop, panel, "GGUF")
    assert panel.results.rowCount() == 20
    assert cell(panel.results, 0, 0) == "tester/Tiny-GGUF"
    assert panel.more_button.isEnabled()
    panel.more_button.click()
    run_until(loop, lambda: panel.results.rowCount() == 24)
    assert not panel.more_button.isEnabled()

    panel.results.selectRow(0)
    run_until(loop, lambda: panel.choices.rowCount() == 4)
    # The licence is the Hub's text, shown as it is (never markup).
    assert panel.repo_facts.textFormat() == Qt.TextFormat.PlainText
    assert "<b>bold</b> licence" in panel.repo_facts.text()
    recommended = [r for r in range(4) if "recommended" in cell(panel.choices, r, 4)]
    assert len(recommended) == 1
    assert panel.choices.currentRow() == recommended[0]
    assert cell(panel.choices, 2, 0) == "Tiny-Q8_0-00001-of-00002.gguf  (2 parts)"

    opened: list[Path] = []
    library.open_requested.connect(opened.append)
    panel.choices.selectRow(0)  # Q2_K
    panel.download_button.click()
    assert panel.transfers.rowCount() == 1
    run_until(loop, lambda: "Downloaded" in cell(panel.transfers, 0, 2), timeout=20)
    bar = panel.transfers.cellWidget(0, 1)
    assert isinstance(bar, QProgressBar)
    assert bar.value() == 1000
    panel.transfers.selectRow(0)
    assert panel.open_button.isEnabled()
    assert not panel.pause_button.isEnabled()
    panel.open_button.click()
    assert opened == [downloads.folder / "Tiny-Q2_K.gguf"]


def test_pause_resume_and_cancel_from_the_buttons(
    qtbot: QtBot, loop: Loop, fake_hub: FakeHub, downloads: HubDownloads
) -> None:
    repo = fake_hub.add(tiny_repo())
    fake_hub.faults.rate = 300_000
    panel = HubPanel(downloads)
    qtbot.addWidget(panel)
    loop.run_until_complete(downloads.repository(repo.repo_id))
    row = downloads.download("Tiny-F16.gguf")
    assert row is not None
    run_until(loop, lambda: "Downloading" in cell(panel.transfers, 0, 2))
    panel.transfers.selectRow(0)
    assert panel.pause_button.isEnabled()
    assert panel.cancel_button.isEnabled()
    panel.pause_button.click()
    run_until(loop, lambda: cell(panel.transfers, 0, 2).startswith("Paused"))
    assert panel.resume_button.isEnabled()
    assert not panel.pause_button.isEnabled()
    panel.resume_button.click()
    run_until(loop, lambda: "Downloading" in cell(panel.transfers, 0, 2))
    panel.cancel_button.click()
    run_until(loop, lambda: cell(panel.transfers, 0, 2).startswith("Cancelled"))
    assert not panel.cancel_button.isEnabled()
    assert downloads.queue.wait(10)
    assert not any((downloads.folder / ".downloads").iterdir())


def test_a_gated_repository_takes_a_token_from_the_panel(
    qtbot: QtBot, loop: Loop, fake_hub: FakeHub, downloads: HubDownloads
) -> None:
    fake_hub.add(tiny_repo("meta/Gated-GGUF", gated=True, token="hf_secret"))
    before = keyring.get_keyring()
    keyring.set_keyring(MemoryKeyring())
    try:
        panel = HubPanel(downloads)
        qtbot.addWidget(panel)
        search(loop, panel, "Gated")
        assert cell(panel.results, 0, 0) == "meta/Gated-GGUF  (gated)"
        panel.results.selectRow(0)
        run_until(loop, lambda: panel.choices.rowCount() == 4)
        assert "gated: accept its terms" in panel.repo_facts.text()
        assert "HTTP 401" in panel.repo_facts.text()  # its header could not be read yet

        panel.token_button.click()
        dialog = panel.token_dialog
        assert dialog is not None
        assert dialog.textEchoMode() == QLineEdit.EchoMode.Password
        dialog.setTextValue(" hf_secret ")
        dialog.accept()
        run_until(loop, lambda: "HTTP 401" not in panel.repo_facts.text())
        assert keyring.get_password("Floodgate", f"hub token {fake_hub.url}") == "hf_secret"
        panel.choices.selectRow(0)
        panel.download_button.click()
        run_until(loop, lambda: "Downloaded" in cell(panel.transfers, 0, 2), timeout=20)
    finally:
        keyring.set_keyring(before)


def test_an_unreachable_hub_is_said_in_the_panel(
    qtbot: QtBot, loop: Loop, monkeypatch: pytest.MonkeyPatch, downloads: HubDownloads
) -> None:
    with FakeHub() as hub:
        closed = hub.url
    monkeypatch.setenv("HF_ENDPOINT", closed)
    panel = HubPanel(downloads)
    qtbot.addWidget(panel)
    panel.query.setText("llama")
    panel.search_button.click()
    run_until(loop, lambda: "cannot be reached" in panel.message.text())
    assert panel.search_button.isEnabled()
    assert panel.results.rowCount() == 0


def test_the_status_line_shows_a_download_and_the_library_gets_the_model(
    qtbot: QtBot, loop: Loop, fake_hub: FakeHub
) -> None:
    repo = fake_hub.add(tiny_repo())
    fake_hub.faults.rate = 1_000_000
    session, window, dialogs = shown_window(qtbot)
    try:
        dialogs.open_library()
        library = dialogs._library
        assert library is not None
        hub = dialogs.hub_downloads()
        loop.run_until_complete(hub.repository(repo.repo_id))
        hub.download("Tiny-F16.gguf")
        label = window.status_line.downloads_label
        run_until(loop, lambda: label.isVisible() and "Tiny-F16.gguf: Downloading" in label.text())
        run_until(loop, lambda: not label.isVisible(), timeout=20)
        [row] = hub.rows.values()
        assert (row.state, row.sentence) == ("done", "")
        final = hub.folder / "Tiny-F16.gguf"
        run_until(loop, lambda: final.resolve() in library.paths(), timeout=20)
    finally:
        window.close()
        loop.run_until_complete(session.close())
    assert session.state is not ModelState.GENERATING


def test_downloads_left_unfinished_come_back_when_the_app_starts(
    qtbot: QtBot, loop: Loop, fake_hub: FakeHub
) -> None:
    repo = fake_hub.add(tiny_repo())
    fake_hub.faults.rate = 1_000_000
    hub = Hub()

    def remote(path: str) -> RemoteFile:
        file = repo.files[path]
        return RemoteFile(hub.endpoint, repo.repo_id, repo.sha, path, file.size, file.sha256)

    # An earlier run: the F16 downloading when Floodgate ended, a split model paused.
    folder = data_dir() / "models"
    seen: list[DownloadStatus] = []
    earlier = DownloadQueue(folder, seen.append, report_interval=0.02)
    running = earlier.add([remote("Tiny-F16.gguf")])
    split = earlier.add([remote(f"Q8_0/Tiny-Q8_0-0000{n}-of-00002.gguf") for n in (1, 2)])
    earlier.pause(split.id)
    run_until(loop, lambda: any(s.id == running.id and s.done > 200_000 for s in seen))
    earlier.close()

    session, window, dialogs = shown_window(qtbot)
    try:
        # Without opening the library: the one that was running goes on by itself ...
        label = window.status_line.downloads_label
        run_until(loop, lambda: label.text().startswith("Tiny-F16.gguf: Downloading"))
        assert "1 paused" in label.text()
        hub_downloads = dialogs.hub_downloads()
        run_until(loop, lambda: (folder / "Tiny-F16.gguf").is_file(), timeout=20)
        # ... and the paused split model waits as one model, shown in the status line.
        run_until(loop, lambda: label.text().startswith("Tiny-Q8_0-00001-of-00002.gguf: Paused"))
        states = {row.label: row.state for row in hub_downloads.rows.values()}
        assert states == {
            "Tiny-F16.gguf": State.DONE.value,
            "Tiny-Q8_0-00001-of-00002.gguf": State.PAUSED.value,
        }
        assert fake_hub.requests[-1].range is not None  # the F16 went on from where it was
    finally:
        window.close()
        loop.run_until_complete(session.close())


def test_the_hub_panel_finds_models_that_see_and_names_the_projector_that_comes_with_one(
    qtbot: QtBot, loop: Loop, fake_hub: FakeHub, downloads: HubDownloads
) -> None:
    fake_hub.add(tiny_repo(downloads=1000))
    model = {"Tiny-Q4_K_M.gguf": FakeFile(data=tiny(500_000))}
    seeing = {
        **model,
        "mmproj-Tiny-F16.gguf": FakeFile(data=tiny(120_000)),
        "mmproj-Tiny-Q8_0.gguf": FakeFile(data=tiny(70_000)),
    }
    fake_hub.add(FakeRepo("tester/TinyVL-GGUF", seeing, pipeline_tag="image-text-to-text"))
    panel = HubPanel(downloads)
    qtbot.addWidget(panel)
    panel.sees.setChecked(True)
    search(loop, panel, "Tiny")
    assert panel.results.rowCount() == 1
    assert cell(panel.results, 0, 0) == "tester/TinyVL-GGUF"
    panel.results.selectRow(0)
    run_until(loop, lambda: panel.choices.rowCount() == 1)
    # Named with its size before the download (no Q4_K_M projector: the F16 one).
    label = cell(panel.choices, 0, 0)
    assert "Tiny-Q4_K_M.gguf + its projector mmproj-Tiny-F16.gguf (117.2 KB)" in label
    panel.choices.selectRow(0)
    panel.download_button.click()
    run_until(loop, lambda: "Downloaded" in cell(panel.transfers, 0, 2), timeout=20)
    assert (downloads.folder / "Tiny-Q4_K_M.gguf").is_file()
    # The projector is kept under its model's name, which pairs them in the downloads folder.
    assert (downloads.folder / "mmproj-Tiny-Q4_K_M.gguf").read_bytes() == tiny(120_000)
    assert not (downloads.folder / "mmproj-Tiny-F16.gguf").exists()
    assert not (downloads.folder / "mmproj-Tiny-Q8_0.gguf").exists()
    panel.sees.setChecked(False)
    search(loop, panel, "Tiny")
    assert panel.results.rowCount() == 2
