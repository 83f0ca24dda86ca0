"""The history file watched and backed up, with real SQLite files: deleted or replaced while
running, damaged between runs (pages, or the write-ahead log after a kill -9), backups made and
pruned."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.store.backup import (
    backups_folder,
    check_file,
    list_backups,
    make_backup,
    prune_backups,
    wal_is_damaged,
)
from app.store.conversation import Conversation
from app.store.database import Database, open_database


def chat(prompt: str, reply: str = "an answer") -> Conversation:
    c = Conversation()
    c.add("user", prompt)
    c.add("assistant", reply)
    return c


def titles(path: Path) -> list[str]:
    """Conversation titles in the file, read by another connection."""
    with sqlite3.connect(path) as db:
        return sorted(row[0] for row in db.execute("SELECT title FROM conversations"))


def look_now(db: Database) -> None:
    """Let the next write look at the file now (it looks at most once a second)."""
    db._watched_at = -1e9


# -- deleted or replaced while running -----------------------------------------------------------


def test_a_history_deleted_while_running_is_made_again_with_everything(tmp_path: Path) -> None:
    path = tmp_path / "floodgate.sqlite3"
    db, _ = open_database(path, backups=False)
    for n in range(3):
        db.save_all(chat(f"before {n}"))
    for name in os.listdir(tmp_path):  # the file, its log and its index, as `rm floodgate*`
        if name.startswith("floodgate"):
            (tmp_path / name).unlink()
    look_now(db)
    assert db.watch() is not None  # what the archive does before each write
    db.save_all(chat("after"))
    assert titles(path) == ["after", "before 0", "before 1", "before 2"]
    db.close()
    assert titles(path) == ["after", "before 0", "before 1", "before 2"]


def test_the_deletion_is_noticed_with_a_sentence(tmp_path: Path) -> None:
    path = tmp_path / "floodgate.sqlite3"
    db, _ = open_database(path, backups=False)
    db.save_all(chat("kept"))
    path.unlink()  # only the file: its -wal and -shm stay behind
    look_now(db)
    notice = db.watch()
    assert notice is not None
    assert "was deleted while Floodgate was running" in str(notice)
    assert "with every conversation" in str(notice)
    db.save_all(chat("written after"))
    db.close()
    assert titles(path) == ["kept", "written after"]
    assert open_database(path, backups=False)[1] is None  # a sound file, not a stale log


def test_within_a_second_the_file_is_not_looked_at_again(tmp_path: Path) -> None:
    path = tmp_path / "floodgate.sqlite3"
    db, _ = open_database(path, backups=False)
    assert db.watch() is None
    path.unlink()
    assert db.watch() is None  # looked less than a second ago: a stat per save is too many
    look_now(db)
    assert db.watch() is not None
    db.close()


def test_a_replaced_file_is_moved_aside_never_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "floodgate.sqlite3"
    db, _ = open_database(path, backups=False)
    db.save_all(chat("ours"))
    replacement = tmp_path / "someone-elses.sqlite3"
    replacement.write_bytes(b"a file someone put there")
    os.replace(replacement, path)
    look_now(db)
    notice = db.watch()
    assert notice is not None
    assert "was replaced while Floodgate was running" in str(notice)
    db.save_all(chat("ours, later"))
    db.close()
    assert titles(path) == ["ours", "ours, later"]
    aside = [p for p in tmp_path.iterdir() if ".replaced-" in p.name]
    assert len(aside) == 1
    assert aside[0].read_bytes() == b"a file someone put there"
    assert str(aside[0]) in str(notice)


def test_when_the_deleted_file_cannot_be_read_what_the_run_saved_is_written(
    tmp_path: Path,
) -> None:
    path = tmp_path / "floodgate.sqlite3"
    db, _ = open_database(path, backups=False)
    for n in range(20):
        db.save_all(chat(f"earlier {n}", "words " * 500))
    db._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the log now holds only what follows
    kept = chat("saved this run")
    db.save_all(kept)
    streaming = kept.add("assistant", "a reply saved as it streamed", status="streaming")
    db.save_messages(kept.id, [streaming])
    path.unlink()
    db._db.close()  # as if the old file could not be read any more: nothing to copy from
    look_now(db)
    notice = db.watch()
    assert notice is not None
    assert "the conversations of this session" in str(notice)
    loaded = db.load(kept.id)
    assert loaded is not None
    assert loaded.nodes == {m.id: m for m in kept.nodes.values()}
    # A sound file: the deleted one's log, left behind, was not read into it.
    assert db.integrity_ok()
    db.close()
    assert check_file(path) is None


# -- damaged between runs ------------------------------------------------------------------------


def damage_pages(path: Path) -> None:
    """Write garbage over the headers of the file's pages after the first (the file's own
    header stays valid, so it still opens)."""
    data = bytearray(path.read_bytes())
    page = 4096
    for start in range(page, len(data), page):
        data[start : start + 24] = b"\xa5" * 24
    path.write_bytes(bytes(data))


def history_with(path: Path, prompts: list[str]) -> None:
    db, problem = open_database(path)
    assert problem is None
    for prompt in prompts:
        db.save_all(chat(prompt, "reply " * 200))
    db.close()


def test_damaged_pages_at_start_open_the_newest_backup_and_leave_the_file(tmp_path: Path) -> None:
    path = tmp_path / "floodgate.sqlite3"
    history_with(path, [f"chat {n}" for n in range(20)])
    open_database(path)[0].close()  # this start backs up all twenty
    damage_pages(path)
    damaged = path.read_bytes()
    assert check_file(path) is not None  # quick_check sees it; reading sqlite_master does not
    sqlite3.connect(path).execute("SELECT count(*) FROM sqlite_master").fetchone()

    db, problem = open_database(path)
    assert problem is not None
    text = str(problem)
    assert "is damaged" in text
    assert "Floodgate opened its backup from" in text
    assert "20 conversations" in text
    assert db.path == path  # a working file again, not memory
    assert len(db.list_conversations()) == 20
    db.save_all(chat("written after the restore"))
    db.close()
    aside = [p for p in tmp_path.iterdir() if ".damaged-" in p.name and p.suffix == ".sqlite3"]
    assert len(aside) == 1
    assert aside[0].read_bytes() == damaged  # left exactly as it was, under a name of its own
    assert str(aside[0]) in text
    assert len(titles(path)) == 21


def test_a_damaged_file_with_no_backup_runs_in_memory_and_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "floodgate.sqlite3"
    history_with(path, [f"chat {n}" for n in range(20)])
    for backup in list_backups(backups_folder(path), path.stem):
        backup.path.unlink()
    damage_pages(path)
    damaged = path.read_bytes()
    db, problem = open_database(path)
    assert problem is not None
    assert "damaged" in str(problem)
    assert db.path is None
    db.close()
    assert path.read_bytes() == damaged


def test_a_damaged_backup_is_passed_over_for_an_older_good_one(tmp_path: Path) -> None:
    path = tmp_path / "floodgate.sqlite3"
    history_with(path, ["first"])
    history_with(path, ["second"])  # its start backed up "first"
    newest = open_database(path)[0]  # and this one both
    newest.close()
    backups = list_backups(backups_folder(path), path.stem)
    assert len(backups) == 3
    damage_pages(backups[0].path)
    damage_pages(path)
    db, problem = open_database(path)
    assert problem is not None
    assert backups[1].local_time() in str(problem)
    assert [s.title for s in db.list_conversations()] == ["first"]
    db.close()


WRITER = """
import sys, time
from app.store.conversation import Conversation
from app.store.database import open_database
db, problem = open_database(__import__("pathlib").Path(sys.argv[1]))
assert problem is None
for n in range(int(sys.argv[2])):
    c = Conversation()
    c.add("user", f"{sys.argv[3]} {n}")
    c.add("assistant", "reply " * 300)
    db.save_all(c)
