"""Launches the real app, attaches a picture, asks about it, and reports the answer on screen.

Run by tests/test_app_process.py, which kills this process with SIGKILL mid-answer. The picture
is the file ``$FLOODGATE_TEST_PICTURE``, attached as a user would (the paperclip's path); every
50 ms it prints ``shown <characters> <time>``.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from app.flow.session import ModelState
from app.main import main
from app.ui.window.main_window import MainWindow
from tests.drivers import LONG_PROMPT, report_shown


async def attach_ask_and_report(window: MainWindow) -> None:
    session = window.session
    while session.state is not ModelState.READY:
        await asyncio.sleep(0.01)
    window.attach([Path(os.environ["FLOODGATE_TEST_PICTURE"])])
    while not window.tray.attachments():
        await asyncio.sleep(0.01)
    window.composer.setPlainText(LONG_PROMPT)
    window.send()
    await report_shown(window)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], driver=attach_ask_and_report))
