"""One file from the Hub into the models folder: resumable, checked, verified, then moved.

``huggingface_hub`` resumes only within one process, has no cancel, and checks a download's
size but not its sha256; so the transfer is Floodgate's own, over ``httpx``:

- The bytes go to ``<models>/.downloads/<name>.part``, with ``<name>.json`` beside it saying
  what they are (repository, revision, file, size, sha256, address). A later run, after a
  dropped connection, a Pause, a crash or a restart, finds both and asks for the rest with an
  HTTP range request. A server that answers with the whole file instead is read from the
  start; one that sends more bytes than the Hub listed is refused.
- No bytes for ``stall_timeout`` seconds counts as a stall: the transfer tries again after a
  pause, a few times, then stops with a sentence, keeping what it has.
- Free disk space is checked first (the rest of the file plus a margin); a disk that fills
  anyway stops the transfer with a sentence and keeps the partial file.
- At the end the sha256 (computed once, as the bytes arrive) must be the LFS object id the
  Hub listed, and the file must start as GGUF; then it is synced to disk and moved into the
  folder atomically. A mismatch deletes the file and says so.

Where the time of a verified download goes (256 MiB from the fake Hub on loopback, 2 cores):
receiving about 90 ms, writing into the page cache 45 ms, sha256 135 ms (1.9 GB/s with the
CPU's SHA instructions), and the final ``fsync`` 250-330 ms: the disk took the whole file at
the end, after the last byte arrived. So the file is put on disk as it arrives
(:class:`Writeback`, a few MiB behind the last byte) and the final ``fsync`` has only that
little left.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import shutil
import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import BinaryIO
from urllib.parse import urlsplit

import httpx

from app.downloads.errors import DownloadError
from app.downloads.files import ModelChoice, local_name, safe_repo_id, size_text
from app.downloads.hub import USER_AGENT, RepoListing, refused, resolve_url
from app.engine.errors import ModelLoadError
from app.engine.model_file import check_model_file
from app.sentence import QT_TRANSLATE_NOOP

PARTIAL_FOLDER = ".downloads"
"""Where partial files and their records wait, inside the models folder (same file system,
so the finished file is moved, not copied)."""

DISK_MARGIN = 256 * 1024 * 1024
"""Free space left over after a download, at the least."""

STALL_TIMEOUT_S = 30.0
"""Seconds without a byte after which a transfer counts as stalled."""

RETRY_DELAYS_S: tuple[float, ...] = (2.0, 8.0, 30.0)
"""Pauses before each new attempt after a stall or a dropped connection; then it stops."""

CONNECT_TIMEOUT_S = 20.0

WRITEBACK_BYTES = 8 * 1024 * 1024
"""Bytes written between two requests to put the partial file on disk (see :class:`Writeback`):
small enough that the final ``fsync`` is short, large enough that each request is worth it."""

_HASH_BLOCK = 1024 * 1024
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_CONTENT_RANGE = re.compile(r"^bytes (\d+)-(\d+)/(\d+|\*)$")


@dataclass(frozen=True)
class RemoteFile:
    """A file to download and what the Hub listed about it (all checked when made).

    Raises:
        ValueError: from the constructor, when any part is not what the Hub could list.
    """

    endpoint: str
    repo_id: str
    revision: str
    path: str
    size: int
    sha256: str
    local: str = ""
    """The name it is kept under ("": its name in the repository)."""

    def __post_init__(self) -> None:
        if urlsplit(self.endpoint).scheme not in ("http", "https"):
            raise ValueError("endpoint")
        if not safe_repo_id(self.repo_id) or local_name(self.path) is None:
            raise ValueError("name")
        if self.local and (local_name(self.local) is None or "/" in self.local):
            raise ValueError("name")
        if not _SHA256.match(self.sha256) or self.size <= 0 or not self.revision:
            raise ValueError("listing")

    @property
    def name(self) -> str:
        """The local file name."""
        return self.local or self.path.rsplit("/", 1)[-1]

    @property
    def url(self) -> str:
        """Where the file is downloaded from, at exactly its revision."""
        return resolve_url(self.endpoint, self.repo_id, self.revision, self.path)

    @classmethod
    def from_record(cls, data: object) -> RemoteFile | None:
        """The file a partial download's record describes, or None when it is not one."""
        if not isinstance(data, dict):
            return None
        try:
            return cls(
                endpoint=str(data["endpoint"]),
                repo_id=str(data["repo_id"]),
                revision=str(data["revision"]),
                path=str(data["path"]),
                size=int(data["size"]),
                sha256=str(data["sha256"]),
                local=str(data.get("local", "")),
            )
        except (KeyError, TypeError, ValueError):
            return None


