"""A plain client of an OpenAI-compatible server, for the bench: one streamed reply, timed.

Kept apart from the rest of the bench (httpx only) so that it starts quickly in a process of
its own: ``python -m app.bench.api_client URL BODY`` prints the run as JSON.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any

import httpx


@dataclass
class StreamRun:
    """One streamed reply as a client saw it."""

    tokens: int
    sent_at: float
    first_at: float | None
    last_at: float | None
    text: str

    @property
    def rate(self) -> float:
        """Tokens per second from the first content to the last."""
        if self.first_at is None or self.last_at is None or self.last_at <= self.first_at:
            return 0.0
        return (self.tokens - 1) / (self.last_at - self.first_at)

    @property
    def ttft_ms(self) -> float:
        """From the request to the first content."""
        return ((self.first_at or self.sent_at) - self.sent_at) * 1000


def stream_once(url: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> StreamRun:
    """Stream one chat completion with a plain HTTP client (on the calling thread)."""
    body = {**body, "stream": True, "stream_options": {"include_usage": True}}
    parts: list[str] = []
    tokens = 0
    first = last = None
    sent = time.perf_counter()
    with (
        httpx.Client(timeout=300) as client,
        client.stream("POST", url + "/chat/completions", json=body, headers=headers) as reply,
    ):
        for line in reply.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            data = json.loads(line[6:])
            if data.get("usage"):
                tokens = int(data["usage"]["completion_tokens"])
            for choice in data.get("choices", []):
                content = choice.get("delta", {}).get("content")
                if content:
                    now = time.perf_counter()
                    first = first or now
                    last = now
                    parts.append(content)
    return StreamRun(tokens, sent, first, last, "".join(parts))


async def stream_in_process(url: str, body: dict[str, Any]) -> StreamRun:
    """:func:`stream_once` in a process of its own (the bench's loop stays free meanwhile)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "app.bench.api_client",
        url,
        json.dumps(body),
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"the bench's client failed ({process.returncode})")
    return StreamRun(**json.loads(out))


def main(argv: list[str]) -> int:
    """``python -m app.bench.api_client URL BODY``: one run, printed as JSON."""
    url, body = argv
    print(json.dumps(asdict(stream_once(url, json.loads(body)))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
