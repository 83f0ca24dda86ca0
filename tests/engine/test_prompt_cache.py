"""The prompt cache: RAM budget, longest prefix, disk format, restart, and every bad file kind."""

from __future__ import annotations

import ctypes
import json
import logging
import os
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.engine.prompt_cache import (
    FORMAT_VERSION,
    MAGIC,
    MIN_MATCH,
    CacheStats,
    ModelIdentity,
    PromptCache,
    read_sequence,
    shared_prefix,
    write_sequence,
)

IDENTITY = ModelIdentity(
    model_digest="ab" * 32, n_ctx=2048, type_k=1, type_v=1, runtime="llama-cpp-python test"
)
LOGGER = "app.engine.prompt_cache"
MB = 1024 * 1024


def tokens(n: int, start: int = 1) -> list[int]:
    return list(range(start, start + n))


def state(size: int, fill: int = 7) -> bytes:
    return bytes([fill]) * size


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return tmp_path / "prompt-cache"


@pytest.fixture
def make_cache(folder: Path) -> Iterator[Callable[..., PromptCache]]:
    caches: list[PromptCache] = []

    def make(**options: object) -> PromptCache:
        settings: dict[str, object] = {
            "ram_budget": 64 * MB,
            "disk_dir": folder,
            "disk_budget": 256 * MB,
        }
        settings.update(options)
        identity = settings.pop("identity", IDENTITY)
        assert isinstance(identity, ModelIdentity)
        cache = PromptCache(identity, **settings)  # type: ignore[arg-type]
        caches.append(cache)
        return cache

    yield make
    for cache in caches:
        cache.close()


def wait_for(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.005)


def cache_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.fgkv")) if folder.exists() else []


def written(cache: PromptCache, folder: Path, count: int) -> None:
    """Wait until the writer has put ``count`` entries in the folder."""
    wait_for(lambda: cache.stats().disk_entries == count and len(cache_files(folder)) == count)


# --------------------------------------------------------------------------------- RAM


def test_ram_keeps_the_least_recently_used_out_of_budget(
    make_cache: Callable[..., PromptCache],
) -> None:
    cache = make_cache(ram_budget=300, disk_dir=None)
    for name in "abc":
        cache.put(name, tokens(40, start=ord(name) * 1000), state(100), 1.0)
    assert cache.stats().entries == 3
    assert cache.lookup("x", tokens(40, start=ord("a") * 1000)) is not None  # a is now recent
    cache.put("d", tokens(40, start=ord("d") * 1000), state(100), 1.0)
    stats = cache.stats()
    assert (stats.entries, stats.bytes) == (3, 300)
    assert cache.lookup("x", tokens(40, start=ord("b") * 1000)) is None  # b went first
    for name in "acd":
        assert cache.lookup("x", tokens(40, start=ord(name) * 1000)) is not None


def test_an_entry_larger_than_the_budget_is_not_kept(
    make_cache: Callable[..., PromptCache],
) -> None:
    cache = make_cache(ram_budget=100, disk_dir=None)
    cache.put("a", tokens(40), state(101), 1.0)
    assert cache.stats().entries == 0
    assert cache.lookup("a", tokens(40)) is None


def test_the_newest_entry_of_a_conversation_replaces_the_older(
    make_cache: Callable[..., PromptCache],
) -> None:
    cache = make_cache(disk_dir=None)
    cache.put("a", tokens(40), state(100, fill=1), 1.0)
    cache.put("a", tokens(80), state(200, fill=2), 2.0)
    assert (cache.stats().entries, cache.stats().bytes) == (1, 200)
    hit = cache.lookup("a", tokens(40))
    assert hit is not None
    assert hit.state == state(200, fill=2)
    assert hit.tokens == tuple(tokens(80))


def test_lookup_picks_the_longest_shared_prefix(make_cache: Callable[..., PromptCache]) -> None:
    cache = make_cache(disk_dir=None)
    prompt = tokens(200)
    cache.put("short", prompt[:50] + [9999] * 30, state(10, fill=1), 1.0)
    cache.put("long", prompt[:120] + [9999] * 5, state(10, fill=2), 1.0)
    cache.put("other", tokens(150, start=5000), state(10, fill=3), 1.0)
    hit = cache.lookup("new", prompt)
    assert hit is not None
    assert hit.state == state(10, fill=2)
    assert hit.source == "memory"


