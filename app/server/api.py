"""The OpenAI-compatible API over the open model: ``/v1/models``, chat and text completions.

Each completion becomes a :class:`~app.flow.worker.ReplyJob` queued for the one worker that
owns the model, behind the window's replies and the other requests (one FIFO queue). The
:class:`~app.flow.requests.RequestBoard` bounds how many may wait; past it, 503 with
``Retry-After``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeVar

from llama_cpp import llama_grammar
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from app import defaults
from app.engine import ChatMessage, GenerationSettings, StopSignal
from app.flow.piece_queue import PieceQueue
from app.flow.requests import RequestBoard, ServedRequest, SharedModel
from app.flow.worker import ReplyJob
from app.server.errors import ApiError
from app.server.guard import Guard, body_too_large
from app.server.pictures import picture_from_url
from app.server.replies import ReplyResponse, ReplyShape
from app.server.schema import ChatRequest, CompletionRequest, parse_chat, parse_completion
from app.server.sounds import sound_from_part

P = TypeVar("P")
T = TypeVar("T")

DEFAULT_PORT = defaults.API_SERVER_PORT
MAX_WAITING = defaults.API_SERVER_MAX_WAITING

MAX_BODY_BYTES = 32 * 1024 * 1024
"""The largest request body: far more text than any context holds, or a picture or two as
base64 ``data:`` URLs."""

RETRY_AFTER_SECONDS = 5

SEND_BUFFER_BYTES = 64 * 1024
"""The kernel's send buffer of each connection: about two seconds of a fast model's stream.
Left to itself Linux grows it to megabytes, which a slow reader would fill before the
backpressure reached the worker (memory the stream never needed)."""

COMPLETION_TOKENS = 16
"""``/v1/completions`` without ``max_tokens``: OpenAI's own default for it."""


@dataclass(frozen=True)
class ServerConfig:
    """How the local API server runs.

    Attributes:
        host: the address it listens on (loopback by default).
        port: its port.
        api_key: the key clients must send (None: none; then only loopback is allowed).
        cors_origins: web origins allowed to call it from a browser (none by default).
        max_waiting: the bound on requests waiting for the model.
        max_body_bytes: the largest request body.
        queue_bound: pieces buffered between the worker and a response before the worker
            waits (a slow reader pauses inference, nothing piles up).
        send_buffer_bytes: the kernel's send buffer of each connection.
        sampling: what a request that does not say gets (the app's own sampling settings).
    """

    host: str = defaults.API_SERVER_HOST
    port: int = DEFAULT_PORT
    api_key: str | None = None
    cors_origins: tuple[str, ...] = ()
    max_waiting: int = MAX_WAITING
    max_body_bytes: int = MAX_BODY_BYTES
    queue_bound: int = defaults.QUEUE_BOUND
    send_buffer_bytes: int = SEND_BUFFER_BYTES
    sampling: GenerationSettings = field(default_factory=GenerationSettings)


def build_api(config: ServerConfig, model: SharedModel, board: RequestBoard) -> Starlette:
    """The ASGI application: the guard, CORS when origins are listed, the endpoints."""
    endpoints = _Endpoints(config, model, board)
    middleware = [
        Middleware(
            Guard,
            bound_host=config.host,
            api_key=config.api_key,
            max_body_bytes=config.max_body_bytes,
        )
    ]
    if config.cors_origins:
        middleware.insert(
            0,
            Middleware(
                CORSMiddleware,
                allow_origins=list(config.cors_origins),
                allow_methods=["GET", "POST"],
                allow_headers=["Authorization", "Content-Type"],
            ),
        )
    return Starlette(
        routes=[
            Route("/v1/models", endpoints.models, methods=["GET"]),
            Route("/v1/chat/completions", endpoints.chat, methods=["POST"]),
            Route("/v1/completions", endpoints.completions, methods=["POST"]),
        ],
        middleware=middleware,
        exception_handlers={
            ApiError: _api_error,
            404: _not_found,
            405: _not_allowed,
            Exception: _unexpected,
        },
    )


