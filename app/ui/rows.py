"""The rows of the conversation view, and the stack that places them.

A conversation is shown as a column of rows: a speaker header, one row per top-level Markdown
block of a reply, a code block, a note. Each row knows its height for a width, and
:class:`RowStack` places the rows one under the other itself (no QLayout), so when the last
row grows only that row and the stack's height change: the cost of an update does not depend
on how many rows are above it. Rows keep what they were rendered from, so a change of theme
re-renders them.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass

from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import TextLexer, get_lexer_by_name
from pygments.util import ClassNotFound
from PySide6.QtCore import QCoreApplication, QEvent, Qt, QUrl, Slot
from PySide6.QtGui import (
    QColor,
    QDesktopServices,
    QFont,
    QFontDatabase,
    QGuiApplication,
    QPainter,
    QPalette,
)
from PySide6.QtWidgets import QLabel, QScrollArea, QScrollBar, QToolButton, QWidget
from typing_extensions import override

from app.ui.markdown import Block

SAFE_LINK_SCHEMES = ("http", "https", "mailto")
"""The only links a click opens (in the system browser); other schemes are not followed."""

MARGIN = 14
"""Left and right margin of the conversation's text, in pixels."""


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

    @property
    def code_style(self) -> str:
        """The Pygments style for code blocks."""
        return "monokai" if self.dark else "default"

    @property
    def css(self) -> str:
        """The style sheet every rich-text row carries (Qt's rich text supports a CSS subset)."""
        return (
            "p, ul, ol, blockquote, table, pre, h1, h2, h3, h4, h5, h6"
            " { margin-top: 0px; margin-bottom: 0px; }"
            f" a {{ color: {self.link}; }}"
            f" .address, .image {{ color: {self.muted}; }}"
            f" code {{ font-family: monospace; background-color: {self.code_background}; }}"
            f" blockquote {{ color: {self.muted}; margin-left: 12px; }}"
            f" table.md {{ border-color: {self.grid}; border-style: solid; }}"
            f" th {{ background-color: {self.code_background}; }}"
        )


def theme_for(palette: QPalette) -> Theme:
    """The theme matching a palette (dark when its window colour is dark)."""
    window = palette.color(QPalette.ColorRole.Base)  # the conversation's background
    dark = window.lightness() < 128
    text = palette.color(QPalette.ColorRole.Text)
    mix = 0.4  # text faded 40 % toward the background: still above 4.5:1 in both themes
    muted = QColor.fromRgbF(
        text.redF() * (1 - mix) + window.redF() * mix,
        text.greenF() * (1 - mix) + window.greenF() * mix,
        text.blueF() * (1 - mix) + window.blueF() * mix,
    )
    return Theme(
        dark=dark,
        text=text.name(),
        muted=muted.name(),
        link=palette.color(QPalette.ColorRole.Link).name(),
        error="#ff6b5b" if dark else "#c0392b",
        code_background="#272822" if dark else "#f3f3f3",
        grid="#555555" if dark else "#c8c8c8",
    )


@Slot(str)
def open_link(href: str) -> None:
    """Open a link the user clicked in the system browser, if it is a web or mail link."""
    url = QUrl(href)
    if url.scheme().lower() in SAFE_LINK_SCHEMES:
        QDesktopServices.openUrl(url)


def _label(parent: QWidget) -> QLabel:
    label = QLabel(parent)
    label.setWordWrap(True)
    label.setTextInteractionFlags(
        Qt.TextInteractionFlag.TextSelectableByMouse | Qt.TextInteractionFlag.LinksAccessibleByMouse
    )
    label.setOpenExternalLinks(False)
    label.linkActivated.connect(open_link)
    label.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
    return label


class Row(QWidget):
    """One row of the conversation. Subclasses say how tall they are for a width."""

    kind = "row"
    renders = 0
    """How many times the row was rendered (tests check that final rows are left alone)."""

    def row_height(self, width: int) -> int:
        """Height the row needs at ``width`` pixels."""
        return self.sizeHint().height()

    def restyle(self, theme: Theme) -> None:
        """Render again with another theme."""

    def plain_text(self) -> str:
        """The row's text, as the user would copy it."""
        return ""

    def retranslate(self) -> None:
        """Set the row's own words (buttons, labels) in the current language."""

    @override
    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.LanguageChange:
            self.retranslate()


