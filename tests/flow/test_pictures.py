"""Pictures through the flow and the window: attached, pasted, kept, refused, sent, opened."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from PySide6.QtCore import QMimeData, QSize
from PySide6.QtGui import QColor, QImage
from pytestqt.qtbot import QtBot

from app.documents import Attachment
from app.engine import ChatMessage, EngineOptions
from app.engine.context import fit_to_context
from app.engine.llama import open_llama
from app.engine.pictures import Picture
from app.flow.attachments import AttachmentReader, is_picture_file, read_picture
from app.flow.session import ChatSession, ModelState
from app.standins.projector import LARGE, ProjectorShape, write_projector
from app.store.conversation import Conversation
from app.store.database import open_database
from app.store.exchange import NotAConversationError, from_json, to_json
from app.store.media_files import picture_path
from app.ui.chat.transcript import PictureDialog, show_attachment
from app.ui.composer.attachment_tray import ChipState
from tests.support.loop import Loop, run_for, run_until
from tests.support.window import card_chips, open_window, scripted_session, sent_and_reopened


def png(folder: Path, name: str = "photo.png", seed: int = 0) -> Path:
    pixels = np.random.default_rng(seed).integers(0, 255, (60, 80, 3), dtype=np.uint8)
    path = folder / name
    Image.fromarray(pixels).save(path, format="PNG")
    return path


def test_a_picture_is_told_apart_by_its_bytes_not_its_name(tmp_path: Path) -> None:
    assert is_picture_file(png(tmp_path, "photo.png"))
    assert is_picture_file(png(tmp_path, "no-suffix"))
    (tmp_path / "notes.png").write_text("Plain words, whatever the name says.\n")
    assert not is_picture_file(tmp_path / "notes.png")
    (tmp_path / "cars.txt").write_text("BMW and others\n")
    assert not is_picture_file(tmp_path / "cars.txt")
    Image.new("RGB", (4, 4)).save(tmp_path / "tiny.bmp")
    assert is_picture_file(tmp_path / "tiny.bmp")
    assert not is_picture_file(tmp_path)  # a folder: the document reader says what it is


def test_an_attached_picture_is_kept_by_its_digest_in_the_data_folder(
    floodgate_home: Path, tmp_path: Path
) -> None:
    source = png(tmp_path)
    attachment = read_picture(source, "photo.png")
    assert attachment.kind == "picture"
    assert attachment.is_picture
    assert attachment.text == ""
    assert attachment.digest is not None
    kept = picture_path(attachment.digest)
    assert kept.is_relative_to(floodgate_home)
    assert kept.read_bytes() == source.read_bytes()
    assert Attachment.from_dict(attachment.to_dict()) == attachment
    # The same picture again is the same file.
    assert read_picture(source, "again.png").digest == attachment.digest
    assert len(list((floodgate_home / "pictures").rglob("*"))) == 2  # one folder, one file


def test_the_reader_keeps_pictures_and_says_why_not_for_a_damaged_one(
    loop: Loop, floodgate_home: Path, tmp_path: Path
) -> None:
    reader = AttachmentReader(lambda text: len(text.split()))
    ready: list[Attachment] = []
    failed: list[tuple[str, str]] = []
    reader.ready.connect(lambda event: ready.append(event.attachment))
    reader.failed.connect(lambda event: failed.append((event.name, event.sentence)))
    good = png(tmp_path)
    broken = tmp_path / "broken.png"
    broken.write_bytes(good.read_bytes()[:120])
    reader.read([good, broken])
    run_until(loop, lambda: len(ready) + len(failed) == 2)
    assert [a.name for a in ready] == ["photo.png"]
    assert ready[0].is_picture
    assert failed[0][0] == "broken.png"
    assert "damaged" in failed[0][1]
    loop.run_until_complete(reader.close())


def test_a_pasted_screenshot_becomes_a_picture_chip_and_garbage_keeps_nothing(
    qtbot: QtBot, loop: Loop, floodgate_home: Path
) -> None:
    window = open_window(qtbot, scripted_session(loop))
    window.composer.setPlainText("what is this?")
    image = QImage(64, 48, QImage.Format.Format_RGB32)
    image.fill(QColor("teal"))
    mime = QMimeData()
    mime.setImageData(image)
    assert window.composer.canInsertFromMimeData(mime)
    window.composer.insertFromMimeData(mime)
    run_until(loop, lambda: len(window.tray.attachments()) == 1)
    assert window.composer.toPlainText() == "what is this?"
    [pasted] = window.tray.attachments()
    assert pasted.is_picture
    assert pasted.name == "Pasted picture.png"
    assert pasted.digest is not None
    with Image.open(picture_path(pasted.digest)) as kept:
        assert kept.size == (64, 48)
    chip = window.tray.chip("Pasted picture.png")
    assert chip is not None
    assert window.tray.state("Pasted picture.png") is ChipState.READY
    assert "picture" in chip.summary.text()
    # Its thumbnail, decoded off the UI thread: 64 x 48 fitted to 28 pixels.
    run_until(loop, chip.thumbnail.isVisible)
    assert chip.thumbnail.pixmap().size() == QSize(28, 21)

    failed: list[str] = []
    window.attachments.reader.failed.connect(lambda event: failed.append(event.sentence))
    window.attachments.reader.read_picture_bytes(b"not a picture", "junk.png")
    run_until(loop, lambda: bool(failed))
    assert "junk.png" in failed[0]
    assert len(list((floodgate_home / "pictures").rglob("*.png"))) == 0
    assert len([p for p in (floodgate_home / "pictures").rglob("*") if p.is_file()]) == 1


def test_pictures_for_a_model_that_cannot_see_are_refused_before_sending(
    qtbot: QtBot, loop: Loop, tmp_path: Path
) -> None:
    session = scripted_session(loop)
    window = open_window(qtbot, session)
    window.attach([png(tmp_path)])
    run_until(loop, lambda: len(window.tray.attachments()) == 1)
    window.composer.setPlainText("what is in it?")
    window.send()
    assert "cannot see pictures" in window.statusBar().currentMessage()
    assert window.composer.toPlainText() == "what is in it?"  # nothing lost
    assert len(window.tray.attachments()) == 1
    assert session.conversation.messages == []


def test_a_sent_picture_is_kept_with_the_conversation_and_opens_in_a_window(
    qtbot: QtBot, loop: Loop, tmp_path: Path
) -> None:
    path = tmp_path / "history.sqlite3"
    picture = read_picture(png(tmp_path), "photo.png")
    with sent_and_reopened(qtbot, loop, path, picture) as (window, kept):
        assert kept == [picture.to_dict()]
        # The prompt card's chip shows the picture small (80 x 60 fitted to 28 pixels).
        run_until(loop, lambda: len(card_chips(window)) == 1)  # built a slice a turn
        [card_chip] = card_chips(window)
        run_until(loop, lambda: card_chip.iconSize() == QSize(28, 21))
        # As wide as its thumbnail and its whole name (not "ph…ng").
        assert card_chip.width() >= card_chip.sizeHint().width()
        dialog = show_attachment(window, kept[0])
        assert isinstance(dialog, PictureDialog)
        run_until(
            loop,
            lambda: dialog.picture.pixmap() is not None and not dialog.picture.pixmap().isNull(),
        )
        assert dialog.picture.pixmap().width() > 0
        dialog.close()


def seeing_session(
    loop: Loop, tmp_path: Path, model_path: Path, shape: ProjectorShape, parallel: int
) -> ChatSession:
    """The app's session on the bundled model with a test projector beside it."""
    folder = tmp_path / "models"
    folder.mkdir()
    model = folder / "SmolVLM-test-Q4_1.gguf"
    model.symlink_to(model_path)
    write_projector(folder / "mmproj-SmolVLM-test-f16.gguf", shape)
    session = ChatSession(open_llama, options=EngineOptions(n_threads=2, parallel=parallel))
    session.open_model(model)
    run_until(loop, lambda: session.state is ModelState.READY, timeout=60)
    assert session.model is not None
    assert session.model.sees
    assert session.model.parallel == parallel
    return session


