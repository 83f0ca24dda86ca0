"""Sentences for the user, in the language the application is shown in."""

from __future__ import annotations

from PySide6.QtCore import QCoreApplication

from app.sentence import CONTEXT, Sentence


def say_sentence(sentence: Sentence) -> str:
    """A sentence, translated by the installed Qt translator (English if there is none).

    A field that is itself a :class:`Sentence` (a word chosen below the flow) is translated too.
    """
    translated = QCoreApplication.translate(CONTEXT, sentence.template)
    fields = {
        key: say_sentence(value) if isinstance(value, Sentence) else value
        for key, value in sentence.fields.items()
    }
    try:
        return translated.format(**fields)
    except (KeyError, IndexError, ValueError):
        # A translation with a broken {field} must not lose the message: fall back to English.
        return str(sentence)


def say(template: str, **fields: object) -> str:
    """Translate ``template`` (marked with QT_TRANSLATE_NOOP) and fill in its fields."""
    return say_sentence(Sentence(template, fields))
