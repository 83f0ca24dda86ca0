"""One request's reply, from the worker's queue to the socket, and Stop when the client leaves.

Both kinds of response watch the connection while they wait: an ASGI ``receive()`` that
returns ``http.disconnect`` sets the request's :class:`~app.engine.stop.StopSignal`, which
raises llama.cpp's native abort flag, so the computation ends within milliseconds, during
prompt processing too. (A server that notices a client left only when it next writes to it
cannot stop a prompt being read, nor a request that streams nothing.)

A slow reader is backpressure, not memory: the stream writes a chunk only once the last one
left (uvicorn's ``send`` waits while the socket's buffer is full), so the bounded
:class:`~app.flow.piece_queue.PieceQueue` fills and the worker waits.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from starlette.types import Receive, Scope, Send

from app.engine import GenerationReport
from app.flow.requests import RequestBoard, ServedRequest
from app.flow.worker import ReplyJob
from app.server.errors import ApiError
from app.trace import TRACE

WAIT_FOR_ABORT = 0.002
"""Seconds between looks at a stopped reply whose computation is ending (milliseconds)."""


@dataclass(frozen=True)
class ReplyShape:
    """What kind of reply the client asked for, and how its objects are named.

    Attributes:
        chat: ``chat.completion`` objects (else ``text_completion``).
        model: the model's name, as ``/v1/models`` lists it.
        stream: server-sent events.
        include_usage: a usage chunk (empty ``choices``) before ``data: [DONE]``.
    """

    chat: bool
    model: str
    stream: bool
    include_usage: bool

    @property
    def prefix(self) -> str:
        """The id's prefix."""
        return "chatcmpl-" if self.chat else "cmpl-"


def finish_reason(report: GenerationReport, request: ServedRequest) -> str:
    """OpenAI's ``finish_reason``: ``stop``, ``length``, or why the reply was cut.

    ``cancelled``: stopped from the window's panel, or the server is closing.
    """
    if request.stopped_by_window or report.finish == "stopped":
        return "cancelled"
    if report.finish == "length":
        return "length"
    if report.finish == "error":
        return "error"
    return "stop"


def usage(report: GenerationReport) -> dict[str, Any]:
    """The usage object (prompt tokens, of them cached, reply tokens)."""
    prompt, reply = report.prompt_tokens, report.reply_tokens
    return {
        "prompt_tokens": prompt,
        "completion_tokens": reply,
        "total_tokens": prompt + reply,
        "prompt_tokens_details": {"cached_tokens": report.cached_tokens},
    }


def _error_of(report: GenerationReport) -> ApiError:
    message = str(report.error) if report.error is not None else "Generation failed."
    return ApiError(500, message, kind="server_error", code="generation_failed")


