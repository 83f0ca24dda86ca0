"""Sentences for the user, in the language the application is shown in."""

from __future__ import annotations

from PySide6.QtCore import QCoreApplication

from app.sentence import CONTEXT, Sentence


def say_sentence(sentence: Sentence) -> str:
    """A sentence, translated by the installed Qt translator (English if there is none)."""
    translated = QCoreApplication.translate(CONTEXT, sentence.template)
    try:
        return translated.format(**sentence.fields)
    except (KeyError, IndexError, ValueError):
        # A translation with a broken {field} must not lose the message: fall back to English.
        return str(sentence)


def say(template: str, **fields: object) -> str:
    """Translate ``template`` (marked with QT_TRANSLATE_NOOP) and fill in its fields."""
    return say_sentence(Sentence(template, fields))
