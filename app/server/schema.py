"""What a request may say, checked by pydantic, and what Floodgate does not support.

The bodies are validated in pydantic's strict JSON mode: a string where a number belongs, a
value out of range, a field nobody knows, or malformed JSON is a 400 whose message and
``param`` name the field. Fields OpenAI defines that Floodgate cannot honour (tools, several
choices, images, log probabilities…) are refused by name, never silently ignored.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from app.server.errors import ApiError, unsupported

_Model = TypeVar("_Model", bound=BaseModel)


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")


class StreamOptions(_Strict):
    """``stream_options``."""

    include_usage: bool = False


class TextPart(_Strict):
    """A text part of a message's content."""

    type: Literal["text"]
    text: str


class ImageUrl(_Strict):
    """``image_url`` of an image part: a ``data:`` URL (the server fetches nothing)."""

    url: str
    detail: Literal["auto", "low", "high"] | None = None


class ImagePart(_Strict):
    """A picture in a message's content, for a model that sees."""

    type: Literal["image_url"]
    image_url: ImageUrl


class InputAudio(_Strict):
    """``input_audio`` of a sound part: the file's bytes in base64, and its format."""

    data: str
    format: str


class AudioPart(_Strict):
    """A sound in a message's content, for a model that hears."""

    type: Literal["input_audio"]
    input_audio: InputAudio


class ChatMessageIn(_Strict):
    """One message of ``messages``."""

    # "developer" is OpenAI's newer name for a system message.
    role: Literal["system", "developer", "user", "assistant"]
    content: (
        str | list[Annotated[TextPart | ImagePart | AudioPart, Field(discriminator="type")]] | None
    ) = None
    name: str | None = None

    def text(self) -> str:
        """The content's text parts as one text."""
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text for part in self.content if isinstance(part, TextPart))

    def image_urls(self) -> list[tuple[int, str]]:
        """The picture parts' URLs, with their places in the content."""
        if not isinstance(self.content, list):
            return []
        return [
            (j, part.image_url.url)
            for j, part in enumerate(self.content)
            if isinstance(part, ImagePart)
        ]

    def sounds(self) -> list[tuple[int, InputAudio]]:
        """The sound parts, with their places in the content."""
        if not isinstance(self.content, list):
            return []
        return [
            (j, part.input_audio)
            for j, part in enumerate(self.content)
            if isinstance(part, AudioPart)
        ]


class JsonSchemaFormat(_Strict):
    """``response_format.json_schema``."""

    name: Annotated[str, Field(max_length=64)] = "response"
    description: str | None = None
    # The schema itself is free-form JSON; its conversion to a grammar checks it.
    json_schema: dict[str, Any] | None = Field(default=None, alias="schema")
    strict: bool | None = None

    model_config = ConfigDict(strict=True, extra="forbid", populate_by_name=True)


class ResponseFormat(_Strict):
    """``response_format``."""

    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaFormat | None = None


Penalty = Annotated[float, Field(ge=-2.0, le=2.0)]


class _Sampling(_Strict):
    """What both endpoints share."""

    model: str | None = None
    temperature: Annotated[float, Field(ge=0.0, le=2.0)] | None = None
    top_p: Annotated[float, Field(gt=0.0, le=1.0)] | None = None
    max_tokens: Annotated[int, Field(ge=1)] | None = None
    stop: str | Annotated[list[str], Field(max_length=4)] | None = None
    seed: int | None = None
    presence_penalty: Penalty | None = None
    frequency_penalty: Penalty | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    user: str | None = None
    # Accepted when they ask for what Floodgate does anyway; refused by name otherwise.
    n: int | None = None
    logprobs: bool | int | None = None

    def stop_strings(self) -> tuple[str, ...]:
        """``stop`` as a tuple (empty strings left out)."""
        if self.stop is None:
            return ()
        stops = [self.stop] if isinstance(self.stop, str) else self.stop
        return tuple(s for s in stops if s)


class ChatRequest(_Sampling):
    """``POST /v1/chat/completions``."""

    messages: Annotated[list[ChatMessageIn], Field(min_length=1)]
    max_completion_tokens: Annotated[int, Field(ge=1)] | None = None
    response_format: ResponseFormat | None = None
    top_logprobs: int | None = None


class CompletionRequest(_Sampling):
    """``POST /v1/completions``."""

    prompt: Annotated[str, Field(min_length=1)] | Annotated[list[str], Field(min_length=1)]
    echo: bool = False
    suffix: str | None = None

    def text(self) -> str:
        """The prompt (a list must hold one string: one completion per request)."""
        if isinstance(self.prompt, str):
            return self.prompt
        if len(self.prompt) != 1 or not self.prompt[0]:
            raise unsupported("prompt", "More than one prompt per request")
        return self.prompt[0]


