"""Launches the real app, asks for a long answer, and closes the window in the middle of it.

Run by tests/test_app_process.py as ``python -m tests.drivers.close_mid_answer``; prints when it
closed the window.
"""

from __future__ import annotations

import asyncio
import sys
import time

from app.main import main
from app.ui.window.main_window import MainWindow
from tests.drivers import send_when_ready


async def close_mid_answer(window: MainWindow) -> None:
    session = window.session
    await send_when_ready(window)
    while session.metrics.reply.pieces_shown < 20:
        await asyncio.sleep(0.01)
    print(f"closing at {time.time():.6f}", flush=True)
    window.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], driver=close_mid_answer))
