"""Several clients of an OpenAI-compatible server at once, through the official ``openai`` client.

For the bench's ``parallel`` section: the same clients against Floodgate's API server and
against llama-cpp-python's, in a process of their own (as real clients are; threads here
would take turns with the app's worker for the GIL). ``python -m app.bench.openai_clients
SPEC`` imports the client, prints ``ready``, waits for a line on its stdin (so that importing
is no part of the timing), then streams every completion at once, the ``i``-th sent ``i``
staggers after the first, and prints each one's timing as JSON.

SPEC (JSON): ``url`` (the base URL, ``…/v1``), ``prompts`` (one completion each), ``max_tokens``,
``stagger`` (seconds), ``extra_body`` (fields the server needs beyond OpenAI's, or none).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any


async def _one(client: Any, spec: dict[str, Any], index: int, start: float) -> dict[str, Any]:
    await asyncio.sleep(max(0.0, start + index * float(spec["stagger"]) - time.perf_counter()))
    sent = time.perf_counter()
    first = last = None
    chunks = 0
    usage = None
    stream = await client.completions.create(
        model="bench",
        prompt=spec["prompts"][index],
        max_tokens=int(spec["max_tokens"]),
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
        extra_body=spec.get("extra_body") or None,
    )
    async for chunk in stream:
        if chunk.usage is not None:
            usage = int(chunk.usage.completion_tokens)
        text = chunk.choices[0].text if chunk.choices else ""
        if text:
            now = time.perf_counter()
            first = first if first is not None else now
            last = now
            chunks += 1
    # Floodgate joins the pieces waiting into one chunk and says how many tokens in the
    # usage; llama-cpp-python's server sends a chunk per token and no usage.
    return {"sent_at": sent, "first_at": first, "last_at": last, "tokens": usage or chunks}


async def run(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Every completion of ``spec`` at once (after its stagger); their timings, in order."""
    from openai import AsyncOpenAI

    async with AsyncOpenAI(
        base_url=spec["url"], api_key="bench", max_retries=0, timeout=600
    ) as client:
        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        start = time.perf_counter()
        return list(
            await asyncio.gather(
                *(_one(client, spec, i, start) for i in range(len(spec["prompts"])))
            )
        )


def main(argv: list[str]) -> int:
    """``python -m app.bench.openai_clients SPEC``: the runs, printed as one JSON line."""
    print(json.dumps(asyncio.run(run(json.loads(argv[0])))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