def remote_files(endpoint: str, listing: RepoListing, choice: ModelChoice) -> list[RemoteFile]:
    """The files to download for ``choice``, each under the name it is kept under."""
    return [
        RemoteFile(
            endpoint,
            listing.repo_id,
            listing.revision,
            f.path,
            f.size,
            f.sha256 or "",
            choice.local_name(f),
        )
        for f in choice.downloads
    ]


class StoppedError(Exception):
    """The transfer was paused or cancelled; what arrived is kept for a resume."""


def partial_paths(folder: Path, name: str) -> tuple[Path, Path]:
    """The partial file and its record for the file ``name`` in the models ``folder``."""
    waiting = folder / PARTIAL_FOLDER
    return waiting / f"{name}.part", waiting / f"{name}.json"


def read_record(record: Path) -> RemoteFile | None:
    """What a record says is downloading, or None when it is missing or not a record."""
    try:
        return RemoteFile.from_record(json.loads(record.read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return None


def pending(folder: Path) -> list[tuple[RemoteFile, int]]:
    """The unfinished downloads in ``folder`` and how many bytes each has."""
    found: list[tuple[RemoteFile, int]] = []
    waiting = folder / PARTIAL_FOLDER
    if not waiting.is_dir():
        return found
    for record in sorted(waiting.glob("*.json")):
        remote = read_record(record)
        if remote is None or partial_paths(folder, remote.name)[1] != record:
            continue
        part = partial_paths(folder, remote.name)[0]
        found.append((remote, part.stat().st_size if part.is_file() else 0))
    return found


def discard(folder: Path, name: str) -> None:
    """Delete a partial download and its record (a Cancel)."""
    for path in partial_paths(folder, name):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def disk_free(folder: Path) -> int:
    """Free bytes on the disk holding ``folder``."""
    return shutil.disk_usage(folder).free


def _write_record(record: Path, remote: RemoteFile) -> None:
    temporary = record.with_suffix(".tmp")
    temporary.write_text(json.dumps(asdict(remote), indent=1), encoding="utf-8")
    os.replace(temporary, record)


def _hash_file(path: Path, hasher: hashlib._Hash, stop: threading.Event) -> None:
    """Feed ``path``'s bytes to ``hasher``, stopping when ``stop`` is set."""
    with path.open("rb") as f:
        while block := f.read(_HASH_BLOCK):
            if stop.is_set():
                raise StoppedError
            hasher.update(block)


class Writeback:
    """Puts a file on disk while it is being written, on a thread of its own.

    The writer calls :meth:`wrote` after each write; every :data:`WRITEBACK_BYTES` the thread
    asks the kernel to write what is there (``fdatasync``; the GIL is released meanwhile), so
    the disk works while the next bytes arrive. Without it the disk got the whole file at the
    end, in one ``fsync`` (more than half of a 256 MiB download's time on loopback) that also
    stalled the window's thread 10-25 ms. The final ``fsync`` is still the writer's: this only
    makes it short. Use it as a context manager around the writing; it is stopped and joined
    before the file is closed.

    Args:
        fd: the open file's descriptor.
        every: bytes written between two requests.
    """

    def __init__(self, fd: int, every: int = WRITEBACK_BYTES) -> None:
        self._fd = fd
        self._every = every
        self._written = 0
        self._asked = 0
        self._closed = False
        self._failure: OSError | None = None
        self._wake = threading.Condition()
        self._thread = threading.Thread(target=self._work, name="download writeback", daemon=True)

    def __enter__(self) -> Writeback:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        with self._wake:
            self._closed = True
            self._wake.notify()
        self._thread.join()

    def wrote(self, total: int) -> None:
        """``total`` bytes of the file are written.

        Raises:
            OSError: putting earlier bytes on disk failed (a full disk shows here or at the end).
        """
        if self._failure is not None:
            raise self._failure
        if total - self._asked >= self._every:
            self._asked = total
            with self._wake:
                self._written = total
                self._wake.notify()

    def _work(self) -> None:
        sync = getattr(os, "fdatasync", os.fsync)  # macOS has no fdatasync
        done = 0
        while True:
            with self._wake:
                while not self._closed and self._written == done:
                    self._wake.wait()
                if self._closed:
                    return
                done = self._written
            try:
                sync(self._fd)
            except OSError as exc:
                self._failure = exc
                return


class _RetryError(Exception):
    """A failure worth another attempt (a stall, a drop, a busy server); says which."""

    def __init__(self, stalled: bool, reason: str) -> None:
        super().__init__(reason)
        self.stalled = stalled


# Sentences for the failures that end a transfer.


def _write_failed(exc: OSError, remote: RemoteFile, part: Path, done: int) -> DownloadError:
    """Writing the partial file failed: the disk is full, or some other reason."""
    if exc.errno not in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC), errno.EFBIG):
        return DownloadError(
            QT_TRANSLATE_NOOP("Floodgate", "{file} cannot be written: {reason}."),
            keeps_partial=True,
            file=part,
            reason=exc.strerror or exc,
        )
    return DownloadError(
        QT_TRANSLATE_NOOP(
            "Floodgate",
            "The disk is full: the download of {name} stopped at {done} of {size}. "
            "What arrived is kept; free some space and resume.",
        ),
        keeps_partial=True,
        name=remote.name,
        done=size_text(done),
        size=size_text(remote.size),
    )