# One reply at a time, and side by side (the batch the app and the API server share).
@pytest.mark.model
@pytest.mark.parametrize("parallel", [1, 2])
def test_a_picture_reaches_a_model_that_sees_and_a_follow_up_reads_it_from_the_cache(
    loop: Loop, tmp_path: Path, model_path: Path, parallel: int
) -> None:
    session = seeing_session(loop, tmp_path, model_path, ProjectorShape(), parallel)
    session.settings = dataclasses.replace(session.settings, temperature=0.0, max_tokens=12)
    picture = read_picture(png(tmp_path), "photo.png")
    assert session.send("What is in this picture?", [picture])
    run_until(loop, lambda: not session.generating, timeout=120)
    reply = session.conversation.messages[-1]
    assert reply.status != "error", reply.content
    first_prompt = session.metrics.prompt_tokens
    assert first_prompt > ProjectorShape().tokens_per_image
    assert session.send("Say it again.")
    run_until(loop, lambda: not session.generating, timeout=120)
    assert session.conversation.messages[-1].status != "error"
    # The picture and the first turn came from the KV cache: not encoded or read again.
    assert session.metrics.cached_tokens >= first_prompt
    loop.run_until_complete(session.close())


def test_a_picture_survives_the_sqlite_file_and_a_json_export_by_its_digest(
    tmp_path: Path,
) -> None:
    picture = read_picture(png(tmp_path), "photo.png").to_dict()
    conversation = Conversation()
    conversation.add("user", "What is it?", attachments=[picture])
    db, _ = open_database(tmp_path / "history.sqlite3", backups=False)
    db.save_all(conversation)
    db.close()
    db, _ = open_database(tmp_path / "history.sqlite3", backups=False)
    loaded = db.load(conversation.id)
    db.close()
    assert loaded is not None
    assert loaded.messages[0].attachments == [picture]
    again = from_json(to_json(conversation))
    assert again.messages[0].attachments == [picture]
    # A picture without its digest is not a picture Floodgate can keep: the file is refused.
    broken = to_json(conversation).replace(str(picture["digest"]), "not-a-digest")
    with pytest.raises(NotAConversationError):
        from_json(broken)


