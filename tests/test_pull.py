"""``floodgate pull`` in a real child process, interrupted, killed, run again (fake Hub)."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from app.downloads.transfer import partial_paths
from app.engine.model_card import find_projector, read_model_card
from app.main import build_parser
from app.standins.fake_hub import FakeFile, FakeHub, FakeRepo
from app.standins.projector import ProjectorShape, write_projector
from app.store.paths import DEFAULT_MODEL, PROJECT_DIR
from tests.support.hub_repos import SMOL, SMOL_FILE, smol_repo, tiny_repo


def start_pull(spec: str, home: Path, hub: FakeHub) -> subprocess.Popen[str]:
    env = {**os.environ, "FLOODGATE_HOME": str(home), "HF_ENDPOINT": hub.url}
    env.pop("HF_TOKEN", None)
    return subprocess.Popen(
        [sys.executable, "-m", "app", "pull", spec],
        cwd=PROJECT_DIR,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_interruptible,
    )


def _interruptible() -> None:
    """Ctrl+C reaches the pull as in a terminal.

    A command started in the background by a non-interactive shell (a CI script's ``&``)
    inherits SIGINT ignored, and Python then installs no KeyboardInterrupt handler: the pull
    ran to its end through the test's Ctrl+C.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def wait_for_bytes(part: Path, more_than: int, child: subprocess.Popen[str]) -> int:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        size = part.stat().st_size if part.exists() else 0
        if size > more_than:
            return size
        assert child.poll() is None, child.communicate()
        time.sleep(0.05)
    raise AssertionError(f"{part} stayed at {more_than} bytes")


def test_pull_is_listed_in_the_help() -> None:
    assert "floodgate pull REPO[:FILE or QUANT]" in build_parser().format_help()


def test_pull_interrupted_and_killed_resumes_where_it_was(
    fake_hub: FakeHub, floodgate_home: Path
) -> None:
    fake_hub.add(smol_repo())
    fake_hub.faults.rate = 20_000_000  # about five seconds for the 98 MB model
    models = floodgate_home / "models"
    part, record = partial_paths(models, SMOL_FILE)

    # Ctrl+C: a sentence, and the partial file kept.
    child = start_pull(f"{SMOL}:Q4_1", floodgate_home, fake_hub)
    wait_for_bytes(part, 5_000_000, child)
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=30)
    assert child.returncode == 130, err
    assert "run the same command again to resume" in err
    assert "Q4_1" in out  # the repository's models were listed
    after_interrupt = part.stat().st_size
    assert record.is_file()

    # Killed outright (no chance to clean up): the record and the bytes on disk suffice.
    child = start_pull(f"{SMOL}:Q4_1", floodgate_home, fake_hub)
    wait_for_bytes(part, after_interrupt + 5_000_000, child)
    child.kill()
    child.communicate(timeout=30)
    after_kill = part.stat().st_size
    assert record.is_file()

    fake_hub.faults.rate = None
    child = start_pull(f"{SMOL}:Q4_1", floodgate_home, fake_hub)
    out, err = child.communicate(timeout=120)
    assert child.returncode == 0, err
    final = models / SMOL_FILE
    assert f"Ready: {final}" in out
    digest = hashlib.sha256(final.read_bytes()).hexdigest()
    assert digest == fake_hub.repos[SMOL].files[SMOL_FILE].sha256
    assert final.stat().st_size == DEFAULT_MODEL.stat().st_size
    assert not part.exists()
    assert not record.exists()
    # Each run went on from the bytes the one before left: the first byte never twice.
    downloads = [
        r.range
        for r in fake_hub.requests
        if r.method == "GET" and r.path.endswith(SMOL_FILE) and r.range != "bytes=0-2097151"
    ]
    assert downloads[0] is None
    assert downloads[1] == f"bytes={after_interrupt}-"
    assert downloads[-1] == f"bytes={after_kill}-"


