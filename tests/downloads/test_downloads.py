"""Models from the Hub: search, choices, memory estimate, and downloads that resume and verify.

Everything talks to the fake Hub (a real HTTP server on 127.0.0.1, app/standins/fake_hub.py)
through the real ``huggingface_hub`` and ``httpx`` clients; the real Hub is never asked.
"""

from __future__ import annotations

import errno
import hashlib
import itertools
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import httpx
import keyring
import pytest

from app.downloads.download_queue import DownloadQueue, DownloadStatus, State
from app.downloads.errors import DownloadError
from app.downloads.estimate import (
    Assessment,
    Fit,
    assess,
    judge,
    model_shape,
    remote_header,
)
from app.downloads.files import (
    HubFile,
    ModelChoice,
    local_name,
    model_choices,
    projector_for,
    quantization_of,
)
from app.downloads.hub import Hub, save_token
from app.downloads.transfer import (
    PARTIAL_FOLDER,
    FileTransfer,
    RemoteFile,
    StoppedError,
    Writeback,
    partial_paths,
    pending,
)
from app.engine.model_card import read_model_card
from app.standins.fake_hub import FakeFile, FakeHub, FakeRepo
from app.store.paths import DEFAULT_MODEL
from tests.support.hub_repos import SMOL, SMOL_FILE, smol_repo, tiny, tiny_repo
from tests.support.keyring import MemoryKeyring

QUICK = (0.01, 0.01)
"""Retry pauses for tests: short, so a retry is quick (the stall timeout is injected too)."""

UNLIMITED = 10**15


def remote_of(hub: Hub, repo: FakeRepo, path: str) -> RemoteFile:
    file = repo.files[path]
    return RemoteFile(hub.endpoint, repo.repo_id, repo.sha, path, file.size, file.sha256)


def transfer(
    hub: Hub, repo: FakeRepo, path: str, folder: Path, client: httpx.Client, **kwargs: object
) -> FileTransfer:
    options: dict[str, object] = {"retry_delays": QUICK, "free_space": lambda _: UNLIMITED}
    options.update(kwargs)
    return FileTransfer(
        remote_of(hub, repo, path),
        folder,
        client,
        headers=hub.headers(),
        **options,  # type: ignore[arg-type]
    )


def file_gets(fake: FakeHub, path: str) -> list[str | None]:
    """The Range header of every GET of ``path`` (None: the whole file)."""
    return [r.range for r in fake.requests if r.method == "GET" and r.path.endswith("/" + path)]


class Reported:
    """What a download queue reports (on its thread): call it with a status; wait for one."""

    def __init__(self) -> None:
        self.changed = threading.Condition()
        self.statuses: list[DownloadStatus] = []

    def __call__(self, status: DownloadStatus) -> None:
        with self.changed:
            self.statuses.append(status)
            self.changed.notify_all()

    def wait_for(self, download_id: int, test: Callable[[DownloadStatus], bool]) -> DownloadStatus:
        """The latest status of ``download_id`` that passes ``test`` (waits up to 20 s)."""

        def matches() -> list[DownloadStatus]:
            return [s for s in self.statuses if s.id == download_id and test(s)]

        with self.changed:
            assert self.changed.wait_for(lambda: bool(matches()), timeout=20)
            return matches()[-1]


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(trust_env=True, follow_redirects=True) as c:
        yield c


@pytest.fixture
def models(tmp_path: Path) -> Path:
    return tmp_path / "models"


@pytest.fixture
def make_queue(models: Path) -> Iterator[Callable[..., DownloadQueue]]:
    """Download queues into ``models``, closed (threads and connections) when the test ends."""
    made: list[DownloadQueue] = []

    def make(on_change: Callable[[DownloadStatus], None], **options: Any) -> DownloadQueue:
        queue = DownloadQueue(models, on_change, free_space=lambda _: UNLIMITED, **options)
        made.append(queue)
        return queue

    yield make
    for queue in made:
        queue.close()


# Finding.


