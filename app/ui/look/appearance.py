"""Theme and language: applied to the whole application, following the system unless chosen."""

from __future__ import annotations

from PySide6.QtCore import QObject, Qt, Slot
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QApplication

from app.flow.preferences import PreferencesKeeper
from app.ui.look.language import LANGUAGE_CHOICES, LanguageChoice, Languages
from app.ui.look.theme import THEME_CHOICES, ThemeChoice, apply_theme


class Appearance(QObject):
    """Applies the user's theme and language, and re-applies when the system's colours change.

    Args:
        app: the application.
        keeper: the preferences: what the user chose last time (unknown values mean
            "system"), where each new choice is kept.
    """

    def __init__(self, app: QApplication, keeper: PreferencesKeeper) -> None:
        super().__init__(app)
        self._app = app
        self._keeper = keeper
        preferences = keeper.preferences
        self.languages = Languages(app)
        theme = preferences.theme
        self.theme: ThemeChoice = theme if theme in THEME_CHOICES else "system"
        language = preferences.language
        self.language: LanguageChoice = language if language in LANGUAGE_CHOICES else "system"
        apply_theme(app, self.theme)
        self.translation_missing = not self.languages.apply(self.language)
        QGuiApplication.styleHints().colorSchemeChanged.connect(self._on_system_scheme)

    def _remember(self) -> None:
        self._keeper.preferences.theme = self.theme
        self._keeper.preferences.language = self.language
        self._keeper.save()

    @Slot(str)
    def choose_theme(self, choice: str) -> None:
        """Switch to ``"system"``, ``"light"`` or ``"dark"``, and remember it."""
        if choice not in THEME_CHOICES:
            return
        self.theme = choice
        apply_theme(self._app, self.theme)
        self._remember()

    @Slot(str)
    def choose_language(self, choice: str) -> bool:
        """Switch the interface language, and remember it.

        Returns:
            False if that language's compiled translation is missing (English stays).
        """
        if choice not in LANGUAGE_CHOICES:
            return False
        self.language = choice
        found = self.languages.apply(self.language)
        self._remember()
        return found

    @Slot(Qt.ColorScheme)
    def _on_system_scheme(self, _scheme: Qt.ColorScheme) -> None:
        if self.theme == "system":
            apply_theme(self._app, self.theme)
