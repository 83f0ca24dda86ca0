"""The interface language: English (the source) or Chinese, following the system by default.

Translations are Qt Linguist files: ``app/ui/i18n/floodgate_<locale>.ts`` are the sources in
the repository; the setup (``make``) compiles them into ``.qm`` files next to them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from PySide6.QtCore import QLibraryInfo, QLocale, QTranslator
from PySide6.QtGui import QFont, QFontDatabase
from PySide6.QtWidgets import QApplication

LanguageChoice = Literal["system", "en", "zh_CN"]
LANGUAGE_CHOICES: tuple[LanguageChoice, ...] = ("system", "en", "zh_CN")
I18N_DIR = Path(__file__).parent.parent / "i18n"
TRANSLATED = ("zh_CN",)
"""Locales Floodgate has a translation for; any other falls back to English."""

CJK_FONTS = (
    "Noto Sans CJK SC",
    "Source Han Sans SC",
    "WenQuanYi Micro Hei",
    "Microsoft YaHei",
    "PingFang SC",
)
"""Fonts that draw Simplified Chinese well, in order of preference."""


def locale_for(choice: LanguageChoice) -> str:
    """The translation a choice means now: ``"zh_CN"``, or ``"en"`` for the source text."""
    if choice != "system":
        return choice
    system = QLocale.system()
    if system.language() == QLocale.Language.Chinese:
        return "zh_CN"
    return "en"


class Languages:
    """Installs and removes the translators of the application and of Qt's own dialogs."""

    def __init__(self, app: QApplication) -> None:
        self._app = app
        self._translators: list[QTranslator] = []
        self._base_font = QFont(app.font())
        self.current = "en"

    def apply(self, choice: LanguageChoice) -> bool:
        """Switch the interface language; widgets retranslate on the LanguageChange event.

        Returns:
            False if the translation was chosen but its compiled file is missing (the
            interface stays in English).
        """
        for translator in self._translators:
            self._app.removeTranslator(translator)
        self._translators.clear()
        wanted = locale_for(choice)
        found = True
        if wanted in TRANSLATED:
            found = self._install(I18N_DIR, f"floodgate_{wanted}")
            # Qt's own strings (the file dialog, context menus), when the wheel ships them.
            qt_dir = Path(QLibraryInfo.path(QLibraryInfo.LibraryPath.TranslationsPath))
            self._install(qt_dir, f"qtbase_{wanted}")
        self.current = wanted if found else "en"
        QLocale.setDefault(QLocale(self.current if self.current != "en" else "en_US"))
        self._app.setFont(self._font_for(self.current))
        return found

    def _install(self, folder: Path, name: str) -> bool:
        translator = QTranslator(self._app)
        if not translator.load(name, str(folder)):
            return False
        self._app.installTranslator(translator)
        self._translators.append(translator)
        return True

    def _font_for(self, language: str) -> QFont:
        font = QFont(self._base_font)
        if language.startswith("zh"):
            families = set(QFontDatabase.families())
            cjk = [f for f in CJK_FONTS if f in families]
            if cjk:
                # Latin text keeps the usual font; Chinese gets a real CJK face, not a fallback
                # picked glyph by glyph.
                font.setFamilies([*self._base_font.families(), cjk[0]])
        return font