def test_search_pages_through_the_hubs_link_header(fake_hub: FakeHub) -> None:
    for i in range(7):
        fake_hub.add(FakeRepo(f"maker{i}/Model{i}-GGUF", {}, downloads=100 * i, likes=7 - i))
    fake_hub.add(FakeRepo("other/Unrelated-GGUF", {}, downloads=10**6))

    search = Hub().search("model", sort="downloads")
    first = search.next_page(5)
    assert [r.repo_id for r in first] == [f"maker{i}/Model{i}-GGUF" for i in (6, 5, 4, 3, 2)]
    assert not search.exhausted
    second = search.next_page(5)
    assert [r.repo_id for r in second] == ["maker1/Model1-GGUF", "maker0/Model0-GGUF"]
    assert search.exhausted
    # The server's pages hold 3: the seven results came in three requests, cursor-linked.
    listings = [r for r in fake_hub.requests if r.path == "/api/models"]
    assert len(listings) == 3

    by_likes = Hub().search("model", sort="likes").next_page(3)
    assert [r.repo_id for r in by_likes] == [f"maker{i}/Model{i}-GGUF" for i in (0, 1, 2)]


def test_a_repository_lists_its_gguf_models_by_quantization_splits_as_one(
    fake_hub: FakeHub,
) -> None:
    repo = fake_hub.add(tiny_repo(license="llama3.1", gated=True, token="t"))
    listing = Hub().repository(repo.repo_id)
    assert listing.revision == repo.sha
    assert listing.license == "llama3.1"
    assert listing.gated
    assert [(c.quantization, c.label, len(c.files)) for c in listing.choices] == [
        ("Q2_K", "Tiny-Q2_K.gguf", 1),
        ("Q4_K_M", "Tiny-Q4_K_M.gguf", 1),
        ("Q8_0", "Tiny-Q8_0-00001-of-00002.gguf", 2),
        ("F16", "Tiny-F16.gguf", 1),
    ]
    split = listing.choices[2]
    assert split.size == repo.files["Q8_0/Tiny-Q8_0-00001-of-00002.gguf"].size + 450_000
    assert [f.sha256 for f in split.files] == [
        repo.files["Q8_0/Tiny-Q8_0-00001-of-00002.gguf"].sha256,
        repo.files["Q8_0/Tiny-Q8_0-00002-of-00002.gguf"].sha256,
    ]


def test_a_split_with_a_part_missing_is_not_offered_and_a_projector_goes_with_a_model() -> None:
    sha = "0" * 64
    files = [
        HubFile("M-Q4_K_M-00001-of-00003.gguf", 10, sha),
        HubFile("M-Q4_K_M-00003-of-00003.gguf", 10, sha),
        HubFile("mmproj-M-F16.gguf", 10, sha),
        HubFile("M-Q5_K_S.gguf", 10, None),  # not in LFS: nothing to verify it against
        HubFile("M-IQ2_XXS.gguf", 10, sha),
    ]
    [offered] = model_choices(files)
    assert offered.label == "M-IQ2_XXS.gguf"
    # The projector goes with the model (no IQ2_XXS projector: the F16 one), counted in its size.
    assert offered.projector == files[2]
    assert offered.downloads == (files[4], files[2])
    assert offered.size == 20
    # Kept under the model's name: paired with it, and safe from another repository's.
    assert offered.local_name(files[2]) == "mmproj-M-IQ2_XXS.gguf"
    assert offered.local_name(files[4]) == "M-IQ2_XXS.gguf"
    q8 = HubFile("mmproj-M-Q8_0.gguf", 5, sha)
    assert projector_for("Q8_0", [files[2], q8]) == q8
    assert projector_for("Q4_K_M", [q8, files[2]]) == files[2]
    assert projector_for("Q4_K_M", [q8]) == q8
    assert quantization_of("Llama-3.2-1B-Instruct-UD-Q4_K_XL.gguf") == "Q4_K_XL"
    assert quantization_of("model.q8_0.gguf") == "Q8_0"


