"""Checks on a model path before llama.cpp sees it, so failures read as sentences."""

from __future__ import annotations

from pathlib import Path

from app.engine.errors import ModelLoadError

GGUF_MAGIC = b"GGUF"


def check_model_file(path: Path) -> None:
    """Raise :class:`ModelLoadError` unless ``path`` looks like a readable GGUF file."""
    if not path.exists():
        raise ModelLoadError(f"The model file {path} does not exist.")
    if path.is_dir():
        raise ModelLoadError(f"{path} is a folder, not a model file. Choose a .gguf file.")
    try:
        with path.open("rb") as f:
            magic = f.read(4)
    except OSError as exc:
        raise ModelLoadError(f"The model file {path} cannot be read: {exc.strerror}.") from exc
    if magic != GGUF_MAGIC:
        raise ModelLoadError(
            f"{path.name} is not a GGUF model file. Floodgate opens llama.cpp models in the "
            "GGUF format (.gguf)."
        )
