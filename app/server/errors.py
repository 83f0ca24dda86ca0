"""OpenAI's error object, and the one exception every refusal of a request goes through."""

from __future__ import annotations

import json
from typing import Any

from starlette.responses import Response


class ApiError(Exception):
    """A request the server refuses, as OpenAI says it: ``{"error": {...}}`` and a status.

    Args:
        status: the HTTP status code.
        message: a sentence for the client's user, naming the field when one is at fault.
        param: the field at fault (``messages[0].content``), or None.
        code: a short machine-readable code, or None.
        kind: OpenAI's error ``type``.
        headers: extra response headers (``Retry-After``).
    """

    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        kind: str = "invalid_request_error",
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.kind = kind
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        """The error object."""
        return {
            "error": {
                "message": self.message,
                "type": self.kind,
                "param": self.param,
                "code": self.code,
            }
        }

    def response(self) -> Response:
        """The HTTP response that says it."""
        return Response(
            json.dumps(self.body()),
            status_code=self.status,
            headers=self.headers,
            media_type="application/json",
        )


def unsupported(param: str, what: str) -> ApiError:
    """A 400 for a field Floodgate's server does not support (never silently ignored)."""
    return ApiError(
        400,
        f"Floodgate's server does not support {what[:1].lower()}{what[1:]} (the field '{param}').",
        param=param,
        code="unsupported_parameter",
    )
