"""Guards against a Qt binding that corrupts reference counts (PySide6 6.12.0 did).

Such a bug frees ``None`` or ``True`` a little on every signal emission or loop callback and
kills the app with "Fatal Python error: none_dealloc" after a few thousand frames, so it is
checked directly instead of waiting for a long stream to crash.
"""

from __future__ import annotations

import asyncio
import sys

from PySide6.QtCore import QObject, Signal

from tests.support.loop import Loop


class _Emitter(QObject):
    text = Signal(str)
    bare = Signal()


def test_signal_emission_keeps_refcounts(loop: Loop) -> None:
    emitter = _Emitter()
    received: list[str] = []
    emitter.text.connect(received.append)
    emitter.bare.connect(lambda: None)
    before = sys.getrefcount(None), sys.getrefcount(True), sys.getrefcount(False)
    for _ in range(200):
        emitter.text.emit("x")
        emitter.bare.emit()
    after = sys.getrefcount(None), sys.getrefcount(True), sys.getrefcount(False)
    assert len(received) == 200
    assert [a - b for a, b in zip(after, before, strict=True)] == [0, 0, 0]


def test_loop_callbacks_do_not_drain_none(loop: Loop) -> None:
    async def spin() -> None:
        for _ in range(500):
            await asyncio.sleep(0)

    loop.run_until_complete(spin())  # warm caches first
    before = sys.getrefcount(None)
    loop.run_until_complete(spin())
    # A leak of references grows the count and is harmless here; a refcount bug shrinks it.
    assert sys.getrefcount(None) - before > -50
