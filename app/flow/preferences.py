"""The owner of the user's preferences: holds them, and writes them off the UI thread."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from app.store.preferences import Preferences, load_preferences, save_preferences


class PreferencesKeeper:
    """The one object that holds the :class:`Preferences` while Floodgate runs.

    Whoever changes a preference (the theme, the settings dialog, a model opened) changes it
    here and calls :meth:`save`; the file is written on a spare thread, never the UI's.
    """

    def __init__(self, preferences: Preferences) -> None:
        self.preferences = preferences
        self._saving: set[asyncio.Future[None]] = set()

    @classmethod
    async def load(cls) -> PreferencesKeeper:
        """Read the preferences file off the UI thread."""
        return cls(await asyncio.to_thread(load_preferences))

    def save(self) -> None:
        """Write the preferences as they are now, without waiting."""
        # A copy: the UI thread may change the preferences while the write is under way.
        preferences = self.preferences
        snapshot = replace(
            preferences,
            recent_models=list(preferences.recent_models),
            remotes=list(preferences.remotes),
            projectors=dict(preferences.projectors),
        )
        saving = asyncio.get_running_loop().run_in_executor(None, save_preferences, snapshot)
        self._saving.add(saving)
        saving.add_done_callback(self._saving.discard)

    def remember_model(self, path: str) -> None:
        """Put a model file first among the recent ones, and save."""
        self.preferences.remember_model(path)
        self.save()

    async def flush(self) -> None:
        """Wait for the writes under way."""
        if self._saving:
            await asyncio.gather(*self._saving, return_exceptions=True)