def test_a_prefix_shorter_than_the_minimum_is_no_hit(
    make_cache: Callable[..., PromptCache],
) -> None:
    cache = make_cache(disk_dir=None)
    prompt = tokens(100)
    cache.put("a", prompt[: MIN_MATCH - 1] + [9999] * 60, state(10), 1.0)
    assert cache.lookup("a", prompt) is None
    cache.put("a", prompt[:MIN_MATCH] + [9999] * 60, state(10), 1.0)
    assert cache.lookup("a", prompt) is not None


def test_only_a_prefix_longer_than_what_the_caller_holds_is_a_hit(
    make_cache: Callable[..., PromptCache],
) -> None:
    cache = make_cache(disk_dir=None)
    prompt = tokens(100)
    cache.put("a", prompt[:60], state(10), 6.0)
    assert cache.lookup("a", prompt, longer_than=60) is None
    assert cache.lookup("a", prompt, longer_than=59) is not None
    assert (cache.stats().hits, cache.stats().misses) == (1, 1)
    assert cache.stats().saved_seconds == pytest.approx(6.0)


def test_on_a_tie_the_same_conversation_wins(make_cache: Callable[..., PromptCache]) -> None:
    cache = make_cache(disk_dir=None)
    prompt = tokens(100)
    cache.put("mine", prompt[:60], state(10, fill=1), 1.0)
    cache.put("theirs", prompt[:60], state(10, fill=2), 1.0)  # newer, same match
    hit = cache.lookup("mine", prompt)
    assert hit is not None
    assert hit.state == state(10, fill=1)
    hit = cache.lookup("theirs", prompt)
    assert hit is not None
    assert hit.state == state(10, fill=2)


def test_hits_misses_and_saved_seconds_are_counted(make_cache: Callable[..., PromptCache]) -> None:
    cache = make_cache(disk_dir=None)
    cache.put("a", tokens(100), state(10), 8.0)
    hit = cache.lookup("a", tokens(50) + [9999] * 10)
    assert hit is not None
    assert hit.saved_seconds == pytest.approx(4.0)
    assert cache.lookup("a", tokens(100, start=500)) is None
    assert cache.lookup("a", tokens(100)) is not None
    assert cache.stats() == CacheStats(
        entries=1, bytes=10, disk_entries=0, disk_bytes=0, hits=2, misses=1, saved_seconds=12.0
    )


def test_stats_are_safe_from_other_threads(
    make_cache: Callable[..., PromptCache], folder: Path
) -> None:
    cache = make_cache()
    seen: list[CacheStats] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            seen.append(cache.stats())

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        for i in range(20):
            cache.put(f"c{i}", tokens(40, start=i * 100), state(1000), 3.0)
            cache.lookup(f"c{i}", tokens(40, start=i * 100))
        written(cache, folder, 20)
    finally:
        stop.set()
        watcher.join()
    assert seen
    assert all(s.bytes == s.entries * 1000 for s in seen)
    assert cache.stats().hits == 20


@given(st.lists(st.integers(0, 3), max_size=60), st.lists(st.integers(0, 3), max_size=60))
def test_shared_prefix_counts_the_leading_tokens_in_common(a: list[int], b: list[int]) -> None:
    expected = 0
    while expected < min(len(a), len(b)) and a[expected] == b[expected]:
        expected += 1
    assert shared_prefix(a, b) == expected
    assert shared_prefix(a, a + b) == len(a)


