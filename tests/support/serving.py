"""Helpers for the API server's tests: a session with a model, and the server over it.

The ``client`` fixture (the official client) is registered for tests/server/ in its conftest.py;
each module there that uses it defines the ``served`` fixture it asks.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import openai
import pytest

from app.engine import BackendOpener, EngineOptions, GenerationSettings
from app.flow.requests import ServedRequest
from app.flow.session import ChatSession, ModelState
from app.server.api import ServerConfig
from app.server.local import LocalServer
from tests.support.loop import Loop, run_until

STORY = "Tell me a long story about a lighthouse keeper and a storm."
GREEDY = GenerationSettings(temperature=0.0, max_tokens=48)


@dataclass
class Served:
    """A session (the window's flow, without a window), its model, and the server over it."""

    session: ChatSession
    server: LocalServer
    loop: Loop

    @property
    def url(self) -> str:
        return self.server.base_url

    def requests(self) -> list[ServedRequest]:
        return self.server.board.recent()

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 30.0) -> None:
        """Run the session's loop (the worker's signals) until ``predicate`` holds."""
        run_until(self.loop, predicate, timeout)


@pytest.fixture
def client(served: Served) -> Iterator[openai.OpenAI]:
    """The official ``openai`` client, asking the module's own ``served`` server."""
    with openai.OpenAI(base_url=served.url, api_key="unused", max_retries=0) as client:
        yield client


def serve(
    loop: Loop,
    opener: BackendOpener,
    model: Path,
    config: ServerConfig | None = None,
    options: EngineOptions | None = None,
) -> Served:
    """Open ``model`` in a new session and start a server on a free loopback port."""
    session = ChatSession(opener, options=options or EngineOptions(n_ctx=2048))
    session.open_model(model)
    run_until(loop, lambda: session.state is not ModelState.LOADING, 30)
    assert session.state is ModelState.READY, session.describe_state()
    server = LocalServer(config or ServerConfig(port=0), session.host)
    server.start()
    return Served(session, server, loop)


def long_prompt(words: int = 1200) -> str:
    """A prompt that takes the model seconds to read."""
    sentence = "The keeper climbed the stairs, trimmed the wick and watched the sea. "
    return (sentence * (words // 12 + 1)).strip()


def client_process(url: str, body: str, *, stream: bool) -> subprocess.Popen[bytes]:
    """A separate process that asks the server with the official client (to be killed)."""
    code = textwrap.dedent(
        f"""
        import openai, sys
        client = openai.OpenAI(base_url={url!r}, api_key="none", max_retries=0)
        reply = client.chat.completions.create(
            model="any", messages=[{{"role": "user", "content": {body!r}}}],
            max_tokens=1500, stream={stream!r},
        )
        if {stream!r}:
            for chunk in reply:
                sys.stdout.write("."); sys.stdout.flush()
        """
    )
    return subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def wait_until(predicate: Callable[[], bool], timeout: float = 30.0) -> None:
    """Wait on this thread (the server and the worker run on their own)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        time.sleep(0.002)
