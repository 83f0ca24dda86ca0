"""Processed prompts kept per conversation, in RAM and on disk, so no prefix is paid twice.

An entry is the KV cache of one llama.cpp sequence (the bytes of ``llama_state_seq_get_data``)
plus the exact token ids it holds and what computing it cost. :class:`PromptCache` keeps the
newest entry of each conversation in RAM under a byte budget (least recently used goes first)
and hands the ones that cost enough to its :class:`~app.engine.cache_folder.CacheFolder`, whose
writer thread stores them in a folder, also under a budget. :meth:`PromptCache.lookup` finds the
entry sharing the longest token prefix with a new prompt, so the engine restores it and
processes only the rest.

What a file holds and how a file that does not match its model is refused:
``app/engine/cache_file.py``.
"""

from __future__ import annotations

import ctypes
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import llama_cpp

from app.engine.cache_file import FORMAT_VERSION as FORMAT_VERSION
from app.engine.cache_file import MAGIC as MAGIC
from app.engine.cache_file import FileEntry, StateEntry
from app.engine.cache_file import ModelIdentity as ModelIdentity
from app.engine.cache_folder import CacheFolder

DEFAULT_RAM_BUDGET = 1024 * 1024 * 1024
"""1 GiB: about 35 conversations of 1,200 tokens with the bundled model, or two full 4k
contexts of an 8B model (about 130 KB per token)."""

DEFAULT_DISK_BUDGET = 4 * 1024 * 1024 * 1024
"""4 GiB of cache files."""