def _gave_up(
    remote: RemoteFile, retry: _RetryError, stall_timeout: float, tries: int
) -> DownloadError:
    """The last of ``tries`` attempts failed as ``retry`` says."""
    if retry.stalled:
        return DownloadError(
            QT_TRANSLATE_NOOP(
                "Floodgate",
                "The download of {name} stalled: no data for {seconds} seconds, {tries} "
                "times. What arrived is kept; resume it later.",
            ),
            keeps_partial=True,
            name=remote.name,
            seconds=f"{stall_timeout:g}",
            tries=tries,
        )
    return DownloadError(
        QT_TRANSLATE_NOOP(
            "Floodgate",
            "The download of {name} failed {tries} times ({reason}). What arrived is kept; "
            "resume it later.",
        ),
        keeps_partial=True,
        name=remote.name,
        tries=tries,
        reason=str(retry),
    )


class FileTransfer:
    """Downloads one :class:`RemoteFile` into a models folder; :meth:`run` does it all.

    Args:
        remote: the file.
        folder: the models folder.
        client: the HTTP client (``trust_env`` so proxies from the environment apply).
        headers: sent with each request (the access token, when there is one).
        stop: set it to pause (or cancel): :meth:`run` raises :class:`StoppedError` soon after.
        on_progress: called with the bytes on disk so far, on the transfer's thread.
        stall_timeout: seconds without a byte that count as a stall.
        retry_delays: the pauses before each new attempt; when they run out, it stops.
        free_space: bytes free on the folder's disk (injected by tests).
    """

    def __init__(
        self,
        remote: RemoteFile,
        folder: Path,
        client: httpx.Client,
        *,
        headers: dict[str, str] | None = None,
        stop: threading.Event | None = None,
        on_progress: Callable[[int], None] | None = None,
        stall_timeout: float = STALL_TIMEOUT_S,
        retry_delays: Sequence[float] = RETRY_DELAYS_S,
        free_space: Callable[[Path], int] = disk_free,
    ) -> None:
        self.remote = remote
        self.folder = folder
        self.client = client
        self.headers = {"User-Agent": USER_AGENT, **(headers or {})}
        self.stop = stop or threading.Event()
        self.on_progress = on_progress or (lambda _done: None)
        self.stall_timeout = stall_timeout
        self.retry_delays = tuple(retry_delays)
        self.free_space = free_space
        self.final = folder / remote.name
        self.part, self.record = partial_paths(folder, remote.name)
        self.done = 0
        self._hasher = hashlib.sha256()

    # The steps, in order.

    def run(self) -> Path:
        """Download, verify and move the file into the folder; returns where it is.

        Raises:
            StoppedError: ``stop`` was set; the partial file and its record are kept.
            DownloadError: the sentence says why; ``keeps_partial`` says whether a resume
                can go on from what arrived.
        """
        self.folder.mkdir(parents=True, exist_ok=True)
        if self.final.exists():
            return self._already_here()
        self.part.parent.mkdir(exist_ok=True)
        self._resume_point()
        self._check_disk()
        self.on_progress(self.done)
        failures = 0
        while self.done < self.remote.size:
            before = self.done
            try:
                self._receive()
            except _RetryError as retry:
                if self.done > before:
                    failures = 0  # it moved: the count of attempts starts again
                if failures >= len(self.retry_delays):
                    tries = len(self.retry_delays) + 1
                    raise _gave_up(self.remote, retry, self.stall_timeout, tries) from retry
                if self.stop.wait(self.retry_delays[failures]):
                    raise StoppedError from retry
                failures += 1
        return self._finish()

    def _already_here(self) -> Path:
        """A file of this name is in the folder: it is this one (verified), or it is kept."""
        if (
            self.final.stat().st_size == self.remote.size
            and self._sha256_of(self.final) == self.remote.sha256
        ):
            self.done = self.remote.size
            self.on_progress(self.done)
            return self.final
        raise DownloadError(
            QT_TRANSLATE_NOOP(
                "Floodgate",
                "A different file named {name} is already in {folder}. Move it away to "
                "download this one.",
            ),
            name=self.remote.name,
            folder=self.folder,
        )

    def _sha256_of(self, path: Path) -> str:
        hasher = hashlib.sha256()
        _hash_file(path, hasher, self.stop)
        return hasher.hexdigest()

    def _resume_point(self) -> None:
        """Continue from the partial file when its record is for this very file, else anew."""
        known = read_record(self.record)
        same = known is not None and (known.repo_id, known.path, known.size, known.sha256) == (
            self.remote.repo_id,
            self.remote.path,
            self.remote.size,
            self.remote.sha256,
        )
        size = self.part.stat().st_size if self.part.is_file() else 0
        if not same or size > self.remote.size:
            self._start_over()
        else:
            self.done = size
        _write_record(self.record, self.remote)
        if self.done:
            # The bytes on disk are what counts (a write cut short by a full disk included).
            self._hasher = hashlib.sha256()
            _hash_file(self.part, self._hasher, self.stop)

    def _start_over(self) -> None:
        self.part.write_bytes(b"")
        self.done = 0
        self._hasher = hashlib.sha256()

    def _check_disk(self) -> None:
        needed = self.remote.size - self.done + DISK_MARGIN
        free = self.free_space(self.folder)
        if free < needed:
            raise DownloadError(
                QT_TRANSLATE_NOOP(
                    "Floodgate",
                    "There is not enough free disk space for {name}: it needs {needed} in "
                    "{folder}, and {free} are free. Free some space, or choose a smaller model.",
                ),
                keeps_partial=True,
                name=self.remote.name,
                needed=size_text(needed),
                folder=self.folder,
                free=size_text(free),
            )

    def _receive(self) -> None:
        """One request: append what the server sends to the partial file.

        Raises:
            _RetryError: a stall, a dropped connection or a busy server: worth another attempt.
        """
        headers = {**self.headers, "Accept-Encoding": "identity"}
        if self.done:
            headers["Range"] = f"bytes={self.done}-"
        timeout = httpx.Timeout(
            self.stall_timeout, connect=max(CONNECT_TIMEOUT_S, self.stall_timeout)
        )
        try:
            with self.client.stream(
                "GET", self.remote.url, headers=headers, timeout=timeout
            ) as response:
                self._take(response)
        except httpx.TimeoutException as exc:
            raise _RetryError(True, type(exc).__name__) from exc
        except httpx.TransportError as exc:  # dropped, refused, reset
            raise _RetryError(False, type(exc).__name__) from exc

    def _take(self, response: httpx.Response) -> None:
        status = response.status_code
        if status in (401, 403):
            endpoint = self.remote.endpoint
            raise refused(endpoint, self.remote.repo_id, status)
        if status == 404:
            raise DownloadError(
                QT_TRANSLATE_NOOP("Floodgate", "The Hub has no file {file} in {repo} (HTTP 404)."),
                file=self.remote.path,
                repo=self.remote.repo_id,
            )
        if status == 416:  # the range is past the file's end: what is here is not its start
            self._start_over()
            raise _RetryError(False, "HTTP 416")
        if status == 429 or status >= 500:
            raise _RetryError(False, f"HTTP {status}")
        if status == 206:
            match = _CONTENT_RANGE.match(response.headers.get("Content-Range", ""))
            if match is None or int(match[1]) != self.done:
                self._start_over()
                raise _RetryError(False, "Content-Range")
            if match[3] != "*" and int(match[3]) != self.remote.size:
                raise self._wrong_size(int(match[3]))
        elif status == 200:
            if self.done:  # the server ignored the range and sends the whole file
                self._start_over()
            length = response.headers.get("Content-Length")
            if length is not None and length.isdigit() and int(length) != self.remote.size:
                raise self._wrong_size(int(length))
        else:
            raise DownloadError(
                QT_TRANSLATE_NOOP("Floodgate", "The Hub answered HTTP {status} for {file}."),
                status=status,
                file=self.remote.path,
            )
        self._append(response)

    def _append(self, response: httpx.Response) -> None:
        size = self.remote.size
        try:
            with self.part.open("r+b", buffering=0) as f, Writeback(f.fileno()) as writeback:
                f.seek(self.done)
                f.truncate()
                # httpcore reads 64 KiB at a time; asking iter_raw for larger chunks only joins
                # them (one more copy): measured slower. The per-chunk work below is cheap next
                # to the copy and the hash (progress reports are rate-limited by the queue).
                for chunk in response.iter_raw():
                    if self.stop.is_set():
                        raise StoppedError
                    if self.done + len(chunk) > size:
                        self._discard()
                        raise self._wrong_size(self.done + len(chunk))
                    written = f.write(chunk) or 0
                    if written == len(chunk):
                        self._hasher.update(chunk)
                        self.done += written
                    else:  # a short write (a disk filling up): what was written counts
                        self._write_rest(f, memoryview(chunk), written)
                    writeback.wrote(self.done)
                    self.on_progress(self.done)
                # On disk before it is verified and moved: a crash after the move must not
                # leave a "verified" model of zeros. The writeback left only its last few MiB.
                os.fsync(f.fileno())
        except OSError as exc:
            raise _write_failed(exc, self.remote, self.part, self.done) from exc
        if self.done < size:
            raise _RetryError(False, "the connection ended early")

    def _write_rest(self, f: BinaryIO, chunk: memoryview, written: int) -> None:
        self._hasher.update(chunk[:written])
        self.done += written
        view = chunk[written:]
        while view:
            written = f.write(view) or 0
            self._hasher.update(view[:written])
            self.done += written
            view = view[written:]

    def _finish(self) -> Path:
        if self._hasher.hexdigest() != self.remote.sha256:
            self._discard()
            raise DownloadError(
                QT_TRANSLATE_NOOP(
                    "Floodgate",
                    "{name} arrived damaged: its sha256 is not the one the Hub lists, so it "
                    "was deleted. Download it again.",
                ),
                name=self.remote.name,
            )
        try:
            check_model_file(self.part)
        except ModelLoadError as exc:
            self._discard()
            raise DownloadError(
                QT_TRANSLATE_NOOP(
                    "Floodgate",
                    "{name} is not a GGUF model file, though the Hub lists it as one; it was "
                    "deleted.",
                ),
                name=self.remote.name,
            ) from exc
        os.replace(self.part, self.final)
        self.record.unlink(missing_ok=True)
        return self.final

    # Sentences.

    def _discard(self) -> None:
        discard(self.folder, self.remote.name)

    def _wrong_size(self, got: int) -> DownloadError:
        self._discard()
        return DownloadError(
            QT_TRANSLATE_NOOP(
                "Floodgate",
                "The server sent {got} bytes for {name}, but the Hub lists {size}; the download "
                "was deleted.",
            ),
            got=got,
            name=self.remote.name,
            size=self.remote.size,
        )
