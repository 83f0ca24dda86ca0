"""What every row of the conversation is: a widget that knows its height for a width.

The kinds of rows (:mod:`app.ui.chat.rows.text`, :mod:`app.ui.chat.rows.code`,
:mod:`app.ui.chat.rows.header`) build on :class:`Row`; :class:`app.ui.chat.rows.stack.RowStack`
places them. A row also says what the view's selection, keyboard navigation and accessibility
tree need from it: its selectable text, its buttons, and how a screen reader names it.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QEvent, Signal
from PySide6.QtGui import QAccessible, QEnterEvent
from PySide6.QtWidgets import QWidget
from typing_extensions import override

from app.markdown.stream import Block
from app.ui.chat.rows.text_block import TextBlock
from app.ui.look.colors import Theme

MARGIN = 14
"""Left and right margin of the conversation's text, in pixels."""


class Row(QWidget):
    """One row of the conversation. Subclasses say how tall they are for a width.

    Signals:
        height_changed(): the row's height changed by itself (a prompt folded or unfolded).
    """

    height_changed = Signal()

    kind = "row"
    renders = 0
    """How many times the row was rendered (tests check that final rows are left alone)."""

    author = ""
    """Who wrote the message this row belongs to ("You", a model's name; "" for notes)."""

    entered: Callable[[Row], None] | None = None
    """Told when the pointer enters the row (the view shows the hovered message's actions)."""

    def row_height(self, width: int) -> int:
        """Height the row needs at ``width`` pixels."""
        return self.sizeHint().height()

    def restyle(self, theme: Theme) -> None:
        """Render again with another theme."""

    def plain_text(self) -> str:
        """The row's text, as the user would copy it."""
        return ""

    def copy_separator(self) -> str:
        """What separates this row's text from the next row's in a copied selection."""
        return "\n\n"

    def text_block(self) -> TextBlock | None:
        """The row's selectable text, if it has any."""
        return None

    def controls(self) -> list[QWidget]:
        """The row's buttons, in the order Tab visits them."""
        return []

    def accessible_children(self) -> list[QWidget]:
        """The widgets a screen reader finds inside the row, in reading order."""
        return self.controls()

    def accessible_role(self) -> QAccessible.Role:
        """What a screen reader calls the row."""
        return QAccessible.Role.Grouping

    def accessible_name(self) -> str:
        """What a screen reader reads for the row (its text; computed only when asked)."""
        block = self.text_block()
        return block.plain_text() if block is not None else ""

    def accessible_description(self) -> str:
        """Who wrote the row's text, for a screen reader."""
        return self.author

    def retranslate(self) -> None:
        """Set the row's own words (buttons, labels) in the current language."""

    def realize(self) -> None:
        """Make the widgets a row puts off until it is shown (a code block's header)."""

    def dispose(self) -> None:
        """The row is about to be deleted: drop what could hold it in a reference cycle.

        Rows are built while the collector is kept off them (see
        :func:`app.flow.pacing.keep_built`), so a row left in a cycle would stay in memory
        until the next cleared conversation. Cheap, and safe to call more than once.
        """
        self.entered = None
        block = self.text_block()
        if block is not None:
            block.forget()

    @override
    def enterEvent(self, event: QEnterEvent) -> None:
        super().enterEvent(event)
        if self.entered is not None:
            self.entered(self)

    @override
    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.LanguageChange:
            self.retranslate()


class ThemedRow(Row):
    """A row rendered from a block with the current theme: a change of either renders again."""

    def __init__(self, theme: Theme, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.theme = theme
        self.block: Block | None = None

    def set_block(self, block: Block) -> bool:
        """Show a Markdown block; returns whether anything changed."""
        if block is self.block:
            return False
        if block == self.block:
            self.block = block  # the stream's own object: the next update passes by identity
            return False
        self.block = block
        self._render()
        return True

    def _render(self) -> None:
        raise NotImplementedError

    def _apply_colors(self) -> None:
        raise NotImplementedError

    @override
    def copy_separator(self) -> str:
        # The segments of one long block run on from one row into the next.
        return "\n" if self.block is not None and self.block.continued else "\n\n"

    @override
    def restyle(self, theme: Theme) -> None:
        self.theme = theme
        self._apply_colors()
        if self.block is not None:
            self._render()
