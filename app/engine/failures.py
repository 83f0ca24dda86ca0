"""The llama.cpp engine's failures, worded in a reply's report for the user."""

from __future__ import annotations

from app.engine.backend import GenerationReport
from app.engine.chat_template import TemplateError
from app.engine.generation import DecodeFailedError, GrammarError
from app.engine.pictures import PictureError
from app.engine.projector import ProjectorError
from app.engine.sounds import SoundError
from app.sentence import QT_TRANSLATE_NOOP, Sentence


class ContextOverflowError(Exception):
    """The prompt does not fit in the context."""


ENGINE_ERRORS = (
    TemplateError,
    ContextOverflowError,
    GrammarError,
    DecodeFailedError,
    PictureError,
    SoundError,
    ProjectorError,
)
"""What the engine raises for a reply that cannot go on: each ends it with a sentence."""


def record_failure(exc: Exception, report: GenerationReport, n_ctx: int) -> bool:
    """Word an engine error in ``report`` for the user; False if ``exc`` is not one.

    ``n_ctx`` is a sequence's context, which a prompt too long is told it did not fit.
    """
    if isinstance(exc, TemplateError):
        if not exc.stopped:
            report.finish = "error"
            report.error = exc.sentence
    elif isinstance(exc, ContextOverflowError):
        report.finish = "error"
        report.error = Sentence(
            QT_TRANSLATE_NOOP(
                "Floodgate",
                "The conversation is too long for this model's context of {n_ctx} tokens "
                "({reason}). Start a new chat or shorten the prompt.",
            ),
            {"n_ctx": n_ctx, "reason": exc},
        )
    elif isinstance(exc, GrammarError):
        report.finish = "error"
        report.error = Sentence(
            QT_TRANSLATE_NOOP("Floodgate", "The grammar could not be used: {reason}"),
            {"reason": exc},
        )
    elif isinstance(exc, DecodeFailedError):
        report.finish = "error"
        report.error = Sentence(
            QT_TRANSLATE_NOOP("Floodgate", "The model failed: {reason}"), {"reason": exc}
        )
    elif isinstance(exc, (PictureError, SoundError, ProjectorError)):
        report.finish = "error"
        report.error = exc.sentence
    else:
        return False
    return True
