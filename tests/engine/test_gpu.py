"""The GPU path for real: the Vulkan build of llama.cpp on Mesa's lavapipe, in a process of its own.

``make test`` builds the Vulkan profile once per machine (kept in the wheel cache) and unpacks
it into ``.venv/llama-vulkan``, beside the CPU build the rest of the suite uses. This test
runs ``tests/engine/gpu/`` in a child pytest with that build first on ``PYTHONPATH`` and lavapipe
made visible (ggml skips CPU-type Vulkan devices unless ``GGML_VK_VISIBLE_DEVICES`` names
them, as llama.cpp's own CI does).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.install.llama_wheel import UNAVAILABLE
from tests.support import GPU_TESTS

PROJECT = Path(__file__).resolve().parents[2]
VULKAN_BUILD = PROJECT / ".venv" / "llama-vulkan"


@pytest.mark.model
@pytest.mark.timeout(1800)
def test_the_vulkan_build_on_lavapipe() -> None:
    if (VULKAN_BUILD / UNAVAILABLE).exists():
        pytest.skip((VULKAN_BUILD / UNAVAILABLE).read_text().strip())
    assert (VULKAN_BUILD / "llama_cpp").is_dir(), "run `make test`: it builds the Vulkan profile"
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(VULKAN_BUILD), str(PROJECT)]),
        GGML_VK_VISIBLE_DEVICES="0",
        QT_QPA_PLATFORM="offscreen",
        **{GPU_TESTS: "1"},
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-s", "tests/engine/gpu"],
        capture_output=True,
        text=True,
        cwd=PROJECT,
        env=env,
        timeout=1700,
    )
    print(done.stdout[-20000:], done.stderr[-5000:])
    assert done.returncode == 0, done.stdout[-20000:] + done.stderr[-5000:]
    assert " passed" in done.stdout
    assert " skipped" not in done.stdout.splitlines()[-1]
