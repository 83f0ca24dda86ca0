"""The archive: the conversation database, driven from a thread of its own.

Every query runs on one worker thread, in the order asked for, so the UI thread never waits
on the disk. Saves during streaming are fire-and-forget (:meth:`Archive.submit`); reads are
awaited (:meth:`Archive.call`).

Nothing fails silently. Whatever a save raises, :attr:`Archive.on_failure` gets a sentence once
and :attr:`Archive.failure` holds it until a later write succeeds; then everything this run
saved is written again and :attr:`Archive.on_recovered` is called. Before writes, the file is
looked at (at most once a second): deleted or replaced, it is made again with every
conversation, and :attr:`Archive.on_notice` says so. Every so often (when something changed),
a backup is made, on this thread too.

The three callbacks run on the archive's thread: connect them to signals (queued) to reach the
UI thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import ParamSpec, TypeVar

from app.sentence import QT_TRANSLATE_NOOP, Sentence
from app.store.backup import BACKUP_EVERY
from app.store.conversation import Conversation
from app.store.database import WRITES, Database, open_database
from app.store.media_sweep import sweep_unreferenced
from app.store.rescue import is_damage
from app.trace import TRACE

log = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")


class Archive:
    """A :class:`Database` behind a one-thread executor, reporting every failure."""

    backup_every = BACKUP_EVERY
    """Seconds between backups while running (tests shorten it)."""

    def __init__(self, database: Database, executor: concurrent.futures.ThreadPoolExecutor) -> None:
        self.database = database
        self._executor = executor
        self._pending: set[concurrent.futures.Future[object]] = set()
        self.on_failure: Callable[[Sentence], None] = lambda sentence: None
        """Saving failed: the history is not being written (called once until it recovers)."""
        self.on_recovered: Callable[[Sentence], None] = lambda sentence: None
        """Saving works again, and everything this run saved was written again."""
        self.on_notice: Callable[[Sentence], None] = lambda sentence: None
        """Something happened to the file that the user should know (deleted, replaced)."""
        self.failure: Sentence | None = None
        """The sentence of the failure in force, or None while the history is being written."""

    @classmethod
    async def open(cls, path: Path | None = None) -> tuple[Archive, Sentence | None]:
        """Open the database on the archive's thread (checked, and backed up when sound).

        Returns:
            The archive, and a sentence if the file could not be used as it was: a backup was
            opened in its place, or the archive keeps conversations in memory only.
        """
        executor = concurrent.futures.ThreadPoolExecutor(
            1,
            thread_name_prefix="floodgate-store",
            initializer=TRACE.name_thread,
            initargs=("archive",),
        )
        loop = asyncio.get_running_loop()
        database, problem = await loop.run_in_executor(executor, open_database, path)
        # Conversations deleted long enough ago that their Undo is gone are removed for good.
        await loop.run_in_executor(executor, database.purge_deleted)
        if database.path is not None:
            # Then the pictures nothing refers to any more (not waited for; in memory, the
            # file on disk may refer to any).
            executor.submit(sweep_unreferenced, database.path)
        return cls(database, executor), problem

    @property
    def in_memory(self) -> bool:
        """Whether nothing is being written to disk."""
        return self.database.path is None

    @property
    def failing(self) -> bool:
        """Whether the history is not being written right now."""
        return self.failure is not None

    async def call(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run ``fn`` on the archive's thread, after everything submitted before it.

        A failure of a database method is reported as for :meth:`submit`, and raised here too.
        """
        future = self._executor.submit(self._run, False, fn, functools.partial(fn, *args, **kwargs))
        return await asyncio.wrap_future(future)

    def submit(self, fn: Callable[P, object], *args: P.args, **kwargs: P.kwargs) -> None:
        """Run ``fn`` on the archive's thread without waiting for it (saves)."""
        future: concurrent.futures.Future[object] = self._executor.submit(
            self._run, True, fn, functools.partial(fn, *args, **kwargs)
        )
        self._pending.add(future)
        future.add_done_callback(self._pending.discard)

    def rewrite(self, conversations: Sequence[Conversation]) -> None:
        """Write these conversations again, whole (what the app holds in memory).

        Takes copies now, on the caller's thread; the writing happens on the archive's thread.
        """
        copies = [_copy(c) for c in conversations]
        self.submit(self.database.rewrite, copies)

    def _run(self, fire_and_forget: bool, fn: object, job: Callable[[], T]) -> T:
        # On the archive's thread. Fire-and-forget work has nobody waiting for its exception,
        # so any failure is reported; awaited work only when it is the history's own.
        history = getattr(fn, "__self__", None) is self.database
        writes = history and getattr(fn, "__name__", "") in WRITES
        try:
            if writes:
                notice = self.database.watch()
                if notice is not None:
                    log.warning("%s", notice)
                    self.on_notice(notice)
            try:
                with TRACE.span(getattr(fn, "__name__", "archive job"), cat="archive"):
                    result = job()
            except sqlite3.DatabaseError as exc:
                if not (history and is_damage(exc)):
                    raise
                self._rescue(exc)
                result = job()  # once more, on the file put in place of the damaged one
            if writes:
                self._written()
        except Exception as exc:
            if history or fire_and_forget:
                self._failed(exc)
            raise
        return result

    def _rescue(self, damage: sqlite3.DatabaseError) -> None:
        log.error("The chat history is damaged: %r", damage)
        notice = self.database.rescue()
        log.warning("%s", notice)
        self.on_notice(notice)

    def _failed(self, exc: Exception) -> None:
        if self.failure is not None:
            log.debug("Saving the conversation failed again: %r", exc)
            return
        log.error("Saving the conversation failed: %r", exc, exc_info=exc)
        self.failure = Sentence(
            QT_TRANSLATE_NOOP(
                "Floodgate",
                "Saving the chat history failed ({reason}). Floodgate keeps trying; until it "
                "works, what is on screen is only in memory, and can be exported.",
            ),
            {"reason": _reason(exc)},
        )
        self.on_failure(self.failure)

    def _written(self) -> None:
        self.database.note_written()
        if self.failure is not None:
            # Whatever failed meanwhile is written now, before the failure is called over.
            self.database.rewrite_held()
            self.failure = None
            self.on_recovered(
                Sentence(
                    QT_TRANSLATE_NOOP(
                        "Floodgate",
                        "The chat history is being saved again; everything on screen is in it.",
                    )
                )
            )
        if self.database.backup_due(self.backup_every):
            try:
                self.database.backup()
            except Exception as exc:  # a backup failing must not fail the save before it
                log.warning("Backing up the chat history failed: %r", exc)

    async def flush(self) -> None:
        """Wait until everything submitted so far is written."""
        await self.call(lambda: None)

    async def close(self, timeout: float | None = None) -> bool:
        """Finish the pending writes, close the database and end the thread.

        A history file deleted (or written over) in the last second is dealt with first.

        Args:
            timeout: give up waiting after this many seconds (a disk that hangs holds the
                archive's thread in a system call; nothing can end that from here).

        Returns:
            False if the archive's thread did not finish in time. It is still running then,
            and the process must not wait for it at exit.
        """

        async def finish() -> None:
            await self.flush()
            await self.call(self._last_look)
            await self.call(self.database.close)

        try:
            await asyncio.wait_for(finish(), timeout)
        except TimeoutError:
            log.error("The chat history did not finish writing within %s s", timeout)
            return False
        finally:
            self._executor.shutdown(wait=False)
        return True

    def _last_look(self) -> None:
        try:
            notice = self.database.watch(force=True)
        except Exception as exc:
            self._failed(exc)
            return
        if notice is not None:
            log.warning("%s", notice)
            self.on_notice(notice)


def _copy(conversation: Conversation) -> Conversation:
    return replace(
        conversation,
        nodes={key: replace(m) for key, m in conversation.nodes.items()},
        settings=dict(conversation.settings),
    )


def _reason(exc: Exception) -> str:
    text = str(exc) or type(exc).__name__
    return text if len(text) <= 200 else text[:199] + "…"
