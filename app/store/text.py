r"""Text the history can keep: every ``str`` made encodable as UTF-8, the same way everywhere.

Python strings may hold lone surrogates (``'\ud800'``): JSON's ``\ud800`` escapes, Windows file
names, the clipboard and byte-level model output all produce them. SQLite stores UTF-8, and
encoding such a string raises :class:`UnicodeEncodeError`, so a save of it fails. Every place
where text enters the app or the store passes it through :func:`storable_text` first.
"""

from __future__ import annotations

import re
from typing import NamedTuple

REPLACEMENT = "\ufffd"
"""What a character that cannot be kept becomes (U+FFFD REPLACEMENT CHARACTER)."""

_SURROGATES = re.compile("[\ud800-\udbff][\udc00-\udfff]|[\ud800-\udfff]")


class StorableText(NamedTuple):
    """The text made storable, and whether any character in it had to be replaced."""

    text: str
    replaced: bool


def _repair(match: re.Match[str]) -> str:
    units = match.group()
    if len(units) == 1:
        return REPLACEMENT
    high, low = ord(units[0]), ord(units[1])
    return chr(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))


def storable_text(text: str) -> StorableText:
    r"""``text`` made encodable as UTF-8, so saving it can never fail.

    A surrogate pair given as two code units (``'\ud83d\ude00'``) becomes the character it
    stands for (``'😀'``); that changes nothing the user sees, so it does not count as replaced.
    Every lone surrogate becomes U+FFFD, and ``replaced`` is then True: the caller tells the user
    that what they gave was changed. Text that is already valid is returned as it is, at the
    cost of one encoding pass.

    Returns:
        ``(text, replaced)``, a :class:`StorableText`.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        pass
    else:
        return StorableText(text, False)
    before = text.count(REPLACEMENT)
    fixed = _SURROGATES.sub(_repair, text)
    return StorableText(fixed, fixed.count(REPLACEMENT) > before)