class _Endpoints:
    def __init__(self, config: ServerConfig, model: SharedModel, board: RequestBoard) -> None:
        self._config = config
        self._model = model
        self._board = board

    async def models(self, request: Request) -> Response:
        info = self._model.served_model
        data = []
        if info is not None:
            data.append({"id": info.name, "object": "model", "created": 0, "owned_by": "floodgate"})
        return JSONResponse({"object": "list", "data": data})

    async def chat(self, request: Request) -> Response | ReplyResponse:
        served = self._board.receive(_client(request), request.url.path)
        try:
            parsed = parse_chat(await self._body(request))
            messages = [
                ChatMessage(role="system" if m.role == "developer" else m.role, content=m.text())
                for m in parsed.messages
            ]
            await self._add_pictures(parsed, messages)
            await self._add_sounds(parsed, messages)
            settings = self._settings(parsed, parsed.max_completion_tokens or parsed.max_tokens)
            settings = replace(settings, grammar=_grammar(parsed))
            return self._queue(served, parsed, messages, None, settings, chat=True)
        except ApiError as exc:
            self._board.end(served, "refused", exc.message)
            return exc.response()

    async def completions(self, request: Request) -> Response | ReplyResponse:
        served = self._board.receive(_client(request), request.url.path)
        try:
            parsed = parse_completion(await self._body(request))
            prompt = parsed.text()
            settings = self._settings(parsed, parsed.max_tokens or COMPLETION_TOKENS)
            messages = [ChatMessage(role="user", content=prompt)]
            return self._queue(served, parsed, messages, prompt, settings, chat=False)
        except ApiError as exc:
            self._board.end(served, "refused", exc.message)
            return exc.response()

    async def _add_pictures(self, parsed: ChatRequest, messages: list[ChatMessage]) -> None:
        """The requests' ``image_url`` parts, decoded and kept off the event loop (or 400)."""
        wanted = [(i, m.image_urls()) for i, m in enumerate(parsed.messages) if m.image_urls()]
        info = self._model.served_model
        if wanted and info is not None and not info.sees:
            raise _cannot(
                wanted,
                f"The open model ({info.name}) cannot see pictures: open a model with a "
                "projector (an mmproj file beside it), or send text only.",
                "model_cannot_see",
            )
        for i, pictures in await _read_parts(
            wanted, lambda i, j, url: picture_from_url(url, f"{_place(i, j)}.image_url.url")
        ):
            messages[i]["pictures"] = pictures

    async def _add_sounds(self, parsed: ChatRequest, messages: list[ChatMessage]) -> None:
        """The requests' ``input_audio`` parts, decoded and kept off the event loop (or 400)."""
        wanted = [(i, m.sounds()) for i, m in enumerate(parsed.messages) if m.sounds()]
        info = self._model.served_model
        if wanted and info is not None and not info.hears:
            raise _cannot(
                wanted,
                f"The open model ({info.name}) cannot hear sound: open a model whose projector "
                "reads audio (an mmproj file beside it), or send text only.",
                "model_cannot_hear",
            )
        for i, sounds in await _read_parts(
            wanted,
            lambda i, j, part: sound_from_part(
                part.data, part.format, f"{_place(i, j)}.input_audio"
            ),
        ):
            messages[i]["sounds"] = sounds

    def _queue(
        self,
        served: ServedRequest,
        parsed: ChatRequest | CompletionRequest,
        messages: list[ChatMessage],
        prompt: str | None,
        settings: GenerationSettings,
        *,
        chat: bool,
    ) -> ReplyResponse:
        info = self._model.served_model
        if info is None:
            raise ApiError(
                503,
                "No local model is open in Floodgate: open one, then send again.",
                kind="server_error",
                code="model_not_loaded",
            )
        stop = StopSignal()
        job = ReplyJob(
            messages,
            settings,
            stop,
            PieceQueue(self._config.queue_bound, stop),
            conversation=_conversation_key(messages, prompt),
            prompt=prompt,
            origin="server",
        )
        if not self._board.admit(served, job):
            raise ApiError(
                503,
                f"{self._board.max_waiting} requests are already waiting for the model; "
                f"try again in a few seconds.",
                kind="server_error",
                code="queue_full",
                headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
            )
        self._model.produce_local(job)
        include_usage = bool(parsed.stream_options and parsed.stream_options.include_usage)
        shape = ReplyShape(chat, info.name, parsed.stream, include_usage)
        return ReplyResponse(served, job, shape, self._board)

    def _settings(
        self, parsed: ChatRequest | CompletionRequest, max_tokens: int | None
    ) -> GenerationSettings:
        base = self._config.sampling
        penalties = parsed.frequency_penalty is not None or parsed.presence_penalty is not None
        return replace(
            base,
            temperature=_given(parsed.temperature, base.temperature),
            top_p=_given(parsed.top_p, base.top_p),
            seed=parsed.seed if parsed.seed is not None else base.seed,
            presence_penalty=_given(parsed.presence_penalty, base.presence_penalty),
            frequency_penalty=_given(parsed.frequency_penalty, base.frequency_penalty),
            max_tokens=max_tokens if max_tokens is not None else base.max_tokens,
            # OpenAI's penalties take the place of llama.cpp's repeat penalty, not add to it.
            repeat_penalty=1.0 if penalties else base.repeat_penalty,
            stop=parsed.stop_strings(),
        )

    async def _body(self, request: Request) -> bytes:
        """The body, counted as it is read: one without a length cannot pass the limit."""
        limit = self._config.max_body_bytes
        chunks: list[bytes] = []
        size = 0
        try:
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise body_too_large(limit)
                chunks.append(chunk)
        except ClientDisconnect:
            raise ApiError(400, "The client left before sending the whole body.") from None
        return b"".join(chunks)


