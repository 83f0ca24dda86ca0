"""The note under a reply's header saying how far the model is in reading the prompt."""

from __future__ import annotations

from collections.abc import Callable

from app.ui.chat.rows.stack import RowStack
from app.ui.chat.rows.text import TextRow
from app.ui.look.colors import Theme

__all__ = ["PromptProgress"]


class PromptProgress:
    """The prompt-progress row at the bottom of the conversation, updated in place.

    Args:
        stack: the conversation's rows.
        theme: the view's current theme (asked each time a row is made).
    """

    def __init__(self, stack: RowStack, theme: Callable[[], Theme]) -> None:
        self._stack = stack
        self._theme = theme
        self._row: TextRow | None = None

    def show(self, text: str) -> None:
        """Say ``text`` in the row (made at the bottom if there is none); empty removes it."""
        row = self._row
        if not text:
            if row is not None:
                self._row = None
                self._stack.remove_tail([row])
            return
        if row is None:
            row = self._row = TextRow(self._theme(), "note")
            row.setObjectName("promptProgress")
            row.set_plain(text)
            self._stack.append(row)
        else:
            row.set_plain(text)
            self._stack.refresh(row)

    def forget(self) -> None:
        """The rows were taken away: there is no progress row any more."""
        self._row = None
