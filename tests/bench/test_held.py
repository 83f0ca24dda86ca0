"""``floodgate bench --cpus N``: the run held to N CPUs' time by a real cgroup.

Where this process may not make a cgroup (not root, no delegated cgroup), the tests that need
one are skipped with the reason; this project's VMs run them (root, cgroup v1's ``cpu``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.bench.held import CannotHoldError, Held, hold


def _cgroup_of(pid: int) -> str:
    return Path(f"/proc/{pid}/cgroup").read_text(encoding="utf-8")


@pytest.fixture
def held_quarter() -> Iterator[Held]:
    """This process held to a quarter of a CPU, or the test skipped saying why not."""
    try:
        with hold(0.25) as held:
            yield held
    except CannotHoldError as error:
        pytest.skip(str(error))


def test_a_held_process_gets_its_share_of_a_cpu_and_its_children_with_it(
    held_quarter: Held,
) -> None:
    # A busy loop on one thread gets the whole of a core unheld; held to a quarter of a CPU,
    # it can run about a quarter of the time.
    start_wall, start_cpu = time.monotonic(), time.process_time()
    while time.monotonic() - start_wall < 0.6:
        pass
    share = (time.process_time() - start_cpu) / (time.monotonic() - start_wall)
    assert share < 0.45, share
    # A process started while held (the bench's bare baselines) is held with it.
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"])
    try:
        assert held_quarter.cgroup.rsplit("/", 1)[-1] in _cgroup_of(child.pid)
    finally:
        child.kill()
        child.wait()
    assert Path(held_quarter.cgroup, "cgroup.procs").exists()


def test_leaving_the_hold_puts_the_process_back_and_removes_its_cgroup() -> None:
    before = _cgroup_of(os.getpid())
    try:
        with hold(0.5) as held:
            assert _cgroup_of(os.getpid()) != before
    except CannotHoldError as error:
        pytest.skip(str(error))
    assert _cgroup_of(os.getpid()) == before
    assert not Path(held.cgroup).exists()
    # Unheld again: a busy loop has its core.
    start_wall, start_cpu = time.monotonic(), time.process_time()
    while time.monotonic() - start_wall < 0.3:
        pass
    assert (time.process_time() - start_cpu) / (time.monotonic() - start_wall) > 0.6


def test_a_held_run_says_so_in_its_figures(tmp_path: Path) -> None:
    try:
        with hold(1.5):
            pass
    except CannotHoldError as error:
        pytest.skip(str(error))
    out = tmp_path / "held.json"
    command = ["bench", "--quick", "--only", "long_reply", "--cpus", "1.5", "--json", str(out)]
    proc = subprocess.run(
        [sys.executable, "-m", "app", *command],
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ, QT_QPA_PLATFORM="offscreen"),
    )
    assert proc.returncode == 0, proc.stderr
    assert "held to 1.5 CPUs' time" in proc.stdout
    held = json.loads(out.read_text())["machine"]["held"]
    assert held["cpus"] == 1.5
    assert held["quota_us"] == round(1.5 * held["period_us"])
