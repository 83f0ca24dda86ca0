"""The CPU time of this process's threads by kind, from the kernel's accounts (Linux).

``/proc/self/task/<tid>/schedstat`` holds each thread's time on a CPU and its time ready to
run but waiting for one (nanoseconds). The decode threads are the worker (its thread is named
after the ``InferenceWorker`` QThread) and llama.cpp's OpenMP team, which the worker's thread
creates and which inherit its name; the UI thread is the process's first thread; every other
thread (Qt's, the archive's) is "other".
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

WORKER_NAME = "InferenceWorker"
"""The worker QThread's object name, which Qt gives its native thread (``/proc/.../comm``)."""

DECODE_COMM = WORKER_NAME[:15]
"""A decode thread's name as the kernel keeps it (15 characters): the worker's, and that of
llama.cpp's OpenMP team, which inherits it."""


@dataclass(frozen=True)
class ThreadTimes:
    """Seconds on a CPU by kind of thread at one moment, and the decode threads' waits."""

    ui: float
    decode: float
    other: float
    decode_waited: float


def read_threads(pid: int | None = None) -> ThreadTimes:
    """The CPU time each kind of thread of process ``pid`` (this one) has used so far."""
    pid = pid or os.getpid()
    ui = decode = other = waited = 0.0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            ran, waits, _ = (task / "schedstat").read_text().split()
            name = (task / "comm").read_text().strip()
        except (OSError, ValueError):  # the thread ended meanwhile
            continue
        seconds = int(ran) / 1e9
        if int(task.name) == pid:
            ui += seconds
        elif name == DECODE_COMM:
            decode += seconds
            waited += int(waits) / 1e9
        else:
            other += seconds
    return ThreadTimes(ui, decode, other, waited)


def decode_thread_ids(pid: int | None = None) -> list[int]:
    """The ids of process ``pid``'s decode threads (this one's): the worker and its team."""
    pid = pid or os.getpid()
    ids = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
        except OSError:  # the thread ended meanwhile
            continue
        if name == DECODE_COMM and int(task.name) != pid:
            ids.append(int(task.name))
    return ids


def set_decode_priority(nice: int) -> bool:
    """Give this process's decode threads ``nice``; False if it may not.

    Lowering a thread's ``nice`` needs a privilege: root, ``CAP_SYS_NICE``, or a
    ``RLIMIT_NICE`` that allows it.
    """
    try:
        for tid in decode_thread_ids():
            os.setpriority(os.PRIO_PROCESS, tid, nice)
    except PermissionError:
        return False
    except ProcessLookupError:  # a thread ended meanwhile: the others are set
        pass
    return True
