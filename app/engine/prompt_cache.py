"""Processed prompts kept per conversation, in RAM and on disk, so no prefix is paid twice.

An entry is the KV cache of one llama.cpp sequence (the bytes of ``llama_state_seq_get_data``)
plus the exact token ids it holds and what computing it cost. :class:`PromptCache` keeps the
newest entry of each conversation in RAM under a byte budget (least recently used goes first)
and hands the ones that cost enough to a writer thread that stores them in a folder, also under a
budget. :meth:`PromptCache.lookup` finds the entry sharing the longest token prefix with a new
prompt, so the engine restores it and processes only the rest.

A saved state is only sound for the exact model file, llama.cpp build, context size and KV cache
types that produced it (GPT4All dropped its "save chat context" because newer llama.cpp builds
could not read old states). Every file therefore carries a header naming all of them, a checksum
of itself and of its payload; a file that does not match in every respect is removed, logged and
never used.

File layout (all integers little-endian)::

    MAGIC (8 bytes) | format version (u32) | header length (u32) | header (UTF-8 JSON)
    | sha256 of everything before it (32 bytes) | payload (the sequence state)

Files are named ``fgkv-<32 hex digits>.fgkv`` (the digits are a hash of the conversation id);
the writer's temporary files ``.fgkv-<32 hex digits>.<pid>-<n>.tmp``. Other files in the folder
are not ours: they are never read, counted or removed.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import itertools
import json
import logging
import math
import os
import queue
import re
import struct
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import llama_cpp

log = logging.getLogger(__name__)

MAGIC = b"\x89FGKV\r\n\x1a"
"""First bytes of every cache file (PNG-style: catches text-mode and truncation damage)."""

FORMAT_VERSION = 1
"""Version of the file layout and header fields; a file of any other version is removed."""

DEFAULT_RAM_BUDGET = 1024 * 1024 * 1024
"""1 GiB: about 35 conversations of 1,200 tokens with the bundled model, or two full 4k
contexts of an 8B model (about 130 KB per token)."""

DEFAULT_DISK_BUDGET = 4 * 1024 * 1024 * 1024
"""4 GiB of cache files."""

MIN_MATCH = 32
"""Shorter shared prefixes are not worth a restore (processing them takes well under 1 s)."""

MAX_HEADER_BYTES = 16 * 1024 * 1024
"""A bound on the JSON header (token ids for even a 1M-token context fit well below it)."""

CLOSE_WAIT_SECONDS = 1.0
"""How long :meth:`PromptCache.close` waits for pending writes before giving up on them."""

_PREAMBLE = struct.Struct("<8sII")
_DIGEST_BYTES = 32
_FILE_NAME = re.compile(r"fgkv-([0-9a-f]{32})\.fgkv")
_TEMP_NAME = re.compile(r"\.fgkv-([0-9a-f]{32})\.[0-9a-z-]+\.tmp")
_MIB = 1024 * 1024
_MODEL_HEAD_BYTES = 16 * _MIB
_MODEL_SAMPLES = 16
_MODEL_SAMPLE_BYTES = 64 * 1024
_temp_counter = itertools.count()


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


@dataclass(frozen=True)
class CacheHit:
    """A stored sequence state whose tokens share a long enough prefix with the prompt.

    Attributes:
        tokens: Every token id the state holds. The shared prefix may be shorter: the engine
            removes the positions after it (``llama_memory_seq_rm``) once restored.
        state: The sequence state, for :func:`write_sequence`.
        source: Where it came from.
        saved_seconds: What processing the shared prefix would have cost.
    """

    tokens: tuple[int, ...]
    state: bytes
    source: Literal["memory", "disk"]
    saved_seconds: float


@dataclass(frozen=True)
class CacheStats:
    """The cache at a glance, for the diagnostics panel.

    Attributes:
        entries: Entries in RAM.
        bytes: Bytes of state in RAM.
        disk_entries: Files in the cache folder (0 until the folder has been listed).
        disk_bytes: Their total size.
        hits: Lookups that returned a state.
        misses: Lookups that did not.
        saved_seconds: Processing time the hits saved, in total.
    """

    entries: int
    bytes: int
    disk_entries: int
    disk_bytes: int
    hits: int
    misses: int
    saved_seconds: float


@dataclass
class _Entry:
    conversation: str
    tokens: tuple[int, ...]
    state: bytes
    seconds: float
    created: float


@dataclass
class _DiskEntry:
    conversation: str
    tokens: tuple[int, ...]
    seconds: float
    path: Path
    size: int
    used: float


@dataclass
class _WriteJob:
    entry: _Entry
    cancelled: bool = field(default=False)


class _BadFileError(Exception):
    """A cache file that must not be used; ``str()`` says why."""


class PromptCache:
    """Sequence states of conversations, in RAM and in a folder. Every method is thread-safe.

    Args:
        identity: The model and runtime every entry belongs to; files of any other are removed.
        ram_budget: Bytes of state kept in RAM at most.
        disk_dir: The cache folder (created when first written), or None for RAM only.
        disk_budget: Bytes of files kept in the folder at most.
        disk_min_seconds: Entries that cost less than this to compute are not written.
    """

    def __init__(
        self,
        identity: ModelIdentity,
        *,
        ram_budget: int,
        disk_dir: Path | None,
        disk_budget: int,
        disk_min_seconds: float = 2.0,
    ) -> None:
        self._identity = identity
        self._identity_fields = _identity_fields(identity)
        self._ram_budget = ram_budget
        self._disk_dir = disk_dir
        self._disk_budget = disk_budget
        self._disk_min_seconds = disk_min_seconds
        self._lock = threading.Lock()
        self._scan_lock = threading.Lock()
        self._ram: OrderedDict[str, _Entry] = OrderedDict()
        self._ram_bytes = 0
        self._disk: dict[str, _DiskEntry] | None = None
        self._pending: dict[str, _WriteJob] = {}
        self._in_flight: _WriteJob | None = None
        self._hits = 0
        self._misses = 0
        self._saved_seconds = 0.0
        self._closed = False
        self._queue: queue.SimpleQueue[tuple[str, str]] = queue.SimpleQueue()
        self._writer: threading.Thread | None = None
        if disk_dir is not None:
            self._writer = threading.Thread(
                target=self._write_loop, name="prompt-cache-writer", daemon=True
            )
            self._writer.start()

    # ----------------------------------------------------------------------------- the API

    @property
    def identity(self) -> ModelIdentity:
        """The model and runtime this cache's entries belong to."""
        return self._identity

    def put(self, conversation: str, tokens: Sequence[int], state: bytes, seconds: float) -> None:
        """Keep ``state`` as the newest entry of ``conversation``; never waits for the disk.

        Args:
            conversation: The conversation's id.
            tokens: Every token id the state holds, in order.
            state: The sequence state (:func:`read_sequence`); kept by reference, not copied.
            seconds: What computing this state from nothing cost: the time of a restored
                prefix (its hit's ``saved_seconds``) plus the time just spent processing.
                It decides whether the entry goes to disk and what a later hit saves.
        """
        if not tokens or not state:
            return
        seconds = seconds if math.isfinite(seconds) and seconds > 0 else 0.0
        # int(): ids from numpy arrays would not serialise to the JSON header.
        entry = _Entry(conversation, tuple(map(int, tokens)), state, seconds, time.time())
        with self._lock:
            self._drop_ram(conversation)
            if len(state) <= self._ram_budget:
                self._ram[conversation] = entry
                self._ram_bytes += len(state)
                self._evict_ram()
            if (
                self._writer is not None
                and not self._closed
                and entry.seconds >= self._disk_min_seconds
            ):
                if self._on_disk_already(entry):
                    # A restored state put back unchanged (the user switched away again):
                    # no need to write 30 MB or more again, only to count it as used.
                    self._queue.put(("touch", conversation))
                    return
                previous = self._pending.get(conversation)
                self._pending[conversation] = _WriteJob(entry)
                if previous is None:
                    self._queue.put(("write", conversation))

    def _on_disk_already(self, entry: _Entry) -> bool:
        """Whether the folder holds or will hold these very tokens for this conversation."""
        conversation, tokens = entry.conversation, entry.tokens
        stored = self._disk.get(conversation) if self._disk is not None else None
        pending = self._pending.get(conversation)
        flying = self._in_flight
        if pending is not None:
            # A pending write of other tokens would overwrite the file; this one replaces it.
            return pending.entry.tokens == tokens
        if flying is not None and flying.entry.conversation == conversation:
            return flying.entry.tokens == tokens and not flying.cancelled
        return stored is not None and stored.tokens == tokens

    def lookup(
        self, conversation: str, tokens: Sequence[int], *, longer_than: int = 0
    ) -> CacheHit | None:
        """The entry sharing the longest prefix (at least :data:`MIN_MATCH` tokens) with ``tokens``.

        RAM is searched along with the folder's index; on a tie the same conversation wins, then
        RAM. A file is read and checked in full before it is returned: a bad one is removed,
        logged, and the next best entry tried. A hit from disk is also kept in RAM when that
        conversation has nothing there.

        Args:
            conversation: The conversation the prompt belongs to.
            tokens: The prompt's token ids.
            longer_than: How many prompt tokens the caller already holds: only an entry
                sharing more counts as a hit (so hits and saved seconds count what was used).
        """
        query = tuple(tokens)
        least = max(MIN_MATCH, longer_than + 1)
        self._ensure_disk_index()
        tried: set[str] = set()
        while True:
            with self._lock:
                best = self._best_candidate(conversation, query, least, tried)
                if best is None:
                    self._misses += 1
                    return None
                matched, candidate = best
                if isinstance(candidate, _Entry):
                    self._ram.move_to_end(candidate.conversation)
                    saved = _saved(candidate.seconds, matched, len(candidate.tokens))
                    self._hits += 1
                    self._saved_seconds += saved
                    if self._disk is not None and candidate.conversation in self._disk:
                        self._queue.put(("touch", candidate.conversation))
                    return CacheHit(candidate.tokens, candidate.state, "memory", saved)
            # Read outside the lock: 30 MB or more, and stats() must stay instant meanwhile.
            tried.add(candidate.conversation)
            state = self._read_payload(candidate)
            if state is None:
                continue
            with self._lock:
                if self._disk is None or self._disk.get(candidate.conversation) is not candidate:
                    continue  # forgotten or replaced while it was being read
                now = time.time()
                candidate.used = now
                with contextlib.suppress(OSError):
                    os.utime(candidate.path, (now, now))
                saved = _saved(candidate.seconds, matched, len(candidate.tokens))
                self._hits += 1
                self._saved_seconds += saved
                if candidate.conversation not in self._ram and len(state) <= self._ram_budget:
                    self._ram[candidate.conversation] = _Entry(
                        candidate.conversation, candidate.tokens, state, candidate.seconds, now
                    )
                    self._ram_bytes += len(state)
                    self._evict_ram()
                return CacheHit(candidate.tokens, state, "disk", saved)

    def forget(self, conversation: str) -> None:
        """Remove the conversation's entries, in RAM and on disk (it was deleted)."""
        with self._lock:
            self._drop_ram(conversation)
            self._cancel_writes(conversation)
            if self._disk is not None:
                self._disk.pop(conversation, None)
            if self._disk_dir is not None:
                _remove(self._disk_dir / _file_name(conversation))

    def clear(self) -> None:
        """Remove every entry, in RAM and on disk (the "Clear cache" action)."""
        with self._lock:
            self._ram.clear()
            self._ram_bytes = 0
            self._cancel_writes(None)
            if self._disk is not None:
                self._disk.clear()
            if self._disk_dir is not None:
                for path in _our_files(self._disk_dir):
                    _remove(path)

    def set_budgets(self, *, ram_budget: int, disk_budget: int) -> None:
        """Change both budgets (from Settings); what no longer fits goes at once."""
        with self._lock:
            self._ram_budget = ram_budget
            self._disk_budget = disk_budget
            self._evict_ram()
            if self._disk is not None:
                self._evict_disk(keep=None)

    def stats(self) -> CacheStats:
        """The cache's figures; touches no file, so any thread (the UI's too) may call it."""
        with self._lock:
            disk = self._disk.values() if self._disk is not None else ()
            return CacheStats(
                entries=len(self._ram),
                bytes=self._ram_bytes,
                disk_entries=len(disk),
                disk_bytes=sum(entry.size for entry in disk),
                hits=self._hits,
                misses=self._misses,
                saved_seconds=self._saved_seconds,
            )

    def close(self) -> None:
        """Write what is pending (waiting about a second at most), then stop the writer.

        Writes still pending after that are dropped; a file half-written when the process
        ends is a temporary one, removed by the next cache on the folder.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self._writer is not None:
            self._queue.put(("stop", ""))
            self._writer.join(CLOSE_WAIT_SECONDS)
            if self._writer.is_alive():
                with self._lock:
                    dropped = len(self._pending) + (self._in_flight is not None)
                    self._cancel_writes(None)
                if dropped:
                    log.warning("Prompt cache: %d writes still pending at close dropped", dropped)

    # ----------------------------------------------------------------------------- RAM

    def _drop_ram(self, conversation: str) -> None:
        old = self._ram.pop(conversation, None)
        if old is not None:
            self._ram_bytes -= len(old.state)

    def _evict_ram(self) -> None:
        while self._ram_bytes > self._ram_budget and self._ram:
            _, old = self._ram.popitem(last=False)
            self._ram_bytes -= len(old.state)

    def _best_candidate(
        self, conversation: str, query: tuple[int, ...], least: int, tried: set[str]
    ) -> tuple[int, _Entry | _DiskEntry] | None:
        best: tuple[int, _Entry | _DiskEntry] | None = None
        best_rank: tuple[int, bool, bool, float] | None = None
        candidates: list[_Entry | _DiskEntry] = list(self._ram.values())
        if self._disk is not None:
            candidates += [d for d in self._disk.values() if d.conversation not in tried]
        for candidate in candidates:
            matched = shared_prefix(candidate.tokens, query)
            if matched < least:
                continue
            in_ram = isinstance(candidate, _Entry)
            recency = candidate.created if isinstance(candidate, _Entry) else candidate.used
            rank = (matched, candidate.conversation == conversation, in_ram, recency)
            if best_rank is None or rank > best_rank:
                best, best_rank = (matched, candidate), rank
        return best

    # ----------------------------------------------------------------------------- disk

    def _ensure_disk_index(self) -> None:
        """List the folder once, reading headers only; bad files are removed on the way."""
        if self._disk_dir is None or self._listed():
            return
        with self._scan_lock:
            if self._listed():  # another thread listed it while this one waited
                return
            index: dict[str, _DiskEntry] = {}
            try:
                names = sorted(os.listdir(self._disk_dir))
            except FileNotFoundError:
                names = []
            except OSError as exc:
                log.warning("Prompt cache: cannot list %s: %s", self._disk_dir, exc)
                names = []
            for name in names:
                path = self._disk_dir / name
                if _TEMP_NAME.fullmatch(name):
                    # The writer of this cache has not started writing yet (it lists the
                    # folder first), so this is a leftover of a killed process.
                    log.warning("Prompt cache: removed %s: a half-written file", name)
                    _remove(path)
                    continue
                if not _FILE_NAME.fullmatch(name):
                    continue
                try:
                    entry = self._read_header(path)
                except _BadFileError as exc:
                    log.warning("Prompt cache: removed %s: %s", name, exc)
                    _remove(path)
                    continue
                except OSError as exc:
                    log.warning("Prompt cache: cannot read %s: %s", name, exc)
                    continue
                index[entry.conversation] = entry
            with self._lock:
                self._disk = index
                self._evict_disk(keep=None)

    def _listed(self) -> bool:
        with self._lock:
            return self._disk is not None

    def _read_header(self, path: Path) -> _DiskEntry:
        with path.open("rb") as f:
            size = os.fstat(f.fileno()).st_size
            header, payload_at = _parse_header(f, size)
            used = os.fstat(f.fileno()).st_mtime
        self._check_header(header, path)
        payload_length: int = header["payload_length"]
        if size != payload_at + payload_length:
            raise _BadFileError(
                f"{size} bytes, the header announces {payload_at + payload_length} (truncated?)"
            )
        return _DiskEntry(
            conversation=header["conversation"],
            tokens=tuple(header["tokens"]),
            seconds=float(header["seconds"]),
            path=path,
            size=size,
            used=used,
        )

    def _check_header(self, header: dict[str, Any], path: Path) -> None:
        for name, expected in self._identity_fields.items():
            if header.get(name) != expected:
                raise _BadFileError(
                    f"made for another {name.replace('_', ' ')}: {header.get(name)!r}"
                )
        conversation = header.get("conversation")
        if not isinstance(conversation, str) or path.name != _file_name(conversation):
            raise _BadFileError("its name does not match the conversation it holds")
        tokens = header.get("tokens")
        if not (
            isinstance(tokens, list)
            and tokens
            and all(type(t) is int and 0 <= t < 2**31 for t in tokens)
        ):
            raise _BadFileError("no valid token ids")
        if not isinstance(header.get("seconds"), int | float):
            raise _BadFileError("no valid seconds")
        length = header.get("payload_length")
        if type(length) is not int or length <= 0:
            raise _BadFileError("no valid payload length")
        if not isinstance(header.get("payload_sha256"), str):
            raise _BadFileError("no payload checksum")

    def _read_payload(self, candidate: _DiskEntry) -> bytes | None:
        """The candidate's state, checked in full; None (file removed, logged) if it is bad."""
        path = candidate.path
        try:
            with path.open("rb") as f:
                size = os.fstat(f.fileno()).st_size
                header, payload_at = _parse_header(f, size)
                self._check_header(header, path)
                if tuple(header["tokens"]) != candidate.tokens:
                    raise _BadFileError("it changed since the folder was listed")
                length: int = header["payload_length"]
                if size != payload_at + length:
                    raise _BadFileError(f"{size} bytes, the header announces {payload_at + length}")
                payload = f.read(length)
            if len(payload) != length:
                raise _BadFileError("truncated")
            if _payload_digest(payload) != header["payload_sha256"]:
                raise _BadFileError("payload checksum mismatch")
        except _BadFileError as exc:
            log.warning("Prompt cache: removed %s: %s", path.name, exc)
            self._drop_disk_entry(candidate, remove=True)
            return None
        except OSError as exc:
            log.warning("Prompt cache: cannot read %s: %s", path.name, exc)
            self._drop_disk_entry(candidate, remove=False)
            return None
        return payload

    def _drop_disk_entry(self, candidate: _DiskEntry, *, remove: bool) -> None:
        with self._lock:
            if self._disk is not None and self._disk.get(candidate.conversation) is candidate:
                del self._disk[candidate.conversation]
                if remove:
                    _remove(candidate.path)

    def _evict_disk(self, keep: str | None) -> None:
        """Remove least recently used files until the folder fits its budget (lock held)."""
        assert self._disk is not None
        total = sum(entry.size for entry in self._disk.values())
        for entry in sorted(self._disk.values(), key=lambda e: e.used):
            if total <= self._disk_budget:
                break
            if entry.conversation == keep:
                continue
            del self._disk[entry.conversation]
            _remove(entry.path)
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
            self._ensure_disk_index()
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
            entry = self._disk.get(conversation) if self._disk is not None else None
            if entry is None:
                return
            now = time.time()
            entry.used = now
            with contextlib.suppress(OSError):
                os.utime(entry.path, (now, now))

    def _write(self, job: _WriteJob) -> None:
        assert self._disk_dir is not None
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
            "payload_sha256": _payload_digest(entry.state),
        }
        head = _encode_header(header)
        size = len(head) + len(entry.state)
        if size > self._disk_budget:
            log.info("Prompt cache: %d bytes exceed the disk budget; not written", size)
            return
        final = self._disk_dir / _file_name(entry.conversation)
        temp = self._disk_dir / (f".{final.stem}.{os.getpid()}-{next(_temp_counter)}.tmp")
        started = time.perf_counter()
        try:
            self._disk_dir.mkdir(parents=True, exist_ok=True)
            with temp.open("xb") as f:
                f.write(head)
                f.write(entry.state)
                f.flush()
                os.fsync(f.fileno())
            with self._lock:
                if job.cancelled or self._disk is None:
                    _remove(temp)
                    return
                os.replace(temp, final)
                self._disk[entry.conversation] = _DiskEntry(
                    entry.conversation, entry.tokens, entry.seconds, final, size, now
                )
                self._evict_disk(keep=entry.conversation)
            _sync_folder(self._disk_dir)
        except OSError as exc:
            log.warning("Prompt cache: writing %s failed, entry dropped: %s", final.name, exc)
            _remove(temp)
            return
        log.debug(
            "Prompt cache: wrote %s (%d tokens, %.1f MB) in %.0f ms",
            final.name,
            len(entry.tokens),
            size / 1e6,
            (time.perf_counter() - started) * 1000,
        )


