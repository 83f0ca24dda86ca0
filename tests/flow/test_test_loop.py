"""The tests' event loop: a task woken as a run ends still steps inside a running loop."""

from __future__ import annotations

import asyncio
import time

from tests.support.loop import Loop, run_until


def test_a_task_woken_between_runs_steps_with_its_loop_running(loop: Loop) -> None:
    """A worker thread's result that arrives as a run stops, stepped with no loop running, made
    the task's next ``asyncio.to_thread`` fail ("no running event loop"): qasync's own
    ``run_until_complete`` did so on its first run here, the model library's scan in CI."""
    steps = 0

    async def scan() -> None:
        nonlocal steps
        while True:
            await asyncio.to_thread(time.sleep, 0)
            steps += 1

    task = loop.create_task(scan())
    try:
        runs = 0
        ends = time.monotonic() + 2.0
        while time.monotonic() < ends and not task.done():
            run_until(loop, lambda: True)
            runs += 1
        assert not task.done(), task.exception()
        assert runs > 100  # it ran between many runs' ends
        assert steps > 100
    finally:
        task.cancel()
        run_until(loop, task.done)
