"""A model on a server: any OpenAI-compatible chat-completions endpoint, streamed over SSE.

llama.cpp's llama-server, vLLM, Ollama and LM Studio speak it. No Qt: the stream is an async
generator read with httpx on the event loop; the flow puts its pieces into the same bounded
queue as the local worker's. Stopping is closing the stream (the caller cancels the task that
reads it), which these servers take as the signal to abort the request.

Errors are recorded in the :class:`GenerationReport` as sentences, never raised mid-reply, so
the text received so far is kept.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from app.engine.backend import ChatMessage, GenerationReport, GenerationSettings
from app.sentence import QT_TRANSLATE_NOOP, Sentence


@dataclass(frozen=True)
class RemoteEndpoint:
    """Where the server is and how to talk to it.

    Attributes:
        base_url: the API root, for example ``http://localhost:8080/v1``.
        model: the model id to ask for (from ``/v1/models``).
        api_key: sent as a bearer token; never shown in ``repr`` or logs.
        read_timeout: seconds without a byte from the server before the reply is given up.
    """

    base_url: str
    model: str = ""
    api_key: str = field(default="", repr=False)
    read_timeout: float = 120.0

    def url(self, path: str) -> str:
        """``path`` under the API root."""
        return self.base_url.rstrip("/") + "/" + path.lstrip("/")

    @property
    def headers(self) -> dict[str, str]:
        """The request headers (the key, if there is one)."""
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def timeout(self) -> httpx.Timeout:
        """Connect quickly or fail; then allow long silences while the server thinks."""
        return httpx.Timeout(connect=5.0, read=self.read_timeout, write=10.0, pool=5.0)


class RemoteError(Exception):
    """The server could not be used; ``sentence`` says why, for the user."""

    def __init__(self, sentence: Sentence) -> None:
        super().__init__(str(sentence))
        self.sentence = sentence


def _status_sentence(status: int, detail: str, endpoint: RemoteEndpoint) -> Sentence:
    if status == 401 or status == 403:
        template = QT_TRANSLATE_NOOP(
            "Floodgate", "The server at {url} refused the API key (HTTP {status})."
        )
    elif status == 404:
        template = QT_TRANSLATE_NOOP(
            "Floodgate",
            "The server at {url} does not know the model “{model}” or this API (HTTP {status}).",
        )
    else:
        template = QT_TRANSLATE_NOOP(
            "Floodgate", "The server at {url} answered with an error (HTTP {status}): {detail}"
        )
    return Sentence(
        template,
        {"url": endpoint.base_url, "status": status, "model": endpoint.model, "detail": detail},
    )


def _transport_sentence(exc: httpx.HTTPError, endpoint: RemoteEndpoint) -> Sentence:
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
        template = QT_TRANSLATE_NOOP(
            "Floodgate", "The server at {url} cannot be reached. Is it running? ({reason})"
        )
    elif isinstance(exc, httpx.TimeoutException):
        template = QT_TRANSLATE_NOOP(
            "Floodgate", "The server at {url} stopped answering for {seconds} seconds."
        )
    else:
        template = QT_TRANSLATE_NOOP(
            "Floodgate", "The connection to {url} broke in the middle of the reply ({reason})."
        )
    return Sentence(
        template,
        {"url": endpoint.base_url, "reason": exc, "seconds": f"{endpoint.read_timeout:g}"},
    )


def _malformed(endpoint: RemoteEndpoint, what: str) -> Sentence:
    return Sentence(
        QT_TRANSLATE_NOOP(
            "Floodgate", "The server at {url} sent something that is not a chat stream: {what}"
        ),
        {"url": endpoint.base_url, "what": what[:200]},
    )


async def _detail(response: httpx.Response) -> str:
    body = (await response.aread()).decode("utf-8", "replace")
    try:
        error = json.loads(body).get("error")
        message = error.get("message") if isinstance(error, dict) else error
        return str(message or body)[:300]
    except (ValueError, AttributeError):
        return body[:300]


async def list_models(client: httpx.AsyncClient, endpoint: RemoteEndpoint) -> list[str]:
    """The model ids the server offers (``GET /models``).

    Raises:
        RemoteError: unreachable, refused, or not an OpenAI-compatible answer.
    """
    try:
        response = await client.get(
            endpoint.url("models"), headers=endpoint.headers, timeout=endpoint.timeout()
        )
        if response.status_code != 200:
            raise RemoteError(
                _status_sentence(response.status_code, await _detail(response), endpoint)
            )
        data = response.json()["data"]
        return [str(entry["id"]) for entry in data]
    except httpx.HTTPError as exc:
        raise RemoteError(_transport_sentence(exc, endpoint)) from exc
    except (ValueError, KeyError, TypeError) as exc:
        raise RemoteError(_malformed(endpoint, repr(exc))) from exc


def _request(
    endpoint: RemoteEndpoint, messages: Sequence[ChatMessage], settings: GenerationSettings
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": endpoint.model,
        "messages": list(messages),
        "stream": True,
        "temperature": settings.temperature,
        "top_p": settings.top_p,
        "max_tokens": settings.max_tokens,
    }
    if settings.seed is not None:
        body["seed"] = settings.seed
    return body


async def stream_chat(
    client: httpx.AsyncClient,
    endpoint: RemoteEndpoint,
    messages: Sequence[ChatMessage],
    settings: GenerationSettings,
    report: GenerationReport,
) -> AsyncGenerator[str, None]:
    """Yield the reply's text as the server streams it.

    Cancelling the task that iterates closes the connection. Errors end the stream and are
    recorded in ``report``.
    """
    try:
        async with client.stream(
            "POST",
            endpoint.url("chat/completions"),
            json=_request(endpoint, messages, settings),
            headers=endpoint.headers,
            timeout=endpoint.timeout(),
        ) as response:
            if response.status_code != 200:
                report.finish = "error"
                report.error = _status_sentence(
                    response.status_code, await _detail(response), endpoint
                )
                return
            # Closed explicitly, as its lines are (see there).
            reply = _read_events(response, endpoint, report)
            async with contextlib.aclosing(reply):
                async for text in reply:
                    yield text
    except httpx.HTTPError as exc:
        report.finish = "error"
        report.error = _transport_sentence(exc, endpoint)


async def _read_events(
    response: httpx.Response, endpoint: RemoteEndpoint, report: GenerationReport
) -> AsyncGenerator[str, None]:
    """Yield the reply's text from a response's server-sent events.

    A malformed event, or a stream that ends before ``[DONE]`` or a finish reason, ends the
    reply with an error in ``report``.
    """
    finished = False  # [DONE] or a finish_reason: a stream that just stops was cut off
    # Closed explicitly: an abandoned async generator would be finalized by the garbage
    # collector, outside any event loop.
    lines = response.aiter_lines()
    async with contextlib.aclosing(lines):  # type: ignore[type-var]
        async for line in lines:
            if not line.startswith("data:"):
                continue  # blank separators, comments, event: and id: fields
            data = line[5:].strip()
            if data == "[DONE]":
                # Read on to the end of the stream (the server closes it next), so the
                # response's inner generators finish in this task rather than later.
                finished = True
                continue
            try:
                choice = json.loads(data)["choices"][0]
            except (ValueError, KeyError, IndexError, TypeError):
                report.finish = "error"
                report.error = _malformed(endpoint, data)
                return
            text = (choice.get("delta") or {}).get("content")
            if text:
                report.pieces += 1
                yield str(text)
            reason = choice.get("finish_reason")
            if reason:
                finished = True
            if reason == "length":
                report.finish = "length"
    if not finished:
        report.finish = "error"
        report.error = _transport_sentence(
            httpx.RemoteProtocolError("the stream ended before the reply did"), endpoint
        )
