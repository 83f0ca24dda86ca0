"""Light and dark themes: Qt's Fusion style with a palette for each, following the system."""

from __future__ import annotations

from typing import Literal

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication, QStyleFactory

ThemeChoice = Literal["system", "light", "dark"]
THEME_CHOICES: tuple[ThemeChoice, ...] = ("system", "light", "dark")

ColorRole = QPalette.ColorRole

_LIGHT = {
    ColorRole.Window: "#f3f3f3",
    ColorRole.WindowText: "#1b1b1b",
    ColorRole.Base: "#ffffff",
    ColorRole.AlternateBase: "#eaf0f8",
    ColorRole.ToolTipBase: "#ffffdc",
    ColorRole.ToolTipText: "#1b1b1b",
    ColorRole.PlaceholderText: "#6e6e6e",
    ColorRole.Text: "#1b1b1b",
    ColorRole.Button: "#ececec",
    ColorRole.ButtonText: "#1b1b1b",
    ColorRole.BrightText: "#d01010",
    ColorRole.Link: "#0b57d0",
    ColorRole.LinkVisited: "#6a3ab2",
    ColorRole.Highlight: "#2f6fd0",
    ColorRole.HighlightedText: "#ffffff",
    ColorRole.Light: "#ffffff",
    ColorRole.Midlight: "#e3e3e3",
    ColorRole.Mid: "#b8b8b8",
    ColorRole.Dark: "#9f9f9f",
    ColorRole.Shadow: "#767676",
}

_DARK = {
    ColorRole.Window: "#202124",
    ColorRole.WindowText: "#e8eaed",
    ColorRole.Base: "#17181a",
    ColorRole.AlternateBase: "#2a2f38",
    ColorRole.ToolTipBase: "#303134",
    ColorRole.ToolTipText: "#e8eaed",
    ColorRole.PlaceholderText: "#9aa0a6",
    ColorRole.Text: "#e8eaed",
    ColorRole.Button: "#2d2e31",
    ColorRole.ButtonText: "#e8eaed",
    ColorRole.BrightText: "#ff6b5b",
    ColorRole.Link: "#8ab4f8",
    ColorRole.LinkVisited: "#c58af9",
    ColorRole.Highlight: "#3f73c9",
    ColorRole.HighlightedText: "#ffffff",
    ColorRole.Light: "#3c4043",
    ColorRole.Midlight: "#333539",
    ColorRole.Mid: "#4a4d52",
    ColorRole.Dark: "#111214",
    ColorRole.Shadow: "#000000",
}


def palette(dark: bool) -> QPalette:
    """The palette of the light or the dark theme."""
    result = QPalette()
    for role, color in (_DARK if dark else _LIGHT).items():
        result.setColor(role, QColor(color))
    disabled = QColor("#7a7d82" if dark else "#9a9a9a")
    for role in (ColorRole.WindowText, ColorRole.Text, ColorRole.ButtonText):
        result.setColor(QPalette.ColorGroup.Disabled, role, disabled)
    return result


def system_is_dark() -> bool:
    """Whether the desktop asks for dark colours (light if it does not say)."""
    return QGuiApplication.styleHints().colorScheme() == Qt.ColorScheme.Dark


def is_dark(choice: ThemeChoice) -> bool:
    """Whether a choice means dark colours now."""
    return choice == "dark" or (choice == "system" and system_is_dark())


def apply_theme(app: QApplication, choice: ThemeChoice) -> None:
    """Colour the whole application; widgets re-render on the palette change."""
    style = QStyleFactory.create("Fusion")
    if style is not None and app.style().name().lower() != "fusion":
        app.setStyle(style)
    app.setPalette(palette(is_dark(choice)))


def contrast(a: QColor, b: QColor) -> float:
    """WCAG contrast ratio of two colours (1 to 21; 4.5 is the minimum for body text)."""

    def luminance(c: QColor) -> float:
        def channel(v: float) -> float:
            return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4

        return (
            0.2126 * channel(c.redF()) + 0.7152 * channel(c.greenF()) + 0.0722 * channel(c.blueF())
        )

    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)
