"""Checks on a model path before llama.cpp sees it, so failures read as sentences."""

from __future__ import annotations

from pathlib import Path

from app.engine.errors import QT_TRANSLATE_NOOP, ModelLoadError

GGUF_MAGIC = b"GGUF"


def check_model_file(path: Path) -> None:
    """Raise :class:`ModelLoadError` unless ``path`` looks like a readable GGUF file."""
    if not path.exists():
        raise ModelLoadError(
            QT_TRANSLATE_NOOP("Floodgate", "The model file {path} does not exist."), path=path
        )
    if path.is_dir():
        raise ModelLoadError(
            QT_TRANSLATE_NOOP(
                "Floodgate", "{path} is a folder, not a model file. Choose a .gguf file."
            ),
            path=path,
        )
    try:
        with path.open("rb") as f:
            magic = f.read(4)
    except OSError as exc:
        raise ModelLoadError(
            QT_TRANSLATE_NOOP("Floodgate", "The model file {path} cannot be read: {reason}."),
            path=path,
            reason=exc.strerror,
        ) from exc
    if magic != GGUF_MAGIC:
        raise ModelLoadError(
            QT_TRANSLATE_NOOP(
                "Floodgate",
                "{name} is not a GGUF model file. Floodgate opens llama.cpp models in the "
                "GGUF format (.gguf).",
            ),
            name=path.name,
        )
