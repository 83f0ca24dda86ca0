"""What pictures and sounds share: a content-addressed file, and an error that says why not.

A projector reads both (:mod:`app.engine.projector`); each kind has its own checks and decoder
(:mod:`app.engine.pictures`, :mod:`app.engine.sounds`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from app.sentence import Sentence


class MediaError(Exception):
    """A picture or a sound that cannot be used, with the sentence that says why."""

    def __init__(self, sentence: Sentence) -> None:
        super().__init__(str(sentence))
        self.sentence = sentence


@dataclass(frozen=True)
class KeptFile:
    """A picture or a sound in a conversation.

    Attributes:
        digest: the SHA-256 of the file's bytes (hex): its name in the data folder, and the
            key of its encoded embeddings.
        path: the file.
    """

    digest: str
    path: Path
