"""Inference engines: llama.cpp and a scripted stand-in. No Qt here."""

from app.engine.backend import (
    Backend,
    BackendOpener,
    ChatMessage,
    EngineOptions,
    GenerationReport,
    GenerationSettings,
    ModelInfo,
)
from app.engine.errors import QT_TRANSLATE_NOOP, ModelLoadError, Sentence
from app.engine.stop import StopSignal

__all__ = [
    "QT_TRANSLATE_NOOP",
    "Backend",
    "BackendOpener",
    "ChatMessage",
    "EngineOptions",
    "GenerationReport",
    "GenerationSettings",
    "ModelInfo",
    "ModelLoadError",
    "Sentence",
    "StopSignal",
]
