"""The archive reports every save failure, whatever its type, and its recovery; it watches the
file and backs it up on its own thread."""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest

import app.store.database as database_module
from app.flow.archive import Archive
from app.sentence import Sentence
from app.store.backup import backups_folder, list_backups
from app.store.conversation import Conversation


class BrokenDisk:
    """A connection that fails every statement with ``error`` while ``broken`` (a disk that
    went away, or anything else that can go wrong), and is the real one otherwise."""

    def __init__(self, real: sqlite3.Connection, error: Exception) -> None:
        self.real = real
        self.error = error
        self.broken = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def _check(self) -> None:
        if self.broken:
            raise self.error

    def execute(self, *args: Any) -> sqlite3.Cursor:
        self._check()
        return self.real.execute(*args)

    def executemany(self, *args: Any) -> sqlite3.Cursor:
        self._check()
        return self.real.executemany(*args)

    def __enter__(self) -> sqlite3.Connection:
        return self.real.__enter__()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None:
        return self.real.__exit__(kind, value, traceback)


class Heard:
    """What the archive reported, and on which thread."""

    def __init__(self, archive: Archive) -> None:
        self.failures: list[Sentence] = []
        self.recoveries: list[Sentence] = []
        self.notices: list[Sentence] = []
        self.threads: set[str] = set()
        archive.on_failure = self._to(self.failures)
        archive.on_recovered = self._to(self.recoveries)
        archive.on_notice = self._to(self.notices)

    def _to(self, into: list[Sentence]) -> Any:
        def hear(sentence: Sentence) -> None:
            self.threads.add(threading.current_thread().name)
            into.append(sentence)

        return hear


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    event_loop = asyncio.new_event_loop()
    yield event_loop
    event_loop.close()


def opened(loop: asyncio.AbstractEventLoop, path: Path) -> Archive:
    archive, problem = loop.run_until_complete(Archive.open(path))
    assert problem is None
    return archive


def chat(prompt: str) -> Conversation:
    c = Conversation()
    c.add("user", prompt)
    c.add("assistant", "", status="streaming")
    return c


def failing(archive: Archive) -> bool:
    """The archive's state, read afresh (the type checker would carry an earlier answer)."""
    return archive.failing


def titles(path: Path) -> list[str]:
    with sqlite3.connect(path) as db:
        return sorted(row[0] for row in db.execute("SELECT title FROM conversations"))


