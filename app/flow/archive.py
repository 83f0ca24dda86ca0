"""The archive: the conversation database, driven from a thread of its own.

Every query runs on one worker thread, in the order asked for, so the UI thread never waits
on the disk. Saves during streaming are fire-and-forget (:meth:`Archive.submit`); reads are
awaited (:meth:`Archive.call`). A failing save is logged and reported once through
``on_failure``; the conversation stays on screen either way.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import ParamSpec, TypeVar

from app.sentence import QT_TRANSLATE_NOOP, Sentence
from app.store.database import Database, open_database

log = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")


class Archive:
    """A :class:`Database` behind a one-thread executor."""

    def __init__(self, database: Database, executor: concurrent.futures.ThreadPoolExecutor) -> None:
        self.database = database
        self._executor = executor
        self._pending: set[concurrent.futures.Future[object]] = set()
        self.on_failure: Callable[[Sentence], None] = lambda sentence: None
        self._failed = False

    @classmethod
    async def open(cls, path: Path | None = None) -> tuple[Archive, Sentence | None]:
        """Open the database on the archive's thread.

        Returns:
            The archive, and a sentence if the file could not be used (the archive then keeps
            conversations in memory only).
        """
        executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="floodgate-store")
        loop = asyncio.get_running_loop()
        database, problem = await loop.run_in_executor(executor, open_database, path)
        # Conversations deleted long enough ago that their Undo is gone are removed for good.
        await loop.run_in_executor(executor, database.purge_deleted)
        return cls(database, executor), problem

    @property
    def in_memory(self) -> bool:
        """Whether nothing is being written to disk."""
        return self.database.path is None

    async def call(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run ``fn`` on the archive's thread, after everything submitted before it."""
        future = self._executor.submit(fn, *args, **kwargs)
        return await asyncio.wrap_future(future)

    def submit(self, fn: Callable[P, object], *args: P.args, **kwargs: P.kwargs) -> None:
        """Run ``fn`` on the archive's thread without waiting for it (saves)."""
        future: concurrent.futures.Future[object] = self._executor.submit(fn, *args, **kwargs)
        self._pending.add(future)
        future.add_done_callback(self._done)

    def _done(self, future: concurrent.futures.Future[object]) -> None:
        # Runs on the archive's thread; the failure callback hops to the loop itself.
        self._pending.discard(future)
        exc = future.exception()
        if exc is None:
            return
        log.error("Saving the conversation failed: %s", exc)
        if not self._failed and isinstance(exc, sqlite3.Error | OSError):
            self._failed = True
            self.on_failure(
                Sentence(
                    QT_TRANSLATE_NOOP(
                        "Floodgate",
                        "Saving the conversation failed ({reason}). It stays on screen; "
                        "export it to keep it.",
                    ),
                    {"reason": exc},
                )
            )

    async def flush(self) -> None:
        """Wait until everything submitted so far is written."""
        await self.call(lambda: None)

    async def close(self) -> None:
        """Finish the pending writes, close the database and end the thread."""
        await self.flush()
        await self.call(self.database.close)
        self._executor.shutdown(wait=False)
