"""A preferences keeper for tests: it records what it would write to the preferences file."""

from __future__ import annotations

from dataclasses import replace

from app.flow.preferences import PreferencesKeeper
from app.store.preferences import Preferences


class Saved(PreferencesKeeper):
    """A keeper that records what it would write instead of writing it."""

    def __init__(self, preferences: Preferences | None = None) -> None:
        super().__init__(preferences or Preferences())
        self.calls: list[Preferences] = []

    def save(self) -> None:
        self.calls.append(replace(self.preferences))
