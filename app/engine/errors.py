"""Errors the engine reports, carrying a sentence for the person using the app."""

from __future__ import annotations

from app.sentence import Sentence


class ModelLoadError(Exception):
    """A model file could not be opened. ``str(error)`` is a sentence for the user."""

    def __init__(self, template: str, **fields: object) -> None:
        self.sentence = Sentence(template, fields)
        super().__init__(str(self.sentence))
