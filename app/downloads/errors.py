"""What goes wrong with the Hub or a download, as a sentence for the person using the app."""

from __future__ import annotations

from app.sentence import Sentence


class DownloadError(Exception):
    """The Hub or a download failed. ``str(error)`` is a sentence for the user.

    Attributes:
        sentence: the sentence, for the flow to translate.
        keeps_partial: whether what was downloaded so far is kept for a resume.
    """

    def __init__(self, template: str, *, keeps_partial: bool = False, **fields: object) -> None:
        self.sentence = Sentence(template, fields)
        self.keeps_partial = keeps_partial
        super().__init__(str(self.sentence))

    @classmethod
    def saying(cls, sentence: Sentence) -> DownloadError:
        """An error with a sentence made elsewhere (a model file's check, say)."""
        error = cls.__new__(cls)
        Exception.__init__(error, str(sentence))
        error.sentence = sentence
        error.keeps_partial = False
        return error
