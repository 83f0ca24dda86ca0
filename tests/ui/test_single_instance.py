"""One Floodgate per data directory: second launches hand over and exit; crashes never block."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import QByteArray, QLockFile
from PySide6.QtNetwork import QLocalServer, QLocalSocket
from pytestqt.qtbot import QtBot

from app.sentence import Sentence
from app.store.paths import PROJECT_DIR
from app.ui.window.single_instance import LOCK_NAME, LaunchArguments, SingleInstance, server_name

LAUNCH = """
import sys, time
from pathlib import Path
from PySide6.QtCore import QCoreApplication, QTimer
from app.ui.window.single_instance import LaunchArguments, SingleInstance

app = QCoreApplication([])
directory, model, mode = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
instance = SingleInstance(directory)
if instance.claim():
    print("first", instance.socket_path, flush=True)
    if mode == "deaf":
        time.sleep(60)  # holds the directory, never runs its event loop
    def received(arguments):
        print("received", arguments.model, flush=True)
        QTimer.singleShot(0, app.quit)
    instance.arguments_received.connect(received)
    sys.exit(app.exec())
reason = instance.hand_over(
    LaunchArguments(Path(model).resolve() if model else None), timeout=float(mode)
)
if reason is None:
    print("handed over", flush=True)
    sys.exit(0)
print(reason, flush=True)
sys.exit(1)
"""


class Launches:
    """Starts launch processes on one data directory and ends the ones still running."""

    def __init__(self, tmp_path: Path) -> None:
        self.directory = tmp_path / "home"
        self.script = tmp_path / "launch.py"
        self.script.write_text(LAUNCH)
        self.running: list[subprocess.Popen[str]] = []
        self.environment = {
            **os.environ,
            "QT_QPA_PLATFORM": "offscreen",
            "PYTHONPATH": str(PROJECT_DIR),
        }

    def start(self, model: str = "", mode: str = "5") -> subprocess.Popen[str]:
        process = subprocess.Popen(
            [sys.executable, str(self.script), str(self.directory), model, mode],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=self.environment,
            cwd=self.directory.parent,
        )
        self.running.append(process)
        return process

    def first(self, mode: str = "5") -> tuple[subprocess.Popen[str], str]:
        """A launch that claims the directory; returns it and its socket's path."""
        process = self.start(mode=mode)
        assert process.stdout is not None
        line = process.stdout.readline().split()
        assert line[:1] == ["first"], process.stderr.read() if process.stderr else ""
        return process, line[1]

    def run(self, model: str = "", timeout: str = "5") -> tuple[int, str]:
        """A launch run to its end: its exit code and what it printed."""
        process = self.start(model, timeout)
        out, err = process.communicate(timeout=60)
        return process.returncode, out.strip() + err.strip()

    def end(self) -> None:
        for process in self.running:
            if process.poll() is None:
                process.kill()
            process.communicate(timeout=30)


@pytest.fixture
def launches(tmp_path: Path) -> Iterator[Launches]:
    started = Launches(tmp_path)
    try:
        yield started
    finally:
        started.end()


def test_a_second_launch_hands_its_model_to_the_first_and_exits(launches: Launches) -> None:
    first, _ = launches.first()
    (launches.directory.parent / "chosen.gguf").write_bytes(b"GGUF")
    code, said = launches.run("chosen.gguf")
    assert (code, said) == (0, "handed over")
    out, _ = first.communicate(timeout=30)
    # Relative to where the second launch was started: the first gets an absolute path.
    assert out.strip() == f"received {launches.directory.parent / 'chosen.gguf'}"
    assert first.returncode == 0
    # The first is gone and gave the directory up: the next launch is first.
    launches.first()


def test_a_launch_without_a_model_just_asks_the_first_to_come_forward(
    launches: Launches,
) -> None:
    first, _ = launches.first()
    assert launches.run() == (0, "handed over")
    out, _ = first.communicate(timeout=30)
    assert out.strip() == "received None"


def test_a_crashed_first_instance_does_not_block_the_next_launch(launches: Launches) -> None:
    first, socket_path = launches.first()
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=30)
    # What the crash left: the lock file with a dead process id, and the socket file.
    assert (launches.directory / LOCK_NAME).exists()
    assert Path(socket_path).exists()
    second, _ = launches.first()
    assert launches.run() == (0, "handed over")
    out, _ = second.communicate(timeout=30)
    assert out.strip() == "received None"


def test_a_first_instance_that_does_not_answer_gets_a_reason(launches: Launches) -> None:
    first, _ = launches.first(mode="deaf")
    started = time.monotonic()
    code, said = launches.run(timeout="1")
    assert time.monotonic() - started < 30
    assert code == 1
    assert said.startswith(
        f"Floodgate is already running with the data folder {launches.directory} "
        f"(process {first.pid}), but it did not answer: "
    )
    assert said.endswith(". Close it, or start this one with another data folder (FLOODGATE_HOME).")


# -- in one process ---------------------------------------------------------------------------


@pytest.fixture
def first(tmp_path: Path, qtbot: QtBot) -> Iterator[SingleInstance]:
    instance = SingleInstance(tmp_path / "home")
    assert instance.claim()
    try:
        yield instance
    finally:
        instance.release()