MIN_MATCH = 32
"""Shorter shared prefixes are not worth a restore (processing them takes well under 1 s)."""


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
        self._ram_budget = ram_budget
        self._disk_dir = disk_dir
        self._lock = threading.Lock()
        self._ram: OrderedDict[str, StateEntry] = OrderedDict()
        self._ram_bytes = 0
        self._hits = 0
        self._misses = 0
        self._saved_seconds = 0.0
        self._closed = False
        self._folder: CacheFolder | None = None
        if disk_dir is not None:
            self._folder = CacheFolder(
                disk_dir,
                identity,
                self._lock,
                budget=disk_budget,
                min_seconds=disk_min_seconds,
            )

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
        entry = StateEntry(conversation, tuple(map(int, tokens)), state, seconds, time.time())
        with self._lock:
            self._drop_ram(conversation)
            self._keep_in_ram(entry)
            if self._folder is not None and not self._closed:
                self._folder.offer(entry)

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
        folder = self._folder
        if folder is not None:
            folder.ensure_index()
        tried: set[str] = set()
        while True:
            with self._lock:
                best = self._best_candidate(conversation, query, least, tried)
                if best is None:
                    self._misses += 1
                    return None
                matched, candidate = best
                if isinstance(candidate, StateEntry):
                    return self._memory_hit(candidate, matched)
            # A file candidate implies a folder. Read outside the lock: 30 MB or more, and
            # stats() must stay instant meanwhile.
            assert folder is not None
            tried.add(candidate.conversation)
            state = folder.read(candidate)
            if state is None:
                continue
            with self._lock:
                now = time.time()
                if not folder.mark_used(candidate, now):
                    continue  # forgotten or replaced while it was being read
                saved = self._count_hit(candidate.seconds, matched, len(candidate.tokens))
                if candidate.conversation not in self._ram:
                    self._keep_in_ram(
                        StateEntry(
                            candidate.conversation, candidate.tokens, state, candidate.seconds, now
                        )
                    )
                return CacheHit(candidate.tokens, state, "disk", saved)

    def forget(self, conversation: str) -> None:
        """Remove the conversation's entries, in RAM and on disk (it was deleted)."""
        with self._lock:
            self._drop_ram(conversation)
            if self._folder is not None:
                self._folder.forget(conversation)

    def clear(self) -> None:
        """Remove every entry, in RAM and on disk (the "Clear cache" action)."""
        with self._lock:
            self._ram.clear()
            self._ram_bytes = 0
            if self._folder is not None:
                self._folder.clear()

    def set_budgets(self, *, ram_budget: int, disk_budget: int) -> None:
        """Change both budgets (from Settings); what no longer fits goes at once."""
        with self._lock:
            self._ram_budget = ram_budget
            self._evict_ram()
            if self._folder is not None:
                self._folder.set_budget(disk_budget)

    def stats(self) -> CacheStats:
        """The cache's figures; touches no file, so any thread (the UI's too) may call it."""
        with self._lock:
            disk_entries, disk_bytes = self._folder.totals() if self._folder else (0, 0)
            return CacheStats(
                entries=len(self._ram),
                bytes=self._ram_bytes,
                disk_entries=disk_entries,
                disk_bytes=disk_bytes,
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
        if self._folder is not None:
            self._folder.close()

    # ----------------------------------------------------------------------------- RAM

    def _memory_hit(self, entry: StateEntry, matched: int) -> CacheHit:
        """A hit on an entry in RAM (lock held)."""
        self._ram.move_to_end(entry.conversation)
        saved = self._count_hit(entry.seconds, matched, len(entry.tokens))
        if self._folder is not None:
            self._folder.touch_later(entry.conversation)
        return CacheHit(entry.tokens, entry.state, "memory", saved)

    def _count_hit(self, seconds: float, matched: int, total: int) -> float:
        """Count a hit and return what it saved (lock held)."""
        saved = seconds * matched / total if total else 0.0
        self._hits += 1
        self._saved_seconds += saved
        return saved

    def _keep_in_ram(self, entry: StateEntry) -> None:
        """Keep ``entry`` if it fits the budget at all; older entries make room (lock held)."""
        if len(entry.state) <= self._ram_budget:
            self._ram[entry.conversation] = entry
            self._ram_bytes += len(entry.state)
            self._evict_ram()

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
    ) -> tuple[int, StateEntry | FileEntry] | None:
        best: tuple[int, StateEntry | FileEntry] | None = None
        best_rank: tuple[int, bool, bool, float] | None = None
        candidates: list[StateEntry | FileEntry] = list(self._ram.values())
        if self._folder is not None:
            candidates += self._folder.candidates(tried)
        for candidate in candidates:
            matched = shared_prefix(candidate.tokens, query)
            if matched < least:
                continue
            in_ram = isinstance(candidate, StateEntry)
            recency = candidate.created if isinstance(candidate, StateEntry) else candidate.used
            rank = (matched, candidate.conversation == conversation, in_ram, recency)
            if best_rank is None or rank > best_rank:
                best, best_rank = (matched, candidate), rank
        return best


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


# --------------------------------------------------------------------------------- llama.cpp


def read_sequence(ctx: llama_cpp.llama_context_p, seq_id: int = 0) -> bytes:
    """The KV cache of sequence ``seq_id`` (``llama_state_seq_get_data``), and nothing else.

    No logits are included: after :func:`write_sequence` the engine evaluates at least the
    last prompt token again to get the next token's logits.
    """
    size = llama_cpp.llama_state_seq_get_size(ctx, seq_id)
    if size < 1024:  # none real; and CPython may share a bytes object this small
        buffer = (ctypes.c_uint8 * size)()
        written = llama_cpp.llama_state_seq_get_data(ctx, buffer, size, seq_id)
        return ctypes.string_at(buffer, written)
    # Written straight into the bytes object returned (new, referenced only here): one fresh
    # buffer instead of two (a ctypes array, then its copy). Each fresh page costs a fault on
    # first touch, and a 30 MB state is 7,300 pages: 80 ms a buffer on a 2-core VM. A large
    # bytes(size) is calloc'd, so its zeros cost no pass of their own.
    data = bytes(size)
    target = ctypes.cast(ctypes.c_char_p(data), ctypes.POINTER(ctypes.c_uint8))
    written = llama_cpp.llama_state_seq_get_data(ctx, target, size, seq_id)
    return data if written == size else data[:written]


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
