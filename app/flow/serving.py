"""The local API server as the window sees it: on or off, its address, its requests.

The window may not import the server (``app/server/``), nor the server the window; the
composition root hands this object a *starter* that starts the real server. Starting binds a
socket and waits for uvicorn, stopping joins its thread: both run on a spare thread, never
the UI's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from PySide6.QtCore import QObject, Signal

from app.flow.requests import RequestBoard
from app.flow.words import say, say_sentence
from app.sentence import QT_TRANSLATE_NOOP, Sentence
from app.store.preferences import ApiServerPreferences


class RunningServer(Protocol):
    """A server that serves (what the starter returns)."""

    @property
    def base_url(self) -> str:
        """The address clients use."""
        ...

    def stop(self) -> None:
        """Stop its requests and close it (blocks until its thread ended)."""
        ...


Starter = Callable[[ApiServerPreferences, str | None, RequestBoard], "RunningServer | Sentence"]
"""Starts the server with these preferences and key (blocking); or says why it cannot."""


class ApiServing(QObject):
    """Turns the local API server on and off as Settings say, and tells the window about it.

    Signals:
        changed(): the address or the problem changed (the status line reads them again).
    """

    changed = Signal()

    def __init__(self, starter: Starter, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._starter = starter
        self.board = RequestBoard()
        self._server: RunningServer | None = None
        self._problem: Sentence | None = None
        self._lock = asyncio.Lock()

    @property
    def address(self) -> str | None:
        """The base URL while it serves (None when off)."""
        return self._server.base_url if self._server is not None else None

    def problem(self) -> str:
        """Why it does not serve although Settings ask it to (empty: no problem)."""
        return say_sentence(self._problem) if self._problem is not None else ""

    def status(self) -> str:
        """For the status line: the address and the requests queued and running."""
        address = self.address
        if address is None:
            return ""
        queued, running = self.board.counts()
        return say(
            QT_TRANSLATE_NOOP("Floodgate", "API {address} · {running} running, {queued} queued"),
            address=address,
            running=running,
            queued=queued,
        )

    async def apply(self, preferences: ApiServerPreferences, api_key: str | None) -> None:
        """Serve as ``preferences`` say: start, restart on another address, or stop."""
        async with self._lock:
            await self._stop()
            self._problem = None
            if preferences.enabled:
                started = await asyncio.to_thread(self._starter, preferences, api_key, self.board)
                if isinstance(started, Sentence):
                    self._problem = started
                else:
                    self._server = started
            self.changed.emit()

    def stop_request(self, request_id: int) -> bool:
        """Stop one request (queued: dropped; running: its computation aborts)."""
        return self.board.stop(request_id)

    async def close(self) -> None:
        """Stop serving (at quit)."""
        async with self._lock:
            await self._stop()

    async def _stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            await asyncio.to_thread(server.stop)
            self.changed.emit()
