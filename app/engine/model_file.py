"""Checks on a model path before llama.cpp sees it, so failures read as sentences.

Only regular files are opened. A named pipe blocks ``open()`` until a writer comes (for ever,
usually), a device or a socket is no model, and a file on a network mount that stopped
answering blocks ``stat()`` itself; none of that may hold the worker, the model library or
the exit. So the checks run on a daemon thread with a timeout (a thread stuck in the kernel
cannot be ended, but a daemon thread does not hold the process when it exits).
"""

from __future__ import annotations

import os
import re
import stat
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from app.engine.errors import ModelLoadError
from app.sentence import QT_TRANSLATE_NOOP

GGUF_MAGIC = b"GGUF"

FILE_TIMEOUT_S = 5.0
"""Seconds a model file may take to answer ``stat``, ``open`` and a first read."""

T = TypeVar("T")

# What file names add to a model's name: the quantization ("Q4_K_M", "IQ4_XS", "f16", "bf16",
# "q4_0"), a shard's place ("00001-of-00003") and a "GGUF" tag, each after a dot, a dash or an
# underscore at the end of the stem.
_FILE_TAG = re.compile(
    r"[._-](?:i?q\d(?:_[a-z0-9]+)*|f(?:p)?(?:16|32)|bf16|\d{5}-of-\d{5}|gguf)$", re.IGNORECASE
)


def readable_name(path: Path) -> str:
    """The name the user sees for the model in ``path``, wherever it is shown.

    The file's name without what files add to it (the quantization, a shard's place): the
    name people know the model by ("SmolLM2-135M-Instruct" for
    ``SmolLM2-135M-Instruct.Q4_1.gguf``). Not the GGUF's ``general.name``, which is often a
    training run's tag ("Smollm2 135M 8k Lc100K Mix1 Ep2"); the quantization is shown beside
    the name where two files of one model could meet (the picker, the library).
    """
    name = path.stem
    while (shorter := _FILE_TAG.sub("", name)) != name and shorter:
        name = shorter
    return name


_OPEN_FLAGS = (
    os.O_RDONLY
    # A path swapped for a named pipe between stat and open must not block the open.
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)


def within_timeout(work: Callable[[], T], path: Path, timeout: float = FILE_TIMEOUT_S) -> T:
    """Run ``work`` (file access to ``path``) on a daemon thread, waiting ``timeout`` seconds.

    Returns:
        What ``work`` returned; what it raised is raised here.

    Raises:
        ModelLoadError: ``work`` did not finish in time (it is left to finish, or not, on its
            own thread, which never holds the process's exit).
    """
    outcome: list[T] = []
    failure: list[BaseException] = []
    done = threading.Event()

    def run() -> None:
        try:
            outcome.append(work())
        except BaseException as exc:  # handed to the caller's thread as it is
            failure.append(exc)
        finally:
            done.set()

    threading.Thread(target=run, name=f"file check {path.name}", daemon=True).start()
    if not done.wait(timeout):
        raise ModelLoadError(
            QT_TRANSLATE_NOOP(
                "Floodgate",
                "The model file {path} did not answer within {seconds} seconds. It may be on "
                "a network drive or a disk that stopped responding.",
            ),
            path=path,
            seconds=f"{timeout:g}",
        )
    if failure:
        raise failure[0]
    return outcome[0]


def _refuse_unless_regular(path: Path, mode: int) -> None:
    """Raise a sentence naming what ``path`` is, unless it is a regular file."""
    if stat.S_ISREG(mode):
        return
    if stat.S_ISDIR(mode):
        raise ModelLoadError(
            QT_TRANSLATE_NOOP(
                "Floodgate", "{path} is a folder, not a model file. Choose a .gguf file."
            ),
            path=path,
        )
    if stat.S_ISFIFO(mode):
        template = QT_TRANSLATE_NOOP(
            "Floodgate",
            "{path} is a named pipe, not a model file, so Floodgate does not open it. "
            "Choose a .gguf file.",
        )
    elif stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        template = QT_TRANSLATE_NOOP(
            "Floodgate",
            "{path} is a device, not a model file, so Floodgate does not open it. "
            "Choose a .gguf file.",
        )
    elif stat.S_ISSOCK(mode):
        template = QT_TRANSLATE_NOOP(
            "Floodgate",
            "{path} is a socket, not a model file, so Floodgate does not open it. "
            "Choose a .gguf file.",
        )
    else:
        template = QT_TRANSLATE_NOOP(
            "Floodgate",
            "{path} is not a regular file, so Floodgate does not open it. Choose a .gguf file.",
        )
    raise ModelLoadError(template, path=path)


def _unreadable(path: Path, exc: OSError | ValueError) -> ModelLoadError:
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    error = ModelLoadError(
        QT_TRANSLATE_NOOP("Floodgate", "The model file {path} cannot be read: {reason}."),
        path=path,
        reason=reason,
    )
    error.__cause__ = exc
    return error


def _check(path: Path) -> None:
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError) as exc:
        raise ModelLoadError(
            QT_TRANSLATE_NOOP("Floodgate", "The model file {path} does not exist."), path=path
        ) from exc
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        raise _unreadable(path, exc) from exc
    _refuse_unless_regular(path, mode)
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        raise _unreadable(path, exc) from exc
    try:
        # What was opened, not what the name pointed at a moment earlier.
        _refuse_unless_regular(path, os.fstat(fd).st_mode)
        magic = b""
        while len(magic) < len(GGUF_MAGIC):
            chunk = os.read(fd, len(GGUF_MAGIC) - len(magic))
            if not chunk:
                break
            magic += chunk
    except OSError as exc:
        raise _unreadable(path, exc) from exc
    finally:
        os.close(fd)
    if magic != GGUF_MAGIC:
        raise ModelLoadError(
            QT_TRANSLATE_NOOP(
                "Floodgate",
                "{name} is not a GGUF model file. Floodgate opens llama.cpp models in the "
                "GGUF format (.gguf).",
            ),
            name=path.name,
        )


def check_model_file(path: Path, timeout: float = FILE_TIMEOUT_S) -> None:
    """Raise :class:`ModelLoadError` unless ``path`` is a regular file that starts as GGUF.

    Never blocks for longer than ``timeout`` seconds, whatever the path is: a named pipe, a
    device or a socket is refused from its ``stat`` without being opened, and a file that
    does not answer gets a sentence saying so.
    """
    within_timeout(lambda: _check(path), path, timeout)
