"""A fenced code block in the conversation: highlighted, its language shown, a Copy button."""

from __future__ import annotations

import functools

from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from PySide6.QtCore import QCoreApplication, Qt, Slot
from PySide6.QtGui import QAccessible, QColor, QFontDatabase, QGuiApplication, QPainter, QPalette
from PySide6.QtWidgets import QLabel, QScrollArea, QScrollBar, QWidget
from typing_extensions import override

from app.ui.action_button import ActionButton
from app.ui.colors import Theme
from app.ui.lexers import PLAIN, shelf
from app.ui.row_base import MARGIN, ThemedRow
from app.ui.text_block import TextBlock


@functools.lru_cache(maxsize=4)
def _formatter(style: str) -> HtmlFormatter[str]:
    return HtmlFormatter(nowrap=True, noclasses=True, style=style)


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
        """Whether the code is shown plain until its language's lexer is ready."""
        self.language_label = QLabel(self)
        self.language_label.setObjectName("codeLanguage")
        self.language_label.setTextFormat(Qt.TextFormat.PlainText)
        self.copy_button = ActionButton(self)
        self.copy_button.setObjectName("copyCode")
        self.retranslate()
        self.copy_button.clicked.connect(self._on_copy)
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
        muted = QPalette(palette)
        muted.setColor(QPalette.ColorRole.WindowText, QColor(self.theme.muted))
        self.language_label.setPalette(muted)

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
        self.language_label.setText(
            self.block.language or QCoreApplication.translate("ChatView", "code")
        )
        code = self.block.code.removesuffix("\n")
        body = highlight(code, self._lexer(), _formatter(self.theme.code_style))
        self._code.set_html(f'<pre style="margin: 0px;">{body}</pre>')
        # A later segment of a long block continues the first one's box: no header of its own,
        # and no padding where two segments meet.
        self.language_label.setVisible(self._first)
        self.copy_button.setVisible(self._first)
        self._code.setContentsMargins(8, 4 if self._first else 0, 8, 0 if self._gap() == 0 else 6)
        self._code.adjustSize()

    def _header_height(self) -> int:
        if not self._first:
            return 0
        label, button = self.language_label.sizeHint(), self.copy_button.sizeHint()
        return max(label.height(), button.height()) + 2

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
        copy = self.copy_button.sizeHint()
        self.language_label.setGeometry(MARGIN + 8, 1, inner - copy.width() - 8, header - 2)
        self.copy_button.setGeometry(MARGIN + inner - copy.width(), 1, copy.width(), header - 2)
        below = self.height() - header - self._gap()
        if self._scroll is None and self._code.sizeHint().width() > inner:
            self._scroller()
        if self._scroll is not None:
            self._scroll.setGeometry(MARGIN, header, inner, below)
        else:
            self._code.setGeometry(MARGIN, header, inner, below)

    @override
    def paintEvent(self, event: object) -> None:
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
        self.copy_button.setText(QCoreApplication.translate("ChatView", "Copy"))
        self.copy_button.setToolTip(QCoreApplication.translate("ChatView", "Copy the code"))
        self.copy_button.setAccessibleName(QCoreApplication.translate("ChatView", "Copy the code"))
        if self.block is not None and not self.block.language:
            self.language_label.setText(QCoreApplication.translate("ChatView", "code"))

    def _lexer(self) -> Lexer:
        """The language's lexer; plain until it is made, off the UI thread."""
        assert self.block is not None
        language = self.block.language
        lexer = shelf().lexer(language)
        if lexer is None and not self._waiting:
            self._waiting = True
            shelf().ready.connect(self._on_lexer_ready)
            # Asked again: it may have been made before we listened, its signal gone.
            lexer = shelf().lexer(language)
        if lexer is not None and self._waiting:
            self._waiting = False
            shelf().ready.disconnect(self._on_lexer_ready)
        return lexer or PLAIN

    @Slot(str)
    def _on_lexer_ready(self, _language: str) -> None:
        if self.block is None or shelf().lexer(self.block.language) is None:
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
