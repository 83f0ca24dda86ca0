"""One Floodgate per data directory: a second launch hands its arguments to the first.

The desktop convention (the first instance gets the file and comes forward; no second window
writing the same history file). Two parts, both keyed on the data directory:

- a lock file in the data directory (``QLockFile``): whoever holds it is *the* Floodgate of
  that directory. A crashed instance leaves the file behind with its process id; Qt sees that
  process is gone and takes the lock over, so a crash never blocks the next launch.
- a local socket (``QLocalServer``), listened on by the holder. A second launch connects,
  sends its arguments as one line of JSON, and waits for the first to acknowledge; then it
  exits. The socket file a crashed instance left is removed by the next holder of the lock
  before it listens (only the holder may do that, so it never removes a live one).
"""

from __future__ import annotations

import contextlib
import getpass
import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QByteArray, QLockFile, QObject, QSysInfo, QTimer, Signal, Slot
from PySide6.QtNetwork import QLocalServer, QLocalSocket

from app.sentence import QT_TRANSLATE_NOOP, Sentence

PROTOCOL = 1
"""The version of the hand-over message; a launch of another version is told so."""

LOCK_NAME = "floodgate.lock"
"""The lock file in the data directory."""

MESSAGE_LIMIT = 64 * 1024
"""The longest hand-over message accepted (a path, some JSON): no client can fill memory."""

CLIENT_TIMEOUT_MS = 5000
"""How long the first instance waits for a connected launch to say something."""

HAND_OVER_TIMEOUT_S = 5.0
"""How long a second launch tries to reach the first one."""

_RETRY_S = 0.05
_SLICE_MS = 20
_PAUSE_S = 0.002


@dataclass(frozen=True)
class LaunchArguments:
    """What a launch asks of the running Floodgate.

    Attributes:
        model: a model file to open (absolute), or None to just come forward.
    """

    model: Path | None = None

    def to_json(self) -> bytes:
        """One line of JSON."""
        message = {"floodgate": PROTOCOL, "model": str(self.model) if self.model else None}
        return json.dumps(message).encode("utf-8") + b"\n"

    @classmethod
    def from_json(cls, line: bytes) -> LaunchArguments:
        """Read a line :meth:`to_json` wrote.

        Raises:
            ValueError: it is not such a line.
        """
        message = json.loads(line.decode("utf-8"))
        if not isinstance(message, dict) or message.get("floodgate") != PROTOCOL:
            raise ValueError("not a Floodgate hand-over of this version")
        model = message.get("model")
        if model is not None and (not isinstance(model, str) or not model or "\0" in model):
            raise ValueError("the model is not a path")
        return cls(Path(model) if model else None)


def server_name(directory: Path) -> str:
    """The local socket's name for ``directory``: short, and the same for every launch on it.

    Hashed (Unix socket paths are limited to about 100 bytes) with the user's name, so two
    users never share one.
    """
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = ""
    key = f"{user}\0{directory.expanduser().resolve()}".encode("utf-8", "surrogatepass")
    return "floodgate-" + hashlib.sha256(key).hexdigest()[:24]


class _Client(QObject):
    """One launch connected to the first instance: reads its line, answers, hangs up."""

    def __init__(self, socket: QLocalSocket, owner: SingleInstance) -> None:
        super().__init__(owner)
        self._socket = socket
        self._owner = owner
        self._buffer = b""
        socket.setParent(self)
        socket.readyRead.connect(self._read)
        socket.disconnected.connect(self._finish)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self._finish)
        self._timer.start(CLIENT_TIMEOUT_MS)
        self._done = False

    @Slot()
    def _read(self) -> None:
        if self._done:
            return
        self._buffer += bytes(self._socket.readAll().data())
        if b"\n" not in self._buffer:
            if len(self._buffer) > MESSAGE_LIMIT:
                self._answer({"ok": False, "reason": "message too long"})
            return
        line = self._buffer.split(b"\n", 1)[0]
        try:
            arguments = LaunchArguments.from_json(line)
        except (ValueError, UnicodeDecodeError) as exc:
            self._answer({"ok": False, "reason": str(exc)})
            return
        self._answer({"ok": True})
        self._owner.arguments_received.emit(arguments)

    def _answer(self, reply: dict[str, object]) -> None:
        self._done = True
        self._socket.write(QByteArray(json.dumps(reply).encode("utf-8") + b"\n"))
        self._socket.flush()
        self._socket.disconnectFromServer()

    @Slot()
    def _finish(self) -> None:
        self._timer.stop()
        if self._socket.state() != QLocalSocket.LocalSocketState.UnconnectedState:
            self._socket.abort()
        self.deleteLater()


