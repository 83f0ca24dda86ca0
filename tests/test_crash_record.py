"""A native crash is recorded, told at the next launch, and loses nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from app.crash_record import FILE_NAME, KEPT_FOLDER, last_end
from app.store.database import open_database
from tests.drivers import LONG_PROMPT

HERE = Path(__file__).resolve().parent


def _run_recorded(tmp_path: Path, script: str) -> subprocess.CompletedProcess[str]:
    """Run ``script`` in a child process whose crash record is in ``tmp_path``."""
    code = textwrap.dedent(
        f"""
        import faulthandler, os, signal
        from pathlib import Path
        from app.crash_record import CRASH_RECORD
        assert CRASH_RECORD.begin(Path({str(tmp_path)!r})) is None
        {script}
        """
    )
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=HERE.parent, timeout=60
    )


def test_a_clean_session_leaves_no_record(tmp_path: Path) -> None:
    done = _run_recorded(
        tmp_path,
        "assert Path(CRASH_RECORD._path).is_file()\n"
        "        CRASH_RECORD.doing('loading', model='m.gguf')\n"
        "        CRASH_RECORD.end()",
    )
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / FILE_NAME).exists()
    assert last_end(tmp_path) is None


def _segfault_while(tmp_path: Path, script: str) -> subprocess.CompletedProcess[str]:
    return _run_recorded(tmp_path, f"{script}\n        faulthandler._sigsegv()")


def test_a_segfault_is_told_with_what_was_being_done(tmp_path: Path) -> None:
    done = _segfault_while(
        tmp_path,
        "CRASH_RECORD.doing('loading', model='big.gguf', conversation='')\n"
        "        CRASH_RECORD.doing('idle', system_info='AVX2 = 1 | AVX512 = 1')\n"
        "        CRASH_RECORD.doing('prefill', conversation='c-42')",
    )
    assert done.returncode == -signal.SIGSEGV
    assert done.stderr == ""  # the fault handler wrote into the record, not the terminal
    last = last_end(tmp_path)
    assert last is not None
    assert (last.activity, last.model, last.conversation) == ("prefill", "big.gguf", "c-42")
    assert last.system_info == "AVX2 = 1 | AVX512 = 1"
    assert last.fault == "Segmentation fault"
    said = str(last.sentence())
    assert "ended unexpectedly (Segmentation fault) while processing a prompt" in said
    assert "big.gguf" in said
    assert "AVX512" in said
    assert str(last.kept_at) in said
    # The record is kept for the user to read, with every thread's stack.
    assert last.kept_at.parent == tmp_path / KEPT_FOLDER
    kept = last.kept_at.read_text()
    assert "activity: prefill" in kept
    assert "Fatal Python error: Segmentation fault" in kept
    assert "most recent call first" in kept


def test_a_process_killed_without_a_fault_is_told_too(tmp_path: Path) -> None:
    done = _run_recorded(
        tmp_path,
        "CRASH_RECORD.doing('decode', model='m.gguf')\n"
        "        os.kill(os.getpid(), signal.SIGKILL)",
    )
    assert done.returncode == -signal.SIGKILL
    last = last_end(tmp_path)
    assert last is not None
    assert last.fault == ""
    assert "no error was recorded: it was killed" in str(last.sentence())
    assert "while writing a reply" in str(last.sentence())


def test_old_records_are_limited(tmp_path: Path) -> None:
    kept = tmp_path / KEPT_FOLDER
    kept.mkdir()
    for n in range(12):
        (kept / f"crash-2000010{n:02d}-000000.txt").write_text("old")
    (tmp_path / FILE_NAME).write_text("{}")
    last = last_end(tmp_path)
    assert last is not None
    assert len(list(kept.glob("crash-*.txt"))) == 10
    assert last.kept_at.is_file()


def _launch(module: str, model: Path, home: Path) -> subprocess.CompletedProcess[str]:
    """Run the app with the driver in ``module``, on ``model``, with its data in ``home``."""
    return subprocess.run(
        [sys.executable, "-m", module, "--model", str(model)],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, QT_QPA_PLATFORM="offscreen", FLOODGATE_HOME=str(home)),
        cwd=HERE.parent,
    )


@pytest.mark.model
def test_a_segfault_mid_reply_is_told_at_the_next_launch_with_the_reply_kept(
    model_path: Path, floodgate_home: Path
) -> None:
    crashed = _launch("tests.drivers.crash_mid_answer", model_path, floodgate_home)
    assert crashed.returncode == -signal.SIGSEGV, crashed.stderr
    assert crashed.stdout.strip().endswith("streaming")  # it crashed mid-reply

    database, _ = open_database(floodgate_home / "floodgate.sqlite3")
    (summary,) = database.list_conversations()
    saved = database.load(summary.id)
    assert saved is not None
    saved_reply = saved.messages[-1].content
    assert saved_reply  # saved as it streamed, before the crash
    database.close()

    after = _launch("tests.drivers.after_crash", model_path, floodgate_home)
    assert after.returncode == 0, after.stderr
    shown = json.loads(after.stdout.strip().splitlines()[-1])
    text = shown["shown"]
    assert "The last session ended unexpectedly (Segmentation fault) while writing a reply" in text
    assert model_path.name in text
    assert "AVX" in text or "NEON" in text  # what llama.cpp was built with
    assert str(floodgate_home / KEPT_FOLDER) in text
    # The conversation the crash cut off is on screen, its reply kept and marked interrupted.
    prompt, reply = shown["messages"]
    assert prompt["content"] == LONG_PROMPT
    assert reply["content"] == saved_reply
    assert reply["status"] == "stopped"
    assert reply["note"].startswith("Interrupted")
    assert "Interrupted: Floodgate closed before this reply ended." in text
    # That launch ended cleanly: no record is left for the one after it.
    assert not (floodgate_home / FILE_NAME).exists()