class _ThemedRow(Row):
    """A row rendered from a block with the current theme: a change of either renders again."""

    def __init__(self, theme: Theme, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.theme = theme
        self.block: Block | None = None

    def set_block(self, block: Block) -> bool:
        """Show a Markdown block; returns whether anything changed."""
        if block == self.block:
            return False
        self.block = block
        self._render()
        return True

    def _render(self) -> None:
        raise NotImplementedError

    def _apply_colors(self) -> None:
        raise NotImplementedError

    @override
    def restyle(self, theme: Theme) -> None:
        self.theme = theme
        self._apply_colors()
        if self.block is not None:
            self._render()


class TextRow(_ThemedRow):
    """A block of text: a reply's Markdown block (rich), or a prompt or note (plain).

    Args:
        style: ``"reply"``, ``"thinking"`` (muted), ``"user"`` (tinted background, plain text),
            ``"note"`` or ``"error"`` (italic, plain text).
    """

    kind = "text"

    def __init__(self, theme: Theme, style: str, parent: QWidget | None = None) -> None:
        super().__init__(theme, parent)
        self.role = style
        self.label = _label(self)
        self._plain = ""
        top, bottom = (8, 8) if style == "user" else (0, 10)
        self._margins = (MARGIN + (10 if style == "thinking" else 0), top, MARGIN, bottom)
        if style == "user":
            self.setAutoFillBackground(True)
            self.setBackgroundRole(QPalette.ColorRole.AlternateBase)
        if style in ("note", "error"):
            font = QFont(self.label.font())
            font.setItalic(True)
            self.label.setFont(font)
        self._apply_colors()

    @override
    def _apply_colors(self) -> None:
        palette = self.label.palette()
        if self.role in ("note", "thinking"):
            palette.setColor(QPalette.ColorRole.WindowText, QColor(self.theme.muted))
        elif self.role == "error":
            palette.setColor(QPalette.ColorRole.WindowText, QColor(self.theme.error))
        self.label.setPalette(palette)

    def set_plain(self, text: str) -> None:
        """Show text as it is (prompts and notes are never interpreted)."""
        self._plain = text
        self.label.setTextFormat(Qt.TextFormat.PlainText)
        self.label.setText(text)

    @override
    def _render(self) -> None:
        assert self.block is not None
        self.renders += 1
        self.label.setTextFormat(Qt.TextFormat.RichText)
        self.label.setText(
            f"<html><head><style>{self.theme.css}</style></head>"
            f"<body>{self.block.html}</body></html>"
        )

    def _bottom(self) -> int:
        # A segment of a long paragraph runs on into the next row without a paragraph gap.
        continued = self.block is not None and self.block.continued
        return 0 if continued else self._margins[3]

    @override
    def row_height(self, width: int) -> int:
        left, top, right, _ = self._margins
        bottom = self._bottom()
        return self.label.heightForWidth(max(1, width - left - right)) + top + bottom

    @override
    def resizeEvent(self, event: object) -> None:
        left, top, right, _ = self._margins
        bottom = self._bottom()
        self.label.setGeometry(left, top, self.width() - left - right, self.height() - top - bottom)

    @override
    def plain_text(self) -> str:
        if self.block is not None:
            return self.block.source.strip("\n")
        return self._plain


@functools.lru_cache(maxsize=64)
def _lexer(language: str) -> Lexer:
    lexer: Lexer = TextLexer()
    with contextlib.suppress(ClassNotFound):
        lexer = get_lexer_by_name(language) if language else lexer
    return lexer


@functools.lru_cache(maxsize=4)
def _formatter(style: str) -> HtmlFormatter[str]:
    return HtmlFormatter(nowrap=True, noclasses=True, style=style)


class CodeRow(_ThemedRow):
    """A fenced code block: highlighted, its language shown, a Copy button; long lines scroll."""

    kind = "code"

    def __init__(self, theme: Theme, parent: QWidget | None = None) -> None:
        super().__init__(theme, parent)
        self.segments: list[CodeRow] = [self]
        """The rows of one long code block shown in segments (this row among them)."""
        self.language_label = QLabel(self)
        self.language_label.setObjectName("codeLanguage")
        self.copy_button = QToolButton(self)
        self.copy_button.setObjectName("copyCode")
        self.copy_button.setAutoRaise(True)
        self.retranslate()
        self.copy_button.clicked.connect(self._on_copy)
        self._code = QLabel()
        self._code.setTextFormat(Qt.TextFormat.RichText)
        self._code.setWordWrap(False)
        self._code.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self._code.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self._scroll = QScrollArea(self)
        self._scroll.setWidget(self._code)
        self._scroll.setWidgetResizable(False)
        self._scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        self._scroll.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self._scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        self._apply_colors()

    @override
    def _apply_colors(self) -> None:
        palette = self.palette()
        palette.setColor(QPalette.ColorRole.Window, QColor(self.theme.code_background))
        palette.setColor(QPalette.ColorRole.Base, QColor(self.theme.code_background))
        fg = "#f8f8f2" if self.theme.dark else "#1f1f1f"
        palette.setColor(QPalette.ColorRole.WindowText, QColor(fg))
        self.setPalette(palette)
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
        body = highlight(code, _lexer(self.block.language), _formatter(self.theme.code_style))
        self._code.setText(f'<pre style="margin: 0px;">{body}</pre>')
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

    @override
    def row_height(self, width: int) -> int:
        inner = width - 2 * MARGIN
        height = self._header_height() + self._code.sizeHint().height()
        if self._code.sizeHint().width() > inner:
            height += self._scroll.horizontalScrollBar().sizeHint().height()
        return height + self._gap()

    @override
    def resizeEvent(self, event: object) -> None:
        header = self._header_height()
        inner = self.width() - 2 * MARGIN
        copy = self.copy_button.sizeHint()
        self.language_label.setGeometry(MARGIN + 8, 1, inner - copy.width() - 8, header - 2)
        self.copy_button.setGeometry(MARGIN + inner - copy.width(), 1, copy.width(), header - 2)
        self._scroll.setGeometry(MARGIN, header, inner, self.height() - header - self._gap())

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
        if self.block is not None and not self.block.language:
            self.language_label.setText(QCoreApplication.translate("ChatView", "code"))

    def scroll_bar(self) -> QScrollBar:
        """The sideways scroll bar long lines get."""
        return self._scroll.horizontalScrollBar()

    @Slot()
    def _on_copy(self) -> None:
        QGuiApplication.clipboard().setText(self.full_code)

    @override
    def plain_text(self) -> str:
        return self.block.source.strip("\n") if self.block else ""


def _action_text(key: str) -> tuple[str, str]:
    """The label and tooltip of a message action, in the current language."""
    # Spelled out in full each time: lupdate only finds literal QCoreApplication.translate calls.
    if key == "copy":
        return (
            QCoreApplication.translate("ChatView", "Copy"),
            QCoreApplication.translate(
                "ChatView", "Copy the whole message (Markdown as the model wrote it)"
            ),
        )
    if key == "edit":
        return (
            QCoreApplication.translate("ChatView", "Edit"),
            QCoreApplication.translate("ChatView", "Edit this message and send it again"),
        )
    if key == "regenerate":
        return (
            QCoreApplication.translate("ChatView", "Regenerate"),
            QCoreApplication.translate(
                "ChatView", "Ask for this reply again; this one stays as a variant"
            ),
        )
    if key == "previous":
        return "‹", QCoreApplication.translate("ChatView", "Previous variant")
    return "›", QCoreApplication.translate("ChatView", "Next variant")


class HeaderRow(Row):
    """The speaker's name above a message, with its actions: Copy, and any others given."""

    kind = "header"

    def __init__(
        self, speaker: str, copy_text: Callable[[], str], parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self._copy_text = copy_text
        self._name = QLabel(speaker, self)
        font = QFont(self._name.font())
        font.setBold(True)
        self._name.setFont(font)
        self._counter = QLabel(self)
        self._counter.hide()
        self.buttons: dict[str, QToolButton] = {}
        self.copy_button = self.add_action("copy", self._on_copy)
        self.copy_button.setObjectName("copyMessage")
        self.speaker = speaker

    def add_action(self, key: str, callback: Callable[[], None]) -> QToolButton:
        """Add a button (``"edit"``, ``"regenerate"``, ``"previous"``, ``"next"``)."""
        button = QToolButton(self)
        button.setAutoRaise(True)
        button.clicked.connect(lambda _=False: callback())
        self.buttons[key] = button
        self._retranslate_button(key)
        button.show()
        self._place()
        return button

    def set_variant(self, index: int, count: int) -> None:
        """Show which of ``count`` variants this message is (1-based ``index``)."""
        self._counter.setText(f"{index}/{count}")
        self._counter.setVisible(count > 1)
        self._place()

    def set_action_visible(self, key: str, visible: bool) -> None:
        """Show or hide one of the actions."""
        if key in self.buttons:
            self.buttons[key].setVisible(visible)
            self._place()

    def _retranslate_button(self, key: str) -> None:
        text, tip = _action_text(key)
        self.buttons[key].setText(text)
        self.buttons[key].setToolTip(tip)

    @override
    def row_height(self, width: int) -> int:
        return max(self._name.sizeHint().height(), self.copy_button.sizeHint().height()) + 14

    @override
    def resizeEvent(self, event: object) -> None:
        self._place()

    def _place(self) -> None:
        if "copy" not in self.buttons:
            return  # still being built
        top = 12
        height = self.buttons["copy"].sizeHint().height()
        right = self.width() - MARGIN
        # Right to left: Copy, then the other actions, with the variant counter between ‹ and ›.
        order = ["copy", "regenerate", "edit", "next", "counter", "previous"]
        for key in order:
            widget: QWidget | None = self._counter if key == "counter" else self.buttons.get(key)
            if widget is None or widget.isHidden():
                continue
            width = widget.sizeHint().width()
            right -= width
            widget.setGeometry(right, top, width, height)
            right -= 2
        self._name.setGeometry(MARGIN, top, max(0, right - MARGIN), height)

    @override
    def retranslate(self) -> None:
        for key in self.buttons:
            self._retranslate_button(key)
        self._place()

    @Slot()
    def _on_copy(self) -> None:
        QGuiApplication.clipboard().setText(self._copy_text())

    @override
    def plain_text(self) -> str:
        return self.speaker


class ThinkingRow(Row):
    """The header of a reasoning model's thinking: shows its duration and folds it away."""

    kind = "thinking"

    def __init__(self, on_toggle: Callable[[bool], None], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._on_toggle = on_toggle
        self.button = QToolButton(self)
        self.button.setObjectName("thinkingToggle")
        self.button.setAutoRaise(True)
        self.button.setCheckable(True)
        self.button.setChecked(True)
        self.button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.button.setArrowType(Qt.ArrowType.DownArrow)
        self.button.toggled.connect(self._toggled)
        self.seconds: float | None = None
        self.done = False
        self.retranslate()

    @override
    def retranslate(self) -> None:
        if not self.done:
            self.button.setText(QCoreApplication.translate("ChatView", "Thinking…"))
        elif self.seconds is None:
            self.button.setText(QCoreApplication.translate("ChatView", "Thoughts"))
        else:
            self.button.setText(
                QCoreApplication.translate("ChatView", "Thought for {seconds} s").format(
                    seconds=f"{self.seconds:.1f}"
                )
            )
        self._place()

    def set_done(self, seconds: float | None) -> None:
        """Thinking ended after ``seconds`` (None: not known); fold it away."""
        self.done = True
        self.seconds = seconds
        self.button.setChecked(False)
        self.retranslate()

    @property
    def expanded(self) -> bool:
        """Whether the thinking text is shown."""
        return self.button.isChecked()

    @Slot(bool)
    def _toggled(self, expanded: bool) -> None:
        self.button.setArrowType(Qt.ArrowType.DownArrow if expanded else Qt.ArrowType.RightArrow)
        self._on_toggle(expanded)

    @override
    def row_height(self, width: int) -> int:
        return self.button.sizeHint().height() + 6

    @override
    def resizeEvent(self, event: object) -> None:
        self._place()

    def _place(self) -> None:
        hint = self.button.sizeHint()
        self.button.setGeometry(MARGIN - 4, 0, hint.width() + 8, hint.height())

    @override
    def plain_text(self) -> str:
        return self.button.text()


class RowStack(QWidget):
    """Places rows one under the other, at the view's width.

    Positions are kept as running tops, so a change in a row's height moves only the rows
    below it. A reply grows at the bottom, so an update re-places one row.

    A new width (the window was resized) re-measures the rows on screen at once and leaves the
    others stale; :meth:`measure_stale` measures those a slice at a time, so a long
    conversation never stalls the window on a resize.
    """

    SYNC_ROWS = 120
    """Up to this many rows, a new width is laid out at once (it takes a few milliseconds)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.rows: list[Row] = []
        self._tops: list[int] = []
        self._heights: list[int] = []
        self._measured_at: list[int] = []
        self._index: dict[int, int] = {}
        self._hidden: set[int] = set()

    @property
    def tops(self) -> list[int]:
        """Where each row starts, in the stack's coordinates."""
        return self._tops

    @property
    def stale(self) -> int:
        """Rows not measured at the current width yet."""
        width = self.width()
        return sum(1 for w in self._measured_at if w != width)

    def _measure(self, i: int) -> int:
        row = self.rows[i]
        width = self.width()
        self._measured_at[i] = width
        # Folded away, or not shown yet (measured when the view gets its width): no height.
        height = 0 if id(row) in self._hidden or width <= 0 else row.row_height(width)
        self._heights[i] = height
        return height

    def _bottom(self) -> int:
        return self._tops[-1] + self._heights[-1] if self.rows else 0

    def row_at(self, y: int) -> int:
        """The index of the row at height ``y`` (the last one if ``y`` is below all)."""
        return max(0, bisect.bisect_right(self._tops, y) - 1)

    def append(self, row: Row) -> None:
        """Add a row at the bottom."""
        row.setParent(self)
        self._index[id(row)] = len(self.rows)
        self._tops.append(self._bottom())
        self.rows.append(row)
        self._heights.append(0)
        self._measured_at.append(0)
        self._measure(len(self.rows) - 1)
        row.setGeometry(0, self._tops[-1], self.width(), self._heights[-1])
        row.show()
        self.resize(self.width(), self._bottom())

    def refresh(self, row: Row) -> None:
        """Re-measure a row whose content changed; moves the rows under it if it grew."""
        i = self._index[id(row)]
        before = self._heights[i]
        if self._measure(i) != before:
            self._place(i)
        else:
            row.setGeometry(0, self._tops[i], self.width(), before)

    def set_visible(self, rows: list[Row], visible: bool) -> None:
        """Fold rows away (height 0) or show them again."""
        if not rows:
            return
        for row in rows:
            if visible:
                self._hidden.discard(id(row))
            else:
                self._hidden.add(id(row))
            row.setVisible(visible)
            self._measure(self._index[id(row)])
        self._place(min(self._index[id(row)] for row in rows))

    def remove_tail(self, rows: list[Row]) -> None:
        """Remove rows that are the last ones in the stack."""
        if not rows:
            return
        first = min(self._index[id(row)] for row in rows)
        assert first + len(rows) == len(self.rows), "only the bottom rows can be removed"
        for row in self.rows[first:]:
            del self._index[id(row)]
            self._hidden.discard(id(row))
            row.hide()
            row.deleteLater()
        del self.rows[first:], self._tops[first:], self._heights[first:]
        del self._measured_at[first:]
        self.resize(self.width(), self._bottom())

    def clear(self) -> None:
        """Remove every row."""
        if self.rows:
            self.remove_tail(list(self.rows))

    def set_width(self, width: int, shown_from: int = 0, shown_to: int = 0) -> int:
        """Take a new width (window resize, theme change); returns how many rows are stale.

        Rows between ``shown_from`` and ``shown_to`` (what the view shows, in the stack's
        coordinates) are measured at once; the others wait for :meth:`measure_stale`, unless
        there are few rows.
        """
        self.resize(width, self.height())
        self._measured_at = [0] * len(self.rows)  # everything is stale now, even at one width
        if not self.rows:
            return 0
        if len(self.rows) <= self.SYNC_ROWS:
            shown = range(len(self.rows))
        else:
            shown = range(self.row_at(shown_from), self.row_at(shown_to) + 1)
        for i in shown:
            self._measure(i)
        self._place(0)
        return self.stale

    def measure_stale(self, budget: float) -> int:
        """Measure stale rows for about ``budget`` seconds; returns how many are left."""
        deadline = time.perf_counter() + budget
        width = self.width()
        first = None
        for i, measured in enumerate(self._measured_at):
            if measured == width:
                continue
            first = i if first is None else first
            self._measure(i)
            if time.perf_counter() > deadline:
                break
        if first is not None:
            self._place(first)
        return self.stale

    def _place(self, start: int) -> None:
        """Position rows from ``start`` on; a stale row keeps its old size until measured."""
        width = self.width()
        for i in range(start, len(self.rows)):
            if i > start:
                self._tops[i] = self._tops[i - 1] + self._heights[i - 1]
            if self._measured_at[i] == width:
                self.rows[i].setGeometry(0, self._tops[i], width, self._heights[i])
            else:
                self.rows[i].move(0, self._tops[i])
        self.resize(width, self._bottom())
