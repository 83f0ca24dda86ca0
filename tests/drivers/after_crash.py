"""Launches the real app after a crash and prints what the window shows, then closes it.

Run by tests/test_crash_record.py as ``python -m tests.drivers.after_crash``: prints one JSON
line with the text on screen and the shown conversation's messages.
"""

from __future__ import annotations

import asyncio
import json
import sys

from app.flow.session import ModelState
from app.main import main
from app.ui.window.main_window import MainWindow


async def report_after_crash(window: MainWindow) -> None:
    for _ in range(1000):
        if "ended unexpectedly" in window.view.toPlainText():
            break
        await asyncio.sleep(0.01)
    # llama-cpp-python points the process's stdout at /dev/null while it loads a model: what
    # is printed meanwhile is lost.
    while window.session.state is not ModelState.READY:
        await asyncio.sleep(0.01)
    window.view.finish_building()
    messages = [
        {"role": m.role, "status": m.status, "note": m.note, "content": m.content}
        for m in window.session.conversation.messages
    ]
    print(json.dumps({"shown": window.view.toPlainText(), "messages": messages}), flush=True)
    window.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], driver=report_after_crash))