@pytest.mark.parametrize(
    "error",
    [
        RuntimeError("the disk went away"),
        MemoryError(),
        sqlite3.OperationalError("disk I/O error"),
        UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_any_save_failure_is_reported_once_and_its_recovery_too(
    loop: asyncio.AbstractEventLoop, tmp_path: Path, error: Exception
) -> None:
    path = tmp_path / "floodgate.sqlite3"
    archive = opened(loop, path)
    heard = Heard(archive)
    disk = BrokenDisk(archive.database._db, error)
    archive.database._db = disk  # type: ignore[assignment]
    archive.submit(archive.database.save_all, chat("saved before"))
    loop.run_until_complete(archive.flush())
    assert heard.failures == []
    assert not failing(archive)

    disk.broken = True
    during = chat("said while saving failed")
    archive.submit(archive.database.save_all, during)
    reply = during.messages[-1]
    for text in ("a ", "reply ", "streaming"):
        reply.content += text
        archive.submit(archive.database.save_messages, during.id, [reply])
    loop.run_until_complete(archive.flush())
    assert len(heard.failures) == 1  # once, not once per save
    assert failing(archive)
    assert archive.failure == heard.failures[0]
    assert "Saving the chat history failed" in str(heard.failures[0])
    assert heard.threads == {t for t in heard.threads if t.startswith("floodgate-store")}
    with pytest.raises(type(error)):  # an awaited save raises to its caller as well
        loop.run_until_complete(archive.call(archive.database.rename, during.id, "x"))
    assert len(heard.failures) == 1

    disk.broken = False
    archive.submit(archive.database.save_all, chat("saved after"))
    loop.run_until_complete(archive.flush())
    assert len(heard.recoveries) == 1
    assert not failing(archive)
    # What was said while saving failed is in the file, even the rename: nothing was dropped.
    assert titles(path) == ["saved after", "saved before", "x"]
    loaded = loop.run_until_complete(archive.call(archive.database.load, during.id))
    assert loaded is not None
    assert loaded.messages[-1].content == "a reply streaming"
    loop.run_until_complete(archive.close())


def test_file_work_that_fails_is_the_callers_not_a_history_failure(
    loop: asyncio.AbstractEventLoop, tmp_path: Path
) -> None:
    archive = opened(loop, tmp_path / "floodgate.sqlite3")
    heard = Heard(archive)
    with pytest.raises(FileNotFoundError):
        loop.run_until_complete(archive.call((tmp_path / "missing.json").read_text))
    assert heard.failures == []
    assert not failing(archive)
    loop.run_until_complete(archive.close())


def test_a_history_deleted_while_running_is_noticed_at_the_next_save(
    loop: asyncio.AbstractEventLoop, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(database_module, "WATCH_EVERY", 0.0)
    path = tmp_path / "floodgate.sqlite3"
    archive = opened(loop, path)
    heard = Heard(archive)
    for n in range(3):
        archive.submit(archive.database.save_all, chat(f"before {n}"))
    loop.run_until_complete(archive.flush())
    for name in ("floodgate.sqlite3", "floodgate.sqlite3-wal", "floodgate.sqlite3-shm"):
        (tmp_path / name).unlink()
    held = chat("on screen")
    archive.rewrite([held])  # what the session hands over: the conversation it shows
    loop.run_until_complete(archive.flush())
    assert len(heard.notices) == 1
    assert "was deleted while Floodgate was running" in str(heard.notices[0])
    assert heard.failures == []
    assert titles(path) == ["before 0", "before 1", "before 2", "on screen"]
    loop.run_until_complete(archive.close())
    assert titles(path) == ["before 0", "before 1", "before 2", "on screen"]


def test_a_history_deleted_just_before_closing_is_made_again_at_close(
    loop: asyncio.AbstractEventLoop, tmp_path: Path
) -> None:
    path = tmp_path / "floodgate.sqlite3"
    archive = opened(loop, path)
    heard = Heard(archive)
    archive.submit(archive.database.save_all, chat("the last words"))
    loop.run_until_complete(archive.flush())
    path.unlink()  # within the second after the last look
    loop.run_until_complete(archive.close())
    assert len(heard.notices) == 1
    assert titles(path) == ["the last words"]


def test_backups_are_made_on_the_archives_thread_while_running(
    loop: asyncio.AbstractEventLoop, tmp_path: Path
) -> None:
    path = tmp_path / "floodgate.sqlite3"
    archive = opened(loop, path)
    folder = backups_folder(path)
    at_start = list_backups(folder, path.stem)
    assert len(at_start) == 1  # made at start, after the check
    archive.backup_every = 0.0
    archive.submit(archive.database.save_all, chat("worth keeping"))
    loop.run_until_complete(archive.flush())
    now = list_backups(folder, path.stem)
    assert len(now) == 2
    assert titles(now[0].path) == ["worth keeping"]
    loop.run_until_complete(archive.call(archive.database.list_conversations))
    assert len(list_backups(folder, path.stem)) == 2  # reading changes nothing: no backup
    loop.run_until_complete(archive.close())


def test_a_history_damaged_while_running_is_replaced_by_its_backup_and_this_session(
    loop: asyncio.AbstractEventLoop, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(database_module, "WATCH_EVERY", 0.0)
    path = tmp_path / "floodgate.sqlite3"
    archive = opened(loop, path)
    for n in range(5):
        archive.submit(archive.database.save_all, chat(f"from the backup {n}"))
    loop.run_until_complete(archive.call(archive.database.backup))
    this_session = chat("said after the backup")
    archive.submit(archive.database.save_all, this_session)
    loop.run_until_complete(archive.flush())
    heard = Heard(archive)
    # Someone writes garbage into the file in place (same inode), past its first page.
    loop.run_until_complete(
        archive.call(archive.database._db.execute, "PRAGMA wal_checkpoint(TRUNCATE)")
    )
    loop.run_until_complete(archive.call(archive.database.note_written))
    with path.open("r+b") as raw:
        raw.seek(4096)
        raw.write(b"\xa5" * 4096 * 3)
    reply = this_session.messages[-1]
    reply.content = "and its reply"
    archive.submit(archive.database.save_messages, this_session.id, [reply])
    loop.run_until_complete(archive.flush())
    listed = loop.run_until_complete(archive.call(archive.database.list_conversations))
    assert len(heard.notices) == 1
    assert "was damaged while Floodgate was running" in str(heard.notices[0])
    assert heard.failures == []
    assert {s.title for s in listed} == {
        *(f"from the backup {n}" for n in range(5)),
        "said after the backup",
    }
    loaded = loop.run_until_complete(archive.call(archive.database.load, this_session.id))
    assert loaded is not None
    assert loaded.messages[-1].content == "and its reply"
    loop.run_until_complete(archive.close())
    assert any(".damaged-" in p.name for p in tmp_path.iterdir())


def test_closing_gives_up_on_a_thread_stuck_in_the_disk(
    loop: asyncio.AbstractEventLoop, tmp_path: Path
) -> None:
    archive = opened(loop, tmp_path / "floodgate.sqlite3")
    release = threading.Event()
    archive.submit(release.wait, 5)  # a write stuck in a system call, as on a hung mount
    started = loop.time()
    assert not loop.run_until_complete(archive.close(timeout=0.2))
    assert loop.time() - started < 2
    release.set()


def test_the_whole_data_folder_deleted_while_running_is_made_again(
    loop: asyncio.AbstractEventLoop, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(database_module, "WATCH_EVERY", 0.0)
    folder = tmp_path / "data"
    path = folder / "floodgate.sqlite3"
    archive = opened(loop, path)
    heard = Heard(archive)
    archive.submit(archive.database.save_all, chat("before"))
    loop.run_until_complete(archive.flush())
    shutil.rmtree(folder)
    archive.submit(archive.database.save_all, chat("after"))
    assert loop.run_until_complete(archive.close())
    assert len(heard.notices) == 1
    assert heard.failures == []
    assert titles(path) == ["after", "before"]
