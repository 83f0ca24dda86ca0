"""Reading attached files off the UI thread, counting their tokens, and cancelling a read.

The window hands :class:`AttachmentReader` the paths the user chose (or dropped, or pasted);
each file is read on a thread of the reader's own, its tokens are counted with the callable it
was given (the lead routes that to the model's worker), and the result comes back to the UI
thread as a signal per file. Nothing here blocks the event loop: the longest the UI thread
spends is emitting a signal.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import threading
from collections.abc import Callable, Collection, Coroutine, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final

from PySide6.QtCore import QObject, Signal

from app.documents import (
    MAX_ATTACHMENT_BYTES,
    Attachment,
    Document,
    DocumentError,
    ReadingCancelledError,
    cut_attachment,
    fenced_for_prompt,
    read_document,
    seconds_to_read,
)
from app.engine.pictures import PictureError
from app.engine.pictures import verify as check_picture
from app.engine.sounds import SoundError
from app.flow.sound_files import checked_size, is_sound_file, read_sound
from app.flow.words import say, say_sentence
from app.sentence import QT_TRANSLATE_NOOP, Sentence
from app.store.media_files import keep_checked_bytes, keep_file

TokenCounter = Callable[[str], int | None]
"""The open model's token count of a text; None when no model is open. Called off the UI
thread, possibly from several threads one after the other (never at once)."""

COUNT_CHUNK_CHARS: Final = 200_000
"""A longer text is counted a piece at a time (split at line ends), so Cancel is heard between
pieces and the model's thread is not held by one huge count."""

READ_FAILED: Final = QT_TRANSLATE_NOOP(
    "Floodgate", "{name} could not be read because of an unexpected error: {reason}"
)
COUNT_FAILED: Final = QT_TRANSLATE_NOOP(
    "Floodgate", "The tokens of {name} could not be counted: {reason}"
)
NO_MODEL_TO_CUT: Final = QT_TRANSLATE_NOOP(
    "Floodgate", "Open a model first: the part of {name} that fits is measured in its tokens."
)


@dataclass(frozen=True)
class ReadingStarted:
    """A file's reading began (show a "reading…" chip).

    Attributes:
        name: the file's name in the reader's signals.
        path: where it is read from (empty: a pasted picture).
    """

    name: str
    path: str


@dataclass(frozen=True)
class AttachmentReady:
    """A file read and counted.

    Attributes:
        attachment: what the prompt will carry.
        seconds: how long the model will take to read it at the measured rate (None: no
            rate measured yet, or no tokens counted).
    """

    attachment: Attachment
    seconds: float | None


@dataclass(frozen=True)
class ReadingFailed:
    """A file that cannot be attached.

    Attributes:
        name: the file's name in the reader's signals.
        sentence: why, translated.
    """

    name: str
    sentence: str


@dataclass
class _Reading:
    """One file being read (or cut): what Cancel sets, and the task doing it."""

    cancelled: threading.Event = field(default_factory=threading.Event)
    task: asyncio.Task[None] | None = None


