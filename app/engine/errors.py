"""Sentences the engine reports to the person using the app, and the errors that carry them.

The engine has no Qt, so it cannot translate; it hands over a :class:`Sentence` (an English
template and its fields) and the flow translates it with Qt's translator. Templates are marked
with :func:`QT_TRANSLATE_NOOP` so ``pyside6-lupdate`` collects them.
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


class ModelLoadError(Exception):
    """A model file could not be opened. ``str(error)`` is a sentence for the user."""

    def __init__(self, template: str, **fields: object) -> None:
        self.sentence = Sentence(template, fields)
        super().__init__(str(self.sentence))