def test_hostile_names_are_never_offered_nor_written(fake_hub: FakeHub, models: Path) -> None:
    for hostile in (
        "../evil.gguf",
        "a/../../evil.gguf",
        "..\\evil.gguf",
        "/etc/evil.gguf",
        "sub/.hidden.gguf",
        "evil\x00.gguf",
        "C:evil.gguf",
        "evil\n.gguf",
        "notes.txt",
        "x" * 300 + ".gguf",
    ):
        assert local_name(hostile) is None, hostile
    assert local_name("Q4/fine-Q4_K_M.gguf") == "fine-Q4_K_M.gguf"

    repo = fake_hub.add(
        FakeRepo(
            "tester/Hostile-GGUF",
            {
                "../../outside-Q4_0.gguf": FakeFile(data=tiny(1000)),
                "sub/fine-Q4_0.gguf": FakeFile(data=tiny(1000)),
            },
        )
    )
    listing = Hub().repository(repo.repo_id)
    assert [c.label for c in listing.choices] == ["fine-Q4_0.gguf"]
    with pytest.raises(ValueError, match="name"):
        RemoteFile(fake_hub.url, repo.repo_id, repo.sha, "../../outside-Q4_0.gguf", 1000, "0" * 64)
    with pytest.raises(DownloadError, match="not a repository name"):
        Hub().repository("../../etc")
    # A record someone edited to point outside the folder is not a download.
    record = models / PARTIAL_FOLDER / "x.gguf.json"
    record.parent.mkdir(parents=True)
    record.write_text(
        json.dumps(
            {
                "endpoint": fake_hub.url,
                "repo_id": "a/b",
                "revision": "r",
                "path": "../x.gguf",
                "size": 1,
                "sha256": "0" * 64,
            }
        )
    )
    assert pending(models) == []


def test_the_memory_estimate_counts_weights_and_kv_cache_and_recommends_one(
    fake_hub: FakeHub, client: httpx.Client
) -> None:
    repo = fake_hub.add(tiny_repo())
    hub = Hub()
    listing = hub.repository(repo.repo_id)
    memory = 2_500_000

    def estimate(choices: list[ModelChoice], n_ctx: int = 1024, gpu: int = 0) -> Assessment:
        def url(path: str) -> str:
            return hub.file_url(repo.repo_id, repo.sha, path)

        return assess(client, choices, url, hub.headers(), n_ctx=n_ctx, memory=memory, gpu=gpu)

    result = estimate(listing.choices)
    assert result.shape is not None
    # 4 layers x 2 KV heads x (32 + 32) x 2 bytes = 1 KiB a token.
    assert result.shape.kv_cache_bytes(1024) == 1024 * 1024
    needs = [e.total for e in result.estimates]
    assert needs == [c.size + 1024 * 1024 for c in listing.choices]
    assert [e.fit for e in result.estimates] == [Fit.FITS, Fit.FITS, Fit.TIGHT, Fit.TOO_LARGE]
    assert listing.choices[result.recommended or 0].quantization == "Q4_K_M"
    # The context is capped at what the model was trained for (2048 here).
    assert estimate(listing.choices[:1], n_ctx=100_000).estimates[0].n_ctx == 2048
    # The header came by range requests: a few, never the whole file.
    assert all(r is not None for r in file_gets(fake_hub, "Tiny-Q2_K.gguf"))
    assert judge(10, 0) is Fit.TIGHT  # memory unknown: never "fits" blindly
    # With a GPU: what fits it whole says so and is recommended first (many times faster);
    # what does not runs partly from RAM, which is judged for the rest.
    gpu = needs[1]
    on_gpu = estimate(listing.choices, gpu=gpu)
    fits = [e.fit for e in on_gpu.estimates]
    assert fits[:2] == [Fit.GPU, Fit.GPU]
    assert fits[2:] == [judge(n - gpu, memory) for n in needs[2:]]
    assert on_gpu.recommended == 1  # the largest that fits the GPU