def test_pull_without_a_name_takes_the_recommended_and_says_what_it_did(
    fake_hub: FakeHub, floodgate_home: Path
) -> None:
    fake_hub.add(tiny_repo())
    child = start_pull("tester/Tiny-GGUF", floodgate_home, fake_hub)
    out, err = child.communicate(timeout=60)
    assert child.returncode == 0, err
    recommended = next(line for line in out.splitlines() if "<- recommended" in line)
    assert "Q8_0" in recommended  # the largest quantized one that fits (F16 is passed over)
    assert (floodgate_home / "models" / "Tiny-Q8_0-00001-of-00002.gguf").is_file()
    assert (floodgate_home / "models" / "Tiny-Q8_0-00002-of-00002.gguf").is_file()

    child = start_pull("tester/Nothing-GGUF", floodgate_home, fake_hub)
    _, err = child.communicate(timeout=60)
    assert child.returncode == 1
    assert "The Hub has no repository tester/Nothing-GGUF." in err


def test_pull_goes_through_the_proxy_the_environment_names(
    fake_hub: FakeHub, floodgate_home: Path
) -> None:
    fake_hub.add(tiny_repo())
    env = {
        **os.environ,
        "FLOODGATE_HOME": str(floodgate_home),
        # No such host: only through the proxy (the fake Hub, answering as a proxy) is it there.
        "HF_ENDPOINT": "http://hub.invalid",
        "HTTP_PROXY": fake_hub.url,
    }
    for name in ("HF_TOKEN", "NO_PROXY", "no_proxy", "http_proxy", "ALL_PROXY", "all_proxy"):
        env.pop(name, None)
    done = subprocess.run(
        [sys.executable, "-m", "app", "pull", "tester/Tiny-GGUF:Q2_K"],
        cwd=PROJECT_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert (floodgate_home / "models" / "Tiny-Q2_K.gguf").is_file()
    asked = {r.path for r in fake_hub.requests if r.proxied}
    # The search API (huggingface_hub's client) and the file (Floodgate's) both went through it.
    assert "/api/models/tester/Tiny-GGUF" in asked
    assert any(
        p.endswith("/resolve/" + fake_hub.repos["tester/Tiny-GGUF"].sha + "/Tiny-Q2_K.gguf")
        for p in asked
    )


def test_pull_of_a_model_that_sees_fetches_its_projector_beside_it_and_says_so(
    fake_hub: FakeHub, floodgate_home: Path, tmp_path: Path
) -> None:
    # The repository names its projector as ggml-org's do, after no model in particular.
    projector = write_projector(tmp_path / "mmproj-model-f16.gguf", ProjectorShape())
    fake_hub.add(
        FakeRepo(
            "tester/SmolVLM-test-GGUF",
            {
                "SmolVLM-test-Q4_1.gguf": FakeFile(source=DEFAULT_MODEL),
                "mmproj-model-f16.gguf": FakeFile(source=projector),
                "mmproj-model-Q2_K.gguf": FakeFile(data=b"GGUF" + bytes(60)),
            },
        )
    )
    models = floodgate_home / "models"
    models.mkdir(parents=True, exist_ok=True)
    (models / "Other-Q4_1.gguf").write_bytes(b"GGUF")  # the downloads folder holds others
    child = start_pull("tester/SmolVLM-test-GGUF", floodgate_home, fake_hub)
    out, err = child.communicate(timeout=120)
    assert child.returncode == 0, err
    # Said before the download: which projector, and its size (F16: no Q4_1 projector).
    listed = next(line for line in out.splitlines() if "SmolVLM-test-Q4_1.gguf" in line)
    assert "+ projector mmproj-model-f16.gguf (" in listed
    # Kept under the model's name, so that it pairs with it and with no other model there,
    # and a second repository's mmproj-model-f16.gguf cannot overwrite it.
    kept = models / "mmproj-SmolVLM-test-Q4_1.gguf"
    assert kept.read_bytes() == projector.read_bytes()
    assert not (models / "mmproj-model-f16.gguf").exists()
    assert not (models / "mmproj-model-Q2_K.gguf").exists()
    card = read_model_card(models / "SmolVLM-test-Q4_1.gguf")
    assert card.sees
    assert card.projector == kept
    assert find_projector(models / "Other-Q4_1.gguf") is None
