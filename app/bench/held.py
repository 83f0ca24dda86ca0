"""``floodgate bench --cpus N``: the whole run held to N CPUs' time by a cgroup.

Issue 30's targets are for a two-core machine at about half this VM's speed per core, and it
asks for a run held to a share of the CPU (a cgroup's ``cpu.max``) where a machine is faster.
The kernel's CFS bandwidth control holds a group of threads to ``N`` times each period (5 ms
here: the default 100 ms lets every thread run 65 ms and then stops them all for 35). The
decode threads, the UI thread and the bare baselines' child process (started later, so held
too) share it, side by side in one run as the bench compares them.

It is not a slower CPU, and measured on this project's VM (2026-12-06, ``--only window_cost``)
it does not stand in for one here: the app measures its decode threads and, held to 0.8 or 1.3
CPUs, chose one, which a share above one CPU barely slows (1.3: 124.7 tokens/s, against 142-146
on one thread unheld, where two give 157-164); forced to two (``--threads 2``), OpenMP's threads
spin at each barrier on the group's time, so 1.3 CPUs decoded at 52 tokens/s (50 with a 1 ms
period) where the native loop's rate times 0.65 would be 92, and the group's waits for its next
period showed in the UI thread (loop lag p95 3.3 ms, 6.9 with 1 ms, against 0.2 unheld). Within
a period the threads run at full speed and then wait together, so a wake-up that lands in the
wait is late by up to the rest of the period. The run records the hold in its ``machine``
figures, so that no one reads its figures as the machine's own.

Linux only, and only where this process may make a cgroup: cgroup v1's ``cpu`` controller
written by root (as on this project's VMs), or cgroup v2 where the process's own cgroup is
delegated to it. Elsewhere :func:`hold` says how to run the bench held from outside (systemd's
``CPUQuota``), and the run does not start.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

PERIOD_US = 5000
"""The bandwidth period: short, so that a wait for the group's next share is at most this."""

CGROUP_ROOT = Path("/sys/fs/cgroup")


class CannotHoldError(RuntimeError):
    """This machine (or this user) can't hold the run to a CPU share; the message says how."""


@dataclass(frozen=True)
class Held:
    """Where the run is held, for the run's ``machine`` figures."""

    cpus: float
    period_us: int
    quota_us: int
    cgroup: str


def _own_cgroup(controller: str | None) -> str | None:
    """This process's cgroup path for ``controller`` (v1), or its unified one (``None``)."""
    for line in Path("/proc/self/cgroup").read_text(encoding="utf-8").splitlines():
        number, controllers, path = line.split(":", 2)
        if controller is None and number == "0" and controllers == "":
            return path
        if controller is not None and controller in controllers.split(","):
            return path
    return None


def _v1_cpu_folder() -> Path | None:
    """The v1 ``cpu`` controller's folder for this process, where v1 mounts it."""
    own = _own_cgroup("cpu")
    if own is None:
        return None
    for mount in (CGROUP_ROOT / "cpu", CGROUP_ROOT / "cpu,cpuacct"):
        if (mount / "cpu.cfs_quota_us").exists():
            return mount / own.lstrip("/")
    return None


def _v2_folder() -> Path | None:
    """This process's own v2 cgroup folder, where the unified hierarchy has ``cpu``."""
    own = _own_cgroup(None)
    if own is None or not (CGROUP_ROOT / "cgroup.controllers").exists():
        return None
    folder = CGROUP_ROOT / own.lstrip("/")
    controllers = (folder / "cgroup.controllers").read_text(encoding="utf-8").split()
    return folder if "cpu" in controllers else None


def _how_from_outside(cpus: float) -> str:
    percent = round(cpus * 100)
    return (
        "this process can't make a cgroup to hold itself to a CPU share here. Run the bench "
        "held from outside instead, for example: systemd-run --user --scope "
        f"-p CPUQuota={percent}% -p CPUQuotaPeriodSec={PERIOD_US // 1000}ms "
        ".venv/bin/floodgate bench …"
    )


@contextlib.contextmanager
def hold(cpus: float, period_us: int = PERIOD_US) -> Iterator[Held]:
    """Hold this process, and every process it starts from now on, to ``cpus`` CPUs' time.

    Makes a cgroup beneath the process's own, sets its bandwidth, moves the whole process
    (every thread) into it; on leaving, moves it back and removes the cgroup.

    Raises:
        CannotHoldError: no cgroup this process may make, with the command to run instead.
        ValueError: ``cpus`` not above zero.
    """
    if not cpus > 0:
        raise ValueError(f"a CPU share must be above zero, not {cpus}")
    quota_us = max(1000, round(cpus * period_us))
    name = f"floodgate-bench-{os.getpid()}"
    v1 = _v1_cpu_folder()
    v2 = None if v1 is not None else _v2_folder()
    parent = v1 or v2
    if parent is None:
        raise CannotHoldError(_how_from_outside(cpus))
    group = parent / name
    try:
        group.mkdir()
        if v1 is not None:
            (group / "cpu.cfs_period_us").write_text(str(period_us), encoding="utf-8")
            (group / "cpu.cfs_quota_us").write_text(str(quota_us), encoding="utf-8")
        else:
            (group / "cpu.max").write_text(f"{quota_us} {period_us}", encoding="utf-8")
        # cgroup.procs moves the whole process, every thread of it (tasks would move one).
        (group / "cgroup.procs").write_text(str(os.getpid()), encoding="utf-8")
    except OSError as error:
        with contextlib.suppress(OSError):
            group.rmdir()
        raise CannotHoldError(f"{_how_from_outside(cpus)} ({error})") from error
    try:
        yield Held(cpus, period_us, quota_us, str(group))
    finally:
        # Back where it was; the children it started have ended with the run (a cgroup with
        # a process left in it can't be removed: then it stays, and says so by its name).
        with contextlib.suppress(OSError):
            (parent / "cgroup.procs").write_text(str(os.getpid()), encoding="utf-8")
            group.rmdir()
