"""Which message's actions (Copy, Edit, the variants) are drawn: under the pointer, or focused."""

from __future__ import annotations

from shiboken6 import Shiboken

from app.ui.chat.message_keys import MessageKeys
from app.ui.chat.rows.base import Row
from app.ui.chat.rows.header import HeaderRow
from app.ui.chat.rows.stack import RowStack


class RevealedActions:
    """Draws the actions of at most one message per reason ("hover", "focus"), hiding the last.

    Args:
        stack: the conversation's rows.
        messages: which message a row or widget belongs to.
    """

    def __init__(self, stack: RowStack, messages: MessageKeys) -> None:
        self._stack = stack
        self._messages = messages
        self._revealed: dict[str, HeaderRow] = {}
        """The headers whose actions are drawn, by why: "hover", "focus"."""

    def reveal(self, reason: str, header: int | None) -> None:
        """Draw the actions of the message whose header is at ``header``, for ``reason``."""
        row = self._stack.rows[header] if header is not None else None
        before = self._revealed.pop(reason, None)
        if before is not None and before is not row and Shiboken.isValid(before):
            before.reveal_actions(reason, False)
        if isinstance(row, HeaderRow):
            self._revealed[reason] = row
            row.reveal_actions(reason, True)

    def row_entered(self, row: Row) -> None:
        """The pointer is over ``row``: its message's actions are drawn."""
        self.reveal("hover", self._messages.message_of(row))

    def forget(self) -> None:
        """The rows are gone (the view was cleared)."""
        self._revealed.clear()
