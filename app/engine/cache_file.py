"""One prompt cache file: what a saved state depends on, the file's layout, reading it back.

A saved state is only sound for the exact model file, llama.cpp build, context size and KV cache
types that produced it (GPT4All dropped its "save chat context" because newer llama.cpp builds
could not read old states). Every file therefore carries a header naming all of them, a checksum
of itself and of its payload; a file that does not match in every respect raises
:class:`BadFileError`, and its caller removes it.

File layout (all integers little-endian)::

    MAGIC (8 bytes) | format version (u32) | header length (u32) | header (UTF-8 JSON)
    | sha256 of everything before it (32 bytes) | payload (the sequence state)

Files are named ``fgkv-<32 hex digits>.fgkv`` (the digits are a hash of the conversation id);
the writer's temporary files ``.fgkv-<32 hex digits>.<pid>-<n>.tmp``. Other files in the folder
are not ours: they are never read, counted or removed.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import llama_cpp

# One log for the whole prompt cache, its file and folder parts included.
log = logging.getLogger("app.engine.prompt_cache")

MAGIC = b"\x89FGKV\r\n\x1a"
"""First bytes of every cache file (PNG-style: catches text-mode and truncation damage)."""

FORMAT_VERSION = 1
"""Version of the file layout and header fields; a file of any other version is removed."""

MAX_HEADER_BYTES = 16 * 1024 * 1024
"""A bound on the JSON header (token ids for even a 1M-token context fit well below it)."""

_PREAMBLE = struct.Struct("<8sII")
_DIGEST_BYTES = 32
FILE_NAME = re.compile(r"fgkv-([0-9a-f]{32})\.fgkv")
TEMP_NAME = re.compile(r"\.fgkv-([0-9a-f]{32})\.[0-9a-z-]+\.tmp")
_MIB = 1024 * 1024
_MODEL_HEAD_BYTES = 16 * _MIB
_MODEL_SAMPLES = 16
_MODEL_SAMPLE_BYTES = 64 * 1024


@dataclass(frozen=True)
class ModelIdentity:
    """Everything a saved sequence state depends on, besides the tokens it holds.

    Attributes:
        model_digest: A digest of the model file's content (see :meth:`of`), not its path.
        n_ctx: The context size the state was computed with.
        type_k: The ggml type of the K cache (1 = f16, llama.cpp's default).
        type_v: The ggml type of the V cache.
        runtime: llama-cpp-python's version, a digest of the llama library it loaded, and
            llama.cpp's system info (the CPU features the build uses).
    """

    model_digest: str
    n_ctx: int
    type_k: int
    type_v: int
    runtime: str

    @staticmethod
    def of(path: Path, n_ctx: int, type_k: int = 1, type_v: int = 1) -> ModelIdentity:
        """The identity of the model file at ``path`` run with these settings.

        The digest covers the file's size, its first 16 MiB (the GGUF header: metadata,
        tokenizer and tensor table, plus the start of the weights), its last MiB and 16
        samples of 64 KiB spread over the rest: about 19 MiB read whatever the file's size,
        yet two quantizations or fine-tunes of one model differ in it.

        Raises:
            OSError: The file cannot be read.
        """
        return ModelIdentity(
            model_digest=model_digest(path),
            n_ctx=n_ctx,
            type_k=type_k,
            type_v=type_v,
            runtime=runtime_identity(),
        )

    def header_fields(self) -> dict[str, Any]:
        """The header fields a file of this identity carries, all checked when it is read."""
        return {
            "format": FORMAT_VERSION,
            "model_digest": self.model_digest,
            "runtime": self.runtime,
            "n_ctx": self.n_ctx,
            "type_k": self.type_k,
            "type_v": self.type_v,
        }


def model_digest(path: Path) -> str:
    """A sha256 over the size and sampled regions of the file (see :meth:`ModelIdentity.of`)."""
    digest = hashlib.sha256(b"floodgate-model-digest-1\0")
    with path.open("rb") as f:
        size = os.fstat(f.fileno()).st_size
        digest.update(size.to_bytes(8, "little"))
        regions = [(0, _MODEL_HEAD_BYTES), (max(0, size - _MIB), _MIB)]
        step = max(1, size // (_MODEL_SAMPLES + 1))
        regions += [(i * step, _MODEL_SAMPLE_BYTES) for i in range(1, _MODEL_SAMPLES + 1)]
        for offset, length in regions:
            f.seek(offset)
            digest.update(f.read(length))
    return digest.hexdigest()


@functools.cache
def runtime_identity() -> str:
    """llama-cpp-python's version, its llama library's digest and llama.cpp's system info.

    The library's digest changes with every rebuild of llama.cpp, even under the same
    llama-cpp-python version (a source build may vendor another llama.cpp commit).
    """
    parts = [f"llama-cpp-python {llama_cpp.__version__}"]
    library = getattr(getattr(llama_cpp, "llama_cpp", None), "_lib", None)
    library_path = getattr(library, "_name", None)
    if isinstance(library_path, str):
        try:
            library_digest = hashlib.sha256(Path(library_path).read_bytes()).hexdigest()
            parts.append(f"{Path(library_path).name} {library_digest[:16]}")
        except OSError:
            parts.append(f"{Path(library_path).name} unreadable")
    system_info = llama_cpp.llama_print_system_info()
    if system_info:
        parts.append(system_info.decode("utf-8", "replace").strip())
    return "; ".join(parts)


@dataclass
class StateEntry:
    """A sequence state in RAM: the conversation's newest, and what a write puts in a file."""

    conversation: str
    tokens: tuple[int, ...]
    state: bytes
    seconds: float
    created: float


