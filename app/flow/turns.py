"""The user's turns in the conversation tree: a new prompt, an edited one, one asked again.

A conversation is a tree: an edited prompt or a reply asked again starts a branch beside the
old one, which stays reachable as a variant. :class:`Turns` puts each turn where it belongs,
shows the branch it is on, and hands the prompt to answer to the chat session.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from app.documents import Attachment
from app.flow.library import ConversationLibrary
from app.flow.words import say
from app.sentence import QT_TRANSLATE_NOOP
from app.store.conversation import Message
from app.store.text import storable_text


class Turns:
    """Adds the user's turns to the conversation on screen; none while a reply is on its way.

    Args:
        library: holds the conversation on screen.
        generating: whether a reply is on its way (or waiting for the model).
        answer: starts the reply to a prompt, the conversation's newest turn.
        notice: tells the user something that is not an error.
    """

    def __init__(
        self,
        library: ConversationLibrary,
        generating: Callable[[], bool],
        answer: Callable[[Message], None],
        notice: Callable[[str], object],
    ) -> None:
        self._library = library
        self._generating = generating
        self._answer = answer
        self._notice = notice

    def send(self, text: str, attachments: Sequence[Attachment] = ()) -> bool:
        """Send a prompt with the conversation so far.

        Args:
            text: the question (blank is fine when files are attached).
            attachments: files for the model to read before the question; the conversation
                keeps their text.

        Returns:
            False, and nothing is sent, if the prompt is blank (and nothing is attached) or a
            reply is still streaming.
        """
        if (not text.strip() and not attachments) or self._generating():
            return False
        kept = [a.to_dict() for a in attachments]
        conversation = self._library.conversation
        self._answer(conversation.add("user", _storable(text, self._notice), attachments=kept))
        return True

    def regenerate(self) -> bool:
        """Ask again for the last reply; the earlier one stays as a variant to flip back to."""
        conversation = self._library.conversation
        messages = conversation.messages
        if self._generating() or len(messages) < 2 or messages[-1].role != "assistant":
            return False
        prompt = messages[-2]
        self._show_path_to(prompt.parent_id)
        conversation.leaf_id = prompt.id
        self._answer(prompt)
        return True

    def edit_and_resend(
        self, message: Message, text: str, attachments: Sequence[Attachment] | None = None
    ) -> bool:
        """Send an edited prompt in place of ``message``; the old branch stays reachable.

        The edited prompt keeps ``message``'s attachments unless ``attachments`` replaces them.
        """
        kept = (
            [dict(a) for a in message.attachments]
            if attachments is None
            else [a.to_dict() for a in attachments]
        )
        if self._generating() or message.role != "user" or (not text.strip() and not kept):
            return False
        self._show_path_to(message.parent_id)
        prompt = self._library.conversation.add(
            "user",
            _storable(text, self._notice),
            parent_id=message.parent_id,
            after_leaf=False,
            attachments=kept,
        )
        self._answer(prompt)
        return True

    def show_variant(self, message: Message) -> bool:
        """Show another variant of a turn (and the turns that followed it)."""
        if self._generating():
            return False
        self._library.conversation.show_variant(message)
        self._library.save_conversation()
        self._library.conversation_loaded.emit()
        return True

    def _show_path_to(self, leaf_id: str | None) -> None:
        # The view shows the turns before the new prompt; reply_started then adds the rest.
        self._library.conversation.leaf_id = leaf_id
        self._library.conversation_loaded.emit()


def _storable(text: str, notice: Callable[[str], object]) -> str:
    """What the user gave, made storable (the same rule as every other way text enters)."""
    kept, replaced = storable_text(text)
    if replaced:
        notice(
            say(
                QT_TRANSLATE_NOOP(
                    "Floodgate",
                    "Some characters in your message could not be kept and were replaced with �.",
                )
            )
        )
    return kept