@pytest.mark.model
def test_the_estimate_matches_llama_cpps_own_allocation_for_the_bundled_model(
    fake_hub: FakeHub, client: httpx.Client
) -> None:
    fake_hub.add(smol_repo())
    hub = Hub()
    url = hub.file_url(SMOL, fake_hub.repos[SMOL].sha, SMOL_FILE)
    shape = model_shape(remote_header(client, url, SMOL_FILE))
    assert shape is not None
    n_ctx = 2048
    # llama.cpp, in a child process so its log stays there, says what it allocated.
    script = (
        "import llama_cpp, sys\n"
        f"llama_cpp.Llama({str(DEFAULT_MODEL)!r}, n_ctx={n_ctx}, n_threads=1, verbose=True)\n"
    )
    log = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    ).stderr
    kv_mib = float(re.search(r"KV buffer size =\s*([\d.]+) MiB", log)[1])  # type: ignore[index]
    weights_mib = float(re.search(r"model buffer size =\s*([\d.]+) MiB", log)[1])  # type: ignore[index]
    assert round(shape.kv_cache_bytes(n_ctx) / 2**20, 2) == kv_mib
    # The weights estimate is the file: llama.cpp maps the tensors, the rest is the header.
    size_mib = DEFAULT_MODEL.stat().st_size / 2**20
    assert weights_mib <= size_mib <= weights_mib * 1.05


# Downloading.


@pytest.mark.model
def test_a_download_completes_verifies_and_opens(
    fake_hub: FakeHub, models: Path, make_queue: Callable[..., DownloadQueue]
) -> None:
    from app.engine import EngineOptions, GenerationReport, GenerationSettings, StopSignal
    from app.engine.llama import open_llama

    fake_hub.add(smol_repo())
    hub = Hub()
    listing = hub.repository(SMOL)
    seen: list[DownloadStatus] = []
    queue = make_queue(seen.append)
    files = [
        RemoteFile(hub.endpoint, SMOL, listing.revision, f.path, f.size, f.sha256 or "")
        for f in listing.choices[0].files
    ]
    queue.add(files, hub.headers())
    assert queue.wait(60)
    final = seen[-1]
    assert final.state is State.DONE, final.sentence
    assert final.path == models / SMOL_FILE
    assert final.done == final.total == DEFAULT_MODEL.stat().st_size
    assert State.DOWNLOADING in {s.state for s in seen}
    assert not any((models / PARTIAL_FOLDER).iterdir())
    card = read_model_card(final.path)
    assert card.architecture == "llama"
    question = [{"role": "user", "content": "What is the capital of France?"}]
    settings = GenerationSettings(temperature=0.0, max_tokens=12)

    def greedy(path: Path) -> str:
        backend = open_llama(path, EngineOptions(n_ctx=256, n_threads=1))
        try:
            report = GenerationReport()
            return "".join(backend.stream_reply(question, settings, StopSignal(), report))  # type: ignore[arg-type]
        finally:
            backend.close()

    # The downloaded model answers, as the bundled one does.
    answer = greedy(final.path)
    assert answer.strip()
    assert answer == greedy(DEFAULT_MODEL)

    # Present and verified: not downloaded again.
    gets = len(file_gets(fake_hub, SMOL_FILE))
    again: list[DownloadStatus] = []
    second = make_queue(again.append)
    second.add(files, hub.headers())
    assert second.wait(60)
    assert again[-1].state is State.DONE
    queue.add(files, hub.headers())  # the same queue, asked again after it finished
    assert queue.wait(60)
    assert seen[-1].state is State.DONE
    assert seen[-1].id != final.id
    assert len(file_gets(fake_hub, SMOL_FILE)) == gets


@pytest.mark.parametrize("ignore_ranges", [False, True], ids=["ranges", "server ignores ranges"])
def test_a_dropped_connection_resumes_with_a_range_request(
    fake_hub: FakeHub, models: Path, client: httpx.Client, ignore_ranges: bool
) -> None:
    # A server that ignores the range answers 200 with the whole file: read from the start.
    repo = fake_hub.add(tiny_repo())
    fake_hub.faults.drop_after = 200_000
    fake_hub.faults.ignore_ranges = ignore_ranges
    path = transfer(Hub(), repo, "Tiny-F16.gguf", models, client).run()
    assert path.read_bytes() == repo.files["Tiny-F16.gguf"].data
    assert file_gets(fake_hub, "Tiny-F16.gguf") == [None, "bytes=200000-"]