def test_many_threads_at_once_leave_a_consistent_cache(
    make_cache: Callable[..., PromptCache], folder: Path, caplog: pytest.LogCaptureFixture
) -> None:
    size = 20_000
    cache = make_cache(ram_budget=5 * size, disk_budget=8 * (size + 2_000))
    failures: list[BaseException] = []

    def work(seed: int) -> None:
        try:
            for step in range(150):
                name = f"c{(seed * 7 + step) % 12}"
                start = ((seed + step) % 12) * 1000
                action = (seed + step * 3) % 10
                if action < 5:
                    cache.put(name, tokens(40 + step % 5, start=start), state(size, seed), 3.0)
                elif action < 8:
                    cache.lookup(name, tokens(50, start=start))
                elif action == 8:
                    cache.forget(name)
                elif step % 50 == 0:
                    cache.clear()
                stats = cache.stats()
                assert stats.bytes == stats.entries * size
                assert stats.bytes <= 5 * size
        except BaseException as exc:  # reported below, with the thread's traceback
            failures.append(exc)

    with caplog.at_level(logging.WARNING, logger=LOGGER):
        threads = [threading.Thread(target=work, args=(seed,)) for seed in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        cache.close()
        assert failures == []
        # A slow disk may leave writes in flight past close(): let them end before listing.
        wait_for(lambda: all(t.name != "prompt-cache-writer" for t in threading.enumerate()))
        again = make_cache()
        assert again.lookup("none", tokens(40, start=99_000)) is None  # lists the folder
    assert again.stats().disk_entries == len(cache_files(folder))
    assert again.stats().disk_bytes <= 8 * (size + 2_000)
    assert not list(folder.glob(".*"))
    assert "removed" not in caplog.text  # no file was bad or left half-written


# --------------------------------------------------------------------------------- disk


def test_entries_worth_it_are_written_and_found_after_a_restart(
    make_cache: Callable[..., PromptCache], folder: Path
) -> None:
    cache = make_cache()
    payload = os.urandom(50_000)
    cache.put("a", tokens(300), payload, 5.0)
    cache.put("cheap", tokens(300, start=1000), state(100), 0.5)
    written(cache, folder, 1)
    cache.close()
    (file,) = cache_files(folder)
    assert not list(folder.glob(".*"))  # no temporary file left behind

    again = make_cache()
    assert again.lookup("cheap", tokens(300, start=1000)) is None
    hit = again.lookup("a", [*tokens(200), 9999])
    assert hit is not None
    assert (hit.source, hit.state, hit.tokens) == ("disk", payload, tuple(tokens(300)))
    assert hit.saved_seconds == pytest.approx(5.0 * 200 / 300)
    assert again.stats().disk_entries == 1
    assert again.stats().disk_bytes == file.stat().st_size
    # Kept in RAM after the first hit from disk.
    hit = again.lookup("a", tokens(300))
    assert hit is not None
    assert hit.source == "memory"


def test_a_state_put_back_unchanged_is_not_written_again(
    make_cache: Callable[..., PromptCache], folder: Path
) -> None:
    cache = make_cache()
    cache.put("a", tokens(40), state(10_000), 3.0)
    written(cache, folder, 1)
    (file,) = cache_files(folder)
    inode = file.stat().st_ino
    cache.put("a", tokens(40), state(10_000), 3.0)
    cache.put("b", tokens(40, start=100), state(10_000), 3.0)
    written(cache, folder, 2)  # the writer went past a's turn
    assert file.stat().st_ino == inode
    cache.put("a", tokens(41), state(10_000), 3.0)
    wait_for(lambda: file.stat().st_ino != inode)


def test_the_file_format(make_cache: Callable[..., PromptCache], folder: Path) -> None:
    cache = make_cache()
    payload = os.urandom(1000)
    cache.put("conversation-1", tokens(64), payload, 2.5)
    written(cache, folder, 1)
    data = cache_files(folder)[0].read_bytes()
    magic, version, length = struct.unpack_from("<8sII", data)
    assert (magic, version) == (MAGIC, FORMAT_VERSION)
    header = json.loads(data[16 : 16 + length])
    assert header["format"] == FORMAT_VERSION
    assert header["model_digest"] == IDENTITY.model_digest
    assert header["runtime"] == IDENTITY.runtime
    assert (header["n_ctx"], header["type_k"], header["type_v"]) == (2048, 1, 1)
    assert header["conversation"] == "conversation-1"
    assert header["tokens"] == tokens(64)
    assert header["seconds"] == 2.5
    assert header["payload_length"] == 1000
    assert {"created", "used", "payload_sha256"} <= header.keys()
    assert data[16 + length + 32 :] == payload


def test_the_disk_keeps_the_least_recently_used_out_of_budget(
    make_cache: Callable[..., PromptCache], folder: Path
) -> None:
    size = 100_000
    cache = make_cache(ram_budget=0, disk_budget=int(2.5 * size))
    cache.put("a", tokens(40, start=1000), state(size), 3.0)
    written(cache, folder, 1)
    cache.put("b", tokens(40, start=2000), state(size), 3.0)
    written(cache, folder, 2)
    before = set(cache_files(folder))
    time.sleep(0.01)  # the file's mtime is the time of last use
    assert cache.lookup("x", tokens(40, start=1000)) is not None  # a is now recent
    cache.put("c", tokens(40, start=3000), state(size), 3.0)
    wait_for(lambda: len(set(cache_files(folder)) - before) == 1)
    assert cache.stats().disk_entries == 2
    assert cache.lookup("x", tokens(40, start=2000)) is None
    assert cache.lookup("x", tokens(40, start=1000)) is not None
    assert cache.lookup("x", tokens(40, start=3000)) is not None


def test_smaller_budgets_apply_at_once(
    make_cache: Callable[..., PromptCache], folder: Path
) -> None:
    cache = make_cache()
    for i in range(3):
        cache.put(f"c{i}", tokens(40, start=i * 100), state(10_000), 3.0)
        written(cache, folder, i + 1)
    cache.set_budgets(ram_budget=25_000, disk_budget=25_000)
    stats = cache.stats()
    assert (stats.entries, stats.bytes) == (2, 20_000)
    assert stats.disk_entries == 2
    assert len(cache_files(folder)) == 2
    assert stats.disk_bytes <= 25_000


def test_forget_removes_a_conversation_in_ram_and_on_disk(
    make_cache: Callable[..., PromptCache], folder: Path
) -> None:
    cache = make_cache()
    cache.put("a", tokens(40), state(100), 3.0)
    cache.put("b", tokens(40, start=1000), state(100), 3.0)
    written(cache, folder, 2)
    cache.forget("a")
    assert cache.lookup("a", tokens(40)) is None
    assert cache.stats().disk_entries == 1
    cache.close()
    assert len(cache_files(folder)) == 1
    again = make_cache()
    assert again.lookup("a", tokens(40)) is None
    assert again.lookup("b", tokens(40, start=1000)) is not None


def test_forget_right_after_put_leaves_no_file(
    make_cache: Callable[..., PromptCache], folder: Path
) -> None:
    cache = make_cache()
    for i in range(10):
        cache.put(f"c{i}", tokens(40, start=i * 100), state(200_000), 3.0)
        cache.forget(f"c{i}")
    cache.close()
    assert cache_files(folder) == []
    assert not list(folder.glob(".*"))


class StuckDisk:
    """Holds the writer inside its fsync until released."""

    def __init__(self, patch: pytest.MonkeyPatch) -> None:
        self.entered = threading.Event()
        self.gate = threading.Event()
        self._fsync = os.fsync
        patch.setattr(os, "fsync", self.fsync)

    def fsync(self, fd: int) -> None:
        if threading.current_thread().name == "prompt-cache-writer":
            self.entered.set()
            assert self.gate.wait(10)
        self._fsync(fd)


def test_forget_during_a_write_leaves_no_file(
    make_cache: Callable[..., PromptCache], folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    disk = StuckDisk(monkeypatch)
    cache = make_cache()
    cache.put("a", tokens(40), state(1000), 3.0)
    assert disk.entered.wait(10)  # the temporary file is being written
    cache.forget("a")
    disk.gate.set()
    cache.close()
    assert list(folder.iterdir()) == []


def test_close_waits_a_bounded_time_for_a_stuck_disk(
    make_cache: Callable[..., PromptCache],
    folder: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    disk = StuckDisk(monkeypatch)
    cache = make_cache()
    cache.put("a", tokens(40), state(1000), 3.0)
    cache.put("b", tokens(40, start=100), state(1000), 3.0)
    assert disk.entered.wait(10)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        started = time.monotonic()
        cache.close()
        assert time.monotonic() - started < 5
    assert "dropped" in caplog.text
    disk.gate.set()
    wait_for(lambda: list(folder.iterdir()) == [])  # the stuck write is abandoned, b never starts


def test_clear_removes_everything_but_files_that_are_not_ours(
    make_cache: Callable[..., PromptCache], folder: Path
) -> None:
    cache = make_cache()
    cache.put("a", tokens(40), state(100), 3.0)
    cache.put("b", tokens(40, start=1000), state(100), 0.1)
    written(cache, folder, 1)
    (folder / "notes.txt").write_text("mine")
    cache.clear()
    assert cache.stats() == CacheStats(0, 0, 0, 0, 0, 0, 0.0)
    assert cache_files(folder) == []
    assert (folder / "notes.txt").read_text() == "mine"
    assert cache.lookup("a", tokens(40)) is None


def test_a_write_that_fails_is_logged_and_dropped(
    make_cache: Callable[..., PromptCache], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    cache = make_cache(disk_dir=blocker / "cache")  # cannot be created: a file is in the way
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        cache.put("a", tokens(40), state(100), 3.0)
        wait_for(lambda: "writing" in caplog.text)
    assert cache.lookup("a", tokens(40)) is not None  # still in RAM
    assert cache.stats().disk_entries == 0


def test_put_does_not_wait_for_the_disk(
    make_cache: Callable[..., PromptCache], folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    disk = StuckDisk(monkeypatch)
    cache = make_cache()
    cache.put("a", tokens(40), state(1000), 3.0)
    assert disk.entered.wait(10)
    cache.put("b", tokens(40, start=100), state(1000), 3.0)  # returns while a is stuck
    assert cache.stats().entries == 2
    assert cache.lookup("b", tokens(40, start=100)) is not None
    disk.gate.set()
    written(cache, folder, 2)


# --------------------------------------------------------------------------------- bad files


def write_good_file(
    folder: Path, conversation: str = "bad", identity: ModelIdentity = IDENTITY
) -> None:
    cache = PromptCache(identity, ram_budget=MB, disk_dir=folder, disk_budget=64 * MB)
    cache.put(conversation, tokens(200), os.urandom(20_000), 9.0)
    written(cache, folder, len(cache_files(folder)) + 1)
    cache.close()


def file_of(folder: Path, conversation: str) -> Path:
    for path in cache_files(folder):
        data = path.read_bytes()
        (length,) = struct.unpack_from("<I", data, 12)
        if json.loads(data[16 : 16 + length])["conversation"] == conversation:
            return path
    raise AssertionError(conversation)


def other_identity(**change: object) -> Callable[[Path], None]:
    fields = {**IDENTITY.__dict__, **change}

    def spoil(folder: Path) -> None:
        # Written elsewhere: a cache on this folder would remove the other files as foreign.
        elsewhere = folder.parent / "elsewhere"
        write_good_file(elsewhere, identity=ModelIdentity(**fields))
        path = file_of(folder, "bad")
        file_of(elsewhere, "bad").replace(path)

    return spoil


def truncate(folder: Path) -> None:
    path = file_of(folder, "bad")
    path.write_bytes(path.read_bytes()[:-100])


def flip_payload_byte(folder: Path) -> None:
    path = file_of(folder, "bad")
    data = bytearray(path.read_bytes())
    data[-5000] ^= 0x01
    path.write_bytes(bytes(data))


def flip_token_byte(folder: Path) -> None:
    path = file_of(folder, "bad")
    data = path.read_bytes()
    at = data.index(b'"tokens":[1,2,3') + len(b'"tokens":[1,2,')
    path.write_bytes(data[:at] + b"4" + data[at + 1 :])  # token 3 becomes 4: same length


def other_format_version(folder: Path) -> None:
    path = file_of(folder, "bad")
    data = bytearray(path.read_bytes())
    struct.pack_into("<I", data, 8, FORMAT_VERSION + 1)
    path.write_bytes(bytes(data))


def garbage(folder: Path) -> None:
    file_of(folder, "bad").write_bytes(os.urandom(30_000))


def empty(folder: Path) -> None:
    file_of(folder, "bad").write_bytes(b"")


def renamed(folder: Path) -> None:
    path = file_of(folder, "bad")
    path.rename(folder / ("fgkv-" + "0" * 32 + ".fgkv"))


def half_written(folder: Path) -> None:
    path = file_of(folder, "bad")
    data = path.read_bytes()
    path.unlink()
    (folder / f".{path.stem}.4242-0.tmp").write_bytes(data[: len(data) // 2])


BAD_FILES = {
    "truncated": truncate,
    "flipped payload byte": flip_payload_byte,
    "flipped token id": flip_token_byte,
    "other model digest": other_identity(model_digest="cd" * 32),
    "other runtime version": other_identity(runtime="llama-cpp-python 9.9.9"),
    "other context size": other_identity(n_ctx=4096),
    "other K cache type": other_identity(type_k=8),
    "other V cache type": other_identity(type_v=8),
    "other format version": other_format_version,
    "garbage": garbage,
    "empty": empty,
    "renamed": renamed,
    "half-written temporary file": half_written,
}


@pytest.mark.parametrize("spoil", BAD_FILES.values(), ids=BAD_FILES.keys())
def test_a_bad_file_is_never_used_but_removed_and_logged(
    spoil: Callable[[Path], None],
    make_cache: Callable[..., PromptCache],
    folder: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A good entry sharing a shorter prefix: lookup goes on to it past the bad one.
    cache = PromptCache(IDENTITY, ram_budget=MB, disk_dir=folder, disk_budget=64 * MB)
    cache.put("good", tokens(100) + [9999] * 20, os.urandom(20_000), 9.0)
    written(cache, folder, 1)
    cache.close()
    good = cache_files(folder)[0]
    write_good_file(folder)
    assert len(cache_files(folder)) == 2
    spoil(folder)

    cache = make_cache()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        hit = cache.lookup("bad", tokens(200))
    assert hit is not None
    assert hit.tokens == tuple(tokens(100) + [9999] * 20)  # the good one
    assert [p.name for p in folder.iterdir()] == [good.name]  # the bad one removed
    assert "Prompt cache: removed" in caplog.text
    assert cache.stats().disk_entries == 1


KILLED_WRITER = """
import os, sys, threading
from pathlib import Path
from app.engine.prompt_cache import ModelIdentity, PromptCache
os.fsync = lambda fd: threading.Event().wait()  # the disk never confirms: killed mid-write
identity = ModelIdentity("ab" * 32, 2048, 1, 1, "llama-cpp-python test")
cache = PromptCache(identity, ram_budget=0, disk_dir=Path(sys.argv[1]), disk_budget=2**30)
cache.put("killed", list(range(1, 201)), os.urandom(3_000_000), 9.0)
threading.Event().wait()
"""


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs kill -9")
def test_a_write_killed_half_way_is_removed_and_the_rest_is_used(
    make_cache: Callable[..., PromptCache], folder: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_good_file(folder, "good")
    project = Path(__file__).resolve().parents[2]
    child = subprocess.Popen(
        [sys.executable, "-c", KILLED_WRITER, str(folder)], cwd=project, env={**os.environ}
    )
    try:
        wait_for(lambda: any(p.stat().st_size > 1_000_000 for p in folder.glob(".fgkv-*.tmp")))
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    assert len(cache_files(folder)) == 1

    cache = make_cache()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert cache.lookup("killed", list(range(1, 201))) is not None  # the good one
    assert "half-written" in caplog.text
    assert [p.name for p in folder.iterdir()] == [p.name for p in cache_files(folder)]
    assert cache.stats().disk_entries == 1


def test_files_that_are_not_ours_are_left_alone(
    make_cache: Callable[..., PromptCache], folder: Path
) -> None:
    folder.mkdir()
    (folder / "readme.txt").write_text("not a cache file")
    (folder / "fgkv-short.fgkv").write_bytes(b"x")
    cache = make_cache()
    assert cache.lookup("a", tokens(100)) is None
    assert cache.stats().disk_entries == 0
    cache.clear()
    assert sorted(p.name for p in folder.iterdir()) == ["fgkv-short.fgkv", "readme.txt"]


# --------------------------------------------------------------------------------- identity


def test_the_model_identity_is_the_content_not_the_path(tmp_path: Path) -> None:
    content = os.urandom(3 * MB)
    first, second = tmp_path / "a.gguf", tmp_path / "b.gguf"
    first.write_bytes(content)
    second.write_bytes(content)
    assert ModelIdentity.of(first, 2048) == ModelIdentity.of(second, 2048)
    assert ModelIdentity.of(first, 2048) != ModelIdentity.of(first, 4096)
    assert ModelIdentity.of(first, 2048) != ModelIdentity.of(first, 2048, type_k=8)
    for at in (0, len(content) - 1):
        changed = bytearray(content)
        changed[at] ^= 0xFF
        second.write_bytes(bytes(changed))
        assert (
            ModelIdentity.of(second, 2048).model_digest
            != ModelIdentity.of(first, 2048).model_digest
        )
    second.write_bytes(content + b"\0")
    assert ModelIdentity.of(second, 2048).model_digest != ModelIdentity.of(first, 2048).model_digest
    runtime = ModelIdentity.of(first, 2048).runtime
    assert "llama-cpp-python 0.3" in runtime
    assert "libllama" in runtime


# --------------------------------------------------------------------------------- real model


@pytest.mark.model
def test_a_sequence_state_round_trips_to_identical_logits(model_path: Path, folder: Path) -> None:
    import llama_cpp

    llm = llama_cpp.Llama(model_path=str(model_path), n_ctx=512, n_threads=1, verbose=False)
    try:
        ctx = llm._ctx.ctx
        n_vocab = llm.n_vocab()
        text = "The quick brown fox jumps over the lazy dog. " * 5
        prompt = llm.tokenize(text.encode())
        assert len(prompt) > 40
        prefix, last = prompt[:-1], prompt[-1]

        def next_logits() -> list[float]:
            llm.eval([last])
            logits = llama_cpp.llama_get_logits_ith(ctx, -1)
            return list(ctypes.cast(logits, ctypes.POINTER(ctypes.c_float))[:n_vocab])

        llm.reset()  # type: ignore[no-untyped-call]
        llm.eval(prefix)
        saved = read_sequence(ctx)
        assert len(saved) > 10_000 * len(
            prefix
        )  # a real KV cache (about 23 KB a token), not a stub
        before = next_logits()

        # Something else in the sequence, as when another conversation ran meanwhile.
        llm.reset()  # type: ignore[no-untyped-call]
        llm.eval(llm.tokenize(b"Something else entirely, about cooking pasta."))
        assert write_sequence(ctx, saved)
        llm.n_tokens = len(prefix)
        assert next_logits() == before
        assert read_sequence(ctx) != saved  # now holds the last token too

        # Through the cache's folder and a new cache on it, as after a restart.
        first = PromptCache(
            ModelIdentity.of(model_path, 512),
            ram_budget=0,
            disk_dir=folder,
            disk_budget=256 * MB,
        )
        first.put("a", prefix, saved, 3.0)
        written(first, folder, 1)
        first.close()
        again = PromptCache(
            ModelIdentity.of(model_path, 512), ram_budget=0, disk_dir=folder, disk_budget=256 * MB
        )
        hit = again.lookup("a", prompt)
        again.close()
        assert hit is not None
        assert hit.source == "disk"
        llm.reset()  # type: ignore[no-untyped-call]
        assert write_sequence(ctx, hit.state)
        llm.n_tokens = len(prefix)
        assert next_logits() == before

        assert not write_sequence(ctx, b"not a state" * 100)
        memory = llama_cpp.llama_get_memory(ctx)
        assert llama_cpp.llama_memory_seq_pos_max(memory, 0) == -1  # left empty
    finally:
        llm.close()