print("written", flush=True)
time.sleep(60)
"""


def write_then_kill(path: Path, count: int, prefix: str) -> None:
    """A process that saves ``count`` conversations and is killed with SIGKILL."""
    with subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), str(count), prefix],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    ) as process:
        try:
            assert process.stdout is not None
            assert process.stdout.readline().strip() == "written"
        finally:
            process.send_signal(signal.SIGKILL)
            process.wait()


def test_a_wal_damaged_after_a_kill_opens_the_backup_and_says_from_when(tmp_path: Path) -> None:
    path = tmp_path / "floodgate.sqlite3"
    history_with(path, [f"old {n}" for n in range(5)])  # checkpointed at close
    write_then_kill(path, 30, "new")  # backs up the five at its start, then writes thirty
    wal = path.with_name(path.name + "-wal")
    assert wal.stat().st_size > 100_000
    assert not wal_is_damaged(path)
    plain = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    assert plain.execute("SELECT count(*) FROM conversations").fetchone()[0] == 35
    plain.close()
    # Damage a frame in the middle of the log: SQLite replays up to it and drops the rest.
    data = bytearray(wal.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 64] = b"\x00" * 64
    wal.write_bytes(bytes(data))
    damaged = (path.read_bytes(), wal.read_bytes())
    assert wal_is_damaged(path)
    silent = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    replayed = silent.execute("SELECT count(*) FROM conversations").fetchone()[0]
    silent.close()
    assert 5 < replayed < 35  # what a start that only reads sqlite_master would show
    backup = list_backups(backups_folder(path), path.stem)[0]

    db, problem = open_database(path)
    assert problem is not None
    text = str(problem)
    assert "is damaged" in text
    assert backup.local_time() in text
    listed = {s.title for s in db.list_conversations()}
    assert {f"old {n}" for n in range(5)} <= listed
    # What the log still showed consistently is not lost on top of the backup.
    assert len(listed) == replayed
    assert f"recovered {replayed - 5} newer conversations" in text
    db.close()
    aside = next(
        p for p in tmp_path.iterdir() if p.name.endswith(".sqlite3-wal") and "damaged" in p.name
    )
    assert (aside.with_name(aside.name[: -len("-wal")]).read_bytes(), aside.read_bytes()) == damaged


def test_a_clean_kill_is_not_taken_for_damage(tmp_path: Path) -> None:
    path = tmp_path / "floodgate.sqlite3"
    write_then_kill(path, 10, "chat")
    assert not wal_is_damaged(path)
    db, problem = open_database(path)
    assert problem is None
    assert len(db.list_conversations()) == 10
    db.close()


# -- backups -----------------------------------------------------------------------------------


def test_a_sound_start_makes_a_backup_with_the_online_api(tmp_path: Path) -> None:
    path = tmp_path / "floodgate.sqlite3"
    history_with(path, ["one", "two"])
    db, _ = open_database(path)
    db.close()
    newest = list_backups(backups_folder(path), path.stem)[0]
    assert titles(newest.path) == ["one", "two"]
    assert check_file(newest.path) is None
    assert not list(backups_folder(path).glob("*.partial"))


def test_backups_are_made_while_running_when_something_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "floodgate.sqlite3"
    db, _ = open_database(path, backups=False)
    assert not db.backup_due(every=0)  # nothing written yet
    db.save_all(chat("something"))
    assert db.backup_due(every=0)
    assert not db.backup_due(every=3600)
    made = db.backup()
    assert made is not None
    assert titles(made.path) == ["something"]
    assert not db.backup_due(every=0)
    db.close()


def test_backups_are_pruned_by_age(tmp_path: Path) -> None:
    path = tmp_path / "floodgate.sqlite3"
    db, _ = open_database(path, backups=False)
    db.save_all(chat("x"))
    folder = backups_folder(path)
    now = time.time()
    hour = 3600.0
    ages = [0.1, 0.2, 0.3, 0.4, 2.0, 5.0, 26.0, 30.0, 50.0, 24 * 6.5, 24 * 8, 24 * 30]
    for age in ages:
        make_backup(db._db, folder, path.stem, now - age * hour)
    removed = prune_backups(folder, path.stem, now)
    left = sorted(round((now - b.made_at) / hour, 1) for b in list_backups(folder, path.stem))
    # The newest three; then the newest of each day (today's is among the three already).
    assert left == [0.1, 0.2, 0.3, 26.0, 50.0, 24 * 6.5]
    assert len(removed) == len(ages) - len(left)
    assert all(not p.exists() for p in removed)
    db.close()


def test_a_history_deleted_between_runs_starts_anew_and_says_where_the_backups_are(
    tmp_path: Path,
) -> None:
    path = tmp_path / "floodgate.sqlite3"
    history_with(path, ["old"])
    open_database(path)[0].close()  # backs up "old"
    for name in os.listdir(tmp_path):
        if name.startswith("floodgate"):
            (tmp_path / name).unlink()
    db, problem = open_database(path)
    assert problem is not None
    assert "There was no chat history" in str(problem)
    assert str(backups_folder(path)) in str(problem)
    assert db.list_conversations() == []
    db.close()
    assert open_database(path)[1] is None  # said once: the new file is there now