# Fields of OpenAI's API Floodgate cannot honour, named in the 400 when present at all.
_CHAT_UNSUPPORTED = {
    "tools": "Tool calling",
    "tool_choice": "Tool calling",
    "parallel_tool_calls": "Tool calling",
    "functions": "Function calling",
    "function_call": "Function calling",
    "logit_bias": "Logit bias",
    "audio": "Audio",
    "modalities": "Output modalities",
    "prediction": "Predicted outputs",
    "web_search_options": "Web search",
    "reasoning_effort": "Reasoning effort",
    "service_tier": "Service tiers",
    "store": "Stored completions",
    "metadata": "Stored completions",
}
_COMPLETION_UNSUPPORTED = {"logit_bias": "Logit bias", "best_of": "best_of"}
_CONTENT_KINDS = {
    "file": "Files",
    "refusal": "Refusal parts",
}


def parse_chat(body: bytes) -> ChatRequest:
    """A chat request from its body, or :class:`ApiError` naming what is wrong."""
    data = _object(body)
    _refuse(data, _CHAT_UNSUPPORTED)
    messages = data.get("messages")
    if isinstance(messages, list):
        for i, message in enumerate(messages):
            _refuse_message(i, message)
    request = _validate(ChatRequest, body)
    _refuse_common(request)
    if request.top_logprobs:
        raise unsupported("top_logprobs", "Log probabilities")
    return request


def parse_completion(body: bytes) -> CompletionRequest:
    """A completion request from its body, or :class:`ApiError` naming what is wrong."""
    data = _object(body)
    _refuse(data, _COMPLETION_UNSUPPORTED)
    request = _validate(CompletionRequest, body)
    _refuse_common(request)
    if request.echo:
        raise unsupported("echo", "Echoing the prompt")
    if request.suffix:
        raise unsupported("suffix", "A suffix (fill in the middle)")
    request.text()
    return request


def _object(body: bytes) -> dict[str, Any]:
    try:
        data = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise ApiError(
            400, f"The request body is not valid JSON: {exc}", code="invalid_json"
        ) from None
    if not isinstance(data, dict):
        raise ApiError(400, "The request body must be a JSON object.", code="invalid_json")
    return data


def _refuse(data: dict[str, Any], names: dict[str, str]) -> None:
    for name, what in names.items():
        if name in data and data[name] not in (None, [], {}):
            raise unsupported(name, what)


def _refuse_message(i: int, message: object) -> None:
    if not isinstance(message, dict):
        return  # validation names it
    role = message.get("role")
    if role in ("tool", "function"):
        raise unsupported(f"messages[{i}].role", f"A message with the role '{role}'")
    if message.get("tool_calls") or message.get("function_call"):
        raise unsupported(f"messages[{i}].tool_calls", "Tool calling")
    content = message.get("content")
    if isinstance(content, list):
        for j, part in enumerate(content):
            kind = part.get("type") if isinstance(part, dict) else None
            if isinstance(kind, str) and kind in _CONTENT_KINDS:
                raise unsupported(f"messages[{i}].content[{j}]", _CONTENT_KINDS[kind])


def _refuse_common(request: _Sampling) -> None:
    if request.n is not None and request.n != 1:
        raise unsupported("n", "More than one choice per request (n > 1)")
    if request.logprobs:
        raise unsupported("logprobs", "Log probabilities")


def _validate(model: type[_Model], body: bytes) -> _Model:
    try:
        return model.model_validate_json(body)
    except ValidationError as exc:
        raise _field_error(exc) from None


def _field_error(exc: ValidationError) -> ApiError:
    """The first problem pydantic found, as a sentence naming the field."""
    error = exc.errors(include_url=False)[0]
    # A union tries each branch: the location names the branch ("str", "list[...]");
    # the client knows the field, not pydantic's type names.
    parts = [p for p in error["loc"] if isinstance(p, int) or not _is_type_name(p)]
    param = ""
    for part in parts:
        param += f"[{part}]" if isinstance(part, int) else (f".{part}" if param else part)
    kind = error["type"]
    if kind == "extra_forbidden":
        message = f"Unrecognized request argument supplied: {param}"
    elif kind == "missing":
        message = f"The field '{param}' is required."
    else:
        message = f"Invalid value for '{param}': {error['msg']}."
    return ApiError(400, message, param=param or None, code="invalid_value")


def _is_type_name(part: str) -> bool:
    return (
        part in {"str", "int", "float", "bool", "none"}
        or part.startswith(("list[", "dict[", "function-", "constrained-"))
        or part[:1].isupper()
    )
