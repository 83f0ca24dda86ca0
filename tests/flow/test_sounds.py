"""Sounds in the window's flow: attached by their bytes, kept by digest, refused for a model
that cannot hear, heard by one that can (the real bundled model with a projector the test
writes), kept with the conversation; played from the prompt's card in the system's player."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from app.documents import Attachment
from app.engine import EngineOptions
from app.engine.llama import open_llama
from app.flow.attachments import AttachmentReader
from app.flow.session import ChatSession, ModelState
from app.flow.sound_files import is_sound_file, read_sound
from app.standins.audio_projector import write_audio_projector
from app.store.conversation import Conversation
from app.store.database import open_database
from app.store.exchange import from_json, to_json
from app.store.media_files import sound_path
from app.ui.chat.transcript import SoundDialog, show_attachment
from tests.support.loop import Loop, run_until
from tests.support.sounds import write_sound
from tests.support.window import card_chips, open_window, scripted_session, sent_and_reopened


def wav(folder: Path, name: str = "tone.wav", seconds: float = 1.0) -> Path:
    """A mono 16 kHz tone with a little noise, as a WAV file."""
    return write_sound(folder, name, seconds).path


def test_a_sound_is_told_apart_by_its_bytes_not_its_name(tmp_path: Path) -> None:
    assert is_sound_file(wav(tmp_path))
    wav(tmp_path).rename(tmp_path / "no-suffix")
    assert is_sound_file(tmp_path / "no-suffix")
    (tmp_path / "notes.wav").write_text("Plain words, whatever the name says.\n")
    assert not is_sound_file(tmp_path / "notes.wav")
    (tmp_path / "song.flac").write_bytes(b"fLaC" + bytes(40))
    assert is_sound_file(tmp_path / "song.flac")
    (tmp_path / "talk.mp3").write_bytes(b"ID3\x04" + bytes(40))
    assert is_sound_file(tmp_path / "talk.mp3")
    assert not is_sound_file(tmp_path)  # a folder: the document reader says what it is


def test_an_attached_sound_is_kept_by_its_digest_in_the_data_folder(
    floodgate_home: Path, tmp_path: Path
) -> None:
    source = wav(tmp_path)
    attachment = read_sound(source, "tone.wav")
    assert attachment.kind == "sound"
    assert attachment.is_sound
    assert attachment.is_media
    assert not attachment.is_picture
    assert attachment.digest is not None
    kept = sound_path(attachment.digest)
    assert kept.is_relative_to(floodgate_home / "sounds")
    assert kept.read_bytes() == source.read_bytes()
    assert Attachment.from_dict(attachment.to_dict()) == attachment


def test_the_reader_keeps_sounds_and_says_why_not_for_a_damaged_one(
    loop: Loop, floodgate_home: Path, tmp_path: Path
) -> None:
    reader = AttachmentReader(lambda text: len(text.split()))
    ready: list[Attachment] = []
    failed: list[tuple[str, str]] = []
    reader.ready.connect(lambda event: ready.append(event.attachment))
    reader.failed.connect(lambda event: failed.append((event.name, event.sentence)))
    good = wav(tmp_path)
    broken = tmp_path / "broken.wav"
    broken.write_bytes(good.read_bytes()[:30])  # a header cut short
    reader.read([good, broken])
    run_until(loop, lambda: len(ready) + len(failed) == 2, timeout=30)
    assert [a.name for a in ready] == ["tone.wav"]
    assert ready[0].is_sound
    assert failed[0][0] == "broken.wav"
    assert "broken.wav" in failed[0][1]
    kept = [p for p in (floodgate_home / "sounds").rglob("*") if p.is_file()]
    assert len(kept) == 1  # the good one; nothing of the broken one
    loop.run_until_complete(reader.close())


def test_sounds_for_a_model_that_cannot_hear_are_refused_before_sending(
    qtbot: QtBot, loop: Loop, tmp_path: Path
) -> None:
    session = scripted_session(loop)
    window = open_window(qtbot, session)
    window.attach([wav(tmp_path)])
    run_until(loop, lambda: len(window.tray.attachments()) == 1, timeout=30)
    chip = window.tray.chip("tone.wav")
    assert chip is not None
    assert "sound" in chip.summary.text()
    window.composer.setPlainText("what do you hear?")
    window.send()
    assert "cannot hear sound" in window.statusBar().currentMessage()
    assert window.composer.toPlainText() == "what do you hear?"  # nothing lost
    assert len(window.tray.attachments()) == 1
    assert session.conversation.messages == []


def test_a_sent_sound_is_kept_with_the_conversation_and_its_card_offers_to_play_it(
    qtbot: QtBot, loop: Loop, tmp_path: Path
) -> None:
    sound = read_sound(wav(tmp_path), "tone.wav")
    with sent_and_reopened(qtbot, loop, tmp_path / "history.sqlite3", sound) as (window, kept):
        assert kept == [sound.to_dict()]
        run_until(loop, lambda: len(card_chips(window)) == 1)
        # The chip is as wide as its icon and its whole name (not "to…av").
        [card_chip] = card_chips(window)
        assert card_chip.width() >= card_chip.sizeHint().width()
        dialog = show_attachment(window, kept[0])
        assert isinstance(dialog, SoundDialog)
        run_until(loop, dialog.play.isEnabled)  # its file found, off the UI thread
        dialog.close()
        # A sound whose file is gone says so, and offers nothing to press.
        assert sound.digest is not None
        sound_path(sound.digest).unlink()
        missing = show_attachment(window, kept[0])
        assert isinstance(missing, SoundDialog)
        run_until(loop, missing.note.isVisible)
        assert "missing" in missing.note.text()
        assert not missing.play.isEnabled()
        missing.close()


def test_a_sound_survives_the_sqlite_file_and_a_json_export_by_its_digest(
    tmp_path: Path,
) -> None:
    sound = read_sound(wav(tmp_path), "tone.wav").to_dict()
    conversation = Conversation()
    conversation.add("user", "", attachments=[sound])
    db, _ = open_database(tmp_path / "history.sqlite3", backups=False)
    db.save_all(conversation)
    db.close()
    db, _ = open_database(tmp_path / "history.sqlite3", backups=False)
    loaded = db.load(conversation.id)
    db.close()
    assert loaded is not None
    assert loaded.messages[0].attachments == [sound]
    assert from_json(to_json(conversation)).messages[0].attachments == [sound]
    assert [t[0] for t in conversation.history_turns()] == ["user"]  # a sound alone is a turn


@pytest.mark.model
def test_a_sound_reaches_a_model_that_hears_and_a_follow_up_reads_it_from_the_cache(
    loop: Loop, tmp_path: Path, model_path: Path
) -> None:
    folder = tmp_path / "models"
    folder.mkdir()
    model = folder / "Qwen2-Audio-test-Q4_1.gguf"
    model.symlink_to(model_path)
    write_audio_projector(folder / "mmproj-Qwen2-Audio-test-f16.gguf")
    session = ChatSession(open_llama, options=EngineOptions(n_threads=2))
    session.open_model(model)
    run_until(loop, lambda: session.state is ModelState.READY, timeout=60)
    assert session.model is not None
    assert session.model.hears
    assert not session.model.sees
    session.settings = dataclasses.replace(session.settings, temperature=0.0, max_tokens=8)
    assert session.send("What do you hear?", [read_sound(wav(tmp_path), "tone.wav")])
    run_until(loop, lambda: not session.generating, timeout=180)
    reply = session.conversation.messages[-1]
    assert reply.status != "error", reply.content
    first_prompt = session.metrics.prompt_tokens
    assert first_prompt > 750  # a sound is a 30-second window's positions at least
    report = session.metrics.report
    assert report is not None
    assert report.sounds_encoded == 1
    assert session.send("Say it again.")
    run_until(loop, lambda: not session.generating, timeout=180)
    assert session.conversation.messages[-1].status != "error"
    # The sound came from the KV cache, with the text before and after it: not encoded or
    # read again. (The random projector's sound makes the model end at once: an empty reply
    # is no turn of the history, so the first prompt's last tokens, the assistant turn's
    # opening, are not the follow-up's: those few are read again.)
    again = session.metrics.report
    assert again is not None
    assert again.sounds_encoded == 0
    assert session.metrics.cached_tokens >= first_prompt - 4
    loop.run_until_complete(session.close())
