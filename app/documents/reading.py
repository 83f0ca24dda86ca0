"""Reading a file safely: regular files only, the size checked first, binary known by its bytes."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Final

from app.documents.document import (
    BINARY,
    DAMAGED_PDF,
    EMPTY,
    FOLDER,
    IMAGE,
    NO_PERMISSION,
    NOT_A_FILE,
    NOT_FOUND,
    TOO_LARGE,
    UNREADABLE,
    Document,
    DocumentError,
    ReadingCancelledError,
    kind_of,
)
from app.documents.encodings import clean, decode
from app.documents.html_text import visible_text
from app.documents.pdf import read_pdf
from app.sentence import size_text

MAX_ATTACHMENT_BYTES: Final = 64 * 2**20
"""The largest file an attachment may be. A text this size is some 16 million tokens, far past
any context; PDFs are large for their images, and 64 MB holds long illustrated reports."""

READ_CHUNK_BYTES: Final = 2**20
"""A file is read this much at a time, checking for Cancel between reads."""


# Magic numbers: content that is not text whatever the file is called.
_IMAGE_MAGIC: Final = (
    b"\x89PNG\r\n\x1a\n",
    b"\xff\xd8\xff",  # JPEG
    b"GIF87a",
    b"GIF89a",
    b"II*\x00",  # TIFF, little-endian
    b"MM\x00*",  # TIFF, big-endian
    b"8BPS",  # Photoshop
    b"\x00\x00\x01\x00",  # ICO
    b"\xff\x0a",  # JPEG XL codestream
    b"\x00\x00\x00\x0cJXL ",
)
_IMAGE_BRANDS: Final = (b"heic", b"heix", b"hevc", b"mif1", b"msf1", b"avif", b"avis")
_BINARY_MAGIC: Final = (
    b"PK\x03\x04",  # ZIP: also .docx, .xlsx, .odt, .epub
    b"\x1f\x8b",  # gzip
    b"BZh",
    b"\xfd7zXZ\x00",
    b"7z\xbc\xaf\x27\x1c",
    b"Rar!\x1a\x07",
    b"\x28\xb5\x2f\xfd",  # zstd
    b"\x7fELF",
    b"MZ",  # Windows executables
    b"\xca\xfe\xba\xbe",  # Java class, Mach-O fat
    b"\xcf\xfa\xed\xfe",  # Mach-O
    b"\x00asm",
    b"SQLite format 3\x00",
    b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1",  # old Office documents
    b"ID3",  # MP3
    b"OggS",
    b"fLaC",
    b"GGUF",
)


def _is_image(head: bytes) -> bool:
    if head.startswith(_IMAGE_MAGIC):
        return True
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return True
    if head[4:8] == b"ftyp" and head[8:12] in _IMAGE_BRANDS:
        return True
    # A bitmap: "BM", the file size, then four reserved zero bytes.
    return head[:2] == b"BM" and head[6:10] == b"\x00\x00\x00\x00"


def _is_pdf(head: bytes) -> bool:
    # Readers accept the header anywhere in the first kilobyte; so do we.
    return b"%PDF-" in head[:1024]


def read_document(
    path: Path,
    *,
    max_bytes: int = MAX_ATTACHMENT_BYTES,
    cancelled: Callable[[], bool] = lambda: False,
    progress: Callable[[int, int], None] | None = None,
) -> Document:
    """Read the text of the file at ``path``.

    Runs for as long as the file takes: call it off the UI thread.

    Args:
        path: the file.
        max_bytes: refuse files larger than this.
        cancelled: asked between reads and between a PDF's pages; True stops the reading.
        progress: called with (done, total): pages of a PDF, bytes of anything else.

    Raises:
        ReadingCancelledError: ``cancelled()`` became true.
        DocumentError: the file cannot be attached; its sentence says why.
    """
    name = path.name or str(path)
    data = _read_bytes(path, name, max_bytes, cancelled, progress)
    head = data[:1024]
    if _is_pdf(head):
        return read_pdf(data, name, cancelled, progress)
    if _is_image(head):
        raise DocumentError(IMAGE, name=name)
    if kind_of(name) == "pdf" and not _looks_like_text(data):
        raise DocumentError(DAMAGED_PDF, name=name)
    if head.startswith(_BINARY_MAGIC):
        raise DocumentError(BINARY, name=name)
    text, encoding = decode(data, name)
    kind = kind_of(name)
    if kind == "pdf":  # called .pdf, but text inside: read it as the text it is
        kind = "text"
    if kind == "html":
        text = visible_text(text)
    text = clean(text)
    if not text.strip():
        raise DocumentError(EMPTY, name=name)
    return Document(name=name, kind=kind, size=len(data), text=text, encoding=encoding)


def _read_bytes(
    path: Path,
    name: str,
    max_bytes: int,
    cancelled: Callable[[], bool],
    progress: Callable[[int, int], None] | None,
) -> bytes:
    try:
        info = path.stat()
    except FileNotFoundError:
        raise DocumentError(NOT_FOUND, name=name) from None
    except PermissionError:
        raise DocumentError(NO_PERMISSION, name=name) from None
    except OSError as error:
        raise DocumentError(UNREADABLE, name=name, reason=error.strerror or error) from None
    _check_regular(info, name, max_bytes)
    if cancelled():
        raise ReadingCancelledError(name)
    # Non-blocking: should the path have become a FIFO since stat(), opening it still returns
    # at once (and fstat() below refuses it) instead of waiting for a writer forever.
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))
    except FileNotFoundError:
        raise DocumentError(NOT_FOUND, name=name) from None
    except PermissionError:
        raise DocumentError(NO_PERMISSION, name=name) from None
    except OSError as error:
        raise DocumentError(UNREADABLE, name=name, reason=error.strerror or error) from None
    with os.fdopen(fd, "rb", buffering=0) as file:
        _check_regular(os.fstat(fd), name, max_bytes)
        chunks: list[bytes] = []
        done = 0
        expected = max(info.st_size, 1)
        while True:
            if cancelled():
                raise ReadingCancelledError(name)
            try:
                chunk = file.read(READ_CHUNK_BYTES)
            except OSError as error:
                raise DocumentError(UNREADABLE, name=name, reason=error.strerror or error) from None
            if not chunk:
                break
            done += len(chunk)
            if done > max_bytes:  # the file grew since stat()
                raise DocumentError(
                    TOO_LARGE, name=name, size=size_text(done), limit=size_text(max_bytes)
                )
            chunks.append(chunk)
            if progress is not None and not _is_pdf(chunks[0][:1024]):
                progress(min(done, expected), expected)
    if done == 0:
        raise DocumentError(EMPTY, name=name)
    return b"".join(chunks)


def _check_regular(info: os.stat_result, name: str, max_bytes: int) -> None:
    if stat.S_ISDIR(info.st_mode):
        raise DocumentError(FOLDER, name=name)
    if not stat.S_ISREG(info.st_mode):
        raise DocumentError(NOT_A_FILE, name=name)
    if info.st_size == 0:
        raise DocumentError(EMPTY, name=name)
    if info.st_size > max_bytes:
        raise DocumentError(
            TOO_LARGE, name=name, size=size_text(info.st_size), limit=size_text(max_bytes)
        )


def _looks_like_text(data: bytes) -> bool:
    return b"\x00" not in data[:8192] and not data.startswith(_BINARY_MAGIC)
