"""Where Floodgate keeps its files: one data directory, overridable for tests and portable use."""

from __future__ import annotations

import os
from pathlib import Path

from platformdirs import user_data_dir

HOME_VARIABLE = "FLOODGATE_HOME"
"""Environment variable naming the data directory (tests point it at a temporary folder)."""


def data_dir() -> Path:
    """The data directory: ``$FLOODGATE_HOME``, or the platform's user data folder."""
    override = os.environ.get(HOME_VARIABLE)
    return Path(override) if override else Path(user_data_dir("Floodgate", appauthor=False))


def prompt_cache_dir() -> Path:
    """Where processed prompts are kept between runs (the window's and ``floodgate serve``'s)."""
    return data_dir() / "prompt-cache"


PROJECT_DIR = Path(__file__).resolve().parent.parent.parent
"""The project's folder (the one holding ``app/`` and ``models/``)."""

DEFAULT_MODEL = PROJECT_DIR / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
"""The bundled default model, put there by ``make run`` / ``make test``."""

MODEL_VARIABLE = "FLOODGATE_MODEL"
"""Environment variable naming the model opened when none is given."""


def default_model_path() -> Path:
    """``$FLOODGATE_MODEL`` if set, else the bundled SmolLM2 in the project's ``models/``."""
    return Path(os.environ.get(MODEL_VARIABLE, DEFAULT_MODEL))