# --------------------------------------------------------------------------------- helpers


def _identity_fields(identity: ModelIdentity) -> dict[str, Any]:
    return {
        "format": FORMAT_VERSION,
        "model_digest": identity.model_digest,
        "runtime": identity.runtime,
        "n_ctx": identity.n_ctx,
        "type_k": identity.type_k,
        "type_v": identity.type_v,
    }


def _file_name(conversation: str) -> str:
    key = hashlib.blake2b(conversation.encode("utf-8"), digest_size=16).hexdigest()
    return f"fgkv-{key}.fgkv"


def _our_files(folder: Path) -> list[Path]:
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return [
        folder / name for name in names if _FILE_NAME.fullmatch(name) or _TEMP_NAME.fullmatch(name)
    ]


def _payload_digest(payload: bytes) -> str:
    return hashlib.sha256(payload).hexdigest()


def _encode_header(header: dict[str, Any]) -> bytes:
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    preamble = _PREAMBLE.pack(MAGIC, FORMAT_VERSION, len(text))
    check = hashlib.sha256(preamble + text).digest()
    return preamble + text + check


def _parse_header(f: Any, size: int) -> tuple[dict[str, Any], int]:
    """The header of an open cache file and where its payload starts; raises _BadFileError."""
    preamble = f.read(_PREAMBLE.size)
    if len(preamble) < _PREAMBLE.size:
        raise _BadFileError("too short to be a cache file")
    magic, version, length = _PREAMBLE.unpack(preamble)
    if magic != MAGIC:
        raise _BadFileError("not a Floodgate prompt cache file")
    if version != FORMAT_VERSION:
        raise _BadFileError(f"format version {version}, this Floodgate reads {FORMAT_VERSION}")
    if length > MAX_HEADER_BYTES or _PREAMBLE.size + length + _DIGEST_BYTES > size:
        raise _BadFileError("truncated header")
    text = f.read(length)
    check = f.read(_DIGEST_BYTES)
    if hashlib.sha256(preamble + text).digest() != check:
        raise _BadFileError("header checksum mismatch")
    try:
        header = json.loads(text)
    except ValueError as exc:
        raise _BadFileError(f"unreadable header: {exc}") from exc
    if not isinstance(header, dict):
        raise _BadFileError("unreadable header")
    return header, _PREAMBLE.size + length + _DIGEST_BYTES


