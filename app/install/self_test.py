"""``floodgate --self-test``: run the engine once in a child process and say how it went.

A llama.cpp built for the wrong CPU does not raise: it kills the process (SIGILL for an
instruction the CPU lacks, SIGSEGV for ggml's AMX kernels on some Xeons). So the check runs
in a child (:mod:`app.engine.self_test`), and this parent turns its death into a sentence: the
signal, what the child was doing, what was built, and the one command that rebuilds llama.cpp
with flags that run on any machine. Setup (the Makefile) ends with it.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from app.install.llama_wheel import (
    SAFE_REBUILD,
    cache_root,
    install,
    read_record,
    retry_command,
)

TIMEOUT_SECONDS = 300.0
"""Far beyond what a few hundred tokens take on any CPU (about 3 s on 2 slow cores)."""


@dataclass(frozen=True)
class Outcome:
    """What the child did: its exit status, the last step it began, and what it printed."""

    returncode: int
    step: str
    system_info: str
    result: str
    errors: str

    @property
    def passed(self) -> bool:
        """The child finished every step."""
        return self.returncode == 0 and self.result.startswith("ok")


def run_child(
    model: Path,
    timeout: float = TIMEOUT_SECONDS,
    on_step: Callable[[str, subprocess.Popen[str]], None] | None = None,
) -> Outcome:
    """Run :mod:`app.engine.self_test` on ``model`` in a child process.

    Args:
        model: the GGUF file to load.
        timeout: the child is killed past this many seconds.
        on_step: called with each step as the child begins it, and the child's process
            (tests kill it there, as a crash would).
    """
    command = [sys.executable, "-X", "faulthandler", "-m", "app.engine.self_test", str(model)]
    lines: list[str] = []
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as errors:
        with subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
            cwd=Path(__file__).resolve().parent.parent.parent,
        ) as child:
            timed_out = threading.Event()

            def give_up() -> None:
                timed_out.set()
                child.kill()

            timer = threading.Timer(timeout, give_up)
            timer.start()
            try:
                assert child.stdout is not None
                for line in child.stdout:
                    lines.append(line)
                    key, _, step = line.rstrip("\n").partition(" ")
                    if key == "step" and on_step is not None:
                        on_step(step, child)
                returncode = child.wait()
            finally:
                timer.cancel()
        errors.seek(0)
        err = errors.read()
    if timed_out.is_set():
        err += f"\n(no answer within {timeout:.0f} s: ended by the self-test)"
    return read_output(returncode, "".join(lines), err)


def read_output(returncode: int, stdout: str, stderr: str) -> Outcome:
    """What the child's lines say (see :mod:`app.engine.self_test` for their form)."""
    step, system_info, result = "starting Python", "", ""
    for line in stdout.splitlines():
        key, _, rest = line.partition(" ")
        if key == "step":
            step = rest
        elif key == "system-info":
            system_info = rest
        elif key in ("ok", "error"):
            result = line
    return Outcome(returncode, step, system_info, result, stderr.strip())


def signal_words(returncode: int) -> str:
    """``SIGSEGV (segmentation fault)`` for a child killed by signal 11, and so on."""
    number = -returncode
    try:
        name = signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
    description = signal.strsignal(number) or ""
    return f"{name} ({description.lower()})" if description else name


def sentence(outcome: Outcome, model: Path) -> str:
    """What to tell the person who set Floodgate up."""
    built = outcome.system_info or "unknown (the library did not get as far as saying)"
    if outcome.passed:
        figures = outcome.result.removeprefix("ok ")
        return f"Self-test passed: {model.name} {figures}.\nllama.cpp: {built}"
    if outcome.returncode < 0:
        what = (
            f"The self-test crashed: llama.cpp was killed by {signal_words(outcome.returncode)} "
            f"while {outcome.step} ({model.name})."
        )
    elif outcome.result.startswith("error"):
        what = f"The self-test failed while {outcome.step}: {outcome.result.removeprefix('error ')}"
    else:
        tail = "\n".join(outcome.errors.splitlines()[-5:])
        what = (
            f"The self-test failed while {outcome.step} (exit status {outcome.returncode}).\n{tail}"
        )
    return (
        f"{what}\nllama.cpp was built with: {built}\n"
        "A llama.cpp built for instruction sets this CPU lacks, or with kernels that crash on it, "
        f"dies this way. To rebuild it with flags that run on any machine, run:\n  {SAFE_REBUILD}"
    )


def self_test(model: Path) -> int:
    """Run the self-test and print its sentence; 0 if it passed, 1 if not.

    A GPU build offloads every layer of the model (the default, Auto). If that fails, the
    CPU build is installed instead, with a sentence that says why and which command tries the
    GPU build again, and the self-test runs again on it.
    """
    print(
        f"Self-test: loading {model.name} and processing a prompt in a child process…", flush=True
    )
    outcome = run_child(model)
    print(sentence(outcome, model), file=sys.stdout if outcome.passed else sys.stderr)
    venv = Path(sys.prefix)
    gpu = read_record(venv).get("gpu", "none")
    if not outcome.passed and gpu != "none":
        print(
            f"The {gpu} build of llama.cpp failed its self-test, so Floodgate goes back to the "
            f"CPU build. `{retry_command(gpu)}` tries the {gpu} build again.",
            file=sys.stderr,
            flush=True,
        )
        install(None, venv, cache_root(), gpu="none")
        return self_test(model)
    return 0 if outcome.passed else 1
