"""Sentences for the user, made where there is no Qt and translated where there is.

The engine and the store have no Qt, so they cannot translate; they hand over a
:class:`Sentence` (an English template and its fields) and the flow translates it with Qt's
translator. Templates are marked with :func:`QT_TRANSLATE_NOOP` so ``pyside6-lupdate`` collects
them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

CONTEXT = "Floodgate"
"""The translation context of every sentence outside the widgets."""


def QT_TRANSLATE_NOOP(context: str, text: str) -> str:
    """Mark ``text`` for translation in ``context``; returns it unchanged."""
    return text


@dataclass(frozen=True)
class Sentence:
    """A message for the user: an English template with ``{field}`` places, and their values.

    ``str(sentence)`` is the English text; the flow shows it translated.
    """

    template: str
    fields: Mapping[str, object] = field(default_factory=dict)

    def __str__(self) -> str:
        return self.template.format(**self.fields)


def size_text(size: int) -> str:
    """A size in bytes as people read it: ``"812 B"``, ``"12 KB"``, ``"1.5 MB"``."""
    for unit, scale in (("GB", 2**30), ("MB", 2**20), ("KB", 2**10)):
        if size >= scale:
            value = size / scale
            return f"{value:.1f} {unit}" if value < 10 else f"{value:,.0f} {unit}"
    return f"{size} B"