def hand_over_in_a_thread(
    directory: Path, arguments: LaunchArguments, timeout: float = 5.0
) -> list[Sentence | None]:
    """What a second launch does, on another thread, so this one serves the first."""
    outcome: list[Sentence | None] = []

    def second() -> None:
        launch = SingleInstance(directory)
        assert not launch.claim()
        outcome.append(launch.hand_over(arguments, timeout))

    threading.Thread(target=second, daemon=True).start()
    return outcome


def test_the_first_instance_receives_the_arguments(
    first: SingleInstance, qtbot: QtBot, tmp_path: Path
) -> None:
    assert first.listening
    assert first.problem is None
    model = tmp_path / "model.gguf"
    with qtbot.waitSignal(first.arguments_received, timeout=10_000) as received:
        outcome = hand_over_in_a_thread(first.directory, LaunchArguments(model))
        qtbot.waitUntil(lambda: bool(outcome), timeout=10_000)
    assert received.args == [LaunchArguments(model)]
    assert outcome == [None]


def test_only_one_instance_per_directory_and_each_directory_has_one(
    first: SingleInstance, tmp_path: Path
) -> None:
    assert not SingleInstance(tmp_path / "home").claim()
    other = SingleInstance(tmp_path / "other-home")
    assert other.claim()
    try:
        assert other.name != first.name
    finally:
        other.release()
    first.release()
    again = SingleInstance(tmp_path / "home")
    assert again.claim()
    again.release()


def test_a_stale_socket_file_does_not_block_listening(tmp_path: Path) -> None:
    directory = tmp_path / "home"
    # A crashed instance's socket: a listening server whose file outlives it.
    leftover = QLocalServer()
    assert leftover.listen(server_name(directory))
    path = Path(leftover.fullServerName())
    leftover.setParent(None)
    os.rename(path, tmp_path / "moved")  # keep the file while the server lets go of it
    leftover.close()
    os.rename(tmp_path / "moved", path)
    assert path.exists()
    instance = SingleInstance(directory)
    try:
        assert instance.claim()
        assert instance.listening
    finally:
        instance.release()


def test_a_stale_lock_file_does_not_block_the_claim(tmp_path: Path) -> None:
    directory = tmp_path / "home"
    directory.mkdir()
    # Written as QLockFile writes it, by a process that no longer exists.
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    (directory / LOCK_NAME).write_text(f"{dead.stdout.strip()}\npython3\n\n")
    instance = SingleInstance(directory)
    try:
        assert instance.claim()
    finally:
        instance.release()


def test_nonsense_from_a_client_is_refused_and_the_first_goes_on(
    first: SingleInstance, qtbot: QtBot, tmp_path: Path
) -> None:
    received: list[LaunchArguments] = []
    first.arguments_received.connect(received.append)
    for junk in (b"not json\n", b'{"floodgate": 99}\n', b'{"floodgate": 1, "model": 5}\n'):
        answer = raw_exchange(first.name, junk, qtbot)
        assert answer["ok"] is False
    answer = raw_exchange(first.name, b"x" * 200_000, qtbot)  # never a newline
    assert answer == {"ok": False, "reason": "message too long"}
    assert received == []
    outcome = hand_over_in_a_thread(first.directory, LaunchArguments())
    qtbot.waitUntil(lambda: bool(outcome), timeout=10_000)
    assert outcome == [None]
    qtbot.waitUntil(lambda: received == [LaunchArguments()], timeout=10_000)


def raw_exchange(name: str, data: bytes, qtbot: QtBot) -> dict[str, object]:
    answers: list[bytes] = []

    def client() -> None:
        # Short waits with sleeps between: PySide holds the GIL inside waitFor* calls, and
        # this process's main thread must run to answer.
        socket = QLocalSocket()
        socket.connectToServer(name)
        assert socket.waitForConnected(1000)
        socket.write(QByteArray(data))
        answer = b""
        deadline = time.monotonic() + 10
        while b"\n" not in answer and time.monotonic() < deadline:
            socket.waitForBytesWritten(10)
            socket.waitForReadyRead(10)
            answer += bytes(socket.readAll().data())
            time.sleep(0.002)
        answers.append(answer)
        socket.abort()

    threading.Thread(target=client, daemon=True).start()
    qtbot.waitUntil(lambda: bool(answers), timeout=10_000)
    reply: dict[str, object] = json.loads(answers[0])
    return reply


def test_hand_over_says_why_when_no_one_listens(tmp_path: Path) -> None:
    directory = tmp_path / "home"
    directory.mkdir()
    # Another live process holds the lock (this one, through another QLockFile) but
    # nothing listens.
    holder = QLockFile(str(directory / LOCK_NAME))
    assert holder.tryLock(0)
    try:
        launch = SingleInstance(directory)
        assert not launch.claim()
        started = time.monotonic()
        reason = launch.hand_over(LaunchArguments(), timeout=0.5)
        assert time.monotonic() - started < 5
    finally:
        holder.unlock()
    assert reason is not None
    assert f"(process {os.getpid()}), but it did not answer: " in str(reason)


def test_arguments_survive_the_wire() -> None:
    for arguments in (LaunchArguments(), LaunchArguments(Path("/models/été 中文.gguf"))):
        assert LaunchArguments.from_json(arguments.to_json().strip()) == arguments
    with pytest.raises(ValueError, match="not a path"):
        LaunchArguments.from_json(b'{"floodgate": 1, "model": "a\\u0000b"}')
