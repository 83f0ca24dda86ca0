"""Waiting on the real event loop (qasync: Qt and asyncio in one loop, as in the app)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

Loop = asyncio.AbstractEventLoop


def run_until(loop: Loop, predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    """Run the loop until ``predicate()`` holds; fail the test after ``timeout`` seconds."""

    async def wait() -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise AssertionError(f"condition not met within {timeout} s")
            await asyncio.sleep(0.002)

    loop.run_until_complete(wait())


def run_for(loop: Loop, seconds: float) -> None:
    """Run the loop for ``seconds``."""
    loop.run_until_complete(asyncio.sleep(seconds))
