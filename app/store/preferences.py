"""The user's preferences (theme, language, model settings), kept in a small JSON file."""

from __future__ import annotations

import json
import logging
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from app.store.paths import data_dir
from app.store.settings import Settings, from_mapping, to_mapping

log = logging.getLogger(__name__)

FILE_NAME = "preferences.json"


@dataclass
class Preferences:
    """What the user chose in the View menu and the settings dialog."""

    theme: str = "system"
    language: str = "system"
    settings: Settings = field(default_factory=Settings)
    recent_models: list[str] = field(default_factory=list)
    """Model files opened before, most recent first."""
    server_url: str = ""
    server_model: str = ""
    """The server connected to last (its API key is never stored here)."""

    def remember_model(self, path: str, keep: int = 20) -> None:
        """Put ``path`` first among the recent models."""
        self.recent_models = [path, *(p for p in self.recent_models if p != path)][:keep]


def preferences_path() -> Path:
    """The preferences file in the data directory."""
    return data_dir() / FILE_NAME


def load_preferences(path: Path | None = None) -> Preferences:
    """Read the preferences; a missing or unreadable file gives the defaults (and a log line)."""
    path = path or preferences_path()
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return Preferences()
    except (OSError, ValueError) as exc:
        log.warning("Ignoring unreadable preferences %s: %s", path, exc)
        return Preferences()
    defaults = Preferences()
    if not isinstance(raw, dict):
        return defaults
    return Preferences(
        theme=str(raw.get("theme", defaults.theme)),
        language=str(raw.get("language", defaults.language)),
        settings=from_mapping(raw.get("settings")),
        recent_models=[str(p) for p in raw.get("recent_models", []) if isinstance(p, str)],
        server_url=str(raw.get("server_url", "")),
        server_model=str(raw.get("server_model", "")),
    )


def save_preferences(preferences: Preferences, path: Path | None = None) -> None:
    """Write the preferences atomically (a crash mid-write leaves the old file intact)."""
    path = path or preferences_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".preferences-", suffix=".json", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            document = {
                "theme": preferences.theme,
                "language": preferences.language,
                "settings": to_mapping(preferences.settings),
                "recent_models": list(preferences.recent_models),
                "server_url": preferences.server_url,
                "server_model": preferences.server_model,
            }
            json.dump(document, f, indent=2, ensure_ascii=False)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
