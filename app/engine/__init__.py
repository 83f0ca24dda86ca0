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
from app.engine.errors import ModelLoadError
from app.engine.stop import StopSignal

__all__ = [
    "Backend",
    "BackendOpener",
    "ChatMessage",
    "EngineOptions",
    "GenerationReport",
    "GenerationSettings",
    "ModelInfo",
    "ModelLoadError",
    "StopSignal",
]