def shared_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading token ids ``a`` and ``b`` have in common.

    A binary search over slices, compared in C: about 20 comparisons for a long prompt
    instead of a Python loop over every token.
    """
    a, b = tuple(a), tuple(b)
    low, high = 0, min(len(a), len(b))
    if a[:high] == b[:high]:
        return high
    while low < high:  # the answer lies in [low, high]
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def _saved(seconds: float, matched: int, total: int) -> float:
    return seconds * matched / total if total else 0.0


def _remove(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError as exc:
        log.warning("Prompt cache: cannot remove %s: %s", path.name, exc)


def _sync_folder(folder: Path) -> None:
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


# --------------------------------------------------------------------------------- llama.cpp


def read_sequence(ctx: llama_cpp.llama_context_p, seq_id: int = 0) -> bytes:
    """The KV cache of sequence ``seq_id`` (``llama_state_seq_get_data``), and nothing else.

    No logits are included: after :func:`write_sequence` the engine evaluates at least the
    last prompt token again to get the next token's logits.
    """
    size = llama_cpp.llama_state_seq_get_size(ctx, seq_id)
    buffer = (ctypes.c_uint8 * size)()
    written = llama_cpp.llama_state_seq_get_data(ctx, buffer, size, seq_id)
    return ctypes.string_at(buffer, written)


def write_sequence(ctx: llama_cpp.llama_context_p, data: bytes, seq_id: int = 0) -> bool:
    """Empty sequence ``seq_id`` and load ``data`` (from :func:`read_sequence`) into it.

    Returns:
        False if llama.cpp refused the data (it checks the layout: layer count, KV types,
        V transposition, the room in the context); the sequence is then left empty.
    """
    memory = llama_cpp.llama_get_memory(ctx)
    if memory is not None:
        llama_cpp.llama_memory_seq_rm(memory, seq_id, -1, -1)
    if not data:
        return False
    # Point llama.cpp at the bytes object's own buffer: no copy of 30 MB or more.
    source = ctypes.cast(ctypes.c_char_p(data), ctypes.POINTER(ctypes.c_uint8))
    loaded = llama_cpp.llama_state_seq_set_data(ctx, source, len(data), seq_id)
    if loaded == 0:
        if memory is not None:
            llama_cpp.llama_memory_seq_rm(memory, seq_id, -1, -1)
        return False
    return True
