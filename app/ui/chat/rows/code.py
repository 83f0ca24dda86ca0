"""A fenced code block in the conversation: highlighted, its language shown, a Copy button."""

from __future__ import annotations

import html

from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from PySide6.QtCore import QCoreApplication, QSize, Qt, QTimer, Slot
from PySide6.QtGui import (
    QAccessible,
    QColor,
    QFont,
    QFontDatabase,
    QGuiApplication,
    QPainter,
    QPalette,
)
from PySide6.QtWidgets import QLabel, QScrollArea, QScrollBar, QWidget
from typing_extensions import override

from app.ui.chat.rows.action_button import ActionButton
from app.ui.chat.rows.base import MARGIN, ThemedRow
from app.ui.chat.rows.lexers import shelf
from app.ui.chat.rows.text_block import TextBlock
from app.ui.look.colors import Theme
from app.ui.look.icon_button import ICON_PX
from app.ui.look.icons import icon

_HEADER_HEIGHTS: dict[str, int] = {}


def _header_height_in(font: QFont) -> int:
    """The height of a code block's header (its language and Copy) in ``font``.

    The same for every code row, made or not yet: measured once per font on a label and a
    button that are never shown, so a row's height does not change when its header is made.
    """
    known = _HEADER_HEIGHTS.get(font.key())
    if known is not None:
        return known
    label, button = QLabel("python"), ActionButton()
    label.setFont(font)
    button.setFont(font)
    button.setText("Copy")
    height = max(label.sizeHint().height(), button.sizeHint().height()) + 2
    label.deleteLater()
    button.deleteLater()
    _HEADER_HEIGHTS[font.key()] = height
    return height


