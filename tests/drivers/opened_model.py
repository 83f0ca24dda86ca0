"""A launch without ``--model``: prints which model it opened and the notes shown, and closes.

Run by tests/test_app_process.py as ``python -m tests.drivers.opened_model``.
"""

from __future__ import annotations

import asyncio
import sys

from app.flow.session import ModelState
from app.main import main
from app.ui.window.main_window import MainWindow


async def say_what_opened(window: MainWindow) -> None:
    session = window.session
    while session.state is not ModelState.READY or session.model is None:
        await asyncio.sleep(0.01)
    print(f"opened {session.model.path}", flush=True)
    print(window.view.toPlainText(), flush=True)
    window.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], driver=say_what_opened))