class AttachmentReader(QObject):
    """Reads files for the next prompt, one signal per file, never on the UI thread.

    Each file gets a *name*, its identity in the signals: the file's own name, or the name
    with " (2)", " (3)"... when that name is already taken (two ``notes.txt`` from different
    folders), so a chip, a Cancel and a result always refer to one file.

    Args:
        count_tokens: the open model's token count (see :data:`TokenCounter`).
        prefill_rate: the prompt-processing rate measured on this machine, tokens/s (None:
            not measured yet); read when a file is ready, to say how long it will take.
        max_bytes: the largest file accepted.
        threads: how many files are read at once.

    Signals:
        started(ReadingStarted): a file's reading began.
        progress(str name, int done, int total): pages of a PDF, or bytes of another file.
        ready(AttachmentReady): read and counted.
        failed(ReadingFailed): it cannot be attached.
        cancelled(str name): the read stopped because :meth:`cancel` was called.
    """

    started = Signal(ReadingStarted)
    progress = Signal(str, int, int)
    ready = Signal(AttachmentReady)
    failed = Signal(ReadingFailed)
    cancelled = Signal(str)

    def __init__(
        self,
        count_tokens: TokenCounter,
        *,
        prefill_rate: Callable[[], float | None] = lambda: None,
        max_bytes: int = MAX_ATTACHMENT_BYTES,
        threads: int = 2,
        pictures: Path | None = None,
        sounds: Path | None = None,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.pictures = pictures
        """Where attached pictures are kept (None: the data folder's ``pictures/``)."""
        self.sounds = sounds
        """Where attached sounds are kept (None: the data folder's ``sounds/``)."""
        self.count_tokens = count_tokens
        self.prefill_rate = prefill_rate
        self.max_bytes = max_bytes
        self._pool = concurrent.futures.ThreadPoolExecutor(
            threads, thread_name_prefix="floodgate-attachments"
        )
        self._readings: dict[str, _Reading] = {}
        self._closed = False
        self._counting = threading.Lock()

    @property
    def reading(self) -> list[str]:
        """The names of the files being read or cut right now."""
        return list(self._readings)

    def read(self, paths: Iterable[Path], taken: Collection[str] = ()) -> list[str]:
        """Start reading ``paths``; returns the name each one will be known by.

        Args:
            paths: the files, in the order their chips should appear.
            taken: names already in use (the attachments the prompt has already).
        """
        names: list[str] = []
        if self._closed:
            return names
        for path in paths:
            name = self._free_name(path.name or str(path), {*taken, *self._readings, *names})
            names.append(name)
            self._start(name, functools.partial(self._read_one, path, name))
            self.started.emit(ReadingStarted(name, str(path)))
        return names

    def read_picture_bytes(self, data: bytes, name: str, taken: Collection[str] = ()) -> str:
        """Keep a pasted picture's bytes (checked off the UI thread); returns its chip's name."""
        name = self._free_name(name, {*taken, *self._readings})
        self._start(name, functools.partial(self._keep_pasted, data, name))
        self.started.emit(ReadingStarted(name, ""))
        return name

    def cut(self, attachment: Attachment, tokens: int) -> None:
        """Keep only the start of ``attachment`` that fits in ``tokens``; emits ready or failed.

        The ``tokens`` are the room for this attachment in the prompt (what the others and the
        question leave). The result comes as :attr:`ready` under the same name, marked cut.
        """
        name = attachment.name
        self.cancel(name)
        self._start(name, functools.partial(self._cut_one, attachment, tokens))

    def cancel(self, name: str) -> None:
        """Stop reading (or cutting) ``name``; :attr:`cancelled` follows once it stopped."""
        reading = self._readings.get(name)
        if reading is not None:
            reading.cancelled.set()

    def seconds_to_read(self, tokens: int | None) -> float | None:
        """How long the model takes to read ``tokens``, at the rate measured (None: unknown)."""
        if tokens is None:
            return None
        return seconds_to_read(tokens, self.prefill_rate())

    async def close(self) -> None:
        """Cancel every reading, wait for them to end, and let the reader's threads go."""
        self._closed = True
        tasks = []
        for reading in self._readings.values():
            reading.cancelled.set()
            if reading.task is not None:
                reading.task.cancel()
                tasks.append(reading.task)
        await asyncio.gather(*tasks, return_exceptions=True)
        # Not waiting for the threads: one deep in a huge PDF page cannot be interrupted and
        # must not hold closing the window; it sees the cancel at the next page and ends.
        self._pool.shutdown(wait=False, cancel_futures=True)

    @staticmethod
    def _free_name(name: str, taken: Collection[str]) -> str:
        if name not in taken:
            return name
        number = 2
        while f"{name} ({number})" in taken:
            number += 1
        return f"{name} ({number})"

    def _start(self, name: str, work: Callable[[_Reading], Coroutine[Any, Any, None]]) -> None:
        if self._closed:
            return
        if name in self._readings:  # a name read again: the new reading wins
            self._readings[name].cancelled.set()
        reading = _Reading()
        self._readings[name] = reading

        async def run() -> None:
            try:
                await work(reading)
            finally:
                if self._readings.get(name) is reading:
                    del self._readings[name]

        reading.task = asyncio.ensure_future(run())

    async def _read_one(self, path: Path, name: str, reading: _Reading) -> None:
        loop = asyncio.get_running_loop()
        if await loop.run_in_executor(self._pool, is_picture_file, path):
            await self._keep(read_picture, self.pictures, path, name, reading)
            return
        if await loop.run_in_executor(self._pool, is_sound_file, path):
            await self._keep(read_sound, self.sounds, path, name, reading)
            return

        def report(done: int, total: int) -> None:  # on the reader's thread
            if not reading.cancelled.is_set():
                # The loop may be closed by the time a slow page ends; nobody is left to tell.
                try:
                    loop.call_soon_threadsafe(self._emit_progress, reading, name, done, total)
                except RuntimeError:
                    reading.cancelled.set()

        try:
            document = await loop.run_in_executor(
                self._pool,
                functools.partial(
                    read_document,
                    path,
                    max_bytes=self.max_bytes,
                    cancelled=reading.cancelled.is_set,
                    progress=report,
                ),
            )
        except ReadingCancelledError:
            self._emit_cancelled(reading, name)
            return
        except DocumentError as error:
            self._emit_failed(reading, name, say_sentence(_named(error.sentence, name)))
            return
        except Exception as error:  # a bug, or memory: the user hears of it, the app goes on
            self._emit_failed(reading, name, say(READ_FAILED, name=name, reason=error))
            return
        document = replace(document, name=name)
        try:
            tokens = await loop.run_in_executor(self._pool, self._count, document, reading)
        except ReadingCancelledError:
            self._emit_cancelled(reading, name)
        except Exception as error:  # the token counter is the caller's code: any failure
            self._emit_failed(reading, name, say(COUNT_FAILED, name=name, reason=error))
        else:
            self._emit_ready(reading, Attachment.from_document(document, tokens))

    async def _keep(
        self,
        read: Callable[[Path, str, Path | None], Attachment],
        folder: Path | None,
        path: Path,
        name: str,
        reading: _Reading,
    ) -> None:
        """A picture or a sound: checked, then kept in the data folder by its digest."""
        loop = asyncio.get_running_loop()
        try:
            attachment = await loop.run_in_executor(
                self._pool, functools.partial(read, path, name, folder)
            )
        except (PictureError, SoundError) as error:
            self._emit_failed(reading, name, say_sentence(_named(error.sentence, name)))
        except OSError as error:  # a full disk: said, nothing half-kept
            self._emit_failed(reading, name, say(PICTURE_NOT_KEPT, name=name, reason=error))
        except Exception as error:
            self._emit_failed(reading, name, say(READ_FAILED, name=name, reason=error))
        else:
            self._emit_ready(reading, attachment)

    async def _keep_pasted(self, data: bytes, name: str, reading: _Reading) -> None:
        loop = asyncio.get_running_loop()
        try:
            attachment = await loop.run_in_executor(
                self._pool, functools.partial(picture_from_bytes, data, name, self.pictures)
            )
        except PictureError as error:
            self._emit_failed(reading, name, say_sentence(_named(error.sentence, name)))
        except OSError as error:
            self._emit_failed(reading, name, say(PICTURE_NOT_KEPT, name=name, reason=error))
        else:
            self._emit_ready(reading, attachment)

    async def _cut_one(self, attachment: Attachment, tokens: int, reading: _Reading) -> None:
        loop = asyncio.get_running_loop()
        name = attachment.name

        def count(text: str) -> int:  # on the reader's thread
            if reading.cancelled.is_set():
                raise ReadingCancelledError(name)
            counted = self._count_tokens(text)
            if counted is None:
                raise DocumentError(NO_MODEL_TO_CUT, name=name)
            return counted

        try:
            cut = await loop.run_in_executor(self._pool, cut_attachment, attachment, tokens, count)
        except ReadingCancelledError:
            self._emit_cancelled(reading, name)
        except DocumentError as error:
            self._emit_failed(reading, name, say_sentence(error.sentence))
        except Exception as error:
            self._emit_failed(reading, name, say(COUNT_FAILED, name=name, reason=error))
        else:
            self._emit_ready(reading, cut)

    def _count_tokens(self, text: str) -> int | None:
        # Two files are read at once, but the counter (a tokenizer) gets one text at a time.
        with self._counting:
            return self.count_tokens(text)

    def _count(self, document: Document, reading: _Reading) -> int | None:
        """The attachment's cost in the prompt, counted a piece at a time (reader's thread)."""
        text = fenced_for_prompt(document)
        total = 0
        for piece in _pieces(text, COUNT_CHUNK_CHARS):
            if reading.cancelled.is_set():
                raise ReadingCancelledError(document.name)
            counted = self._count_tokens(piece)
            if counted is None:
                return None
            total += counted
        return total

    # The emitters run on the UI thread; a reading cancelled or replaced meanwhile says only
    # that it was cancelled, so a chip never comes back after its Cancel.
    def _emit_progress(self, reading: _Reading, name: str, done: int, total: int) -> None:
        if not reading.cancelled.is_set() and self._readings.get(name) is reading:
            self.progress.emit(name, done, total)

    def _emit_ready(self, reading: _Reading, attachment: Attachment) -> None:
        if reading.cancelled.is_set():
            self._emit_cancelled(reading, attachment.name)
        elif not self._closed:
            self.ready.emit(AttachmentReady(attachment, self.seconds_to_read(attachment.tokens)))

    def _emit_failed(self, reading: _Reading, name: str, sentence: str) -> None:
        if reading.cancelled.is_set():
            self._emit_cancelled(reading, name)
        elif not self._closed:
            self.failed.emit(ReadingFailed(name, sentence))

    def _emit_cancelled(self, reading: _Reading, name: str) -> None:
        # A newer reading under the same name has its own signals coming.
        if not self._closed and self._readings.get(name) is reading:
            self.cancelled.emit(name)


_PICTURE_MAGIC: Final = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"GIF87a", b"GIF89a")


