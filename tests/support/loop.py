"""Waiting on the real event loop (qasync: Qt and asyncio in one loop, as in the app)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import qasync
from PySide6.QtCore import QCoreApplication, QEventLoop

Loop = asyncio.AbstractEventLoop
T = TypeVar("T")


class TestLoop(qasync.QEventLoop):  # type: ignore[misc]
    """qasync's loop, whose ``run_until_complete`` handles its last events as a running loop.

    qasync's own handles the events left when the future completes once more after it has
    stopped, with no loop running: a task woken then (by a worker thread's result) ran its next
    step without one, and its next ``asyncio.to_thread`` failed with "no running event loop"
    (the model library never got a download's model in one CI run). The app runs its loop
    for as long as it lives; a test runs it many times over, so it must not step tasks outside.
    """

    __test__ = False  # not a test class, whatever pytest makes of its name

    def run_until_complete(self, future: Awaitable[T]) -> T:
        task = asyncio.ensure_future(future, loop=self)

        def stop(_done: object) -> None:
            self.stop()

        task.add_done_callback(stop)
        try:
            self.run_forever()
        finally:
            task.remove_done_callback(stop)
        # The events posted before it stopped, handled as qasync's does, but as this loop's.
        asyncio.events._set_running_loop(self)
        try:
            dispatcher = QCoreApplication.eventDispatcher()
            if dispatcher is not None:
                dispatcher.processEvents(QEventLoop.ProcessEventsFlag.AllEvents)
        finally:
            asyncio.events._set_running_loop(None)
        if not task.done():
            raise RuntimeError("Event loop stopped before Future completed.")
        return task.result()


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
