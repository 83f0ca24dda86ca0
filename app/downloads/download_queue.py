"""Downloads waiting their turn: one at a time on a thread of their own, paused, resumed, cancelled.

The window (through the flow) uses it. It never blocks its caller: every transfer, every file
written or deleted runs on the queue's thread, and what changes is reported through
``on_change`` as an immutable :class:`DownloadStatus` (on that thread; the flow moves it to the
window's). Progress is reported at most every ``report_interval`` seconds.

Each download (a model: one file, or every part of a split one) has a record of its own in the
partial files' folder, ``<first file>.download.json``: its files in order and whether the user
paused it (:mod:`app.downloads.download_record`). The next run restores it from there as one
download (:meth:`DownloadQueue.restore`): a split model interrupted in its second part comes
back as the model, its finished parts counted, rather than as the one part that has a partial
file.
"""

from __future__ import annotations

import contextlib
import enum
import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

import httpx

from app.downloads.download_record import (
    delete_download_record,
    waiting_downloads,
    write_download_record,
)
from app.downloads.errors import DownloadError
from app.downloads.transfer import (
    RETRY_DELAYS_S,
    STALL_TIMEOUT_S,
    FileTransfer,
    RemoteFile,
    StoppedError,
    discard,
    disk_free,
)
from app.sentence import QT_TRANSLATE_NOOP, Sentence

REPORT_INTERVAL_S = 0.1
"""Seconds between two progress reports of one download (a frame or so of the window)."""

SPEED_WINDOW_S = 5.0
"""The speed shown is the average over this many last seconds."""


class State(enum.Enum):
    """Where a download is."""

    QUEUED = "queued"
    DOWNLOADING = "downloading"
    PAUSED = "paused"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


@dataclass(frozen=True)
class DownloadStatus:
    """A download as it is now (a copy: safe to hand to another thread).

    Attributes:
        id: the queue's number for it.
        label: the model's name (its first file's).
        state: where it is.
        done: bytes on disk, all its files together.
        total: bytes of all its files.
        speed: bytes a second over the last seconds (0 when not downloading).
        seconds_left: at that speed (None when unknown).
        sentence: why it failed (or was paused by a stall), for the user.
        path: the file to open (the first part of a split model) once done.
    """

    id: int
    label: str
    state: State
    done: int
    total: int
    speed: float = 0.0
    seconds_left: float | None = None
    sentence: Sentence | None = None
    path: Path | None = None


@dataclass
class _Download:
    status: DownloadStatus
    files: tuple[RemoteFile, ...]
    headers: dict[str, str]
    stop: threading.Event = field(default_factory=threading.Event)
    samples: deque[tuple[float, int]] = field(default_factory=deque)
    reported_at: float = 0.0
    added: float = field(default_factory=time.time)
    """When it was first queued (kept in its record: restored downloads keep their order)."""


class RateMeter:
    """Speed over the last seconds, from (time, bytes) samples."""

    def __init__(self, samples: deque[tuple[float, int]], window: float = SPEED_WINDOW_S) -> None:
        self.samples = samples
        self.window = window

    def add(self, now: float, done: int) -> float:
        """Record ``done`` bytes at ``now``; returns bytes a second over the window."""
        self.samples.append((now, done))
        while len(self.samples) > 2 and now - self.samples[0][0] > self.window:
            self.samples.popleft()
        first_time, first_done = self.samples[0]
        elapsed = now - first_time
        return (done - first_done) / elapsed if elapsed > 0 else 0.0


class _Chores:
    """What callers asked the queue's thread to do on disk: partial files to delete, records.

    Callers add to it under the queue's lock; the queue's thread takes the chores one by one,
    deletions first, and does them outside the lock.

    Args:
        folder: the models folder.
        lock: the queue's lock (it guards the lists and the downloads' statuses).
    """

    def __init__(self, folder: Path, lock: threading.Lock) -> None:
        self.folder = folder
        self._lock = lock
        self.to_discard: list[RemoteFile] = []
        self.to_note: list[_Download] = []
        """Downloads whose record the queue's thread is to write (or delete) as they are now."""

    def take(self) -> RemoteFile | _Download | None:
        """The next file to delete, or download whose record to write (call with the lock)."""
        if self.to_discard:
            return self.to_discard.pop(0)
        if self.to_note:
            return self.to_note.pop(0)
        return None

    def do(self, chore: RemoteFile | _Download) -> None:
        """Delete a file's partial download, or write a download's record."""
        if isinstance(chore, RemoteFile):
            discard(self.folder, chore.name)
        else:
            self.note(chore)

    def do_all(self) -> None:
        """Delete and write what callers asked for meanwhile (on the queue's thread)."""
        while True:
            with self._lock:
                chore = self.take()
            if chore is None:
                return
            self.do(chore)

    def note(self, download: _Download) -> None:
        """Write ``download``'s record as it is now, or delete it once it has ended."""
        with self._lock:
            state = download.status.state
        if state in (State.DONE, State.CANCELLED):
            delete_download_record(self.folder, download.files)
            return
        # A record that cannot be written costs only the restore of this download.
        with contextlib.suppress(OSError):
            write_download_record(
                self.folder, download.files, state is State.PAUSED, download.added
            )


