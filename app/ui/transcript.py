"""The transcript: draws the session's conversation in the chat view, message by message."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

from PySide6.QtCore import QObject, Slot

from app.flow.pacing import Slicer
from app.flow.session import ChatSession
from app.store.conversation import Message
from app.ui.chat_view import ChatView
from app.ui.rows import HeaderRow

APP_NAME = "Floodgate"


class Transcript(QObject):
    """Keeps the chat view in step with the session's conversation.

    A whole conversation (another one, or another branch) is drawn from scratch a slice at a
    time, so opening a long one never freezes the window; a new reply is added at the end
    once everything before it is drawn. Each message's header gets its actions: Copy, Edit
    for a prompt, Regenerate for the last reply, and the arrows between variants.

    Args:
        session: what is drawn.
        view: where it is drawn.
        begin_edit: called with a prompt the user wants to edit.
        rendered: called when a whole conversation has been drawn.
    """

    def __init__(
        self,
        session: ChatSession,
        view: ChatView,
        begin_edit: Callable[[Message], None],
        rendered: Callable[[], None],
    ) -> None:
        super().__init__(view)
        self._session = session
        self._view = view
        self._begin_edit = begin_edit
        self._rendered = rendered
        self._last_reply_header: HeaderRow | None = None
        self._to_render: deque[Message] = deque()
        self.renderer = Slicer(self._render_slice, parent=self)
        session.conversation_loaded.connect(self.render_conversation)

    @property
    def rendering(self) -> bool:
        """Whether a conversation is still being drawn."""
        return bool(self._to_render)

    @Slot()
    def render_conversation(self) -> None:
        """Draw the session's conversation from scratch."""
        self.renderer.cancel()
        self._view.clear()
        self._last_reply_header = None
        self._to_render = deque(self._session.conversation.messages)
        self.renderer.start()

    def _render_slice(self, deadline: float) -> bool:
        """Draw messages until ``deadline``; returns whether the conversation is complete."""
        view = self._view
        while self._to_render:
            message = self._to_render.popleft()
            if message.role == "user":
                self._decorate(view.add_user_message(message.content), message)
            else:
                self._decorate(view.add_reply(message.model or APP_NAME, message.content), message)
            if message.note:
                view.add_note(message.note, error=message.status == "error")
            if self._to_render and time.perf_counter() > deadline:
                return False
        if self._last_reply_header is not None:
            self._last_reply_header.set_action_visible("regenerate", True)
        self._rendered()
        return True

    def _decorate(self, header: HeaderRow, message: Message) -> None:
        """Give a message's header its actions: variants, Edit or Regenerate."""
        session = self._session
        variants = session.conversation.variants(message)
        if len(variants) > 1:
            index = variants.index(message)

            def show_previous() -> None:
                session.show_variant(variants[index - 1])

            def show_next() -> None:
                session.show_variant(variants[index + 1])

            header.add_action("previous", show_previous).setEnabled(index > 0)
            header.add_action("next", show_next).setEnabled(index + 1 < len(variants))
            header.set_variant(index + 1, len(variants))
        if message.role == "user":
            header.add_action("edit", lambda: self._begin_edit(message))
        else:

            def regenerate() -> None:
                session.regenerate()

            header.add_action("regenerate", regenerate)
            header.set_action_visible("regenerate", False)  # only the last reply shows it
            self._last_reply_header = header

    def reply_started(self) -> None:
        """Add the new prompt and its (empty) reply below everything drawn so far."""
        # The turns before the new prompt first, all of them, so the reply lands after them.
        self.renderer.finish()
        session = self._session
        messages = session.conversation.messages
        prompt, reply = messages[-2], messages[-1]
        if self._last_reply_header is not None:
            self._last_reply_header.set_action_visible("regenerate", False)
        self._decorate(self._view.add_user_message(prompt.content), prompt)
        speaker = session.model.name if session.model else APP_NAME
        self._decorate(self._view.begin_reply(speaker), reply)

    def reply_ended(self, status: str, note: str) -> None:
        """Close the reply with its note; it is now the one Regenerate asks again."""
        self._view.end_reply(note, error=status == "error")
        if self._last_reply_header is not None:
            self._last_reply_header.set_action_visible("regenerate", True)
