"""The local API server: uvicorn on a thread of its own, with its own asyncio loop.

Why uvicorn and Starlette: they are what llama-cpp-python's own server runs on (so already
well exercised with streaming completions), uvicorn applies TCP flow control to ``send`` (a
slow reader makes the response wait, which is the backpressure the flow needs), and
Starlette's ASGI requests expose ``receive()``, where a client that leaves shows as
``http.disconnect`` even while nothing is being written.

Why a thread of its own rather than the window's qasync loop: parsing HTTP, validating JSON
and writing chunks for several clients would otherwise take turns with the window's frames.
On its own loop the window only shares the GIL with it; ``floodgate bench`` measures the
window's loop lag while four clients stream. The worker thread stays the only thread that
calls llama.cpp: the server only queues jobs for it and reads their pieces.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import uvicorn

from app.flow.requests import RequestBoard, SharedModel
from app.sentence import QT_TRANSLATE_NOOP, Sentence
from app.server.api import ServerConfig, build_api
from app.server.guard import is_loopback, is_wildcard
from app.trace import TRACE

START_SECONDS = 5.0
"""How long :meth:`LocalServer.start` waits for uvicorn to be ready."""

STOP_SECONDS = 1.0
"""How long :meth:`LocalServer.stop` waits for the server's thread to end."""


class ServerStartError(Exception):
    """The server could not start; :attr:`sentence` says why, for the user."""

    def __init__(self, sentence: Sentence) -> None:
        super().__init__(str(sentence))
        self.sentence = sentence


def check_address(host: str, api_key: str | None) -> None:
    """Refuse to listen beyond this machine without an API key.

    Raises:
        ServerStartError: ``host`` is not a loopback address and there is no key.
    """
    if not api_key and not is_loopback(host):
        raise ServerStartError(
            Sentence(
                QT_TRANSLATE_NOOP(
                    "Floodgate",
                    "The API server listens on {host} only with an API key: any machine that "
                    "reaches this one could use the model otherwise. Set a key, or use "
                    "127.0.0.1.",
                ),
                {"host": host},
            )
        )


class LocalServer:
    """The OpenAI-compatible API over the open model, served from a thread of its own.

    Args:
        config: where and how it serves.
        model: the open model it shares with the window (the model host).
        board: where its requests are recorded (the window's panel reads it).
    """

    def __init__(
        self, config: ServerConfig, model: SharedModel, board: RequestBoard | None = None
    ) -> None:
        self.config = config
        self.board = board or RequestBoard(config.max_waiting)
        self._model = model
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._port = config.port
        self._failure: BaseException | None = None

    @property
    def port(self) -> int:
        """The port it listens on (the one chosen by the system when configured as 0)."""
        return self._port

    @property
    def base_url(self) -> str:
        """The address clients use, ``http://127.0.0.1:8731/v1``."""
        host = self.config.host
        if is_wildcard(host):
            host = "127.0.0.1" if ":" not in host else "::1"
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{self._port}/v1"

    @property
    def running(self) -> bool:
        """Whether it serves."""
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Bind the address and serve; returns once requests are answered.

        Raises:
            ServerStartError: the address is refused, taken or not this machine's.
        """
        config = self.config
        check_address(config.host, config.api_key)
        listener = self._bind()
        self._port = int(listener.getsockname()[1])
        app = build_api(config, self._model, self.board)
        server = uvicorn.Server(
            uvicorn.Config(
                app,
                http="h11",
                ws="none",
                lifespan="off",
                log_level="warning",
                access_log=False,
                timeout_graceful_shutdown=1,
            )
        )
        self._server = server
        self._thread = threading.Thread(
            target=self._serve, args=(server, listener), name="api-server", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + START_SECONDS
        while not server.started and self._thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        if not server.started:
            self.stop()
            raise ServerStartError(
                Sentence(
                    QT_TRANSLATE_NOOP("Floodgate", "The API server did not start: {reason}"),
                    {"reason": self._failure or "it took too long"},
                )
            )

    def _bind(self) -> socket.socket:
        host, port = self.config.host, self.config.port
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        listener = socket.socket(family, socket.SOCK_STREAM)
        try:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            # Accepted connections inherit it (Linux, macOS, Windows).
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.config.send_buffer_bytes)
            listener.bind((host, port))
        except OSError as exc:
            listener.close()
            raise ServerStartError(
                Sentence(
                    QT_TRANSLATE_NOOP(
                        "Floodgate",
                        "The API server cannot listen on {host}:{port}: {reason}. Another "
                        "program may use that port; choose another one.",
                    ),
                    {"host": host, "port": port, "reason": exc.strerror or exc},
                )
            ) from exc
        return listener

    def _serve(self, server: uvicorn.Server, listener: socket.socket) -> None:
        TRACE.name_thread("api-server")
        try:
            asyncio.run(server.serve(sockets=[listener]))
        except BaseException as exc:  # reported by start(), or logged by uvicorn
            self._failure = exc
        finally:
            listener.close()

    def stop(self, timeout: float = STOP_SECONDS) -> None:
        """Stop every request (their computation aborts), close the server, join its thread."""
        self.board.stop_all()
        server, thread = self._server, self._thread
        if server is not None:
            server.should_exit = True
        if thread is not None:
            thread.join(timeout)
        self._server = None
        self._thread = None
