"""The rows of the conversation view that show text: Markdown blocks, prompts, notes, thinking.

A conversation is shown as a column of rows: a speaker header (:mod:`app.ui.chat.rows.header`), one
row per top-level Markdown block of a reply (:class:`TextRow`, or :mod:`app.ui.chat.rows.code` for
code), a note. Each row knows its height for a width, and :class:`app.ui.chat.rows.stack.RowStack`
places the rows one under the other. Rows keep what they were rendered from, so a change of
theme re-renders them.

The other row kinds and the colours are importable from here too, as they were when they
all lived in this module.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QCoreApplication, Qt, Slot
from PySide6.QtGui import QAccessible, QColor, QFont, QPainter, QPaintEvent, QPalette
from PySide6.QtWidgets import QWidget
from typing_extensions import override

from app.markdown.stream import Block
from app.ui.chat.rows.action_button import ActionButton
from app.ui.chat.rows.base import MARGIN, Row, ThemedRow
from app.ui.chat.rows.code import CodeRow
from app.ui.chat.rows.header import HeaderRow
from app.ui.chat.rows.text_block import SAFE_LINK_SCHEMES, TextBlock, open_link
from app.ui.look.colors import Theme, theme_for

__all__ = [
    "MARGIN",
    "SAFE_LINK_SCHEMES",
    "CodeRow",
    "HeaderRow",
    "Row",
    "TextRow",
    "Theme",
    "ThinkingRow",
    "open_link",
    "theme_for",
]

FOLD_LINES = 12
"""A folded prompt shows this many lines."""

FOLD_SLACK_LINES = 3
"""A prompt at most this many lines longer than :data:`FOLD_LINES` is shown whole: folding
away two lines would hide more behind a button than it saves."""

PREVIEW_CHARS = 6000
"""A folded prompt lays out at most this much of its text (and at most the lines it may show):
laying out a 1 MB paste whole blocked the window for up to 0.77 s."""


CARD_SHARE = 0.8
"""A prompt's card is at most this share of the row's width (on the right: the reply's is all)."""

CARD_PAD = (12, 7)
"""The text's distance from the card's edge: sideways, and above and below."""

CARD_RADIUS = 14


def preview(text: str) -> str | None:
    """The beginning of a prompt enough to fill it folded, or None if that is all of it."""
    lines = FOLD_LINES + FOLD_SLACK_LINES + 1
    end = -1
    for _ in range(lines):
        end = text.find("\n", end + 1, PREVIEW_CHARS)
        if end < 0:
            break
    cut = end if end >= 0 else PREVIEW_CHARS
    return text[:cut] if cut < len(text) else None


class TextRow(ThemedRow):
    """A block of text: a reply's Markdown block (rich), or a prompt or note (plain).

    A long prompt is folded to :data:`FOLD_LINES` lines with a "Show all" button.

    Args:
        style: ``"reply"``, ``"thinking"`` (muted), ``"user"`` (tinted background, plain text),
            ``"note"`` or ``"error"`` (italic, plain text).
    """

    kind = "text"

    def __init__(self, theme: Theme, style: str, parent: QWidget | None = None) -> None:
        super().__init__(theme, parent)
        self.role = style
        self.label = TextBlock(self)
        self._plain = ""
        top, bottom = (2, 8) if style == "user" else (0, 10)
        self._margins = (MARGIN + (10 if style == "thinking" else 0), top, MARGIN, bottom)
        self._natural: int | None = None
        """A prompt's widest line unwrapped, in pixels (its card is no wider than needed)."""
        self.expanded = False
        """Whether a long prompt is shown whole (it is folded until the user opens it)."""
        self._foldable = False
        self.fold_button: ActionButton | None = None
        if style == "user":
            self.fold_button = ActionButton(self)
            self.fold_button.setObjectName("foldPrompt")
            self.fold_button.clicked.connect(self._toggle_fold)
            self.fold_button.hide()
        else:
            # Opaque on the view's own background: when the text changes, Qt paints the text
            # alone, not the row and the stack beneath it first (a reply's text is not on a
            # card; a prompt's is, so its text stays see-through).
            self.label.setAutoFillBackground(True)
            # Static: a reply's row and text grow downwards as lines are added, and what is
            # above the new line stays where it was. Qt then paints the strip a resize adds,
            # not the whole paragraph again with the row and the stack beneath it (a change of
            # width repaints the text whole: TextBlock.resizeEvent).
            self.setAttribute(Qt.WidgetAttribute.WA_StaticContents)
            self.label.setAttribute(Qt.WidgetAttribute.WA_StaticContents)
        if style in ("note", "error"):
            font = QFont(self.label.font())
            font.setItalic(True)
            self.label.setFont(font)
        self._apply_colors()
        self.retranslate()

    @override
    def _apply_colors(self) -> None:
        palette = self.label.palette()
        if self.role in ("note", "thinking"):
            palette.setColor(QPalette.ColorRole.WindowText, QColor(self.theme.muted))
        elif self.role == "error":
            palette.setColor(QPalette.ColorRole.WindowText, QColor(self.theme.error))
        self.label.setPalette(palette)
        if self.role == "user":
            self.update()  # the card's colour

    def set_plain(self, text: str) -> None:
        """Show text as it is (prompts and notes are never interpreted).

        A long prompt lays out only its beginning until the user unfolds it.
        """
        self._plain = text
        self._natural = None
        shown = preview(text) if self.fold_button is not None and not self.expanded else None
        self.label.set_plain(text, shown=shown)

    @override
    def set_block(self, block: Block) -> bool:
        old = self.block
        if old is not None and block.kind == old.kind and block.html == old.html:
            # What it shows is unchanged (a paragraph closing as the next begins: its source
            # gained the line break, its HTML did not). Laying it out and painting it again
            # would cost a whole paragraph's update for nothing.
            self.block = block
            return False
        return super().set_block(block)

    @override
    def _render(self, typed: str | None = None) -> None:
        assert self.block is not None
        self.renders += 1
        self.label.set_html(
            f"<html><body>{self.block.html}</body></html>", style_sheet=self.theme.css, typed=typed
        )

    def type_words(self, block: Block, added: str) -> bool:
        """Show the open paragraph grown by words typed at its end.

        Args:
            block: the paragraph's new block (:meth:`MarkdownStream.type_words`).
            added: what its HTML grew by at the end of its text.

        Returns:
            Whether the row's height may have changed (then the stack measures it again): not
            where the words fit on the paragraph's last line, as most do.
        """
        self.block = block
        if not added:
            return False  # spaces, held back until a word follows them
        self._render(typed=added)
        return self.label.resized

    def _bottom(self) -> int:
        # A segment of a long paragraph runs on into the next row without a paragraph gap.
        continued = self.block is not None and self.block.continued
        return 0 if continued else self._margins[3]

    def _natural_width(self) -> int:
        """The prompt's widest line, unwrapped (a long prompt is as wide as its card may be)."""
        if self._natural is None:
            text = self._plain
            if len(text) > PREVIEW_CHARS:
                self._natural = 1 << 20
            else:
                metrics = self.label.fontMetrics()
                lines = text.split("\n")
                self._natural = max((metrics.horizontalAdvance(line) for line in lines), default=0)
        return self._natural

    def _text_span(self, width: int) -> tuple[int, int]:
        """Where the text starts and how wide it is laid out, in a row ``width`` wide.

        A prompt sits in a card on the right, as wide as its lines up to :data:`CARD_SHARE`
        of the row; every other text runs from margin to margin.
        """
        left, _, right, _ = self._margins
        room = max(1, width - left - right)
        if self.role != "user":
            return left, room
        most = max(1, int(room * CARD_SHARE) - 2 * CARD_PAD[0])
        fold = self.fold_button.sizeHint().width() if self._foldable and self.fold_button else 0
        inner = min(most, max(self._natural_width() + 2, fold))
        return width - right - CARD_PAD[0] - inner, inner

    def _text_height(self, width: int) -> int:
        """The height of the text shown at ``width`` (folded, if it is folded)."""
        whole = self.label.height_for(self._text_span(width)[1])
        if self.fold_button is None:
            return whole
        line = self.label.line_height()
        self._foldable = self.label.cut or whole > (FOLD_LINES + FOLD_SLACK_LINES) * line
        return whole if self.expanded or not self._foldable else FOLD_LINES * line

    def _button_height(self) -> int:
        if self.fold_button is None or not self._foldable:
            return 0
        return self.fold_button.sizeHint().height() + 4

    def _padding(self) -> int:
        return CARD_PAD[1] if self.role == "user" else 0

    @override
    def row_height(self, width: int) -> int:
        _, top, _, _ = self._margins
        text = self._text_height(width)
        return text + top + 2 * self._padding() + self._bottom() + self._button_height()

    @override
    def resizeEvent(self, event: object) -> None:
        top = self._margins[1] + self._padding()
        text = self._text_height(self.width())
        left, width = self._text_span(self.width())
        self.label.setGeometry(left, top, width, text)
        if self.fold_button is not None:
            self.fold_button.setVisible(self._foldable)
            hint = self.fold_button.sizeHint()
            self.fold_button.setGeometry(left - 4, top + text + 2, hint.width(), hint.height())

    @override
    def paintEvent(self, event: QPaintEvent) -> None:
        if self.role != "user":
            return
        # The prompt's card: painted only when the row is (never per streamed update).
        label = self.label.geometry()
        pad_x, pad_y = CARD_PAD
        card = label.adjusted(-pad_x, -pad_y, pad_x, pad_y + self._button_height())
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(QColor(self.theme.prompt_background))
        painter.drawRoundedRect(card, CARD_RADIUS, CARD_RADIUS)

    @Slot()
    def _toggle_fold(self) -> None:
        self.expanded = not self.expanded
        if self.expanded and self.label.cut:
            self.label.set_plain(self._plain)  # the user asked for all of it: laid out once
        self.retranslate()
        self.height_changed.emit()

    @override
    def retranslate(self) -> None:
        if self.fold_button is None:
            return
        if self.expanded:
            self.fold_button.setText(QCoreApplication.translate("ChatView", "Show less"))
        else:
            self.fold_button.setText(QCoreApplication.translate("ChatView", "Show all"))

    @override
    def plain_text(self) -> str:
        if self.block is not None:
            return self.block.source.strip("\n")
        return self._plain

    @override
    def text_block(self) -> TextBlock:
        return self.label

    @override
    def controls(self) -> list[QWidget]:
        return [self.fold_button] if self.fold_button is not None else []

    @override
    def accessible_role(self) -> QAccessible.Role:
        return QAccessible.Role.Paragraph


class ThinkingRow(Row):
    """The header of a reasoning model's thinking: shows its duration and folds it away."""

    kind = "thinking"

    def __init__(self, on_toggle: Callable[[bool], None], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._on_toggle = on_toggle
        self.button = ActionButton(self)
        self.button.setObjectName("thinkingToggle")
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

    @override
    def controls(self) -> list[QWidget]:
        return [self.button]

    @override
    def accessible_name(self) -> str:
        return ""  # the button inside says it
