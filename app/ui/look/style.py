"""The style sheets: rounded fields, icon buttons, the header, the sidebar, docks and dialogs.

One style sheet for the whole window, made from the palette of the light or the dark theme
(:mod:`app.ui.look.theme`), set once per change of theme: never per update. Its rules name
the widgets they style (by object name or class), so every other widget keeps Fusion's look
with the palette's colours; the conversation's rows paint themselves and are not in it.

Dialogs get a sheet of their own (:func:`follow_theme`): the same fields, buttons, tables and
tabs, in the same colours, set on each dialog rather than on the application, for the same
reason as the window's (the rows).
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject
from PySide6.QtGui import QIcon, QPalette
from PySide6.QtWidgets import QDialogButtonBox, QWidget
from typing_extensions import override

from app.ui.look.colors import mix

Role = QPalette.ColorRole

RADIUS_FIELD = 18
"""The composer's rounded corners, in pixels (half its height on one line)."""

SEND_SIDE = 32
"""The round send button's diameter, in pixels (a comfortable target for a pointer)."""


def _colors(palette: QPalette) -> dict[str, str]:
    """The colours both sheets use, by role, made from ``palette``."""
    base = palette.color(Role.Base)
    window = palette.color(Role.Window)
    text = palette.color(Role.Text)
    accent = palette.color(Role.Highlight)
    return {
        "base": base.name(),
        "window": window.name(),
        "text": text.name(),
        "accent": accent.name(),
        "on_accent": palette.color(Role.HighlightedText).name(),
        "line": mix(base, text, 0.16).name(),
        "hover": mix(base, text, 0.08).name(),
        "pressed": mix(base, text, 0.14).name(),
        "field": mix(base, window, 0.5).name(),
        "muted": mix(text, base, 0.4).name(),
        "accent_hover": mix(accent, text, 0.15).name(),
        "disabled": mix(base, text, 0.25).name(),
        "banner": mix(base, accent, 0.12).name(),
        "banner_line": mix(base, accent, 0.35).name(),
        "list_hover": mix(window, text, 0.06).name(),
        "list_selected": mix(window, accent, 0.22).name(),
        "handle": mix(base, text, 0.28).name(),
        "handle_hover": mix(base, text, 0.45).name(),
    }


def style_sheet(palette: QPalette) -> str:
    """The style sheet for ``palette`` (light or dark)."""
    c = _colors(palette)
    rules = (_composer_rules(c), _header_rules(c), _banner_rules(c), _sidebar_rules(c))
    return "\n" + "".join(rules) + _scroll_bars(c)


def _composer_rules(c: dict[str, str]) -> str:
    """The composer's rounded box, its paperclip and its round Send button."""
    send_radius = SEND_SIDE // 2
    return f"""\
#composerBox {{
    background: {c["field"]};
    border: 1px solid {c["line"]};
    border-radius: {RADIUS_FIELD}px;
}}
#composerBox[focused="true"] {{ border-color: {c["accent"]}; }}
#composer {{ background: transparent; border: none; }}
#attachButton {{ border: none; border-radius: 14px; padding: 5px; }}
#attachButton:hover {{ background: {c["hover"]}; }}
#attachButton:pressed {{ background: {c["pressed"]}; }}
#sendButton {{
    background: {c["accent"]};
    border: none;
    border-radius: {send_radius}px;
    min-width: {SEND_SIDE}px; max-width: {SEND_SIDE}px;
    min-height: {SEND_SIDE}px; max-height: {SEND_SIDE}px;
}}
#sendButton:hover {{ background: {c["accent_hover"]}; }}
#sendButton:disabled {{ background: {c["disabled"]}; }}
#sendButton:focus {{ border: 2px solid {c["text"]}; }}
"""


def _header_rules(c: dict[str, str]) -> str:
    """The model header over the chat, and the empty chat's hint and example prompts."""
    return f"""\
#modelHeader {{ background: {c["base"]}; border-bottom: 1px solid {c["line"]}; }}
#modelPicker {{
    border: 1px solid transparent;
    border-radius: 8px;
    padding: 4px 8px;
    font-weight: 600;
}}
#modelPicker:hover, #modelPicker:focus {{ background: {c["hover"]}; border-color: {c["line"]}; }}
#modelPicker::menu-indicator {{ image: none; width: 0px; }}
#modelFacts, #conversationTitle {{ color: {c["muted"]}; }}
#emptyChat QLabel#emptyHint {{ color: {c["muted"]}; }}
#examplePrompt {{
    background: {c["field"]};
    border: 1px solid {c["line"]};
    border-radius: 10px;
    padding: 8px 12px;
    text-align: left;
}}
#examplePrompt:hover, #examplePrompt:focus {{
    background: {c["hover"]};
    border-color: {c["accent"]};
}}
"""


def _banner_rules(c: dict[str, str]) -> str:
    """The banners over the composer (editing, saving) and the attached files' chips."""
    return f"""\
#editBanner, #savingBanner {{
    background: {c["banner"]};
    border: 1px solid {c["banner_line"]};
    border-radius: 8px;
    padding: 6px 10px;
}}
#attachmentChip {{
    background: {c["base"]};
    border: 1px solid {c["line"]};
    border-radius: 10px;
}}
"""


