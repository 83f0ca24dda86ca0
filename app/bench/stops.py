"""Stop, measured in the app: at random moments of decoding and of prompt processing.

After every Stop the next greedy reply is checked against the one a freshly loaded model
gives, so an abort that left the cache broken shows up here.

Stops in replies of a long conversation are measured apart, in a window opened as the app
opens one (its context for the replies side by side that memory allows, and a prompt cache):
there the window's replies are decoded in a batch, and the state of a conversation that took
seconds to process is kept at each reply's end (a copy of tens of MB), which Stop must not
wait for.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

from app.bench.engine_drive import EngineThread
from app.bench.measure import ask, close_app, open_app, until
from app.bench.plan import CHECK, LONG_PROMPT, STORY, Setup
from app.bench.stats import summary
from app.engine import ChatMessage, GenerationSettings
from app.engine.kv_record import DISK_WORTHY_SECONDS
from app.engine.llama import open_llama
from app.flow.metrics import Distribution
from app.flow.session import ModelState
from app.store.conversation import Conversation
from app.ui.window.main_window import MainWindow

CHECK_SETTINGS = GenerationSettings(temperature=0.0, max_tokens=32)


def fresh_reply(setup: Setup) -> str:
    """The greedy reply to the check prompt from a model loaded just for it.

    On an engine thread of its own that ends with it (never the window's thread, which must
    not call llama.cpp beside the app's worker).
    """
    check: list[ChatMessage] = [{"role": "user", "content": CHECK}]
    with EngineThread() as thread:
        fresh = thread.open(setup.model, setup.options)
        try:
            return thread.reply(fresh, check, CHECK_SETTINGS, "check").text
        finally:
            thread.close(fresh)


async def _stop_once(setup: Setup, window: MainWindow, kind: str) -> float | None:
    """Send, Stop at a random moment; the stop's latency, or None if it missed its phase."""
    session = window.session
    session.conversation = Conversation()
    session.settings = GenerationSettings(temperature=0.0, max_tokens=1024)
    session.send(STORY if kind == "decode" else LONG_PROMPT)
    return await _stop_sent(setup, window, kind)


async def _stop_sent(setup: Setup, window: MainWindow, kind: str) -> float | None:
    """Stop the reply just sent at a random moment of its ``kind`` of work (decode, prefill).

    Returns:
        The stop's latency, or None if the reply ended first or had left that phase.
    """
    session = window.session
    if kind == "decode":
        await until(lambda: session.metrics.reply.pieces_shown > 0)
        await asyncio.sleep(setup.rng.uniform(0.0, 1.0))
    else:
        await until(lambda: session.state is ModelState.GENERATING)
        await asyncio.sleep(setup.rng.uniform(0.05, 3.0))
    if not session.generating:
        return None  # finished before the stop moment; draw again next round
    stopped_pieces = session.metrics.reply.pieces_shown
    session.stop()
    await until(lambda: not session.generating)
    latency = session.metrics.stop_latency_ms.last
    assert latency is not None
    if kind == "prefill" and stopped_pieces:
        return None  # prefill had already ended; not a prefill stop
    return latency


async def stops(setup: Setup, window: MainWindow) -> dict[str, Any]:
    """Stop at random moments during decoding and during prefill; check the next reply."""
    session = window.session
    expected = fresh_reply(setup)
    found = {"decode": Distribution(), "prefill": Distribution()}
    consistent = True
    for kind, count in (("decode", setup.plan.decode_stops), ("prefill", setup.plan.prefill_stops)):
        into = found[kind]
        for _ in range(count):
            latency = await _stop_once(setup, window, kind)
            if latency is None:
                continue
            into.add(latency)
            session.settings = CHECK_SETTINGS
            await ask(window, CHECK)
            got = session.conversation.messages[-1].content
            if got != expected:
                consistent = False
                setup.log(f"  inconsistent after {kind} stop: {got!r} != {expected!r}")
        setup.log(f"  {kind}: {into.count} stops, p95 {into.percentile(95):.2f} ms")
    session.settings = setup.greedy
    return {
        "stop_decode_ms": summary(found["decode"]),
        "stop_prefill_ms": summary(found["prefill"]),
        "next_reply_consistent": consistent,
        **await long_conversation_stops(setup),
    }


async def long_conversation_stops(setup: Setup) -> dict[str, Any]:
    """Stops at random moments of replies in a long conversation, in a window as the app's.

    The conversation opens with :data:`LONG_PROMPT` (about 1,500 tokens: seconds to process
    on a small machine, so its state is kept at every reply's end); each Stop's reply stays
    in it, as a user's stopped replies do.
    """
    options = replace(setup.options, parallel=0)  # as the app's Auto: chosen from memory
    window = await open_app(replace(setup, options=options), open_llama, setup.greedy)
    try:
        session = window.session
        session.conversation = Conversation()
        session.settings = GenerationSettings(temperature=0.0, max_tokens=16)
        assert session.send(LONG_PROMPT)
        await until(lambda: not session.generating, 300)
        m = session.metrics
        assert m.prefill_started_at is not None
        assert m.prefill_ended_at is not None
        processed = round(m.prefill_ended_at - m.prefill_started_at, 3)
        session.settings = GenerationSettings(temperature=0.0, max_tokens=1024)
        found = Distribution()
        for _ in range(setup.plan.decode_stops):
            assert session.send(STORY)
            latency = await _stop_sent(setup, window, "decode")
            if latency is not None:  # else it ended first
                found.add(latency)
        model = session.model
        setup.log(
            f"  in a long conversation: {found.count} stops, p95 {found.percentile(95):.2f} ms"
        )
        return {
            "stop_long_ms": summary(found),
            "stop_long": {
                "places": model.parallel if model is not None else 0,
                "prompt_tokens": m.prompt_tokens,
                "first_prompt_seconds": processed,
                "kept_from_seconds": DISK_WORTHY_SECONDS,
            },
        }
    finally:
        await close_app(window)