class SingleInstance(QObject):
    """The one Floodgate of a data directory, or the way to reach it.

    Call :meth:`claim` first. If it returns True this is the first instance: it listens, and
    :attr:`arguments_received` says what later launches ask. If False, another Floodgate has
    the directory: :meth:`hand_over` the arguments to it and exit, or show the reason it
    returns.

    Signals:
        arguments_received(LaunchArguments): another launch asked for this (open its model,
            bring the window forward).
    """

    arguments_received = Signal(LaunchArguments)

    def __init__(self, directory: Path, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.directory = directory
        self.name = server_name(directory)
        self.problem: Sentence | None = None
        """Why this first instance cannot be reached by later launches (None when it can)."""
        self._lock = QLockFile(str(directory / LOCK_NAME))
        # Never stale by age (a Floodgate may run for weeks); stale when its process is gone.
        self._lock.setStaleLockTime(0)
        self._server: QLocalServer | None = None

    def claim(self) -> bool:
        """Become the Floodgate of the directory, unless another one already is.

        Returns:
            True: this is the first instance (listening for later launches). False: another
            Floodgate holds the directory; call :meth:`hand_over`.
        """
        with contextlib.suppress(OSError):  # the lock then fails below, and says why
            self.directory.mkdir(parents=True, exist_ok=True)
        if not self._lock.tryLock(0):
            if self._lock.error() == QLockFile.LockError.LockFailedError:
                return False
            # The directory cannot hold a lock (read-only, say): Floodgate still runs, but
            # cannot promise to be the only one.
            self.problem = Sentence(
                QT_TRANSLATE_NOOP(
                    "Floodgate",
                    "Floodgate cannot lock its data folder {folder}, so it cannot tell "
                    "whether another Floodgate uses it too.",
                ),
                {"folder": self.directory},
            )
            return True
        self._listen()
        return True

    def _listen(self) -> None:
        # Holding the lock means no live instance owns this name: a socket file left by a
        # crashed one is removed here, and never a live one's. (With access options Qt also
        # creates the socket aside and renames it into place; either alone is enough.)
        QLocalServer.removeServer(self.name)
        server = QLocalServer(self)
        server.setSocketOptions(QLocalServer.SocketOption.UserAccessOption)
        if not server.listen(self.name):
            self.problem = Sentence(
                QT_TRANSLATE_NOOP(
                    "Floodgate",
                    "Floodgate cannot listen for other launches ({reason}); a second "
                    "launch will say that this one does not answer.",
                ),
                {"reason": server.errorString()},
            )
            server.deleteLater()
            return
        server.newConnection.connect(self._accept)
        self._server = server

    @property
    def listening(self) -> bool:
        """Whether later launches can hand their arguments to this one."""
        return self._server is not None and self._server.isListening()

    @property
    def socket_path(self) -> str:
        """Where the socket is (its full name), once listening; empty before."""
        return self._server.fullServerName() if self._server is not None else ""

    @Slot()
    def _accept(self) -> None:
        assert self._server is not None
        while self._server.hasPendingConnections():
            socket = self._server.nextPendingConnection()
            if socket is not None:
                _Client(socket, self)

    def hand_over(
        self, arguments: LaunchArguments, timeout: float = HAND_OVER_TIMEOUT_S
    ) -> Sentence | None:
        """Give ``arguments`` to the Floodgate that holds the directory.

        Blocks for at most ``timeout`` seconds (it runs at launch, before any window).

        Returns:
            None once the first instance acknowledged; otherwise why it could not be done,
            as a sentence for the user.
        """
        try:
            pid, host, _ = self._lock.getLockInfo()
        except (TypeError, ValueError):  # no lock information (PySide returns none)
            pid, host = 0, ""
        if host and host != QSysInfo.machineHostName():
            return Sentence(
                QT_TRANSLATE_NOOP(
                    "Floodgate",
                    "Floodgate is already running with the data folder {folder} on another "
                    "computer ({host}). Close it there first, or start this one with another "
                    "data folder (FLOODGATE_HOME).",
                ),
                {"folder": self.directory, "host": host},
            )
        reason = self._send(arguments, timeout)
        if reason is None:
            return None
        return Sentence(
            QT_TRANSLATE_NOOP(
                "Floodgate",
                "Floodgate is already running with the data folder {folder} (process {pid}), "
                "but it did not answer: {reason}. Close it, or start this one with another "
                "data folder (FLOODGATE_HOME).",
            ),
            {"folder": self.directory, "pid": pid, "reason": reason},
        )

    def _send(self, arguments: LaunchArguments, timeout: float) -> str | None:
        """Connect, send, wait for the answer; None on success, else the reason (English)."""
        deadline = time.monotonic() + timeout
        socket = QLocalSocket()

        def wait(step: Callable[[int], bool]) -> bool:
            # PySide holds the GIL inside Qt's waitFor* calls: short slices with a sleep
            # between let any other Python thread (the first instance, in tests) run.
            while time.monotonic() < deadline:
                if step(_SLICE_MS):
                    return True
                if socket.error() != QLocalSocket.LocalSocketError.SocketTimeoutError:
                    return False
                time.sleep(_PAUSE_S)
            return False

        try:
            # The first instance takes the lock a moment before it listens: retry meanwhile.
            while True:
                socket.connectToServer(self.name)
                if wait(socket.waitForConnected):
                    break
                reason = socket.errorString()
                socket.abort()
                if time.monotonic() + _RETRY_S >= deadline:
                    return reason
                time.sleep(_RETRY_S)
            socket.write(QByteArray(arguments.to_json()))
            if not wait(socket.waitForBytesWritten):
                return socket.errorString()
            answer = b""
            while b"\n" not in answer:
                if not wait(socket.waitForReadyRead) and socket.bytesAvailable() == 0:
                    if time.monotonic() >= deadline:
                        return f"no acknowledgement within {timeout:g} s"
                    return socket.errorString()
                answer += bytes(socket.readAll().data())
                if len(answer) > MESSAGE_LIMIT:
                    return "an answer too long"
            try:
                reply = json.loads(answer.split(b"\n", 1)[0].decode("utf-8"))
            except (ValueError, UnicodeDecodeError):
                return "an answer that is not Floodgate's"
            if not isinstance(reply, dict) or reply.get("ok") is not True:
                refusal = reply.get("reason") if isinstance(reply, dict) else None
                return str(refusal or "it refused")
            return None
        finally:
            socket.abort()

    def release(self) -> None:
        """Stop listening and give up the directory (at exit; later launches become first)."""
        if self._server is not None:
            self._server.close()
            self._server.deleteLater()
            self._server = None
        if self._lock.isLocked():
            self._lock.unlock()