def test_a_stall_is_retried_then_said(
    fake_hub: FakeHub, models: Path, client: httpx.Client
) -> None:
    repo = fake_hub.add(tiny_repo())
    fake_hub.faults.stall_after = 100_000
    fake_hub.faults.stall_seconds = 2.0
    path = transfer(Hub(), repo, "Tiny-F16.gguf", models, client, stall_timeout=0.3).run()
    assert path.read_bytes() == repo.files["Tiny-F16.gguf"].data
    assert file_gets(fake_hub, "Tiny-F16.gguf") == [None, "bytes=100000-"]

    fake_hub.faults.stalls = 10
    with pytest.raises(DownloadError, match=r"stalled: no data for 0.3 seconds, 3 times") as info:
        transfer(Hub(), repo, "Tiny-Q4_K_M.gguf", models, client, stall_timeout=0.3).run()
    assert info.value.keeps_partial
    part, record = partial_paths(models, "Tiny-Q4_K_M.gguf")
    assert part.stat().st_size == 100_000
    assert record.is_file()


def test_wrong_bytes_are_deleted_and_said(
    fake_hub: FakeHub, models: Path, client: httpx.Client
) -> None:
    repo = fake_hub.add(tiny_repo())
    fake_hub.faults.wrong_bytes = {"Tiny-Q2_K.gguf"}
    with pytest.raises(DownloadError, match="arrived damaged: its sha256"):
        transfer(Hub(), repo, "Tiny-Q2_K.gguf", models, client).run()
    assert not (models / "Tiny-Q2_K.gguf").exists()
    assert not any((models / PARTIAL_FOLDER).iterdir())

    # Right bytes of a file that is no GGUF: the same check as any model file, then deleted.
    repo.files["Not-Q4_0.gguf"] = FakeFile(data=b"<html>not a model</html>")
    with pytest.raises(DownloadError, match=r"Not-Q4_0\.gguf is not a GGUF model file"):
        transfer(Hub(), repo, "Not-Q4_0.gguf", models, client).run()
    assert not (models / "Not-Q4_0.gguf").exists()
    assert not any((models / PARTIAL_FOLDER).iterdir())


def test_more_bytes_than_listed_are_refused(
    fake_hub: FakeHub, models: Path, client: httpx.Client
) -> None:
    repo = fake_hub.add(tiny_repo())
    repo.listed_sizes["Tiny-Q2_K.gguf"] = 1000
    listing = Hub().repository(repo.repo_id)
    small = next(c for c in listing.choices if c.quantization == "Q2_K").first
    remote = RemoteFile(fake_hub.url, repo.repo_id, repo.sha, small.path, small.size, "0" * 64)
    with pytest.raises(DownloadError, match="but the Hub lists 1000"):
        FileTransfer(remote, models, client, free_space=lambda _: UNLIMITED).run()
    assert not (models / "Tiny-Q2_K.gguf").exists()


def test_a_gated_repository_says_how_to_get_access_and_uses_the_kept_token(
    fake_hub: FakeHub, models: Path, client: httpx.Client
) -> None:
    repo = fake_hub.add(tiny_repo("meta/Gated-GGUF", gated=True, token="hf_secret"))
    with pytest.raises(
        DownloadError, match=r"refused access to meta/Gated-GGUF \(HTTP 401\)"
    ) as info:
        transfer(Hub(), repo, "Tiny-Q2_K.gguf", models, client).run()
    assert f"{fake_hub.url}/settings/tokens" in str(info.value)
    assert not (models / "Tiny-Q2_K.gguf").exists()

    before = keyring.get_keyring()
    keyring.set_keyring(MemoryKeyring())
    try:
        assert save_token(fake_hub.url, "hf_secret")
        hub = Hub()
        assert hub.token == "hf_secret"
        path = transfer(hub, repo, "Tiny-Q2_K.gguf", models, client).run()
    finally:
        keyring.set_keyring(before)
    assert path.read_bytes() == repo.files["Tiny-Q2_K.gguf"].data