class CodeRow(ThemedRow):
    """A fenced code block: highlighted, its language shown, a Copy button; long lines scroll.

    The language is the fence's first word as the model wrote it, so it is shown as plain
    text: a fence opening with ```` ```<b>x</b> ```` shows the tags, never bold text.
    """

    kind = "code"

    def __init__(self, theme: Theme, parent: QWidget | None = None) -> None:
        super().__init__(theme, parent)
        self.segments: list[CodeRow] = [self]
        """The rows of one long code block shown in segments (this row among them)."""
        self._waiting = False
        """Whether the code is shown plain until its lexer and formatter are made."""
        self._language: QLabel | None = None
        self._copy: ActionButton | None = None
        """The header's widgets, made when the row is first shown on screen (see realize)."""
        self._realizing = False
        self._code = TextBlock(self, wrap=False)
        self._code.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self._scroll: QScrollArea | None = None
        """Made for code wider than the row (a scroll area costs 13 KB, and most code fits)."""
        self._apply_colors()

    @override
    def _apply_colors(self) -> None:
        palette = self.palette()
        palette.setColor(QPalette.ColorRole.Window, QColor(self.theme.code_background))
        palette.setColor(QPalette.ColorRole.Base, QColor(self.theme.code_background))
        fg = "#f8f8f2" if self.theme.dark else "#1f1f1f"
        palette.setColor(QPalette.ColorRole.WindowText, QColor(fg))
        self.setPalette(palette)
        if self._scroll is not None:
            self._scroll.viewport().setPalette(palette)
        self._code.setPalette(palette)
        if self._language is not None:
            muted = QPalette(palette)
            muted.setColor(QPalette.ColorRole.WindowText, QColor(self.theme.muted))
            self._language.setPalette(muted)

    # -- the header, made when first shown -----------------------------------------------------

    @override
    def realize(self) -> None:
        """Make the header's widgets (the language and Copy), if not made yet.

        A 1 MB reply has thousands of code rows, most never scrolled to: a label and a button
        each cost 10 KB. A streamed or small reply's rows make them at once; a row built in
        bulk makes them on the turn after it is first painted.
        """
        if self._copy is not None:
            return
        self._language = QLabel(self)
        self._language.setObjectName("codeLanguage")
        self._language.setTextFormat(Qt.TextFormat.PlainText)
        self._copy = ActionButton(self)
        self._copy.setObjectName("copyCode")
        self._copy.setIcon(icon("copy"))
        self._copy.setIconSize(QSize(ICON_PX - 2, ICON_PX - 2))
        self._copy.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self._copy.clicked.connect(self._on_copy)
        self.retranslate()
        self._apply_colors()
        self._show_header()
        self._place_header()

    @property
    def language_label(self) -> QLabel:
        """The code's language, over the code."""
        self.realize()
        assert self._language is not None
        return self._language

    @property
    def copy_button(self) -> ActionButton:
        """Copies the whole code block."""
        self.realize()
        assert self._copy is not None
        return self._copy

    def _show_header(self) -> None:
        if self._language is None or self._copy is None:
            return
        if self.block is not None:
            self._language.setText(
                self.block.language or QCoreApplication.translate("ChatView", "code")
            )
        # A later segment of a long block continues the first one's box: no header of its own.
        self._language.setVisible(self._first)
        self._copy.setVisible(self._first)

    def _place_header(self) -> None:
        if self._language is None or self._copy is None:
            return
        header = self._header_height()
        inner = self.width() - 2 * MARGIN
        copy = self._copy.sizeHint()
        self._language.setGeometry(MARGIN + 8, 1, inner - copy.width() - 8, header - 2)
        self._copy.setGeometry(MARGIN + inner - copy.width(), 1, copy.width(), header - 2)

    @property
    def code(self) -> str:
        """The code this row shows."""
        return self.block.code if self.block else ""

    @property
    def full_code(self) -> str:
        """The whole code block, across its segments (what Copy puts on the clipboard)."""
        return "".join(row.code for row in self.segments)

    @property
    def _first(self) -> bool:
        return self.block is None or self.block.part == 0

    def _gap(self) -> int:
        return 0 if self.block is not None and self.block.continued else 10

    @override
    def _render(self) -> None:
        assert self.block is not None
        self.renders += 1
        code = self.block.code.removesuffix("\n")
        highlighting = self._highlighting()
        if highlighting is None:
            body = html.escape(code, quote=False) + "\n"  # as Pygments writes plain text
        else:
            body = highlight(code, *highlighting)
        self._code.set_html(f'<pre style="margin: 0px;">{body}</pre>')
        self._show_header()
        # No padding where two segments of a long block meet.
        self._code.setContentsMargins(8, 4 if self._first else 0, 8, 0 if self._gap() == 0 else 6)
        if self._scroll is not None:
            # Wider than the row: its scroll area shows it at its own size. Otherwise the
            # row's resizeEvent sizes it, after a view that follows the reply has scrolled
            # (sized here first, its area was invalid then and Qt repainted the whole view).
            self._code.adjustSize()

    def _header_height(self) -> int:
        if not self._first:
            return 0
        return _header_height_in(self.font())

    def _scroller(self) -> QScrollArea:
        """The scroll area that code wider than the row scrolls sideways in (made once)."""
        if self._scroll is None:
            scroll = QScrollArea(self)
            scroll.setWidgetResizable(False)
            scroll.setFrameShape(QScrollArea.Shape.NoFrame)
            scroll.setFocusPolicy(Qt.FocusPolicy.NoFocus)
            scroll.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
            scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
            scroll.viewport().setPalette(self.palette())
            scroll.setWidget(self._code)
            scroll.show()
            self._scroll = scroll
        return self._scroll

    @override
    def row_height(self, width: int) -> int:
        inner = width - 2 * MARGIN
        hint = self._code.sizeHint()
        height = self._header_height() + hint.height()
        if hint.width() > inner:
            height += self._scroller().horizontalScrollBar().sizeHint().height()
        return height + self._gap()

    @override
    def resizeEvent(self, event: object) -> None:
        header = self._header_height()
        inner = self.width() - 2 * MARGIN
        self._place_header()
        below = self.height() - header - self._gap()
        if self._scroll is None and self._code.sizeHint().width() > inner:
            self._scroller()
        if self._scroll is not None:
            self._scroll.setGeometry(MARGIN, header, inner, below)
        else:
            self._code.setGeometry(MARGIN, header, inner, below)

    @override
    def paintEvent(self, event: object) -> None:
        if self._copy is None and self._first and not self._realizing:
            # Shown without its header's widgets (scrolled to): they are made next turn (a
            # widget is not made while painting).
            self._realizing = True
            QTimer.singleShot(0, self, self.realize)
        # Only the code's own rectangle is filled; the margins stay the view's colour.
        painter = QPainter(self)
        painter.fillRect(
            MARGIN,
            0,
            self.width() - 2 * MARGIN,
            self.height() - self._gap(),
            QColor(self.theme.code_background),
        )

    @override
    def retranslate(self) -> None:
        if self._copy is None or self._language is None:
            return  # made in the current language when shown
        self._copy.setText(QCoreApplication.translate("ChatView", "Copy"))
        self._copy.setToolTip(QCoreApplication.translate("ChatView", "Copy the code"))
        self._copy.setAccessibleName(QCoreApplication.translate("ChatView", "Copy the code"))
        if self.block is not None and not self.block.language:
            self._language.setText(QCoreApplication.translate("ChatView", "code"))

    def _made(self) -> tuple[Lexer, HtmlFormatter[str]] | None:
        assert self.block is not None
        lexer = shelf().lexer(self.block.language)
        formatter = shelf().formatter(self.theme.code_style)
        return None if lexer is None or formatter is None else (lexer, formatter)

    def _highlighting(self) -> tuple[Lexer, HtmlFormatter[str]] | None:
        """The language's lexer and the theme's formatter; None (plain) until both are made."""
        made = self._made()
        if made is None and not self._waiting:
            self._waiting = True
            shelf().ready.connect(self._on_highlighting_ready)
            # Asked again: they may have been made before we listened, the signal gone.
            made = self._made()
        if made is not None and self._waiting:
            self._waiting = False
            shelf().ready.disconnect(self._on_highlighting_ready)
        return made

    @Slot(str)
    def _on_highlighting_ready(self, _name: str) -> None:
        if self.block is None or self._made() is None:
            return
        self._render()
        self.height_changed.emit()  # highlighting can make a line wider (bold), never taller

    @override
    def dispose(self) -> None:
        super().dispose()
        if self in self.segments:
            self.segments.remove(self)
        self.segments = []

    def scroll_bar(self) -> QScrollBar:
        """The sideways scroll bar long lines get."""
        return self._scroller().horizontalScrollBar()

    @Slot()
    def _on_copy(self) -> None:
        QGuiApplication.clipboard().setText(self.full_code)

    @override
    def plain_text(self) -> str:
        return self.block.source.strip("\n") if self.block else ""

    @override
    def text_block(self) -> TextBlock:
        return self._code

    @override
    def controls(self) -> list[QWidget]:
        return [self.copy_button]

    @override
    def accessible_children(self) -> list[QWidget]:
        return [self.language_label, *self.controls()] if self._first else []

    @override
    def accessible_role(self) -> QAccessible.Role:
        return QAccessible.Role.Paragraph

    @override
    def accessible_description(self) -> str:
        language = self.block.language if self.block else ""
        code = QCoreApplication.translate("ChatView", "code")
        return ", ".join(part for part in (self.author, language or code) if part)
