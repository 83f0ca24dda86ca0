"""A model on a server, as a producer: its stream feeds the same bounded queue as the worker."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from urllib.parse import urlparse

import httpx

from app.engine import ModelInfo
from app.engine.remote import RemoteEndpoint, list_models, stream_chat
from app.flow.worker import ReplyJob, producing


class RemoteModel:
    """Streams replies from an OpenAI-compatible server on the event loop.

    Where the local worker is a thread that waits on the queue, this is a coroutine that awaits
    it: while the queue is full it reads nothing more from the socket. Stop cancels the
    coroutine, which closes the connection (the server aborts the request) within the frame.
    """

    def __init__(self, endpoint: RemoteEndpoint) -> None:
        self.endpoint = endpoint
        self._client = httpx.AsyncClient()
        self._replies: set[asyncio.Task[None]] = set()
        host = urlparse(endpoint.base_url).netloc or endpoint.base_url
        self.info = ModelInfo(
            path=Path(endpoint.model or host),
            name=f"{Path(endpoint.model).stem or endpoint.model} @ {host}",
            n_ctx=0,
            has_chat_template=True,  # the server applies its own
            chat_format="remote",
        )

    async def models(self) -> list[str]:
        """The models the server offers (raises RemoteError)."""
        return await list_models(self._client, self.endpoint)

    def produce(self, job: ReplyJob) -> None:
        """Start streaming ``job``'s reply on the running loop."""
        task = asyncio.ensure_future(self.run(job))
        self._replies.add(task)  # a strong reference: the loop keeps only a weak one
        task.add_done_callback(self._replies.discard)

    async def run(self, job: ReplyJob) -> None:
        """Stream one reply into ``job.pieces``; ends the queue whatever happens."""
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()

        def cancel() -> None:
            loop.call_soon_threadsafe(task.cancel)

        remove = job.stop.add_listener(cancel)
        stream = stream_chat(self._client, self.endpoint, job.messages, job.settings, job.report)
        with producing(job):
            try:
                if job.stop.is_set():
                    return
                async for text in stream:
                    if not await job.pieces.put_async(text):
                        break
            except asyncio.CancelledError:
                if not job.stop.is_set():
                    raise
            finally:
                with contextlib.suppress(BaseException):
                    await stream.aclose()  # closes the HTTP response: the server stops
                remove()

    async def close(self) -> None:
        """Close the connections."""
        await self._client.aclose()
