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