def test_a_missing_repository_or_file_is_said(
    fake_hub: FakeHub, models: Path, client: httpx.Client
) -> None:
    with pytest.raises(DownloadError, match="The Hub has no repository nobody/Nothing-GGUF"):
        Hub().repository("nobody/Nothing-GGUF")
    repo = fake_hub.add(tiny_repo())
    hub = Hub()
    gone = RemoteFile(hub.endpoint, repo.repo_id, repo.sha, "Gone-Q4_0.gguf", 10, "0" * 64)
    with pytest.raises(
        DownloadError, match=r"no file Gone-Q4_0.gguf in tester/Tiny-GGUF \(HTTP 404\)"
    ):
        FileTransfer(gone, models, client, free_space=lambda _: UNLIMITED).run()


def test_an_unreachable_hub_is_said_and_nothing_else_breaks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with FakeHub() as hub:
        closed = hub.url  # served nowhere once stopped
    monkeypatch.setenv("HF_ENDPOINT", closed)
    with pytest.raises(DownloadError, match="cannot be reached") as info:
        Hub().search("llama")
    assert "Models already on this computer keep working" in str(info.value)


def test_too_little_disk_space_is_said_before_any_byte(
    fake_hub: FakeHub, models: Path, client: httpx.Client
) -> None:
    repo = fake_hub.add(tiny_repo())
    with pytest.raises(DownloadError, match=r"not enough free disk space for Tiny-F16\.gguf"):
        transfer(Hub(), repo, "Tiny-F16.gguf", models, client, free_space=lambda _: 1000).run()
    assert file_gets(fake_hub, "Tiny-F16.gguf") == []


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MB tmpfs, where the system lets this user mount one (root on Linux)."""
    mount = tmp_path / "small-disk"
    mount.mkdir()
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True
    )
    if made.returncode != 0:
        pytest.skip("no tmpfs can be mounted here")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def test_a_disk_that_fills_mid_way_stops_with_a_sentence_and_keeps_the_partial(
    fake_hub: FakeHub, small_disk: Path, client: httpx.Client
) -> None:
    repo = fake_hub.add(tiny_repo())
    # The free-space check is told there is room, as when another program fills the disk.
    with pytest.raises(DownloadError, match="The disk is full") as info:
        transfer(Hub(), repo, "Tiny-F16.gguf", small_disk, client).run()
    assert info.value.keeps_partial
    part, record = partial_paths(small_disk, "Tiny-F16.gguf")
    assert 0 < part.stat().st_size < 1_500_000
    assert record.is_file()


def test_the_writeback_puts_written_bytes_on_disk_and_tells_the_writer_when_it_cannot(
    tmp_path: Path,
) -> None:
    # A real file: the writeback's syncs go through, and the writer is never interrupted.
    path = tmp_path / "file.part"
    with path.open("wb", buffering=0) as f, Writeback(f.fileno(), every=1000) as writeback:
        for total in range(1000, 20_001, 1000):
            f.write(b"x" * 1000)
            writeback.wrote(total)
    assert path.stat().st_size == 20_000
    # A pipe cannot be synced: the failure reaches the writer at its next write, not lost on
    # the writeback's thread (the transfer turns it into its disk sentence).
    read_end, write_end = os.pipe()
    try:
        failed = pytest.raises(OSError, match=r"Errno")
        with Writeback(write_end, every=1) as failing, failed as info:
            for total in itertools.count(1):
                os.write(write_end, b"x")
                os.read(read_end, 1)
                failing.wrote(total)
                time.sleep(0.001)
        assert info.value.errno == errno.EINVAL
    finally:
        os.close(read_end)
        os.close(write_end)


def test_pause_resume_cancel_and_a_queue_of_several(
    fake_hub: FakeHub, models: Path, make_queue: Callable[..., DownloadQueue]
) -> None:
    repo = fake_hub.add(tiny_repo())
    fake_hub.faults.rate = 1_000_000  # a second and a half for the F16
    hub = Hub()
    reported = Reported()
    seen, on_change, wait_for = reported.statuses, reported, reported.wait_for

    queue = make_queue(on_change, report_interval=0.02)
    big = queue.add([remote_of(hub, repo, "Tiny-F16.gguf")], hub.headers())
    small = queue.add([remote_of(hub, repo, "Tiny-Q2_K.gguf")], hub.headers())
    assert small.state is State.QUEUED
    wait_for(big.id, lambda s: s.state is State.DOWNLOADING and s.done > 100_000)
    queue.pause(big.id)
    # The next in the queue goes on while the first waits.
    wait_for(small.id, lambda s: s.state is State.DONE)
    part, _ = partial_paths(models, "Tiny-F16.gguf")
    kept = part.stat().st_size
    assert kept > 100_000

    # A new queue (Floodgate restarted) finds the partial download, paused.
    queue.close()
    fake_hub.faults.rate = None
    seen.clear()
    later = make_queue(on_change)
    [restored] = later.restore(hub.headers())
    assert (restored.state, restored.done, restored.label) == (State.PAUSED, kept, "Tiny-F16.gguf")
    later.resume(restored.id)
    done = wait_for(restored.id, lambda s: s.state is State.DONE)
    assert done.path == models / "Tiny-F16.gguf"
    assert done.path.read_bytes() == repo.files["Tiny-F16.gguf"].data
    assert file_gets(fake_hub, "Tiny-F16.gguf")[-1] == f"bytes={kept}-"

    # Cancel deletes what arrived.
    fake_hub.faults.rate = 200_000
    doomed = later.add([remote_of(hub, repo, "Tiny-Q4_K_M.gguf")], hub.headers())
    wait_for(doomed.id, lambda s: s.state is State.DOWNLOADING and s.done > 0)
    later.cancel(doomed.id)
    assert later.wait(10)
    assert wait_for(doomed.id, lambda s: s.state is State.CANCELLED)
    assert not partial_paths(models, "Tiny-Q4_K_M.gguf")[0].exists()
    assert not partial_paths(models, "Tiny-Q4_K_M.gguf")[1].exists()
    assert not (models / "Tiny-Q4_K_M.gguf").exists()


def test_after_a_restart_running_downloads_go_on_paused_ones_wait_a_split_model_is_one(
    fake_hub: FakeHub, models: Path, make_queue: Callable[..., DownloadQueue]
) -> None:
    repo = fake_hub.add(tiny_repo())
    fake_hub.faults.rate = 1_000_000  # the split model takes about a second
    hub = Hub()
    first, second = (remote_of(hub, repo, f"Q8_0/Tiny-Q8_0-0000{n}-of-00002.gguf") for n in (1, 2))
    reported = Reported()
    seen, on_change, wait_for = reported.statuses, reported, reported.wait_for

    queue = make_queue(on_change, report_interval=0.02)
    split = queue.add([first, second], hub.headers())
    held = queue.add([remote_of(hub, repo, "Tiny-Q4_K_M.gguf")], hub.headers())
    queue.pause(held.id)  # paused by the user before it began
    wait_for(split.id, lambda s: s.done > first.size + 50_000)  # into its second part
    queue.close()  # Floodgate ends mid-download
    assert (models / first.name).is_file()  # the first part finished and was moved
    kept = partial_paths(models, second.name)[0].stat().st_size
    assert kept >= 50_000

    fake_hub.faults.rate = None
    seen.clear()
    later = make_queue(on_change)
    restored = {s.label: s for s in later.restore(hub.headers())}
    # The split model is one download, its finished part counted; the paused one waits.
    assert set(restored) == {first.name, "Tiny-Q4_K_M.gguf"}
    model = restored[first.name]
    assert (model.done, model.total) == (first.size + kept, first.size + second.size)
    assert model.state is State.QUEUED  # it was running: it goes on by itself
    assert restored["Tiny-Q4_K_M.gguf"].state is State.PAUSED
    done = wait_for(model.id, lambda s: s.state is State.DONE)
    assert done.path == models / first.name
    for remote in (first, second):
        assert hashlib.sha256((models / remote.name).read_bytes()).hexdigest() == remote.sha256
    assert file_gets(fake_hub, first.path) == [None]  # not downloaded twice
    assert file_gets(fake_hub, second.path)[-1] == f"bytes={kept}-"
    assert later.wait(10)
    assert later.statuses()[1].state is State.PAUSED  # still waiting for the user

    # Done or cancelled, a download leaves nothing to restore.
    later.cancel(restored["Tiny-Q4_K_M.gguf"].id)
    assert later.wait(10)
    assert not list((models / PARTIAL_FOLDER).iterdir())
    assert make_queue(on_change).restore(hub.headers()) == []


def test_a_split_model_downloads_every_part(
    fake_hub: FakeHub, models: Path, make_queue: Callable[..., DownloadQueue]
) -> None:
    repo = fake_hub.add(tiny_repo())
    hub = Hub()
    split = next(c for c in hub.repository(repo.repo_id).choices if c.is_split)
    seen: list[DownloadStatus] = []
    queue = make_queue(seen.append)
    queue.add(
        [
            RemoteFile(hub.endpoint, repo.repo_id, repo.sha, f.path, f.size, f.sha256 or "")
            for f in split.files
        ]
    )
    assert queue.wait(20)
    assert seen[-1].state is State.DONE
    assert seen[-1].path == models / "Tiny-Q8_0-00001-of-00002.gguf"
    for f in split.files:
        assert hashlib.sha256((models / f.name).read_bytes()).hexdigest() == f.sha256


def test_a_different_file_of_the_same_name_is_kept(
    fake_hub: FakeHub, models: Path, client: httpx.Client
) -> None:
    repo = fake_hub.add(tiny_repo())
    models.mkdir()
    (models / "Tiny-Q2_K.gguf").write_bytes(b"GGUF mine")
    with pytest.raises(DownloadError, match=r"A different file named Tiny-Q2_K\.gguf"):
        transfer(Hub(), repo, "Tiny-Q2_K.gguf", models, client).run()
    assert (models / "Tiny-Q2_K.gguf").read_bytes() == b"GGUF mine"


def test_a_stop_keeps_the_partial_and_its_record(
    fake_hub: FakeHub, models: Path, client: httpx.Client
) -> None:
    repo = fake_hub.add(tiny_repo())
    stop = threading.Event()

    def progress(done: int) -> None:
        if done >= 100_000:
            stop.set()

    with pytest.raises(StoppedError):
        transfer(
            Hub(), repo, "Tiny-F16.gguf", models, client, stop=stop, on_progress=progress
        ).run()
    [(remote, done)] = pending(models)
    assert remote == remote_of(Hub(), repo, "Tiny-F16.gguf")
    assert done >= 100_000


def test_a_pause_and_resume_before_the_first_byte_still_show_the_download(
    fake_hub: FakeHub, make_queue: Callable[..., DownloadQueue]
) -> None:
    repo = fake_hub.add(tiny_repo())
    hub = Hub()
    seen: list[DownloadStatus] = []
    clicked = threading.Event()

    def on_change(status: DownloadStatus) -> None:
        seen.append(status)
        if status.state is State.DOWNLOADING and not clicked.is_set():
            clicked.set()  # Pause then Resume, before the transfer has asked for a byte
            queue.pause(status.id)
            queue.resume(status.id)

    queue = make_queue(on_change, report_interval=0.0)
    queue.add([remote_of(hub, repo, "Tiny-F16.gguf")])
    assert queue.wait(20)
    states = [s.state for s in seen]
    assert states[-1] is State.DONE
    # It went back to downloading (and said so) rather than going on unseen as "waiting".
    after_resume = states[states.index(State.QUEUED, 2) :]
    assert State.DOWNLOADING in after_resume
    assert any(s.state is State.DOWNLOADING and s.done > 0 for s in seen)


def test_a_file_kept_under_another_name_keeps_it_through_a_resume_record() -> None:
    sha = "a" * 64
    remote = RemoteFile(
        "http://hub.test", "o/r", "main", "sub/mmproj-F16.gguf", 10, sha, "mmproj-M.gguf"
    )
    assert remote.name == "mmproj-M.gguf"
    assert RemoteFile.from_record(asdict(remote)) == remote
    older = {k: v for k, v in asdict(remote).items() if k != "local"}  # a record from before
    assert RemoteFile.from_record(older).name == "mmproj-F16.gguf"  # type: ignore[union-attr]
    for unsafe in ("../mmproj.gguf", "a/b.gguf", "mmproj.txt"):
        with pytest.raises(ValueError, match="name"):
            RemoteFile("http://hub.test", "o/r", "main", "mmproj-F16.gguf", 10, sha, unsafe)
