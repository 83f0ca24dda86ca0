"""The prompt cache's folder: its index of files, its budget, and the thread that writes them.

:class:`CacheFolder` is the disk half of :class:`~app.engine.prompt_cache.PromptCache`. It shares
the cache's lock, so a lookup sees RAM and folder at one instant; methods marked "lock held"
expect the caller to hold it. The folder is listed once (headers only, bad files removed on the
way), and files are written by one daemon thread so that ``put`` never waits for the disk.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import queue
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from app.engine.cache_file import (
    FILE_NAME,
    TEMP_NAME,
    BadFileError,
    FileEntry,
    ModelIdentity,
    StateEntry,
    encode_header,
    file_name,
    log,
    our_files,
    payload_digest,
    read_file_entry,
    read_payload,
    remove,
    sync_folder,
)

CLOSE_WAIT_SECONDS = 1.0
"""How long :meth:`CacheFolder.close` waits for pending writes before giving up on them."""

_temp_counter = itertools.count()


@dataclass
class _WriteJob:
    entry: StateEntry
    cancelled: bool = field(default=False)


class CacheFolder:
    """Cache files in one folder, under a byte budget (least recently used goes first).

    Args:
        folder: The cache folder (created when first written).
        identity: The model and runtime every file belongs to; files of any other are removed.
        lock: The prompt cache's lock, guarding this folder's index and pending writes too.
        budget: Bytes of files kept in the folder at most.
        min_seconds: Entries that cost less than this to compute are not written.
    """

    def __init__(
        self,
        folder: Path,
        identity: ModelIdentity,
        lock: threading.Lock,
        *,
        budget: int,
        min_seconds: float,
    ) -> None:
        self._folder = folder
        self._identity_fields = identity.header_fields()
        self._lock = lock
        self._budget = budget
        self._min_seconds = min_seconds
        self._scan_lock = threading.Lock()
        self._index: dict[str, FileEntry] | None = None
        self._pending: dict[str, _WriteJob] = {}
        self._in_flight: _WriteJob | None = None
        self._queue: queue.SimpleQueue[tuple[str, str]] = queue.SimpleQueue()
        self._writer = threading.Thread(
            target=self._write_loop, name="prompt-cache-writer", daemon=True
        )
        self._writer.start()

    # ----------------------------------------------------------------- for the prompt cache

    def offer(self, entry: StateEntry) -> None:
        """Queue ``entry`` to be written if it cost enough (lock held); never waits."""
        if entry.seconds < self._min_seconds:
            return
        conversation = entry.conversation
        if self._on_disk_already(entry):
            # A restored state put back unchanged (the user switched away again):
            # no need to write 30 MB or more again, only to count it as used.
            self._queue.put(("touch", conversation))
            return
        previous = self._pending.get(conversation)
        self._pending[conversation] = _WriteJob(entry)
        if previous is None:
            self._queue.put(("write", conversation))

    def candidates(self, tried: set[str]) -> list[FileEntry]:
        """The listed files, but those of conversations in ``tried`` (lock held)."""
        if self._index is None:
            return []
        return [d for d in self._index.values() if d.conversation not in tried]

    def touch_later(self, conversation: str) -> None:
        """Count the conversation's file, if any, as just used; the writer does it (lock held)."""
        if self._index is not None and conversation in self._index:
            self._queue.put(("touch", conversation))

    def read(self, candidate: FileEntry) -> bytes | None:
        """The candidate's state, checked in full; None (file removed, logged) if it is bad.

        Called without the lock: the read is 30 MB or more, and stats must stay instant.
        """
        try:
            return read_payload(candidate, self._identity_fields)
        except BadFileError as exc:
            log.warning("Prompt cache: removed %s: %s", candidate.path.name, exc)
            self._drop_entry(candidate, remove_file=True)
        except OSError as exc:
            log.warning("Prompt cache: cannot read %s: %s", candidate.path.name, exc)
            self._drop_entry(candidate, remove_file=False)
        return None

    def mark_used(self, candidate: FileEntry, now: float) -> bool:
        """Count a file just read as used; False if it was forgotten or replaced (lock held)."""
        if self._index is None or self._index.get(candidate.conversation) is not candidate:
            return False
        candidate.used = now
        with contextlib.suppress(OSError):
            os.utime(candidate.path, (now, now))
        return True

    def forget(self, conversation: str) -> None:
        """Remove the conversation's file and cancel its writes (lock held)."""
        self._cancel_writes(conversation)
        if self._index is not None:
            self._index.pop(conversation, None)
        remove(self._folder / file_name(conversation))

    def clear(self) -> None:
        """Remove every file of ours and cancel every write (lock held)."""
        self._cancel_writes(None)
        if self._index is not None:
            self._index.clear()
        for path in our_files(self._folder):
            remove(path)

    def set_budget(self, budget: int) -> None:
        """Change the budget; files that no longer fit go at once (lock held)."""
        self._budget = budget
        if self._index is not None:
            self._evict(keep=None)

    def totals(self) -> tuple[int, int]:
        """Files listed and their total size; 0 and 0 until the folder is listed (lock held)."""
        files = self._index.values() if self._index is not None else ()
        return len(files), sum(entry.size for entry in files)

    def close(self) -> None:
        """Write what is pending (waiting about a second at most), then stop the writer."""
        self._queue.put(("stop", ""))
        self._writer.join(CLOSE_WAIT_SECONDS)
        if self._writer.is_alive():
            with self._lock:
                dropped = len(self._pending) + (self._in_flight is not None)
                self._cancel_writes(None)
            if dropped:
                log.warning("Prompt cache: %d writes still pending at close dropped", dropped)

    # ----------------------------------------------------------------------------- index

    def ensure_index(self) -> None:
        """List the folder once, reading headers only; bad files are removed on the way."""
        if self._listed():
            return
        with self._scan_lock:
            if self._listed():  # another thread listed it while this one waited
                return
            index = self._list()
            with self._lock:
                self._index = index
                self._evict(keep=None)

    def _listed(self) -> bool:
        with self._lock:
            return self._index is not None

    def _list(self) -> dict[str, FileEntry]:
        index: dict[str, FileEntry] = {}
        try:
            names = sorted(os.listdir(self._folder))
        except FileNotFoundError:
            names = []
        except OSError as exc:
            log.warning("Prompt cache: cannot list %s: %s", self._folder, exc)
            names = []
        for name in names:
            path = self._folder / name
            if TEMP_NAME.fullmatch(name):
                # The writer of this cache has not started writing yet (it lists the
                # folder first), so this is a leftover of a killed process.
                log.warning("Prompt cache: removed %s: a half-written file", name)
                remove(path)
                continue
            if not FILE_NAME.fullmatch(name):
                continue
            try:
                entry = read_file_entry(path, self._identity_fields)
            except BadFileError as exc:
                log.warning("Prompt cache: removed %s: %s", name, exc)
                remove(path)
                continue
            except OSError as exc:
                log.warning("Prompt cache: cannot read %s: %s", name, exc)
                continue
            index[entry.conversation] = entry
        return index

    def _on_disk_already(self, entry: StateEntry) -> bool:
        """Whether the folder holds or will hold these very tokens for this conversation."""
        conversation, tokens = entry.conversation, entry.tokens
        stored = self._index.get(conversation) if self._index is not None else None
        pending = self._pending.get(conversation)
        flying = self._in_flight
        if pending is not None:
            # A pending write of other tokens would overwrite the file; this one replaces it.
            return pending.entry.tokens == tokens
        if flying is not None and flying.entry.conversation == conversation:
            return flying.entry.tokens == tokens and not flying.cancelled
        return stored is not None and stored.tokens == tokens

    def _drop_entry(self, candidate: FileEntry, *, remove_file: bool) -> None:
        with self._lock:
            if self._index is not None and self._index.get(candidate.conversation) is candidate:
                del self._index[candidate.conversation]
                if remove_file:
                    remove(candidate.path)

    def _evict(self, keep: str | None) -> None:
        """Remove least recently used files until the folder fits its budget (lock held)."""
        assert self._index is not None
        total = sum(entry.size for entry in self._index.values())
        for entry in sorted(self._index.values(), key=lambda e: e.used):
            if total <= self._budget:
                break
            if entry.conversation == keep:
                continue
            del self._index[entry.conversation]
            remove(entry.path)
            total -= entry.size

    def _cancel_writes(self, conversation: str | None) -> None:
        """Drop pending writes of ``conversation`` (None: all) and the one in flight (lock held)."""
        if conversation is None:
            self._pending.clear()
        else:
            self._pending.pop(conversation, None)
        flying = self._in_flight
        if flying is not None and conversation in (None, flying.entry.conversation):
            flying.cancelled = True

    # ----------------------------------------------------------------------------- writer

    def _write_loop(self) -> None:
        try:
            self.ensure_index()
        except Exception:  # pragma: no cover - a bug; the cache keeps working in RAM
            log.exception("Prompt cache: listing the folder failed")
        while True:
            kind, conversation = self._queue.get()
            if kind == "stop":
                return
            try:
                if kind == "touch":
                    self._touch(conversation)
                else:
                    with self._lock:
                        job = self._pending.pop(conversation, None)
                        self._in_flight = job
                    if job is not None:
                        self._write(job)
            except Exception:  # pragma: no cover - a bug; never let the writer die of it
                log.exception("Prompt cache: the writer failed")
            finally:
                with self._lock:
                    self._in_flight = None

    def _touch(self, conversation: str) -> None:
        with self._lock:
            entry = self._index.get(conversation) if self._index is not None else None
            if entry is None:
                return
            now = time.time()
            entry.used = now
            with contextlib.suppress(OSError):
                os.utime(entry.path, (now, now))

    def _write(self, job: _WriteJob) -> None:
        entry = job.entry
        now = time.time()
        header = {
            **self._identity_fields,
            "conversation": entry.conversation,
            "tokens": list(entry.tokens),
            "seconds": entry.seconds,
            "created": entry.created,
            "used": now,
            "payload_length": len(entry.state),
            "payload_sha256": payload_digest(entry.state),
        }
        head = encode_header(header)
        size = len(head) + len(entry.state)
        if size > self._budget:
            log.info("Prompt cache: %d bytes exceed the disk budget; not written", size)
            return
        final = self._folder / file_name(entry.conversation)
        temp = self._folder / (f".{final.stem}.{os.getpid()}-{next(_temp_counter)}.tmp")
        started = time.perf_counter()
        try:
            self._folder.mkdir(parents=True, exist_ok=True)
            with temp.open("xb") as f:
                f.write(head)
                f.write(entry.state)
                f.flush()
                os.fsync(f.fileno())
            with self._lock:
                if job.cancelled or self._index is None:
                    remove(temp)
                    return
                os.replace(temp, final)
                self._index[entry.conversation] = FileEntry(
                    entry.conversation, entry.tokens, entry.seconds, final, size, now
                )
                self._evict(keep=entry.conversation)
            sync_folder(self._folder)
        except OSError as exc:
            log.warning("Prompt cache: writing %s failed, entry dropped: %s", final.name, exc)
            remove(temp)
            return
        log.debug(
            "Prompt cache: wrote %s (%d tokens, %.1f MB) in %.0f ms",
            final.name,
            len(entry.tokens),
            size / 1e6,
            (time.perf_counter() - started) * 1000,
        )
