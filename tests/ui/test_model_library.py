"""The model library: GGUF headers read without loading weights; switching frees memory."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from app.engine import EngineOptions, ModelLoadError
from app.engine.llama import open_llama
from app.engine.model_card import ModelCard, find_models, read_model_card, short_count
from app.flow.session import ChatSession, ModelState
from app.ui.dialogs.model_library import ModelLibrary
from app.ui.window.app_dialogs import describe_models
from tests.support.loop import Loop, run_until


@pytest.mark.model
def test_the_bundled_models_card(model_path: Path) -> None:
    card = read_model_card(model_path)
    assert card.architecture == "llama"
    assert short_count(card.parameters) == "135M"
    assert card.quantization == "Q4_1"
    assert card.context_length == 8192
    assert card.size_bytes == model_path.stat().st_size
    assert card.has_chat_template


def test_files_that_are_not_models_get_a_sentence(tmp_path: Path) -> None:
    text = tmp_path / "notes.gguf"
    text.write_text("not a model")
    with pytest.raises(ModelLoadError, match="not a GGUF model file"):
        read_model_card(text)
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\x03\x00\x00\x00" + b"\xff" * 40)
    with pytest.raises(ModelLoadError, match=r"header of broken\.gguf cannot be read"):
        read_model_card(broken)


def test_known_models_come_from_folders_and_recent_files_once_each(tmp_path: Path) -> None:
    folder = tmp_path / "models"
    folder.mkdir()
    (folder / "b.gguf").write_bytes(b"GGUF")
    (folder / "a.gguf").write_bytes(b"GGUF")
    (folder / "readme.txt").write_text("not listed")
    elsewhere = tmp_path / "elsewhere.gguf"
    elsewhere.write_bytes(b"GGUF")
    found = find_models(
        [folder, tmp_path / "missing-folder"],
        [elsewhere, folder / "a.gguf", tmp_path / "deleted.gguf"],
    )
    assert found == [folder / "a.gguf", folder / "b.gguf", elsewhere]


def test_a_file_reached_through_a_link_is_listed_once_by_the_first_path(tmp_path: Path) -> None:
    folder = tmp_path / "models"
    folder.mkdir()
    (folder / "model.gguf").write_bytes(b"GGUF")
    (folder / "same.gguf").symlink_to(folder / "model.gguf")
    assert find_models([folder]) == [folder / "model.gguf"]
    assert find_models([], [folder / "same.gguf", folder / "model.gguf"]) == [folder / "same.gguf"]


def test_short_counts() -> None:
    assert [short_count(n) for n in (None, 950, 134_515_008, 7_241_732_096)] == [
        "",
        "950",
        "135M",
        "7.24B",
    ]


def card(path: Path, name: str) -> ModelCard:
    return ModelCard(path, name, "llama", 135_000_000, "Q4_1", 8192, 98 * 2**20, True)


def test_the_library_lists_marks_the_model_in_use_and_opens_a_choice(
    qtbot: QtBot, tmp_path: Path
) -> None:
    library = ModelLibrary(tmp_path / "b.gguf")
    qtbot.addWidget(library)
    library.show()
    library.add_card(card(tmp_path / "a.gguf", "Alpha"))
    library.add_card(card(tmp_path / "b.gguf", "Beta"))
    assert library.table.rowCount() == 2
    assert library.table.item(1, 0).text().startswith("Beta  (in use)")  # type: ignore[union-attr]
    assert library.table.item(0, 2).text() == "135M"  # type: ignore[union-attr]
    assert library.table.currentRow() == 1
    with qtbot.waitSignal(library.open_requested) as opened:
        library.table.cellDoubleClicked.emit(0, 0)
    assert opened.args == [tmp_path / "a.gguf"]


@pytest.mark.model
def test_describing_a_folder_shows_models_and_says_which_files_are_not(
    loop: Loop, qtbot: QtBot, tmp_path: Path, model_path: Path
) -> None:
    folder = tmp_path / "models"
    folder.mkdir()
    (folder / "smol.gguf").symlink_to(model_path)
    (folder / "truncated.gguf").write_bytes(model_path.read_bytes()[:4096])
    library = ModelLibrary(None)
    qtbot.addWidget(library)
    loop.run_until_complete(describe_models(library, [folder], []))
    assert library.paths() == [folder / "smol.gguf"]
    assert "truncated.gguf" in library.problems.text()


def test_a_hub_cache_snapshot_is_listed_by_its_links_names_with_the_projector_beside(
    loop: Loop, qtbot: QtBot, tmp_path: Path, model_path: Path
) -> None:
    from app.standins.projector import write_projector

    # huggingface_hub's cache: the files are blobs named by their hashes, and the snapshot
    # folder links each file's name to its blob.
    blobs = tmp_path / "models--someone--SmolVLM-GGUF" / "blobs"
    snapshot = blobs.parent / "snapshots" / "0123abcd"
    blobs.mkdir(parents=True)
    snapshot.mkdir(parents=True)
    shutil.copy(model_path, blobs / "9f2c41aa")
    write_projector(blobs / "77e0b5d3")
    (snapshot / "SmolVLM-test-Q4_1.gguf").symlink_to("../../blobs/9f2c41aa")
    (snapshot / "mmproj-SmolVLM-test-f16.gguf").symlink_to("../../blobs/77e0b5d3")
    library = ModelLibrary(None)
    qtbot.addWidget(library)
    loop.run_until_complete(describe_models(library, [snapshot], []))
    assert library.paths() == [snapshot / "SmolVLM-test-Q4_1.gguf"]
    assert "sees pictures" in library.table.item(0, 0).text()  # type: ignore[union-attr]
    card = read_model_card(library.paths()[0])
    assert card.projector == snapshot / "mmproj-SmolVLM-test-f16.gguf"


def test_a_model_with_an_audio_projector_beside_it_is_listed_as_hearing(
    loop: Loop, qtbot: QtBot, tmp_path: Path, model_path: Path
) -> None:
    from app.standins.audio_projector import write_audio_projector

    folder = tmp_path / "models"
    folder.mkdir()
    (folder / "Qwen2-Audio-test-Q4_1.gguf").symlink_to(model_path)
    write_audio_projector(folder / "mmproj-Qwen2-Audio-test-f16.gguf")
    library = ModelLibrary(None)
    qtbot.addWidget(library)
    loop.run_until_complete(describe_models(library, [folder], []))
    assert library.paths() == [folder / "Qwen2-Audio-test-Q4_1.gguf"]  # one model
    name = library.table.item(0, 0).text()
    assert name.startswith("Qwen2-Audio-test")
    assert "hears sound" in name
    assert "sees pictures" not in name


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


@pytest.mark.model
def test_ten_model_switches_give_the_memory_back(
    loop: Loop, tmp_path: Path, model_path: Path
) -> None:
    other = tmp_path / "other.gguf"
    other.symlink_to(model_path)  # another path: each switch really closes and opens
    session = ChatSession(open_llama, options=EngineOptions(n_ctx=512, n_threads=1))
    loaded: list[Path] = []
    session.model_changed.connect(lambda info: loaded.append(info.path))
    session.open_model(model_path)
    run_until(loop, lambda: session.state is ModelState.READY, timeout=60)
    baseline = rss_mb()
    for i in range(10):
        session.open_model(other if i % 2 == 0 else model_path)
        run_until(loop, lambda n=i: len(loaded) == n + 2, timeout=60)
    after = rss_mb()
    loop.run_until_complete(session.close())
    assert loaded[-1] == model_path
    assert after <= baseline * 1.10, f"{baseline:.0f} MB after the first load, {after:.0f} after"
    print(f"RSS {baseline:.0f} MB after the first load, {after:.0f} MB after 10 switches")


def test_the_library_lists_every_other_file_whatever_one_of_them_is(
    loop: Loop, qtbot: QtBot, tmp_path: Path
) -> None:
    from tests.support.model_files import TEMPLATE, write_gguf

    folder = tmp_path / "models"
    folder.mkdir()
    os.mkfifo(folder / "a-pipe.gguf")
    (folder / "b-null.gguf").symlink_to("/dev/null")
    write_gguf(folder / "c-odd.gguf", {"general.name": b"Odd \xff name", "x": TEMPLATE})
    (folder / "d-truncated.gguf").write_bytes(b"GGUF\x03\x00\x00\x00\x01")
    write_gguf(folder / "e-fine.gguf", {"general.name": "<b>Fine</b>"})
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(folder / "f-socket.gguf"))
    try:
        library = ModelLibrary(None)
        qtbot.addWidget(library)
        loop.run_until_complete(
            asyncio.wait_for(describe_models(library, [folder], [folder / "a-pipe.gguf"]), 30)
        )
    finally:
        server.close()
    assert library.paths() == [folder / "c-odd.gguf", folder / "e-fine.gguf"]
    names = [library.table.item(row, 0).text() for row in range(2)]  # type: ignore[union-attr]
    assert names == ["c-odd", "e-fine"]  # the files' names, never their general.name
    problems = library.problems.text().splitlines()
    assert len(problems) == 4
    assert "a-pipe.gguf is a named pipe" in problems[0]
    assert "b-null.gguf is a device" in problems[1]  # named as listed: the link
    assert "d-truncated.gguf cannot be read" in problems[2]
    assert "f-socket.gguf is a socket" in problems[3]


def test_file_names_and_metadata_are_never_markup(qtbot: QtBot, tmp_path: Path) -> None:
    library = ModelLibrary(None)
    qtbot.addWidget(library)
    library.add_problem("<img src='x.png'> <b>bold</b>.gguf is not a GGUF model file.")
    assert library.problems.textFormat() is Qt.TextFormat.PlainText
    library.add_card(card(tmp_path / "<i>x</i>.gguf", "<a href='file:///'>name</a>"))
    item = library.table.item(0, 0)
    assert item is not None
    assert item.text() == "<a href='file:///'>name</a>"
    assert "&lt;i&gt;x&lt;/i&gt;.gguf" in item.toolTip()
    assert "<i>" not in item.toolTip()


@pytest.mark.model
def test_a_projector_chosen_by_hand_pairs_with_its_model_and_is_remembered(
    qtbot: QtBot, loop: Loop, model_path: Path, tmp_path: Path
) -> None:
    from app.standins.projector import write_projector
    from app.standins.scripted import ScriptedBackend
    from app.ui.window.app_dialogs import AppDialogs
    from app.ui.window.main_window import MainWindow
    from tests.support.preferences import Saved

    opened: list[EngineOptions] = []
    backend = ScriptedBackend(["Hi"])

    def opener(path: Path, options: EngineOptions) -> ScriptedBackend:
        opened.append(options)
        backend.reopen(path)
        return backend

    session = ChatSession(opener)
    window = MainWindow(session)
    qtbot.addWidget(window)
    keeper = Saved()
    dialogs = AppDialogs(window, keeper)
    dialogs.open_library()
    library = window.findChild(ModelLibrary)
    assert library is not None
    run_until(loop, lambda: model_path.resolve() in [p.resolve() for p in library.paths()], 30)
    row = [p.resolve() for p in library.paths()].index(model_path.resolve())
    assert "sees pictures" not in library.table.item(row, 0).text()
    assert library.projector_button.isEnabled()

    # Neither a text file nor a model is a projector: each is said, and nothing is paired.
    notes = tmp_path / "notes.gguf"
    notes.write_text("not a projector")
    dialogs.choose_projector(model_path, notes)
    run_until(loop, lambda: "not a GGUF model file" in library.problems.text(), 10)
    dialogs.choose_projector(model_path, model_path)
    run_until(loop, lambda: "is not a projector" in library.problems.text(), 10)
    assert keeper.preferences.projectors == {}

    (tmp_path / "elsewhere").mkdir()
    projector = write_projector(tmp_path / "elsewhere" / "mmproj-chosen.gguf")
    dialogs.choose_projector(model_path, projector)
    run_until(loop, lambda: "sees pictures" in library.table.item(row, 0).text(), 10)
    assert str(projector.resolve()) in library.table.item(row, 0).toolTip()
    assert keeper.preferences.projectors == {str(model_path.resolve()): str(projector.resolve())}
    assert keeper.calls  # saved
    session.open_model(model_path)
    run_until(loop, lambda: session.state is ModelState.READY, 10)
    assert opened[-1].projector == projector.resolve()
    assert opened[-1].projector_fallback  # remembered: if it fails later, the model still opens

    # Projector > None: it reads text only, even with a projector in its folder, and the
    # open model opens again without one.
    choose_file, none, in_its_folder = library.projector_actions
    library.table.selectRow(row)
    loads = len(opened)
    none.trigger()
    run_until(loop, lambda: "sees pictures" not in library.table.item(row, 0).text(), 10)
    assert keeper.preferences.projectors == {str(model_path.resolve()): ""}
    run_until(loop, lambda: len(opened) > loads and session.state is ModelState.READY, 10)
    assert opened[-1].projector is None
    assert not opened[-1].projector_beside
    # Projector > The one in its folder: the choice is forgotten.
    in_its_folder.trigger()
    run_until(loop, lambda: keeper.preferences.projectors == {}, 10)
    run_until(loop, lambda: len(opened) > loads + 1 and session.state is ModelState.READY, 10)
    assert opened[-1].projector is None
    assert opened[-1].projector_beside
    assert choose_file.text() == "Choose a file…"
    loop.run_until_complete(session.close())


def test_chosen_projectors_are_kept_in_the_preferences(tmp_path: Path) -> None:
    from app.store.preferences import Preferences, load_preferences, save_preferences

    file = tmp_path / "preferences.json"
    save_preferences(Preferences(projectors={"/m/model.gguf": "/p/mmproj.gguf"}), file)
    assert load_preferences(file).projectors == {"/m/model.gguf": "/p/mmproj.gguf"}
    file.write_text(
        '{"projectors": {"/m/a.gguf": 3, "": "/p", "/m/b.gguf": "/p/b.gguf", "/m/c.gguf": ""}}'
    )
    # "" is a projector chosen as none: the model reads text only.
    assert load_preferences(file).projectors == {"/m/b.gguf": "/p/b.gguf", "/m/c.gguf": ""}


@pytest.mark.model
def test_a_model_opened_through_a_link_is_remembered_by_the_link_and_described(
    qtbot: QtBot, loop: Loop, tmp_path: Path, model_path: Path
) -> None:
    from app.standins.scripted import ScriptedBackend
    from app.ui.window.app_dialogs import AppDialogs
    from app.ui.window.main_window import MainWindow
    from tests.support.preferences import Saved

    backend = ScriptedBackend(["Hi"])

    def opener(path: Path, options: EngineOptions) -> ScriptedBackend:
        backend.reopen(path)
        return backend

    blob = tmp_path / "blobs" / "9f2c41aa"
    blob.parent.mkdir()
    shutil.copy(model_path, blob)  # a file of its own, not the bundled one the library lists
    link = tmp_path / "snapshot" / "SmolVLM-test-Q4_1.gguf"
    link.parent.mkdir()
    link.symlink_to(blob)
    session = ChatSession(opener)
    window = MainWindow(session)
    qtbot.addWidget(window)
    keeper = Saved()
    dialogs = AppDialogs(window, keeper)
    run_until(loop, lambda: not dialogs._scanning, 10)  # the library as the app starts
    session.open_model(link)
    # Opened from outside the library: its card is read, and the header shows its size. (One
    # wait: the card is read by a task the opening starts, which must find the loop running.)
    run_until(loop, lambda: session.state is ModelState.READY and blob in window.header.cards, 10)
    # The next launch opens the link, beside which its projector is found.
    assert keeper.preferences.recent_models == [str(link)]
    assert window.header.facts.text().startswith(f"{model_path.stat().st_size / 2**20:.0f} MB")