class DownloadQueue:
    """Downloads into ``folder``, one at a time, in the order they were added.

    Args:
        folder: the models folder.
        on_change: called with a download's new status, on the queue's thread.
        stall_timeout, retry_delays, free_space: passed to each :class:`FileTransfer`.
        report_interval: seconds between two progress reports of one download.
    """

    def __init__(
        self,
        folder: Path,
        on_change: Callable[[DownloadStatus], None],
        *,
        stall_timeout: float = STALL_TIMEOUT_S,
        retry_delays: Sequence[float] = RETRY_DELAYS_S,
        free_space: Callable[[Path], int] = disk_free,
        report_interval: float = REPORT_INTERVAL_S,
    ) -> None:
        self.folder = folder
        self.on_change = on_change
        self.stall_timeout = stall_timeout
        self.retry_delays = tuple(retry_delays)
        self.free_space = free_space
        self.report_interval = report_interval
        self._lock = threading.Lock()
        self._downloads: dict[int, _Download] = {}
        self._chores = _Chores(folder, self._lock)
        self._ids = itertools.count(1)
        self._thread: threading.Thread | None = None
        self._closed = False
        self._client: httpx.Client | None = None
        """Made on the queue's thread when first needed, kept for the next downloads (its
        connections and TLS setup are reused), closed with the queue."""

    # What the caller does (never blocks on the network or the disk).

    def add(
        self, files: Sequence[RemoteFile], headers: dict[str, str] | None = None
    ) -> DownloadStatus:
        """Queue a model (its files in order); returns its first status."""
        if not files:
            raise ValueError("no files")
        with self._lock:
            for download in self._downloads.values():
                same = download.files == tuple(files)
                active = (State.QUEUED, State.DOWNLOADING, State.PAUSED)
                if same and download.status.state in active:
                    return download.status  # already on its way: not twice
            status = DownloadStatus(
                id=next(self._ids),
                label=files[0].name,
                state=State.QUEUED,
                done=0,
                total=sum(f.size for f in files),
            )
            download = _Download(status, tuple(files), dict(headers or {}))
            self._downloads[status.id] = download
            self._chores.to_note.append(download)  # its record, for the next run
        self.on_change(status)
        self._wake()
        return status

    def restore(self, headers: dict[str, str] | None = None) -> list[DownloadStatus]:
        """Bring back the downloads a previous run left unfinished; reads the folder.

        Call it off the UI thread. Those the user had paused come back paused; those that were
        running or waiting when Floodgate ended are queued again, in their order, and continue
        where they were (what the user last asked for). A split model is one download.
        """
        restored = []
        for waiting in waiting_downloads(self.folder):
            with self._lock:
                if any(set(waiting.files) & set(d.files) for d in self._downloads.values()):
                    continue
                status = DownloadStatus(
                    id=next(self._ids),
                    label=waiting.files[0].name,
                    state=State.PAUSED if waiting.held else State.QUEUED,
                    done=waiting.done,
                    total=sum(f.size for f in waiting.files),
                )
                self._downloads[status.id] = _Download(
                    status, waiting.files, dict(headers or {}), added=waiting.added
                )
            restored.append(status)
            self.on_change(status)
        self._wake()
        return restored

    def pause(self, download_id: int) -> None:
        """Pause a queued or running download; what arrived is kept."""
        self._change(download_id, State.PAUSED, (State.QUEUED, State.DOWNLOADING))

    def resume(self, download_id: int) -> None:
        """Put a paused (or failed) download back in the queue; it continues where it was."""
        self._change(download_id, State.QUEUED, (State.PAUSED, State.FAILED))

    def cancel(self, download_id: int) -> None:
        """Stop a download and delete what arrived."""
        with self._lock:
            download = self._downloads.get(download_id)
            if download is None or download.status.state in (State.DONE, State.CANCELLED):
                return
            running = download.status.state is State.DOWNLOADING
            download.stop.set()
            download.status = replace(download.status, state=State.CANCELLED, speed=0.0)
            if not running:
                self._chores.to_discard.extend(download.files)
                self._chores.to_note.append(download)  # its record goes
            status = download.status
        self.on_change(status)
        self._wake()

    def statuses(self) -> list[DownloadStatus]:
        """Every download, in the order added."""
        with self._lock:
            return [d.status for d in self._downloads.values()]

    def close(self, timeout: float = 2.0) -> None:
        """Stop the running download (kept for a resume) and wait up to ``timeout`` seconds."""
        with self._lock:
            self._closed = True
            for download in self._downloads.values():
                download.stop.set()
            thread = self._thread
        if thread is not None:
            thread.join(timeout)
        if thread is None or not thread.is_alive():
            with self._lock:
                client, self._client = self._client, None
            if client is not None:
                client.close()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the queue's thread has nothing left to do; whether it finished."""
        with self._lock:
            thread = self._thread
        if thread is not None:
            thread.join(timeout)
            return not thread.is_alive()
        return True

    # The queue's thread.

    def _change(self, download_id: int, state: State, allowed: tuple[State, ...]) -> None:
        with self._lock:
            download = self._downloads.get(download_id)
            if download is None or download.status.state not in allowed:
                return
            download.stop.set()
            if state is State.QUEUED:
                download.stop = threading.Event()
                download.samples.clear()
            download.status = replace(
                download.status, state=state, speed=0.0, seconds_left=None, sentence=None
            )
            self._chores.to_note.append(download)  # paused by the user, or not any more
            status = download.status
        self.on_change(status)
        self._wake()

    def _wake(self) -> None:
        with self._lock:
            if self._closed or (self._thread is not None and self._thread.is_alive()):
                return
            self._thread = threading.Thread(target=self._work, name="downloads", daemon=True)
            self._thread.start()

    def _next(self) -> tuple[_Download, threading.Event] | _Download | RemoteFile | None:
        with self._lock:
            # Deletions and records first, even when closing: a Pause or a Cancel just before
            # Floodgate ends is what the next run finds.
            if (chore := self._chores.take()) is not None:
                return chore
            if self._closed:
                return None
            for download in self._downloads.values():
                if download.status.state is State.QUEUED:
                    download.status = replace(download.status, state=State.DOWNLOADING)
                    # This run's stop, taken with the state: a Pause (and a Resume) from now
                    # on sets it, even before the transfer starts.
                    return download, download.stop
            self._thread = None  # nothing left: the next add starts a new thread
            return None

    def _work(self) -> None:
        while (item := self._next()) is not None:
            if not isinstance(item, tuple):
                self._chores.do(item)
                continue
            download, stop = item
            self.on_change(download.status)
            if self._client is None:
                self._client = httpx.Client(trust_env=True, follow_redirects=True)
            self._run(download, stop, self._client)
        with self._lock:
            client, closed = self._client, self._closed
        if closed and client is not None:
            client.close()

    def _run(self, download: _Download, stop: threading.Event, client: httpx.Client) -> None:
        before = 0
        path: Path | None = None
        try:
            for index, remote in enumerate(download.files):
                transfer = FileTransfer(
                    remote,
                    self.folder,
                    client,
                    headers=download.headers,
                    stop=stop,
                    on_progress=partial(self._progress, download, before),
                    stall_timeout=self.stall_timeout,
                    retry_delays=self.retry_delays,
                    free_space=self.free_space,
                )
                finished = transfer.run()
                if index == 0:
                    path = finished  # llama.cpp opens a split model by its first part
                before += remote.size
        except StoppedError:
            self._stopped(download)
            return
        except DownloadError as exc:
            self._end(download, State.FAILED, exc.sentence, None, keep=exc.keeps_partial)
            return
        except Exception as exc:  # whatever else: said, not raised on a thread nobody reads
            sentence = Sentence(
                QT_TRANSLATE_NOOP("Floodgate", "The download of {name} failed: {reason}"),
                {"name": download.status.label, "reason": exc},
            )
            self._end(download, State.FAILED, sentence, None, keep=True)
            return
        self._end(download, State.DONE, None, path, keep=True)

    def _progress(self, download: _Download, before: int, file_done: int) -> None:
        chores = self._chores
        if chores.to_discard or chores.to_note:  # read without the lock: a hint
            # A download added, paused or cancelled during a long one: its record is written
            # now, not when this one ends (a crash meanwhile would lose it).
            chores.do_all()
        done = before + file_done
        now = time.monotonic()
        # Called for every chunk read (thousands a second): between reports, nothing else.
        if now - download.reported_at < self.report_interval and done < download.status.total:
            return
        download.reported_at = now
        speed = RateMeter(download.samples).add(now, done)
        with self._lock:
            status = download.status
            if status.state is not State.DOWNLOADING:
                return
            left = (status.total - done) / speed if speed > 0 else None
            download.status = replace(status, done=done, speed=speed, seconds_left=left)
            status = download.status
        self.on_change(status)

    def _stopped(self, download: _Download) -> None:
        with self._lock:
            state = download.status.state
            if state is State.DOWNLOADING:  # the queue closed under it
                download.status = replace(download.status, state=State.PAUSED, speed=0.0)
            status = download.status
        if state is State.CANCELLED:
            for remote in download.files:
                discard(self.folder, remote.name)
            self._chores.note(download)
        self.on_change(status)

    def _end(
        self,
        download: _Download,
        state: State,
        sentence: Sentence | None,
        path: Path | None,
        *,
        keep: bool,
    ) -> None:
        with self._lock:
            if download.status.state is State.CANCELLED:
                state, sentence = State.CANCELLED, None
                keep = False
            done = download.status.total if state is State.DONE else download.status.done
            download.status = replace(
                download.status,
                state=state,
                done=done,
                speed=0.0,
                seconds_left=None,
                sentence=sentence,
                path=path,
            )
            status = download.status
        if not keep:
            for remote in download.files:
                discard(self.folder, remote.name)
        if state is State.DONE or not keep:
            delete_download_record(self.folder, download.files)
        self.on_change(status)
