"""What stands between the socket and the API on a shared machine.

- A ``Host`` header that is neither the server's own address nor a loopback name gets 403: a
  web page that rebinds its own domain name to 127.0.0.1 (DNS rebinding) sends its own name.
- With an API key, every request must carry it (``Authorization: Bearer …``), compared in
  constant time; 401 otherwise.
- A body announced as larger than the limit gets 413 before it is read (a body sent without
  a length is counted as it is read, by the endpoint).
"""

from __future__ import annotations

import hmac
import ipaddress

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from app.server.errors import ApiError

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address) can only be reached from this machine."""
    if host.lower() in LOOPBACK_NAMES or host.lower().endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def is_wildcard(host: str) -> bool:
    """Whether binding ``host`` listens on every interface (0.0.0.0, ::)."""
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


def host_name(header: str) -> str:
    """The name in a ``Host`` header, without its port (``[::1]:8731`` -> ``::1``)."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1 : header.find("]")] if "]" in header else header[1:]
    if header.count(":") == 1:
        return header.split(":", 1)[0]
    return header


class Guard:
    """ASGI middleware: the Host check, the API key, the body size announced.

    Args:
        app: the API.
        bound_host: the address the server listens on.
        api_key: the key every request must carry (None: none needed).
        max_body_bytes: the largest request body accepted.
    """

    def __init__(
        self, app: ASGIApp, *, bound_host: str, api_key: str | None, max_body_bytes: int
    ) -> None:
        self._app = app
        self._allowed = set(LOOPBACK_NAMES) | {host_name(bound_host)}
        # Listening on every interface with a key (it is refused without one): the machine's
        # names and addresses are many; the key is what keeps a web page out.
        self._any_host = is_wildcard(bound_host)
        self._key = api_key.encode() if api_key else None
        self._max_body = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse what must not reach the API, pass the rest."""
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        error = self._check(Headers(scope=scope))
        if error is not None:
            await error.response()(scope, receive, send)
            return
        await self._app(scope, receive, send)

    def _check(self, headers: Headers) -> ApiError | None:
        name = host_name(headers.get("host", ""))
        if not self._any_host and name not in self._allowed and not is_loopback(name):
            return ApiError(
                403,
                f"The Host header '{name}' is not this server's address. (A web page can "
                "reach a local server by renaming its own address; such requests are refused.)",
                kind="permission_error",
                code="host_not_allowed",
            )
        if self._key is not None:
            given = headers.get("authorization", "")
            scheme, _, token = given.partition(" ")
            # compare_digest takes as long for a wrong key as for a right one.
            if scheme.lower() != "bearer" or not hmac.compare_digest(
                token.strip().encode(), self._key
            ):
                return ApiError(
                    401,
                    "The API key is missing or wrong. Send it as 'Authorization: Bearer <key>'.",
                    code="invalid_api_key",
                    headers={"WWW-Authenticate": "Bearer"},
                )
        length = headers.get("content-length")
        if length is not None:
            try:
                announced = int(length)
            except ValueError:
                return ApiError(400, "The Content-Length header is not a number.")
            if announced > self._max_body:
                return body_too_large(self._max_body)
        return None


def body_too_large(limit: int) -> ApiError:
    """The 413 for a body over ``limit`` bytes."""
    return ApiError(
        413,
        f"The request body is larger than this server accepts ({limit:,} bytes).",
        code="request_too_large",
    )
