"""Bytes to text: byte-order marks, UTF-8, and a charset detector for the rest."""

from __future__ import annotations

import contextlib
import re
from typing import Final

import charset_normalizer

from app.documents.document import BINARY, DocumentError

_BOMS: Final = (
    (b"\xff\xfe\x00\x00", "utf-32-le"),
    (b"\x00\x00\xfe\xff", "utf-32-be"),
    (b"\xef\xbb\xbf", "utf-8-sig"),
    (b"\xff\xfe", "utf-16-le"),
    (b"\xfe\xff", "utf-16-be"),
)


def decode(data: bytes, name: str) -> tuple[str, str]:
    """The text of ``data`` and the encoding it was in.

    Raises:
        DocumentError: the bytes are not text in any encoding (``name`` is the file's).
    """
    for bom, codec in _BOMS:
        if data.startswith(bom):
            # The BOM settles the encoding; a broken unit becomes U+FFFD, never a surrogate.
            return data[len(bom) :].decode(codec, errors="replace"), codec.removesuffix("-sig")
    if b"\x00" in data:
        raise DocumentError(BINARY, name=name)
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        pass
    results = charset_normalizer.from_bytes(data)
    best = results.best()
    if best is None:  # no encoding makes sense of it: binary
        raise DocumentError(BINARY, name=name)
    # The detector scores Western European text the same in cp1250, cp1252, iso8859-10...
    # and then returns the first it tried (cp1250: "très" becomes "trčs"). Among the
    # encodings it finds about as good, take the most widely used one.
    tied = [
        match
        for match in results
        if match.chaos <= best.chaos + _TIE and match.coherence >= best.coherence - _TIE
    ]
    for preferred in _PREFERRED_ENCODINGS:
        for match in tied:
            if preferred == match.encoding or preferred in match.could_be_from_charset:
                with contextlib.suppress(UnicodeDecodeError, LookupError):
                    return data.decode(preferred), preferred
    return str(best), best.encoding


_TIE: Final = 0.05
"""Scores this close are a tie: on a short text a few odd letters move the score this much."""

_PREFERRED_ENCODINGS: Final = (
    "cp1252",
    "latin_1",
    "iso8859_15",
    "cp1250",
    "iso8859_2",
    "gb18030",
    "big5",
    "shift_jis",
    "euc_kr",
    "cp1251",
    "koi8_r",
)
"""Legacy encodings by how widely they are used, to choose among equally likely ones."""


_LINE_ENDS = re.compile(r"\r\n?")
_SURROGATES = re.compile("[\ud800-\udfff]")


def clean(text: str) -> str:
    """``text`` with line feeds for line ends, no BOM, no NUL and no lone surrogate."""
    text = _LINE_ENDS.sub("\n", text.removeprefix("\ufeff")).replace("\x00", "")
    # Decoders used here do not produce lone surrogates; this keeps it true whatever a
    # library hands back, since SQLite and Qt both reject them.
    return _SURROGATES.sub("\ufffd", text)
