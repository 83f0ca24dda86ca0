"""Launches the real app, asks for a long answer, and segfaults in the middle of it.

Run by tests/test_crash_record.py as ``python -m tests.drivers.crash_mid_answer``: the process
dies by SIGSEGV, as it would with a llama.cpp built for the wrong CPU, with the reply half streamed.
"""

from __future__ import annotations

import asyncio
import faulthandler
import sys

from app.flow.reply import SAVE_EVERY
from app.main import main
from app.ui.window.main_window import MainWindow
from tests.drivers import send_when_ready


async def crash_mid_answer(window: MainWindow) -> None:
    session = window.session
    await send_when_ready(window)
    while session.metrics.reply.pieces_shown < 1:
        await asyncio.sleep(0.01)
    # The reply is saved as it streams, once a second: let one save happen first.
    await asyncio.sleep(SAVE_EVERY * 1.2)
    reply = session.conversation.messages[-1]
    print(f"crashing with {len(reply.content)} characters, {reply.status}", flush=True)
    faulthandler._sigsegv()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], driver=crash_mid_answer))