def _given(value: float | None, default: float) -> float:
    return value if value is not None else default


def _grammar(parsed: ChatRequest) -> str | None:
    """The GBNF grammar ``response_format`` asks for (None: free text)."""
    form = parsed.response_format
    if form is None or form.type == "text":
        return None
    if form.type == "json_object":
        return str(llama_grammar.JSON_GBNF)
    spec = form.json_schema
    if spec is None or spec.json_schema is None:
        raise ApiError(
            400,
            "response_format of type json_schema needs 'json_schema.schema'.",
            param="response_format.json_schema.schema",
            code="invalid_value",
        )
    try:
        return str(llama_grammar.json_schema_to_gbnf(json.dumps(spec.json_schema)))
    except Exception as exc:  # the converter checks with asserts, raises anything
        raise ApiError(
            400,
            f"The JSON schema cannot be turned into a grammar: {exc}",
            param="response_format.json_schema.schema",
            code="invalid_value",
        ) from None


def _conversation_key(messages: list[ChatMessage], prompt: str | None) -> str:
    """The prompt cache's key for a request: its conversation's opening.

    A client's next turn repeats the turns before it, so the same opening (the messages up
    to the first user message) finds the state its previous request left, in place or in the
    cache; a different conversation gets an entry of its own instead of replacing it.
    """
    if prompt is not None:
        opening = prompt[:256]
    else:
        first = next((i for i, m in enumerate(messages) if m["role"] == "user"), 0)
        # A picture or a sound counts by its digest: the same one opens the same conversation.
        opening = json.dumps(
            [
                {
                    **m,
                    **{
                        key: [item.digest for item in m[key]]
                        for key in ("pictures", "sounds")
                        if key in m
                    },
                }
                for m in messages[: first + 1]
            ],
            sort_keys=True,
        )
    return "api-" + hashlib.sha256(opening.encode("utf-8", "replace")).hexdigest()[:16]


def _client(request: Request) -> str:
    client = request.client
    return f"{client.host}:{client.port}" if client is not None else "?"


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return exc.response()


async def _not_found(request: Request, exc: Exception) -> Response:
    return ApiError(404, f"There is no {request.url.path} here.", code="not_found").response()


async def _not_allowed(request: Request, exc: Exception) -> Response:
    return ApiError(
        405, f"{request.method} is not allowed on {request.url.path}.", code="method_not_allowed"
    ).response()


async def _unexpected(request: Request, exc: Exception) -> Response:
    return ApiError(500, f"The server failed unexpectedly: {exc!r}", kind="server_error").response()


def _place(i: int, j: int) -> str:
    """Where a content part is in the request, as an error's ``param`` names it."""
    return f"messages[{i}].content[{j}]"


def _cannot(
    wanted: Sequence[tuple[int, Sequence[tuple[int, object]]]], message: str, code: str
) -> ApiError:
    """The 400 for media the open model cannot read, naming the first such part."""
    i, parts = wanted[0]
    return ApiError(400, message, param=_place(i, parts[0][0]), code=code)


async def _read_parts(
    wanted: Sequence[tuple[int, Sequence[tuple[int, P]]]], read: Callable[[int, int, P], T]
) -> list[tuple[int, tuple[T, ...]]]:
    """Each message's parts read by ``read(i, j, part)`` off the event loop (decoding, disk)."""
    return [
        (i, tuple([await asyncio.to_thread(read, i, j, part) for j, part in parts]))
        for i, parts in wanted
    ]
