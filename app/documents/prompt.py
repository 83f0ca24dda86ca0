"""How attachments reach the model: fenced in the user's turn, cut to the room there is."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Final

from app.documents.document import (
    MEDIA_KINDS,
    NO_ROOM,
    Attachment,
    Document,
    DocumentError,
    language_of,
)

CUT_MARKER: Final = "[cut: the first {kept} of {full} tokens of {name}; the rest is left out]"
"""What the model reads after a cut attachment. It is for the model, so it stays English."""


def _printable_name(name: str) -> str:
    # A name is one line the model reads as a name: no newlines or other control characters.
    return re.sub(r"[\x00-\x1f\x7f\u2028\u2029]+", " ", name).strip() or "attachment"


def fence_for(text: str) -> str:
    """A backtick fence longer than any run of backticks in ``text`` (three at least)."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def fenced_for_prompt(document: Document | Attachment) -> str:
    """The attachment as the model receives it inside the user's turn.

    The file name on a line, the content in a fence that nothing in it can close, and, when
    only the start of the text is kept, a marker saying how much.
    """
    name = _printable_name(document.name)
    text = document.text
    fence = fence_for(text)
    language = language_of(document.name, document.kind)
    body = text if text.endswith("\n") or not text else text + "\n"
    lines = [f"File: {name}", f"{fence}{language}", f"{body}{fence}"]
    if document.cut:
        kept = document.kept_tokens if document.kept_tokens is not None else "?"
        full = document.full_tokens if document.full_tokens is not None else "?"
        lines.append(
            CUT_MARKER.format(
                kept=f"{kept:,}" if isinstance(kept, int) else kept,
                full=f"{full:,}" if isinstance(full, int) else full,
                name=name,
            )
        )
    return "\n".join(lines)


def content_with_attachments(attachments: Iterable[Document | Attachment], question: str) -> str:
    """A user turn's content: each attachment fenced, in order, then the question."""
    # A picture or a sound is not text: it reaches the model through its projector.
    parts = [fenced_for_prompt(a) for a in attachments if a.kind not in MEDIA_KINDS]
    parts.append(question)
    return "\n\n".join(parts)


def cut_to_tokens(document: Document, tokens: int, count_tokens: Callable[[str], int]) -> Document:
    """The document with only as much of its start as fits in ``tokens``.

    ``tokens`` is the room for the whole attachment as the model receives it
    (:func:`fenced_for_prompt`: name, fence and cut marker included). The cut falls at the end
    of a line where that loses little, so the model does not read half a line.

    Args:
        document: the document (already cut or not).
        tokens: the room, in tokens.
        count_tokens: the open model's token count of a text (called about 20 times, with
            texts up to the document's length: call this off the UI thread).

    Returns:
        ``document`` itself when it fits whole; otherwise a copy marked cut.

    Raises:
        DocumentError: not even the name and an empty fence fit.
    """
    if count_tokens(fenced_for_prompt(document)) <= tokens:
        return document
    text = document.text
    full = document.full_tokens if document.cut and document.full_tokens else count_tokens(text)

    def with_prefix(prefix: str, kept: int) -> Document:
        return replace(document, text=prefix, cut=True, kept_tokens=kept, full_tokens=full)

    def fits(length: int) -> bool:
        # The marker is priced with ``kept == full``: the real one can only be as long.
        return count_tokens(fenced_for_prompt(with_prefix(text[:length], full))) <= tokens

    if not fits(0):
        raise DocumentError(NO_ROOM, name=document.name)
    # Binary search for the longest prefix that fits, starting from a guess by proportion so
    # that the texts counted are not much longer than the answer.
    low, high = 0, len(text)
    guess = min(high, int(len(text) * tokens / max(full, 1) * 1.25) + 64)
    if not fits(guess):
        high = guess - 1
    else:
        low = guess
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    prefix = text[:low]
    line_end = prefix.rfind("\n")
    if line_end >= 0 and line_end + 1 >= len(prefix) * 0.8:
        prefix = prefix[: line_end + 1]
    return with_prefix(prefix, count_tokens(prefix))


def cut_attachment(
    attachment: Attachment, tokens: int, count_tokens: Callable[[str], int]
) -> Attachment:
    """:func:`cut_to_tokens` for an attachment; its ``tokens`` counted again."""
    document = cut_to_tokens(attachment.to_document(), tokens, count_tokens)
    if not document.cut:
        return attachment
    return Attachment.from_document(document, count_tokens(fenced_for_prompt(document)))
