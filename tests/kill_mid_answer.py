"""Launches the real app, asks for a long answer, and reports how much of it is on screen.

Run by tests/test_app_process.py, which kills this process with SIGKILL mid-answer. Every 50 ms
it prints ``shown <characters> <time>``: what the user could see, and when.
"""

from __future__ import annotations

import asyncio
import sys
import time

from app.main import main
from app.ui.window.main_window import MainWindow
from tests.drivers import send_when_ready


async def report_while_streaming(window: MainWindow) -> None:
    session = window.session
    await send_when_ready(window)
    while True:
        reply = session.conversation.messages[-1]
        print(f"shown {len(reply.content)} {time.time():.6f}", flush=True)
        await asyncio.sleep(0.05)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], driver=report_while_streaming))
