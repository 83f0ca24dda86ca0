"""The colours the conversation's rows render with, derived from the application palette.

:mod:`app.ui.look.theme` chooses the palette (light, dark, or the system's); this module turns the
palette into the few colours and the style sheet that rows need, so a change of palette
re-renders them.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from PySide6.QtGui import QColor, QPalette

LINE_HEIGHT_PERCENT = 125
"""Prose lines are this far apart, in percent of the font's own line height."""


@dataclass(frozen=True)
class Theme:
    """Colours the rows render with, derived from the application palette."""

    dark: bool
    text: str
    muted: str
    link: str
    error: str
    code_background: str
    grid: str
    prompt_background: str
    """The card a prompt sits in: the background tinted toward the accent colour."""

    @property
    def code_style(self) -> str:
        """The Pygments style for code blocks."""
        return "monokai" if self.dark else "default"

    @cached_property
    def css(self) -> str:
        """The style sheet every rich-text row carries (Qt's rich text supports a CSS subset).

        Made once: a streaming paragraph's row passes it with every update, and the document
        compares it with the one it has (the same string: compared by identity).
        """
        return (
            "p, ul, ol, blockquote, table, pre, h1, h2, h3, h4, h5, h6"
            " { margin-top: 0px; margin-bottom: 0px; }"
            # A comfortable line height for reading prose (code keeps its own, tighter one).
            f" p, li, blockquote {{ line-height: {LINE_HEIGHT_PERCENT}%; }}"
            f" a {{ color: {self.link}; }}"
            f" .address, .image {{ color: {self.muted}; }}"
            f" code {{ font-family: monospace; background-color: {self.code_background}; }}"
            f" blockquote {{ color: {self.muted}; margin-left: 12px; }}"
            f" table.md {{ border-color: {self.grid}; border-style: solid; }}"
            f" th {{ background-color: {self.code_background}; }}"
        )


def mix(a: QColor, b: QColor, share: float) -> QColor:
    """``a`` moved ``share`` of the way toward ``b`` (0: ``a``; 1: ``b``)."""
    return QColor.fromRgbF(
        a.redF() + (b.redF() - a.redF()) * share,
        a.greenF() + (b.greenF() - a.greenF()) * share,
        a.blueF() + (b.blueF() - a.blueF()) * share,
    )


def theme_for(palette: QPalette) -> Theme:
    """The theme matching a palette (dark when its window colour is dark)."""
    window = palette.color(QPalette.ColorRole.Base)  # the conversation's background
    dark = window.lightness() < 128
    text = palette.color(QPalette.ColorRole.Text)
    # Text faded 40 % toward the background: still above 4.5:1 in both themes.
    muted = mix(text, window, 0.4)
    accent = palette.color(QPalette.ColorRole.Highlight)
    return Theme(
        dark=dark,
        text=text.name(),
        muted=muted.name(),
        link=palette.color(QPalette.ColorRole.Link).name(),
        error="#ff6b5b" if dark else "#c0392b",
        code_background="#272822" if dark else "#f3f3f3",
        grid="#555555" if dark else "#c8c8c8",
        prompt_background=mix(window, accent, 0.22 if dark else 0.1).name(),
    )
