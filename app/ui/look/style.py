"""The application's style sheet: rounded fields, icon buttons, the header, the sidebar, docks.

One style sheet for the whole window, made from the palette of the light or the dark theme
(:mod:`app.ui.look.theme`), set once per change of theme: never per update. Its rules name
the widgets they style (by object name or class), so every other widget keeps Fusion's look
with the palette's colours; the conversation's rows paint themselves and are not in it.
"""

from __future__ import annotations

from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QWidget

from app.ui.look.colors import mix

Role = QPalette.ColorRole

RADIUS_FIELD = 18
"""The composer's rounded corners, in pixels (half its height on one line)."""

SEND_SIDE = 32
"""The round send button's diameter, in pixels (a comfortable target for a pointer)."""


def style_sheet(palette: QPalette) -> str:
    """The style sheet for ``palette`` (light or dark)."""
    base = palette.color(Role.Base)
    window = palette.color(Role.Window)
    text = palette.color(Role.Text)
    accent = palette.color(Role.Highlight)
    line = mix(base, text, 0.16).name()
    hover = mix(base, text, 0.08).name()
    pressed = mix(base, text, 0.14).name()
    field = mix(base, window, 0.5).name()
    muted = mix(text, base, 0.4).name()
    accent_hover = mix(accent, text, 0.15).name()
    disabled = mix(base, text, 0.25).name()
    send_radius = SEND_SIDE // 2
    return f"""
#composerBox {{
    background: {field};
    border: 1px solid {line};
    border-radius: {RADIUS_FIELD}px;
}}
#composerBox[focused="true"] {{ border-color: {accent.name()}; }}
#composer {{ background: transparent; border: none; }}
#attachButton {{ border: none; border-radius: 14px; padding: 5px; }}
#attachButton:hover {{ background: {hover}; }}
#attachButton:pressed {{ background: {pressed}; }}
#sendButton {{
    background: {accent.name()};
    border: none;
    border-radius: {send_radius}px;
    min-width: {SEND_SIDE}px; max-width: {SEND_SIDE}px;
    min-height: {SEND_SIDE}px; max-height: {SEND_SIDE}px;
}}
#sendButton:hover {{ background: {accent_hover}; }}
#sendButton:disabled {{ background: {disabled}; }}
#sendButton:focus {{ border: 2px solid {text.name()}; }}
#modelHeader {{ background: {base.name()}; border-bottom: 1px solid {line}; }}
#modelPicker {{
    border: 1px solid transparent;
    border-radius: 8px;
    padding: 4px 8px;
    font-weight: 600;
}}
#modelPicker:hover, #modelPicker:focus {{ background: {hover}; border-color: {line}; }}
#modelPicker::menu-indicator {{ image: none; width: 0px; }}
#modelFacts, #conversationTitle {{ color: {muted}; }}
#emptyChat QLabel#emptyHint {{ color: {muted}; }}
#examplePrompt {{
    background: {field};
    border: 1px solid {line};
    border-radius: 10px;
    padding: 8px 12px;
    text-align: left;
}}
#examplePrompt:hover, #examplePrompt:focus {{ background: {hover}; border-color: {accent.name()}; }}
#editBanner, #savingBanner {{
    background: {mix(base, accent, 0.12).name()};
    border: 1px solid {mix(base, accent, 0.35).name()};
    border-radius: 8px;
    padding: 6px 10px;
}}
#attachmentChip {{
    background: {base.name()};
    border: 1px solid {line};
    border-radius: 10px;
}}
#sidebar {{ background: {window.name()}; }}
#sidebar QListWidget {{ background: {window.name()}; border: none; }}
#sidebar QListWidget::item {{ padding: 6px 8px; border-radius: 6px; }}
#sidebar QListWidget::item:hover {{ background: {mix(window, text, 0.06).name()}; }}
#sidebar QListWidget::item:selected {{
    background: {mix(window, accent, 0.22).name()};
    color: {text.name()};
}}
#sidebar QLineEdit {{
    background: {base.name()};
    border: 1px solid {line};
    border-radius: 8px;
    padding: 4px 8px;
}}
#sidebar QLineEdit:focus {{ border-color: {accent.name()}; }}
#newChat {{
    background: {base.name()};
    border: 1px solid {line};
    border-radius: 8px;
    padding: 6px 10px;
}}
#newChat:hover {{ background: {hover}; }}
QDockWidget::title {{ padding: 6px 8px; background: {window.name()}; }}
"""


def apply_style(widgets: list[QWidget], palette: QPalette) -> None:
    """Give ``widgets`` (and what they hold) the style sheet of ``palette``.

    Set on the window's chrome (the header, the composer, the banners, the sidebar), not on
    the application: a sheet on the application would be matched against every row of the
    conversation as it is made (measured: a tenth more time per streamed update).
    """
    sheet = style_sheet(palette)
    for widget in widgets:
        if widget.styleSheet() != sheet:
            widget.setStyleSheet(sheet)
