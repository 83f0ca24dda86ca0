"""The first Floodgate of a data folder, waiting for a second launch to hand it a model.

Run by tests/test_app_process.py as ``python -m tests.drivers.second_launch --model M``: prints
``ready`` once its model is loaded, then ``opened NAME`` when another launch made it open
another model, and closes.
"""

from __future__ import annotations

import asyncio
import sys

from app.flow.session import ModelState
from app.main import main
from app.ui.window.main_window import MainWindow


async def wait_for_hand_over(window: MainWindow) -> None:
    session = window.session
    while session.state is not ModelState.READY or session.model is None:
        await asyncio.sleep(0.01)
    first = session.model.path
    print("ready", flush=True)
    while session.state is not ModelState.READY or session.model.path == first:
        await asyncio.sleep(0.01)
    print(f"opened {session.model.path.name}", flush=True)
    window.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], driver=wait_for_hand_over))
