"""The flow's side of the Hub: searches and downloads off the UI thread, rows in words."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from app.flow.hub_downloads import DownloadRow, HubDownloads, HubError
from app.standins.fake_hub import FakeHub, FakeRepo
from tests.support.hub_repos import tiny_repo
from tests.support.loop import Loop, run_until


@pytest.fixture
def downloads(loop: Loop, floodgate_home: Path) -> HubDownloads:
    hub = HubDownloads(floodgate_home / "models", n_ctx=1024)
    yield hub  # type: ignore[misc]
    hub.close()


def test_search_and_more_pages_and_a_repositorys_models(
    loop: Loop, fake_hub: FakeHub, downloads: HubDownloads
) -> None:
    for i in range(25):
        fake_hub.add(FakeRepo(f"maker/Model{i:02}-GGUF", {}, downloads=i))
    fake_hub.add(tiny_repo(license="mit"))
    fake_hub.add(tiny_repo("meta/Gated-GGUF", gated=True, token="t"))
    rows, more = loop.run_until_complete(downloads.search("Model", "downloads"))
    assert [r.repo_id for r in rows][:2] == ["maker/Model24-GGUF", "maker/Model23-GGUF"]
    assert len(rows) == 20
    assert more
    rest, more = loop.run_until_complete(downloads.more())
    assert len(rest) == 5
    assert not more

    view = loop.run_until_complete(downloads.repository("tester/Tiny-GGUF"))
    assert (view.license, view.gated, view.note) == ("mit", False, "")
    assert [c.quantization for c in view.choices] == ["Q2_K", "Q4_K_M", "Q8_0", "F16"]
    assert [c.parts for c in view.choices] == [1, 1, 2, 1]
    assert sum(c.recommended for c in view.choices) == 1
    assert {c.fit for c in view.choices} <= {"fits", "tight", "too large"}

    # Gated, without a token: listed and marked, its memory counted from the sizes alone.
    gated = loop.run_until_complete(downloads.repository("meta/Gated-GGUF"))
    assert gated.gated
    assert "HTTP 401" in gated.note
    assert len(gated.choices) == 4


def test_the_ui_thread_gets_rows_and_the_finished_model(
    loop: Loop, fake_hub: FakeHub, downloads: HubDownloads
) -> None:
    repo = fake_hub.add(tiny_repo())
    fake_hub.faults.rate = 2_000_000
    loop.run_until_complete(downloads.repository(repo.repo_id))
    main = threading.get_ident()
    rows: list[tuple[int, DownloadRow]] = []
    finished: list[Path] = []
    downloads.changed.connect(lambda row: rows.append((threading.get_ident(), row)))
    downloads.finished.connect(finished.append)

    first = downloads.download("Tiny-F16.gguf")
    assert first is not None
    # Queued, the status line says it waits; then that it downloads.
    assert downloads.status_text().startswith("Tiny-F16.gguf: Waiting")
    run_until(loop, lambda: "Tiny-F16.gguf: Downloading" in downloads.status_text())
    run_until(loop, lambda: bool(finished), timeout=20)
    assert finished == [downloads.folder / "Tiny-F16.gguf"]
    assert {thread for thread, _ in rows} == {main}
    states = [row.state for _, row in rows]
    assert states[0] == "queued"
    assert states[-1] == "done"
    moving = [row for _, row in rows if row.state == "downloading" and 0 < row.fraction < 1]
    assert moving, "progress was reported while it downloaded"
    assert " of " in moving[-1].progress
    assert "/s" in moving[-1].progress
    assert downloads.status_text() == ""


def test_an_unreachable_hub_is_a_sentence(
    loop: Loop, monkeypatch: pytest.MonkeyPatch, downloads: HubDownloads
) -> None:
    with FakeHub() as hub:
        closed = hub.url
    monkeypatch.setenv("HF_ENDPOINT", closed)
    with pytest.raises(HubError, match="cannot be reached"):
        loop.run_until_complete(downloads.search("llama", "likes"))