class ReplyResponse:
    """The ASGI response of one admitted request: streamed or whole, Stop on disconnect.

    Args:
        request: the board's record of the request.
        job: its reply job, already queued for the worker.
        shape: what the client asked for.
        board: where the request's end is recorded.
    """

    def __init__(
        self, request: ServedRequest, job: ReplyJob, shape: ReplyShape, board: RequestBoard
    ) -> None:
        self._request = request
        self._job = job
        self._shape = shape
        self._board = board
        self._left = False
        self._completed = False
        self._id = shape.prefix + uuid.uuid4().hex[:24]
        self._created = int(time.time())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer, watching the connection the whole time."""
        request = self._request
        TRACE.instant("api request", cat="server", id=request.id, endpoint=request.endpoint)
        watcher = asyncio.ensure_future(self._watch(receive))
        try:
            if self._shape.stream:
                await self._stream(send, watcher)
            else:
                await self._whole(send, watcher)
        except OSError:  # the socket went while writing: the same as a disconnect
            self._client_left()
        finally:
            watcher.cancel()
            outcome = self._outcome()
            # Cancelled (the server is closing) or failed: nobody will read what it computes.
            self._job.stop.set()
            self._board.end(self._request, outcome, self._reason())
            TRACE.instant("api request ended", cat="server", id=request.id, outcome=outcome)

    async def _watch(self, receive: Receive) -> None:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                self._client_left()
                return

    def _client_left(self) -> None:
        self._left = True
        if self._job.stop.set():
            TRACE.instant("client left", cat="server", id=self._request.id)

    def _outcome(self) -> str:
        report = self._job.report
        if self._left:
            return "client left"
        if self._job.stop.is_set() or not self._completed:
            return "stopped"
        if report.finish == "error":
            return "failed"
        return "length" if report.finish == "length" else "done"

    def _reason(self) -> str:
        report = self._job.report
        if report.finish == "error" and report.error is not None:
            return str(report.error)
        return ""

    async def _pieces(self, each: Callable[[str], Any]) -> bool:
        """Hand each batch of text to ``each`` until the reply ends.

        Returns:
            False when the request was stopped (its client left, or the window stopped it)
            while it still waited for the worker: it is dropped there without computing, and
            nothing is awaited here.
        """
        job = self._job
        pieces = job.pieces
        while not pieces.finished:
            taken = await pieces.take_async()
            if taken:
                await each("".join(piece.text for piece in taken))
            elif job.stop.is_set():
                if job.began_at is None:
                    return False
                # The abort ends llama_decode within milliseconds; wait for the books to close.
                while not pieces.finished:
                    await asyncio.sleep(WAIT_FOR_ABORT)
        return True

    async def _whole(self, send: Send, watcher: asyncio.Future[None]) -> None:
        parts: list[str] = []

        async def keep(text: str) -> None:
            parts.append(text)

        await self._pieces(keep)
        if self._left:
            return
        watcher.cancel()  # the response is about to complete: receive() then says disconnect
        report = self._job.report
        if report.finish == "error" and not parts:
            error = _error_of(report)
            self._completed = True
            await _send_json(send, error.status, error.body())
            return
        text = "".join(parts)
        choice: dict[str, Any] = {"index": 0, "finish_reason": finish_reason(report, self._request)}
        if self._shape.chat:
            choice["message"] = {"role": "assistant", "content": text, "refusal": None}
        else:
            choice["text"] = text
        choice["logprobs"] = None
        self._completed = True
        await _send_json(send, 200, {**self._head(), "choices": [choice], "usage": usage(report)})

    async def _stream(self, send: Send, watcher: asyncio.Future[None]) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"text/event-stream; charset=utf-8"),
                    (b"cache-control", b"no-cache"),
                    (b"x-accel-buffering", b"no"),
                ],
            }
        )
        chat = self._shape.chat

        async def event(data: dict[str, Any]) -> None:
            body = b"data: " + json.dumps(data, ensure_ascii=False).encode() + b"\n\n"
            await send({"type": "http.response.body", "body": body, "more_body": True})

        if chat:
            await event(self._chunk({"role": "assistant", "content": ""}, None))

        async def forward(text: str) -> None:
            await event(self._chunk({"content": text} if chat else text, None))

        await self._pieces(forward)
        if self._left:
            return
        report = self._job.report
        if report.finish == "error":
            await event(_error_of(report).body())
        else:
            await event(self._chunk({} if chat else "", finish_reason(report, self._request)))
            if self._shape.include_usage:
                await event({**self._head(chunk=True), "choices": [], "usage": usage(report)})
        watcher.cancel()
        self._completed = True
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n", "more_body": False})

    def _head(self, *, chunk: bool = False) -> dict[str, Any]:
        kind = "chat.completion" if self._shape.chat else "text_completion"
        return {
            "id": self._id,
            "object": f"{kind}.chunk" if chunk and self._shape.chat else kind,
            "created": self._created,
            "model": self._shape.model,
            "system_fingerprint": None,
        }

    def _chunk(self, delta: dict[str, str] | str, finish: str | None) -> dict[str, Any]:
        choice: dict[str, Any] = {"index": 0, "logprobs": None, "finish_reason": finish}
        if isinstance(delta, dict):
            choice["delta"] = delta
        else:
            choice["text"] = delta
        return {**self._head(chunk=True), "choices": [choice]}


async def _send_json(send: Send, status: int, data: dict[str, Any]) -> None:
    body = json.dumps(data, ensure_ascii=False).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
