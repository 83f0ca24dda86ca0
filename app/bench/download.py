"""Downloads: Floodgate's download queue against a plain ``httpx`` stream of the same file.

Both read one file from the fake Hub on loopback (app/bench/fake_hub.py, served with
``sendfile``) and write it to disk, in interleaved pairs. Floodgate's side is what the window
runs: the :class:`DownloadQueue` on its thread, computing the sha256 as the bytes arrive,
syncing the file, checking it and moving it into the models folder, with its progress
reports handed to the UI loop. A 5 ms heartbeat measures the loop's lag meanwhile.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from app.bench.fake_hub import FakeFile, FakeHub, FakeRepo, gguf_bytes
from app.bench.measure import heartbeat
from app.bench.plan import Setup
from app.bench.stats import interleaved_pairs, summary
from app.downloads.queue import DownloadQueue, DownloadStatus, State
from app.downloads.transfer import RemoteFile

_NAME = "Bench-Q4_0.gguf"
_BLOCK = 1024 * 1024


def _served_file(path: Path, size: int) -> str:
    """Write a GGUF-headed file of ``size`` bytes (not compressible); returns its sha256."""
    hasher = hashlib.sha256()
    block = os.urandom(_BLOCK)
    with path.open("wb") as f:
        head = gguf_bytes({"general.architecture": "llama", "general.name": "Bench"})
        f.write(head)
        hasher.update(head)
        left = size - len(head)
        while left > 0:
            piece = block[: min(left, _BLOCK)]
            f.write(piece)
            hasher.update(piece)
            left -= len(piece)
    return hasher.hexdigest()


def _plain(client: httpx.Client, url: str, out: Path) -> float:
    """MiB/s of a plain streamed GET written to ``out`` (the baseline)."""
    start = time.perf_counter()
    with client.stream("GET", url) as response, out.open("wb") as f:
        response.raise_for_status()
        for chunk in response.iter_raw():
            f.write(chunk)
    elapsed = time.perf_counter() - start
    size = out.stat().st_size
    out.unlink()
    return size / elapsed / 2**20


async def _floodgate(remote: RemoteFile, folder: Path) -> float:
    """MiB/s of one download through the queue, its reports delivered to this loop."""
    loop = asyncio.get_running_loop()
    finished: asyncio.Future[DownloadStatus] = loop.create_future()
    reports = 0

    def on_report(status: DownloadStatus) -> None:
        nonlocal reports
        reports += 1
        if status.state in (State.DONE, State.FAILED) and not finished.done():
            finished.set_result(status)

    def on_change(status: DownloadStatus) -> None:  # on the queue's thread, as in the app
        loop.call_soon_threadsafe(on_report, status)

    queue = DownloadQueue(folder, on_change)
    start = time.perf_counter()
    queue.add([remote])
    status = await finished
    elapsed = time.perf_counter() - start
    queue.close()
    if status.state is not State.DONE or status.path is None:
        raise RuntimeError(f"the bench's download failed: {status.sentence}")
    await asyncio.to_thread(status.path.unlink)  # freeing 256 MB takes a while: off the loop
    return remote.size / elapsed / 2**20


async def download(setup: Setup) -> dict[str, Any]:
    """The ``download`` section: throughput pairs, their ratio, and the loop's lag."""
    size = setup.plan.download_mib * 2**20
    with tempfile.TemporaryDirectory(prefix="floodgate-bench-download-") as folder:
        root = Path(folder)
        source = root / _NAME
        sha256 = await asyncio.to_thread(_served_file, source, size)
        with FakeHub() as hub, httpx.Client(trust_env=True) as client:
            repo = hub.add(FakeRepo("bench/Bench-GGUF", {_NAME: FakeFile(source=source)}))
            remote = RemoteFile(hub.url, repo.repo_id, repo.sha, _NAME, size, sha256)
            models = root / "models"

            async def plain() -> float:
                return await asyncio.to_thread(_plain, client, remote.url, root / "plain.bin")

            async def floodgate() -> float:
                return await _floodgate(remote, models)

            async with heartbeat() as lag:
                pairs = await interleaved_pairs(
                    setup.plan.download_pairs, {"plain": plain}, floodgate, setup.log
                )
    figures = pairs["plain"].figures("plain")
    return {
        "mib": setup.plan.download_mib,
        "plain_mib_s": figures.pop("plain_tok_s"),
        "app_mib_s": round(statistics.median(pairs["plain"].app), 2),
        **figures,
        "loop_lag_ms": summary(lag),
    }