@pytest.mark.model
@pytest.mark.parametrize("parallel", [1, 2])
def test_stop_while_the_model_looks_at_a_picture_lands_and_a_retry_completes(
    loop: Loop, tmp_path: Path, model_path: Path, parallel: int
) -> None:
    session = seeing_session(loop, tmp_path, model_path, LARGE, parallel)
    session.settings = dataclasses.replace(session.settings, temperature=0.0, max_tokens=4)
    big = tmp_path / "big.png"
    pixels = np.random.default_rng(3).integers(0, 255, (768, 1024, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(big, format="PNG")
    picture = read_picture(big, "big.png")
    assert session.send("Describe it.", [picture])
    run_until(loop, lambda: session.runner.report is not None and session.runner.report.looking)
    assert session.stop()
    run_until(loop, lambda: not session.generating, timeout=5)
    stopped = session.conversation.messages[-1]
    assert stopped.status == "stopped"
    assert stopped.content == ""
    assert session.send("Describe it again.", [picture])
    run_until(loop, lambda: not session.generating, timeout=120)
    assert session.conversation.messages[-1].status in ("complete", "length")
    loop.run_until_complete(session.close())


def test_pictures_count_in_fitting_the_context(tmp_path: Path) -> None:
    photo = Picture("0" * 64, tmp_path / "photo.png")
    history: list[ChatMessage] = [
        {"role": "user", "content": "one", "pictures": (photo,)},
        {"role": "assistant", "content": "two"},
        {"role": "user", "content": "three"},
    ]
    kept, dropped = fit_to_context(history, lambda text: len(text.split()), 100, 0)
    assert dropped == 0
    # The picture's 256 positions do not fit beside the rest: its turn goes first.
    kept, dropped = fit_to_context(history, lambda text: len(text.split()), 100, 256)
    assert dropped == 2
    assert kept == history[2:]


def test_pasting_text_with_a_picture_beside_it_inserts_the_text(qtbot: QtBot, loop: Loop) -> None:
    window = open_window(qtbot, scripted_session(loop))
    image = QImage(8, 8, QImage.Format.Format_RGB32)
    image.fill(QColor("red"))
    mime = QMimeData()
    mime.setImageData(image)  # what office apps add beside a copied selection
    mime.setText("copied words")
    window.composer.insertFromMimeData(mime)
    assert window.composer.toPlainText() == "copied words"
    run_for(loop, 0.2)
    assert window.tray.names() == []
