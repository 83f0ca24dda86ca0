"""Picture files no conversation refers to are swept; those a history, a backup or a file
moved aside refers to stay (a real SQLite file, real files in the data folder)."""

from __future__ import annotations

import asyncio
import os
import time
import wave
from pathlib import Path

import numpy as np
from PIL import Image

from app.flow.archive import Archive
from app.flow.attachments import read_picture
from app.store.conversation import Conversation
from app.store.database import database_path, open_database
from app.store.media_files import SWEEP_AFTER_S, keep_bytes, picture_path
from app.store.media_sweep import referenced_digests, sweep_unreferenced

OLD = time.time() - 2 * SWEEP_AFTER_S


def attached(folder: Path, seed: int) -> dict[str, object]:
    """A real PNG, read and kept as the window keeps an attached picture."""
    pixels = np.random.default_rng(seed).integers(0, 255, (24, 32, 3), dtype=np.uint8)
    path = folder / f"photo-{seed}.png"
    Image.fromarray(pixels).save(path)
    return read_picture(path, path.name).to_dict()


def age(*paths: Path) -> None:
    for path in paths:
        os.utime(path, (OLD, OLD))


def history_with(folder: Path, *seeds: int) -> tuple[Conversation, list[Path]]:
    """A history in the data folder whose one conversation shows these pictures."""
    conversation = Conversation()
    pictures = [attached(folder, seed) for seed in seeds]
    conversation.add("user", "What is it?", attachments=pictures)
    db, problem = open_database(database_path(), backups=False)
    assert problem is None
    db.save_all(conversation)
    db.close()
    return conversation, [picture_path(str(p["digest"])) for p in pictures]


def test_only_old_files_no_conversation_refers_to_are_swept(tmp_path: Path) -> None:
    _, (referenced,) = history_with(tmp_path, 1)
    orphan = keep_bytes(b"an API request's picture, long done")[1]
    young = keep_bytes(b"a picture kept for a prompt not saved yet")[1]
    cut_short = orphan.with_name("0" * 64 + ".part")
    cut_short.write_bytes(b"half a picture")
    age(referenced, orphan, cut_short)
    assert sweep_unreferenced(database_path()) == 2
    assert referenced.exists()
    assert young.exists()
    assert not orphan.exists()
    assert not cut_short.exists()
    assert not orphan.parent.exists() or any(orphan.parent.iterdir())  # no empty folder left
    assert sweep_unreferenced(database_path()) == 0


def test_a_deleted_conversation_s_pictures_stay_while_a_backup_refers_to_them(
    tmp_path: Path,
) -> None:
    conversation, (picture,) = history_with(tmp_path, 2)
    age(picture)
    db, _ = open_database(database_path())  # backed up as it opens: the backup shows it
    db.delete(conversation.id)
    db.purge_deleted(older_than=0)
    db.close()
    assert sweep_unreferenced(database_path()) == 0
    assert picture.exists()
    # Without the backup, nothing refers to it any more.
    for backup in (database_path().parent / "backups").iterdir():
        backup.unlink()
    assert sweep_unreferenced(database_path()) == 1
    assert not picture.exists()


def test_a_history_file_that_cannot_be_read_stops_the_sweep(tmp_path: Path) -> None:
    _, (picture,) = history_with(tmp_path, 3)
    orphan = keep_bytes(b"nobody's")[1]
    age(picture, orphan)
    damaged = database_path().with_name("floodgate.damaged-20261203-120000.sqlite3")
    damaged.write_bytes(b"SQLite format 3\x00" + b"\xff" * 4000)
    assert referenced_digests(database_path()) is None
    assert sweep_unreferenced(database_path()) == 0
    assert orphan.exists()
    # A file moved aside that reads refers to its pictures like the history does.
    db, _ = open_database(damaged.with_name("floodgate.replaced-20261203-120000.sqlite3"))
    db.close()
    damaged.unlink()
    digests = referenced_digests(database_path())
    assert digests is not None
    assert picture.name in digests
    assert sweep_unreferenced(database_path()) == 1


def test_a_history_opened_elsewhere_sweeps_nothing(tmp_path: Path) -> None:
    orphan = keep_bytes(b"the data folder's, not this history's")[1]
    age(orphan)
    elsewhere = tmp_path / "elsewhere" / "history.sqlite3"
    db, _ = open_database(elsewhere, backups=False)
    db.close()
    assert sweep_unreferenced(elsewhere) == 0
    assert orphan.exists()


def test_the_archive_sweeps_as_the_app_starts(tmp_path: Path) -> None:
    _, (picture,) = history_with(tmp_path, 4)
    orphan = keep_bytes(b"left by a deleted conversation")[1]
    age(picture, orphan)

    async def start() -> None:
        archive, problem = await Archive.open()
        assert problem is None
        await archive.call(lambda: None)  # after everything submitted before: the sweep
        await archive.close()

    asyncio.run(start())
    assert picture.exists()
    assert not orphan.exists()


def test_kept_sounds_are_swept_as_pictures_are(tmp_path: Path) -> None:
    from app.flow.sound_files import read_sound
    from app.store.media_files import sound_path, sounds_dir

    source = tmp_path / "beep.wav"
    with wave.open(str(source), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(8000)
        out.writeframes(bytes(1600))
    sound = read_sound(source, source.name).to_dict()
    conversation = Conversation()
    conversation.add("user", "Listen", attachments=[sound])
    db, _ = open_database(database_path(), backups=False)
    db.save_all(conversation)
    db.close()
    referenced = sound_path(str(sound["digest"]))
    orphan = keep_bytes(b"a sound nobody refers to", sounds_dir())[1]
    age(referenced, orphan)
    assert sweep_unreferenced(database_path()) == 1
    assert referenced.exists()
    assert not orphan.exists()
