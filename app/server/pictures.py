"""Pictures in API requests: OpenAI's ``image_url`` content parts, as ``data:`` URLs only.

The server does not fetch the web on a client's behalf (an ``http`` URL would make it a proxy
into whatever network it runs in), so a picture comes inside the request, base64-encoded. It is
decoded, kept in the data folder by its digest (the same store as the window's pictures, so
the engine's kept embeddings serve both) and checked whole, off the event loop; anything wrong
is a 400 that names the part.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from pathlib import Path

from app.engine.media import MediaError
from app.engine.pictures import Picture, verify
from app.server.errors import ApiError
from app.store.media_files import keep_checked_bytes

MAX_PICTURE_BYTES = 20 * 1024 * 1024
"""The largest picture a request may carry (decoded)."""


def picture_from_url(url: str, param: str, folder: Path | None = None) -> Picture:
    """The picture a ``data:`` URL holds, kept and checked (call off the event loop).

    Raises:
        ApiError: 400 naming ``param``: not a data URL, not base64, too large, or not a
            picture Floodgate reads.
    """
    if not url.startswith("data:"):
        raise ApiError(
            400,
            "Floodgate's server does not fetch pictures from the web on a client's behalf: "
            "send the picture itself as a data URL (data:image/png;base64,...).",
            param=param,
            code="invalid_image_url",
        )
    header, comma, payload = url.partition(",")
    if not comma or not header.endswith(";base64"):
        raise ApiError(
            400,
            "A picture's data URL must be base64 (data:image/...;base64,...).",
            param=param,
            code="invalid_image_url",
        )
    if len(payload) * 3 // 4 > MAX_PICTURE_BYTES:
        raise ApiError(
            400,
            f"The picture is larger than the {MAX_PICTURE_BYTES // (1024 * 1024)} MB a "
            "request may carry.",
            param=param,
            code="image_too_large",
        )
    data = decoded(
        payload, "The picture's data URL is not valid base64.", param, "invalid_image_url"
    )
    digest, path = kept(data, verify, folder, param, "invalid_image")
    return Picture(digest, path)


def decoded(payload: str, sentence: str, param: str, code: str) -> bytes:
    """A part's base64 ``payload`` decoded, or a 400 naming ``param`` with ``sentence``."""
    try:
        return base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise ApiError(400, sentence, param=param, code=code) from None


def kept(
    data: bytes,
    check: Callable[[Path], object],
    folder: Path | None,
    param: str,
    code: str,
) -> tuple[str, Path]:
    """A part's file kept by its digest once ``check`` passes: (digest, path), or a 400.

    The check's sentence becomes the 400's message, with the part named where it names the
    file; nothing of a file that fails is kept.
    """
    try:
        return keep_checked_bytes(data, check, folder)
    except MediaError as exc:
        fields = {**exc.sentence.fields, "name": param}
        raise ApiError(
            400, exc.sentence.template.format(**fields), param=param, code=code
        ) from None