@dataclass
class FileEntry:
    """A file in the cache folder, known by its header (the payload is read on a hit only)."""

    conversation: str
    tokens: tuple[int, ...]
    seconds: float
    path: Path
    size: int
    used: float


class BadFileError(Exception):
    """A cache file that must not be used; ``str()`` says why."""


def file_name(conversation: str) -> str:
    """The name of ``conversation``'s file in the cache folder."""
    key = hashlib.blake2b(conversation.encode("utf-8"), digest_size=16).hexdigest()
    return f"fgkv-{key}.fgkv"


def our_files(folder: Path) -> list[Path]:
    """The cache files and temporary files in ``folder``; never anyone else's."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return [
        folder / name for name in names if FILE_NAME.fullmatch(name) or TEMP_NAME.fullmatch(name)
    ]


def payload_digest(payload: bytes) -> str:
    """The checksum of a payload, as the header names it."""
    return hashlib.sha256(payload).hexdigest()


def encode_header(header: dict[str, Any]) -> bytes:
    """Everything a file holds before its payload: preamble, JSON header, their checksum."""
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    preamble = _PREAMBLE.pack(MAGIC, FORMAT_VERSION, len(text))
    check = hashlib.sha256(preamble + text).digest()
    return preamble + text + check


def parse_header(f: BinaryIO, size: int) -> tuple[dict[str, Any], int]:
    """The header of an open cache file and where its payload starts; raises BadFileError."""
    preamble = f.read(_PREAMBLE.size)
    if len(preamble) < _PREAMBLE.size:
        raise BadFileError("too short to be a cache file")
    magic, version, length = _PREAMBLE.unpack(preamble)
    if magic != MAGIC:
        raise BadFileError("not a Floodgate prompt cache file")
    if version != FORMAT_VERSION:
        raise BadFileError(f"format version {version}, this Floodgate reads {FORMAT_VERSION}")
    if length > MAX_HEADER_BYTES or _PREAMBLE.size + length + _DIGEST_BYTES > size:
        raise BadFileError("truncated header")
    text = f.read(length)
    check = f.read(_DIGEST_BYTES)
    if hashlib.sha256(preamble + text).digest() != check:
        raise BadFileError("header checksum mismatch")
    try:
        header = json.loads(text)
    except ValueError as exc:
        raise BadFileError(f"unreadable header: {exc}") from exc
    if not isinstance(header, dict):
        raise BadFileError("unreadable header")
    return header, _PREAMBLE.size + length + _DIGEST_BYTES


def check_header(header: dict[str, Any], path: Path, identity: dict[str, Any]) -> None:
    """Raise BadFileError unless ``header`` is whole and made for ``identity``'s fields."""
    for name, expected in identity.items():
        if header.get(name) != expected:
            raise BadFileError(f"made for another {name.replace('_', ' ')}: {header.get(name)!r}")
    conversation = header.get("conversation")
    if not isinstance(conversation, str) or path.name != file_name(conversation):
        raise BadFileError("its name does not match the conversation it holds")
    tokens = header.get("tokens")
    if not (
        isinstance(tokens, list)
        and tokens
        and all(type(t) is int and -(2**31) <= t < 2**31 for t in tokens)  # <0: pictures
    ):
        raise BadFileError("no valid token ids")
    if not isinstance(header.get("seconds"), int | float):
        raise BadFileError("no valid seconds")
    length = header.get("payload_length")
    if type(length) is not int or length <= 0:
        raise BadFileError("no valid payload length")
    if not isinstance(header.get("payload_sha256"), str):
        raise BadFileError("no payload checksum")


def read_file_entry(path: Path, identity: dict[str, Any]) -> FileEntry:
    """The file's entry, from its header only.

    Raises:
        BadFileError: The file must not be used.
        OSError: It cannot be read.
    """
    with path.open("rb") as f:
        size = os.fstat(f.fileno()).st_size
        header, payload_at = parse_header(f, size)
        used = os.fstat(f.fileno()).st_mtime
    check_header(header, path, identity)
    payload_length: int = header["payload_length"]
    if size != payload_at + payload_length:
        raise BadFileError(
            f"{size} bytes, the header announces {payload_at + payload_length} (truncated?)"
        )
    return FileEntry(
        conversation=header["conversation"],
        tokens=tuple(header["tokens"]),
        seconds=float(header["seconds"]),
        path=path,
        size=size,
        used=used,
    )


def read_payload(entry: FileEntry, identity: dict[str, Any]) -> bytes:
    """The entry's state, checked in full against its header and the listed tokens.

    Raises:
        BadFileError: The file must not be used.
        OSError: It cannot be read.
    """
    with entry.path.open("rb") as f:
        size = os.fstat(f.fileno()).st_size
        header, payload_at = parse_header(f, size)
        check_header(header, entry.path, identity)
        if tuple(header["tokens"]) != entry.tokens:
            raise BadFileError("it changed since the folder was listed")
        length: int = header["payload_length"]
        if size != payload_at + length:
            raise BadFileError(f"{size} bytes, the header announces {payload_at + length}")
        payload = f.read(length)
    if len(payload) != length:
        raise BadFileError("truncated")
    if payload_digest(payload) != header["payload_sha256"]:
        raise BadFileError("payload checksum mismatch")
    return payload


def remove(path: Path) -> None:
    """Remove a file if it is there; a failure is logged, never raised."""
    try:
        path.unlink(missing_ok=True)
    except OSError as exc:
        log.warning("Prompt cache: cannot remove %s: %s", path.name, exc)


def sync_folder(folder: Path) -> None:
    """Make the rename itself durable (POSIX; Windows has no directory handles for this)."""
    if os.name != "posix":
        return
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
