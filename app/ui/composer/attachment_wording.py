"""What the attachment tray says: a chip's summary, the total, how long reading takes."""

from __future__ import annotations

import math

from PySide6.QtCore import QCoreApplication

from app.documents import Attachment, size_text


def duration_text(seconds: float) -> str:
    """``"about 19 s to read"`` / ``"about 3 min to read"``, in the current language."""
    if seconds < 90:
        return QCoreApplication.translate("AttachmentTray", "about {seconds} s to read").format(
            seconds=max(1, round(seconds))
        )
    return QCoreApplication.translate("AttachmentTray", "about {minutes} min to read").format(
        minutes=math.ceil(seconds / 60)
    )


def summary_text(name: str, attachment: Attachment, seconds: float | None) -> str:
    """A ready chip's line: name, size, pages, tokens and how long reading them takes."""
    parts = [name, size_text(attachment.size)]
    if attachment.is_picture:
        parts.append(QCoreApplication.translate("AttachmentTray", "picture"))
    if attachment.is_sound:
        parts.append(QCoreApplication.translate("AttachmentTray", "sound"))
    if attachment.pages == 1:
        parts.append(QCoreApplication.translate("AttachmentTray", "1 page"))
    elif attachment.pages is not None:
        parts.append(
            QCoreApplication.translate("AttachmentTray", "{pages} pages").format(
                pages=f"{attachment.pages:,}"
            )
        )
    if attachment.tokens is not None:
        tokens = QCoreApplication.translate("AttachmentTray", "{tokens} tokens").format(
            tokens=f"{attachment.tokens:,}"
        )
        if seconds is not None:
            tokens = QCoreApplication.translate("AttachmentTray", "{tokens}, {duration}").format(
                tokens=tokens, duration=duration_text(seconds)
            )
        parts.append(tokens)
    return " · ".join(parts)


def total_text(used: int, room: int | None, seconds: float | None) -> str:
    """The tray's total: the tokens used against the room left, and how long reading takes.

    Args:
        used: the tokens of the ready attachments.
        room: the room left in the context, or None while it is not known.
        seconds: how long reading them all takes, or None when that is not to be said.
    """
    if room is None:
        text = QCoreApplication.translate("AttachmentTray", "{tokens} tokens in all").format(
            tokens=f"{used:,}"
        )
    elif used > room:
        text = QCoreApplication.translate(
            "AttachmentTray",
            "{tokens} tokens: more than the {room} left in the context. Remove an "
            "attachment or include part of it.",
        ).format(tokens=f"{used:,}", room=f"{room:,}")
    else:
        text = QCoreApplication.translate(
            "AttachmentTray", "Takes {tokens} of the {room} tokens left in the context"
        ).format(tokens=f"{used:,}", room=f"{room:,}")
    if seconds is not None:
        text = QCoreApplication.translate("AttachmentTray", "{total}, {duration}").format(
            total=text, duration=duration_text(seconds)
        )
    return text


def rooms_in_order(room: int, ready: dict[str, int]) -> dict[str, int]:
    """The room for each ready attachment (name to tokens), the others that fit being in.

    They fill the context in order; one that does not fit where it comes is left out and
    takes no room, so the ones after it may still fit.
    """
    left = room
    kept: set[str] = set()
    for name, tokens in ready.items():
        if tokens <= left:
            left -= tokens
            kept.add(name)
    used = room - left
    return {name: room - used + (tokens if name in kept else 0) for name, tokens in ready.items()}
