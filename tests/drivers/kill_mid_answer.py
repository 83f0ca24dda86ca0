"""Launches the real app, asks for a long answer, and reports how much of it is on screen.

Run by tests/test_app_process.py, which kills this process with SIGKILL mid-answer. Every 50 ms
it prints ``shown <characters> <time>``: what the user could see, and when.
"""

from __future__ import annotations

import sys

from app.main import main
from app.ui.window.main_window import MainWindow
from tests.drivers import report_shown, send_when_ready


async def report_while_streaming(window: MainWindow) -> None:
    await send_when_ready(window)
    await report_shown(window)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], driver=report_while_streaming))
