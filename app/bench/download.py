"""Downloads: Floodgate's download queue against a plain ``httpx`` stream of the same file.

Both read one file from the fake Hub on loopback (app/standins/fake_hub.py, served with
``sendfile``) and write it to disk, in interleaved pairs, after one unmeasured run of each
(the served file in the page cache, the connections open). Floodgate's side is what the
window runs (:class:`HubDownloads`): the download queue on its thread, computing the sha256
as the bytes arrive, putting the file on disk, checking it and moving it into the models
folder, its rows crossing to the UI thread by signal to the model library's Hub tab, shown.
A 5 ms heartbeat measures the loop's lag while Floodgate downloads.

The reference of ``download.ratio`` is the plain stream written to a file and synced
(``fsync``), no hash, no check, no move: a downloaded file is on disk when the download says
it is done, as Floodgate's must be. A stream written only into the page cache (``page_cache``)
is measured too, for the record: its file is deleted before the kernel writes it out, so it
never reaches the disk (on the machine this was built on 1.9 GB/s against a disk that takes
0.9-1.3 GB/s); no download that keeps its promise can match it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from app.bench.plan import Setup
from app.bench.stats import interleaved_pairs, summary
from app.defaults import N_CTX
from app.downloads.transfer import RemoteFile
from app.flow.hub_downloads import DownloadRow, HubDownloads
from app.flow.metrics import Distribution, watch_loop_lag
from app.standins.fake_hub import FakeFile, FakeHub, FakeRepo, gguf_bytes
from app.ui.dialogs.model_library import ModelLibrary

_NAME = "Bench-Q4_0.gguf"
_BLOCK = 1024 * 1024
_SETTLE_S = 0.5
"""A pause before each run: a synced write of 256 MiB slowed the next run's disk for a while
(pairs came out 0.4 or 1.1 depending on which side ran second)."""


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


def _plain(client: httpx.Client, url: str, out: Path, *, synced: bool) -> float:
    """MiB/s of a plain streamed GET written to ``out``, then synced to disk when ``synced``."""
    start = time.perf_counter()
    with client.stream("GET", url) as response, out.open("wb") as f:
        response.raise_for_status()
        for chunk in response.iter_raw():
            f.write(chunk)
        if synced:
            f.flush()
            os.fsync(f.fileno())
    elapsed = time.perf_counter() - start
    size = out.stat().st_size
    out.unlink()
    return size / elapsed / 2**20


def _settle() -> None:
    """Let the disk finish what the run before wrote, so that no run pays for another's."""
    sync = getattr(os, "sync", None)  # not on Windows
    if sync is not None:
        sync()
    time.sleep(_SETTLE_S)


async def _floodgate(downloads: HubDownloads, remote: RemoteFile) -> float:
    """MiB/s of one download as the window runs it: the queue's thread, rows by signal."""
    finished: asyncio.Future[Path] = asyncio.get_running_loop().create_future()

    def on_change(row: DownloadRow) -> None:
        if finished.done():
            return
        if row.state == "done" and row.path is not None:
            finished.set_result(row.path)
        elif row.state == "failed":
            finished.set_exception(RuntimeError(f"the bench's download failed: {row.sentence}"))

    downloads.changed.connect(on_change)
    start = time.perf_counter()
    downloads.add([remote])
    try:
        path = await finished
    finally:
        downloads.changed.disconnect(on_change)
    elapsed = time.perf_counter() - start
    await asyncio.to_thread(path.unlink)  # freeing 256 MB takes a while: off the loop
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
            # One for the whole run, as the window keeps one for its life; the library's Hub
            # tab is open, so its table and progress bar follow every report.
            downloads = HubDownloads(root / "models", n_ctx=N_CTX)
            library = ModelLibrary(None, hub=downloads)
            library.tabs.setCurrentIndex(1)
            library.show()

            async def plain() -> float:
                await asyncio.to_thread(_settle)
                out = root / "plain.bin"
                return await asyncio.to_thread(_plain, client, remote.url, out, synced=True)

            async def page_cache() -> float:
                await asyncio.to_thread(_settle)
                out = root / "plain.bin"
                return await asyncio.to_thread(_plain, client, remote.url, out, synced=False)

            lag = Distribution()  # the loop's lateness while Floodgate downloads (only then)

            async def floodgate() -> float:
                await asyncio.to_thread(_settle)
                watch = asyncio.ensure_future(watch_loop_lag(lag))
                try:
                    return await _floodgate(downloads, remote)
                finally:
                    watch.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await watch

            try:
                await plain()  # warm: the served file read, the connections open
                await _floodgate(downloads, remote)
                pairs = await interleaved_pairs(
                    setup.plan.download_pairs,
                    {"plain": plain, "page_cache": page_cache},
                    floodgate,
                    setup.log,
                )
            finally:
                downloads.close()
                library.deleteLater()
    figures = pairs["plain"].figures("plain")
    cached = pairs["page_cache"].figures("page_cache", prefix="page_cache_")
    return {
        "mib": setup.plan.download_mib,
        "plain_mib_s": figures.pop("plain_tok_s"),
        "app_mib_s": round(statistics.median(pairs["plain"].app), 2),
        **figures,
        "page_cache_mib_s": cached.pop("page_cache_tok_s"),
        **cached,
        "loop_lag_ms": summary(lag),
    }
