"""What qasync's event loop leaves out and asyncio code relies on."""

from __future__ import annotations

import asyncio
import sys
from typing import Any


def finalize_async_generators_on(loop: asyncio.AbstractEventLoop) -> Any:
    """Have ``loop`` close abandoned async generators, as asyncio's own loops do.

    qasync runs Qt's event loop in place of asyncio's ``run_forever``, which is where asyncio
    installs these hooks. Without them an async generator left unfinished (httpx's response
    streams, when a reply is stopped) is closed by the garbage collector outside any loop,
    and its cleanup fails with "no running event loop".

    Returns:
        The hooks that were installed before, for :func:`sys.set_asyncgen_hooks` to restore.
    """
    previous = sys.get_asyncgen_hooks()
    sys.set_asyncgen_hooks(
        firstiter=loop._asyncgen_firstiter_hook,  # type: ignore[attr-defined]
        finalizer=loop._asyncgen_finalizer_hook,  # type: ignore[attr-defined]
    )
    return previous
