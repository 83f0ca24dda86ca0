"""The conversation library: the conversation on screen, and the saved ones behind it."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import QObject, Signal, Slot

from app.flow.archive import Archive
from app.flow.words import say, say_sentence
from app.sentence import QT_TRANSLATE_NOOP, Sentence
from app.store.conversation import Conversation, Message
from app.store.database import ConversationSummary
from app.store.exchange import NotAConversationError, read_json, to_json, to_markdown


class ConversationLibrary(QObject):
    """Lists, opens, saves, renames, deletes, exports and imports conversations.

    Holds the :attr:`conversation` on screen. Every read and write runs on the archive's
    thread; without an archive (tests, the bench) conversations live in memory only.

    Signals:
        conversation_loaded(): another conversation (or another branch of this one) is shown:
            render :attr:`conversation` again from scratch.
        conversations_changed(): the list of saved conversations changed.
        notice(str): something the user should know (a failed save, a failed import).
    """

    conversation_loaded = Signal()
    conversations_changed = Signal()
    notice = Signal(str)
    saving_failed = Signal(str)
    saving_recovered = Signal(str)
    _archive_failed = Signal(Sentence)
    _archive_recovered = Signal(Sentence)
    _archive_notice = Signal(Sentence)

    def __init__(self, archive: Archive | None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.archive = archive
        self.conversation = Conversation()
        self.default_system_prompt = ""
        if archive is not None:
            # Called on the archive's thread: the signals carry them to this one.
            archive.on_failure = self._archive_failed.emit
            archive.on_recovered = self._archive_recovered.emit
            archive.on_notice = self._archive_notice.emit
            self._archive_failed.connect(self._on_archive_failed)
            self._archive_recovered.connect(self._on_archive_recovered)
            self._archive_notice.connect(self._on_archive_notice)

    # -- saving ---------------------------------------------------------------------------------

    def save_messages(self, *messages: Message) -> None:
        """Save ``messages`` of the current conversation (copies: they go on changing)."""
        if self.archive is None or not messages:
            return
        snapshot = [replace(m) for m in messages]
        self.archive.submit(self.archive.database.save_messages, self.conversation.id, snapshot)

    def save_conversation(self, *messages: Message) -> None:
        """Save the conversation's own fields, and ``messages``; announces the change."""
        conversation = self.conversation
        if self.archive is None or not conversation.nodes:
            return  # a new chat is saved with its first prompt, not before
        conversation.updated_at = time.time()
        self.archive.submit(
            self.archive.database.save_conversation, replace(conversation, nodes={})
        )
        self.save_messages(*messages)
        self.conversations_changed.emit()

    @property
    def saving_fails(self) -> bool:
        """Whether the history cannot be written now (what is on screen is only in memory)."""
        return self.archive is not None and self.archive.failing

    @Slot(Sentence)
    def _on_archive_failed(self, sentence: Sentence) -> None:
        self.saving_failed.emit(say_sentence(sentence))

    @Slot(Sentence)
    def _on_archive_recovered(self, sentence: Sentence) -> None:
        self._write_again()
        self.saving_recovered.emit(say_sentence(sentence))

    @Slot(Sentence)
    def _on_archive_notice(self, sentence: Sentence) -> None:
        # The file was deleted, replaced or damaged and made again: what is on screen goes in.
        self._write_again()
        self.notice.emit(say_sentence(sentence))

    def _write_again(self) -> None:
        if self.archive is not None and self.conversation.nodes:
            self.archive.rewrite([self.conversation])

    # -- the conversation on screen -------------------------------------------------------------

    def start_new(self) -> None:
        """Show a new, empty chat (the caller has stopped any reply)."""
        self.conversation = Conversation(system_prompt=self.default_system_prompt)
        self.conversation_loaded.emit()

    def show(self, conversation: Conversation) -> None:
        """Show ``conversation`` (the caller has stopped any reply)."""
        self.conversation = conversation
        self.conversation_loaded.emit()

    async def load(self, conversation_id: str) -> Conversation | None:
        """A saved conversation; a reply cut off by a crash is marked as such."""
        if self.archive is None:
            return None
        conversation = await self.archive.call(self.archive.database.load, conversation_id)
        if conversation is None:
            return None
        for message in conversation.nodes.values():
            if message.status == "streaming":
                # Floodgate was killed while this reply streamed: what was saved is kept.
                message.status = "stopped"
                message.note = say(
                    QT_TRANSLATE_NOOP(
                        "Floodgate", "Interrupted: Floodgate closed before this reply ended."
                    )
                )
        return conversation

    def set_settings(self, own: dict[str, object]) -> None:
        """Give this conversation its own sampling settings (empty: the app's)."""
        self.conversation.settings = dict(own)
        self.save_conversation()

    def set_system_prompt(self, text: str) -> None:
        """The system prompt of this conversation (and of new ones, as their default)."""
        self.conversation.system_prompt = text
        self.default_system_prompt = text
        self.save_conversation()

    # -- the saved ones -------------------------------------------------------------------------

    async def list(self, query: str = "") -> list[ConversationSummary]:
        """Saved conversations, newest first, or those matching ``query``."""
        if self.archive is None:
            return []
        return await self.archive.call(self.archive.database.list_conversations, query)

    def rename(self, conversation_id: str, title: str) -> None:
        """Give a conversation a new title."""
        title = " ".join(title.split())
        if not title:
            return
        if conversation_id == self.conversation.id:
            self.conversation.title = title
        if self.archive is not None:
            self.archive.submit(self.archive.database.rename, conversation_id, title)
        self.conversations_changed.emit()

    def delete(self, conversation_id: str) -> None:
        """Delete a saved conversation (the caller moves off it first)."""
        if self.archive is not None:
            self.archive.submit(self.archive.database.delete, conversation_id)
        self.conversations_changed.emit()

    def undelete(self, conversation_id: str) -> None:
        """Bring back a deleted conversation."""
        if self.archive is not None:
            self.archive.submit(self.archive.database.undelete, conversation_id)
        self.conversations_changed.emit()

    async def export(self, path: Path, kind: str) -> bool:
        """Write the conversation to ``path`` as ``"markdown"`` or ``"json"``.

        On a thread of its own, not the archive's: export is the way out when the history
        cannot be written, so it must not wait behind a stuck disk.

        Returns:
            Whether the file was written (if not, a notice says why).
        """
        conversation = self.conversation
        text = to_json(conversation) if kind == "json" else to_markdown(conversation)
        try:
            await asyncio.to_thread(_write_text, path, text)
        except OSError as exc:
            self.notice.emit(
                say(
                    QT_TRANSLATE_NOOP("Floodgate", "{name} could not be written: {reason}"),
                    name=path.name,
                    reason=exc.strerror or exc,
                )
            )
            return False
        return True

    async def read_import(self, path: Path) -> Conversation | None:
        """Read and check a conversation exported as JSON; None (and a notice) if it cannot be."""
        try:
            text = await asyncio.to_thread(path.read_text, encoding="utf-8")
            imported = read_json(text)
        except NotAConversationError as exc:
            self._cannot_import(path, say_sentence(exc.sentence))
            return None
        except (OSError, UnicodeDecodeError) as exc:
            self._cannot_import(path, str(exc))
            return None
        if imported.replaced:
            self.notice.emit(
                say(
                    QT_TRANSLATE_NOOP(
                        "Floodgate",
                        "Some characters in {name} could not be kept and were replaced with �.",
                    ),
                    name=path.name,
                )
            )
        return imported.conversation

    def _cannot_import(self, path: Path, reason: str) -> None:
        self.notice.emit(
            say(
                QT_TRANSLATE_NOOP("Floodgate", "{name} could not be imported: {reason}"),
                name=path.name,
                reason=reason,
            )
        )

    async def keep_imported(self, conversation: Conversation) -> None:
        """Save an imported conversation and show it (the caller has stopped any reply)."""
        self.conversation = conversation
        if self.archive is not None:
            # Submitted, not awaited: a failure is reported like any save's, and kept.
            self.archive.submit(self.archive.database.save_all, conversation)
        self.conversation_loaded.emit()
        self.conversations_changed.emit()


def _write_text(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")
