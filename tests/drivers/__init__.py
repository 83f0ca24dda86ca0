"""What the subprocess tests' drivers share: wait for the model, then send a long prompt."""

from __future__ import annotations

import asyncio
import time

from app.flow.session import ModelState
from app.ui.window.main_window import MainWindow

LONG_PROMPT = "Write a long story about a dragon who learns to read."


async def send_when_ready(window: MainWindow, prompt: str = LONG_PROMPT) -> None:
    """Wait until the model is loaded, then type ``prompt`` and send it, as a user would."""
    while window.session.state is not ModelState.READY:
        await asyncio.sleep(0.01)
    window.composer.setPlainText(prompt)
    window.send()


async def report_shown(window: MainWindow) -> None:
    """Every 50 ms, print ``shown <characters> <time>``: the reply on screen, and when.

    A reply that ends before the test kills the app (a sampled story can be short) is asked
    for again, as a user would with Regenerate: the new one starts from 0 characters, and the
    test counts from there. The conversation keeps one prompt, its reply the newest variant.
    """
    session = window.session
    while True:
        reply = session.conversation.messages[-1]
        if reply.role == "assistant" and reply.status != "streaming" and not session.generating:
            session.regenerate()
            reply = session.conversation.messages[-1]
        print(f"shown {len(reply.content)} {time.time():.6f}", flush=True)
        await asyncio.sleep(0.05)
