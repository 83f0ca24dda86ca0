"""The user's preferences (theme, language, model settings), kept in a small JSON file."""

from __future__ import annotations

import json
import logging
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from app import defaults
from app.store.paths import data_dir
from app.store.settings import Settings, from_mapping, to_mapping

log = logging.getLogger(__name__)

FILE_NAME = "preferences.json"


@dataclass(frozen=True)
class ApiServerPreferences:
    """The local API server as Settings > Local API server keeps it (its key is in the keyring).

    Attributes:
        enabled: serve while Floodgate runs (off by default).
        host: the address to listen on.
        port: its port.
        cors_origins: web origins allowed to call it from a browser, one per line (none: no
            CORS headers at all).
    """

    enabled: bool = False
    host: str = defaults.API_SERVER_HOST
    port: int = defaults.API_SERVER_PORT
    cors_origins: str = ""

    def origins(self) -> tuple[str, ...]:
        """The CORS origins as a tuple (blank lines left out)."""
        return tuple(line.strip() for line in self.cors_origins.splitlines() if line.strip())

    @staticmethod
    def from_mapping(raw: object) -> ApiServerPreferences:
        """From the preferences file; anything missing or invalid keeps its default."""
        kept = ApiServerPreferences()
        if not isinstance(raw, dict):
            return kept
        enabled, host, port, origins = (
            raw.get("enabled"),
            raw.get("host"),
            raw.get("port"),
            raw.get("cors_origins"),
        )
        return ApiServerPreferences(
            enabled=enabled if isinstance(enabled, bool) else kept.enabled,
            host=host.strip() if isinstance(host, str) and host.strip() else kept.host,
            port=port
            if isinstance(port, int) and not isinstance(port, bool) and 1 <= port <= 65535
            else kept.port,
            cors_origins=origins if isinstance(origins, str) else kept.cors_origins,
        )


API_SERVER_KEY_NAME = "local-api-server"
"""The name the local API server's key is kept under in the keyring."""

REMOTES_KEPT = 8
"""How many servers the model picker offers (the ones connected to last)."""


@dataclass(frozen=True)
class KnownRemote:
    """A server connected to before: its address and the model asked of it (no key: keyring)."""

    url: str
    model: str


def _remotes(raw: dict[str, object]) -> list[KnownRemote]:
    """The servers kept in the file; a file from before the list kept only the last one."""
    listed = raw.get("servers")
    if isinstance(listed, list):
        return [
            KnownRemote(str(s["url"]), str(s["model"]))
            for s in listed
            if isinstance(s, dict) and s.get("url") and s.get("model")
        ][:REMOTES_KEPT]
    url, model = raw.get("server_url"), raw.get("server_model")
    if isinstance(url, str) and isinstance(model, str) and url and model:
        return [KnownRemote(url, model)]
    return []


@dataclass
class Preferences:
    """What the user chose in the View menu and the settings dialog."""

    theme: str = "system"
    language: str = "system"
    settings: Settings = field(default_factory=Settings)
    recent_models: list[str] = field(default_factory=list)
    """Model files opened before, most recent first."""
    remotes: list[KnownRemote] = field(default_factory=list)
    """Servers connected to, most recent first (their API keys are never stored here)."""
    api_server: ApiServerPreferences = field(default_factory=ApiServerPreferences)
    """Floodgate's own API server."""
    projectors: dict[str, str] = field(default_factory=dict)
    """Projectors chosen by hand: a model file's path, and its projector's, or "" for none
    (text only; the library's Projector menu); a model not listed pairs with an
    ``mmproj*.gguf`` beside it."""

    def remember_model(self, path: str, keep: int = 20) -> None:
        """Put ``path`` first among the recent models."""
        self.recent_models = [path, *(p for p in self.recent_models if p != path)][:keep]

    def remember_remote(self, url: str, model: str) -> None:
        """Put the server (with that model) first among the servers."""
        chosen = KnownRemote(url, model)
        self.remotes = [chosen, *(s for s in self.remotes if s != chosen)][:REMOTES_KEPT]

    @property
    def last_remote(self) -> KnownRemote | None:
        """The server connected to last, if any."""
        return self.remotes[0] if self.remotes else None


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
        remotes=_remotes(raw),
        api_server=ApiServerPreferences.from_mapping(raw.get("api_server")),
        projectors=_projectors(raw.get("projectors")),
    )


def _projectors(raw: object) -> dict[str, str]:
    """The saved pairs of model and projector ("": none); anything else is left out."""
    if not isinstance(raw, dict):
        return {}
    return {k: v for k, v in raw.items() if isinstance(k, str) and isinstance(v, str) and k}


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
                # Under "servers", the key files have had since before remotes were named.
                "servers": [asdict(remote) for remote in preferences.remotes],
                "api_server": asdict(preferences.api_server),
                "projectors": dict(preferences.projectors),
            }
            json.dump(document, f, indent=2, ensure_ascii=False)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