def is_picture_file(path: Path) -> bool:
    """Whether ``path`` holds a PNG, JPEG, GIF, BMP or WebP picture, by its first bytes.

    By content, not by name (as documents are told apart): a ``notes.png`` that is text is
    read as text. Anything that cannot be opened is not a picture: the document reader then
    says what it is (a folder, a missing file).
    """
    try:
        if not path.is_file():
            return False
        size = path.stat().st_size
        with path.open("rb") as handle:
            head = handle.read(12)
    except OSError:
        return False
    if head.startswith(_PICTURE_MAGIC) or (head[:4] == b"RIFF" and head[8:12] == b"WEBP"):
        return True
    # A BMP starts with "BM" and its own size: text that happens to start with "BM" does not.
    return head[:2] == b"BM" and len(head) >= 6 and int.from_bytes(head[2:6], "little") == size


PICTURE_NOT_KEPT: Final = QT_TRANSLATE_NOOP(
    "Floodgate", "{name} could not be kept with the conversation: {reason}"
)

MAX_PICTURE_BYTES: Final = 64 * 1024 * 1024
"""The largest picture file attached (its pixels are capped too, from its header)."""


def read_picture(path: Path, name: str, folder: Path | None = None) -> Attachment:
    """Check a picture from its header and keep a copy by its digest (a reader's thread).

    Raises:
        PictureError: not a picture Floodgate reads, too large, or unreadable.
        OSError: the copy could not be written.
    """
    too_large = QT_TRANSLATE_NOOP(
        "Floodgate", "{name} is {size}, more than the {limit} a picture may be."
    )
    size = checked_size(path, name, MAX_PICTURE_BYTES, too_large, PictureError)
    check_picture(path)
    digest, _kept = keep_file(path, folder)
    return Attachment(name=name, kind="picture", size=size, text="", tokens=None, digest=digest)


def picture_from_bytes(data: bytes, name: str, folder: Path | None = None) -> Attachment:
    """Keep a pasted picture's bytes by their digest, once checked (a reader's thread).

    Raises:
        PictureError: not a picture Floodgate reads, or too large (nothing is kept).
        OSError: it could not be written.
    """
    digest, _path = keep_checked_bytes(data, check_picture, folder)
    return Attachment(
        name=name, kind="picture", size=len(data), text="", tokens=None, digest=digest
    )


def _named(sentence: Sentence, name: str) -> Sentence:
    """The sentence about a file, calling it by the name its chip shows."""
    if "name" not in sentence.fields:
        return sentence
    return Sentence(sentence.template, {**sentence.fields, "name": name})


def _pieces(text: str, size: int) -> Iterable[str]:
    """``text`` in pieces of about ``size`` characters, each ending at a line end if it can."""
    start = 0
    while start < len(text):
        end = start + size
        if end < len(text):
            line_end = text.rfind("\n", start, end)
            if line_end > start:
                end = line_end + 1
        yield text[start:end]
        start = end