def _sidebar_rules(c: dict[str, str]) -> str:
    """The conversation list beside the chat, its New chat button, and the docks' titles."""
    return f"""\
#sidebar {{ background: {c["window"]}; }}
#sidebar QListWidget {{ background: {c["window"]}; border: none; }}
#sidebar QListWidget::item {{ padding: 6px 8px; border-radius: 6px; }}
#sidebar QListWidget::item:hover {{ background: {c["list_hover"]}; }}
#sidebar QListWidget::item:selected {{
    background: {c["list_selected"]};
    color: {c["text"]};
}}
#sidebar QLineEdit {{
    background: {c["base"]};
    border: 1px solid {c["line"]};
    border-radius: 8px;
    padding: 4px 8px;
}}
#sidebar QLineEdit:focus {{ border-color: {c["accent"]}; }}
#newChat {{
    background: {c["base"]};
    border: 1px solid {c["line"]};
    border-radius: 8px;
    padding: 6px 10px;
}}
#newChat:hover {{ background: {c["hover"]}; }}
QDockWidget::title {{ padding: 6px 8px; background: {c["window"]}; }}
"""


def _scroll_bars(c: dict[str, str]) -> str:
    """Thin scroll bars: a rounded handle on nothing, no arrows.

    Fusion draws its scroll bar with gradients that Qt's raster engine fills on its GUI thread
    pool, and the conversation's bar repaints on every update of a streaming reply (its range
    grows): measured on a 2-core EPYC, 0.35 ms of the UI thread and 0.4 ms more of the pool's
    per paint; painted from this sheet, 0.013 ms.
    """
    return f"""
QScrollBar:vertical {{ background: transparent; width: 12px; margin: 2px 2px 2px 0; }}
QScrollBar:horizontal {{ background: transparent; height: 12px; margin: 0 2px 2px 2px; }}
QScrollBar#chatScrollBar {{ background: {c["base"]}; margin: 0; }}
QScrollBar::handle {{ background: {c["handle"]}; border-radius: 4px; }}
QScrollBar::handle:vertical {{ min-height: 32px; margin: 0 2px; }}
QScrollBar::handle:horizontal {{ min-width: 32px; margin: 2px 0; }}
QScrollBar::handle:hover, QScrollBar::handle:pressed {{ background: {c["handle_hover"]}; }}
QScrollBar::add-line, QScrollBar::sub-line {{ width: 0; height: 0; border: none; }}
QScrollBar::add-page, QScrollBar::sub-page {{ background: none; }}
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


def dialog_style_sheet(palette: QPalette) -> str:
    """The style sheet of a dialog for ``palette``: the window's fields, buttons and lines."""
    c = _colors(palette)
    fields = "QLineEdit, QPlainTextEdit, QTextEdit, QTextBrowser"
    return f"""
{fields} {{
    background: {c["base"]};
    border: 1px solid {c["line"]};
    border-radius: 8px;
    padding: 4px 8px;
}}
{", ".join(f"{field}:focus" for field in fields.split(", "))} {{ border-color: {c["accent"]}; }}
QLineEdit:disabled {{ color: {c["muted"]}; }}
QPushButton {{
    background: {c["base"]};
    border: 1px solid {c["line"]};
    border-radius: 8px;
    padding: 6px 14px;
}}
QPushButton:hover {{ background: {c["hover"]}; }}
QPushButton:pressed {{ background: {c["pressed"]}; }}
QPushButton:focus {{ border-color: {c["accent"]}; }}
QPushButton:disabled {{ color: {c["muted"]}; }}
QPushButton:default {{
    background: {c["accent"]};
    border-color: {c["accent"]};
    color: {c["on_accent"]};
}}
QPushButton:default:hover {{ background: {c["accent_hover"]}; }}
QPushButton:default:disabled {{
    background: {c["line"]};
    border-color: {c["line"]};
    color: {c["muted"]};
}}
QTableView, QTreeView, QListView {{
    background: {c["base"]};
    border: 1px solid {c["line"]};
    border-radius: 8px;
    gridline-color: {c["line"]};
}}
QHeaderView::section {{
    background: {c["window"]};
    border: none;
    border-bottom: 1px solid {c["line"]};
    padding: 4px 8px;
}}
QTabWidget::pane {{ border: 1px solid {c["line"]}; border-radius: 8px; top: -1px; }}
QTabBar::tab {{ padding: 6px 14px; border: none; border-bottom: 2px solid transparent; }}
QTabBar::tab:selected {{ border-bottom-color: {c["accent"]}; color: {c["text"]}; }}
QTabBar::tab:!selected {{ color: {c["muted"]}; }}
QTabBar::tab:hover {{ background: {c["hover"]}; }}
QProgressBar {{
    background: {c["hover"]};
    border: none;
    border-radius: 4px;
    text-align: center;
    max-height: 14px;
}}
QProgressBar::chunk {{ background: {c["accent"]}; border-radius: 4px; }}
"""


class _DialogTheme(QObject):
    """Keeps a dialog's style sheet in step with the theme (it lives as the dialog's child)."""

    def __init__(self, dialog: QWidget) -> None:
        super().__init__(dialog)
        dialog.installEventFilter(self)
        _apply_dialog_sheet(dialog)

    @override
    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if not isinstance(watched, QWidget):
            return False
        if event.type() == QEvent.Type.PaletteChange:
            _apply_dialog_sheet(watched)
        elif event.type() == QEvent.Type.Show:
            # The platform's stock icons on OK and Cancel are not the window's (and the
            # sheet's property for them is read before a button box has its dialog).
            for box in watched.findChildren(QDialogButtonBox):
                for button in box.buttons():
                    button.setIcon(QIcon())
        return False


def _apply_dialog_sheet(dialog: QWidget) -> None:
    sheet = dialog_style_sheet(dialog.palette())
    if dialog.styleSheet() != sheet:  # setting it again would loop through PaletteChange
        dialog.setStyleSheet(sheet)


def follow_theme(dialog: QWidget) -> None:
    """Give ``dialog`` the dialogs' style sheet, now and at every change of theme."""
    _DialogTheme(dialog)
