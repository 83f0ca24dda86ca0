"""The transcript: draws the session's conversation in the chat view, message by message."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

from PySide6.QtCore import QCoreApplication, QObject, QSize, Qt, QUrl, Slot
from PySide6.QtGui import QDesktopServices, QFontDatabase, QIcon, QImage, QPixmap
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QPlainTextEdit,
    QVBoxLayout,
    QWidget,
)

from app.documents import size_text
from app.flow.pacing import Slicer
from app.flow.session import ChatSession
from app.store.conversation import Message
from app.store.media_files import picture_path, sound_path
from app.ui.chat.chat_view import ChatView
from app.ui.chat.rows.text import HeaderRow
from app.ui.look.icons import icon
from app.ui.look.pictures import THUMBNAIL_PX, find_file, load_picture
from app.ui.look.style import follow_theme

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
            self._last_reply_header.reveal_actions("last", True)
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
            for position, attachment in enumerate(message.attachments):
                self._add_chip(header, position, attachment)
        else:

            def regenerate() -> None:
                session.regenerate()

            header.add_action("regenerate", regenerate)
            header.set_action_visible("regenerate", False)  # only the last reply shows it
            self._last_reply_header = header

    def _add_chip(self, header: HeaderRow, position: int, attachment: dict[str, object]) -> None:
        """A compact chip for a file sent with the prompt; it opens the text, read-only."""
        view = self._view

        def open_text() -> None:
            show_attachment(view, attachment)

        def words() -> tuple[str, str, str]:
            return chip_words(attachment)

        chip = header.add_action(f"attachment-{position}", open_text, words)
        chip.setObjectName("attachmentChip")
        chip.setIcon(icon("paperclip"))
        chip.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        digest = attachment.get("digest")
        if attachment.get("kind") == "sound":
            chip.setIcon(icon("music"))
        header.refit()  # its icon beside its words: wider than the words alone
        if attachment.get("kind") == "picture" and isinstance(digest, str):
            side = QSize(THUMBNAIL_PX, THUMBNAIL_PX)

            def thumbnail(image: QImage) -> None:
                if not image.isNull():
                    chip.setIcon(QIcon(QPixmap.fromImage(image)))
                    chip.setIconSize(image.size())
                    header.refit()

            load_picture(picture_path(digest), side, chip, thumbnail)

    def reply_started(self) -> None:
        """Add the new prompt and its (empty) reply below everything drawn so far."""
        # The turns before the new prompt first, all of them, so the reply lands after them.
        self.renderer.finish()
        session = self._session
        messages = session.conversation.messages
        prompt, reply = messages[-2], messages[-1]
        if self._last_reply_header is not None:
            self._last_reply_header.set_action_visible("regenerate", False)
            self._last_reply_header.reveal_actions("last", False)
        self._decorate(self._view.add_user_message(prompt.content), prompt)
        speaker = session.model.name if session.model else APP_NAME
        self._decorate(self._view.begin_reply(speaker), reply)

    def reply_ended(self, status: str, note: str) -> None:
        """Close the reply with its note; it is now the one Regenerate asks again."""
        self._view.end_reply(note, error=status == "error")
        if self._last_reply_header is not None:
            self._last_reply_header.set_action_visible("regenerate", True)
            self._last_reply_header.reveal_actions("last", True)


def attachment_label(attachment: dict[str, object]) -> str:
    """A chip's words: ``"notes.txt · 1,234 tokens"``, and ``"cut"`` when cut (no 📎: an icon)."""
    name = str(attachment.get("name", ""))
    parts = [name]
    tokens = attachment.get("tokens")
    if isinstance(tokens, int):
        parts.append(
            QCoreApplication.translate("Transcript", "{tokens} tokens").format(tokens=f"{tokens:,}")
        )
    if attachment.get("cut"):
        parts.append(QCoreApplication.translate("Transcript", "cut"))
    return " · ".join(parts)


def chip_words(attachment: dict[str, object]) -> tuple[str, str, str]:
    """A prompt's attachment chip's label, tooltip and spoken name, in the current language."""
    name = str(attachment.get("name", ""))
    kind = attachment.get("kind")
    if kind == "picture":
        tip = QCoreApplication.translate("Transcript", "Show this picture")
        spoken = QCoreApplication.translate("Transcript", "Attached picture {name}")
    elif kind == "sound":
        tip = QCoreApplication.translate("Transcript", "Show this sound, to play it")
        spoken = QCoreApplication.translate("Transcript", "Attached sound {name}")
    else:
        tip = QCoreApplication.translate("Transcript", "Show the text of this attached file")
        spoken = QCoreApplication.translate("Transcript", "Attached file {name}")
    return attachment_label(attachment), tip, spoken.format(name=name)


class AttachmentDialog(QDialog):
    """The text of a file sent with a prompt, read-only (the conversation keeps the text)."""

    def __init__(self, attachment: dict[str, object], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("attachmentDialog")
        follow_theme(self)
        name = str(attachment.get("name", ""))
        self.setWindowTitle(name)
        details = [str(attachment.get("kind", "")), size_text(_count(attachment, "size"))]
        tokens = attachment.get("tokens")
        if isinstance(tokens, int):
            details.append(self.tr("{tokens} tokens").format(tokens=f"{tokens:,}"))
        self.summary = QLabel(" · ".join([name, *details]))
        self.summary.setTextFormat(Qt.TextFormat.PlainText)  # a name from anywhere: not markup
        self.summary.setWordWrap(True)
        self.text = QPlainTextEdit()
        self.text.setObjectName("attachmentText")
        self.text.setReadOnly(True)
        self.text.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.text.setPlainText(str(attachment.get("text", "")))
        self.text.setAccessibleName(self.tr("Text of {name}").format(name=name))
        layout = QVBoxLayout(self)
        layout.addWidget(self.summary)
        if attachment.get("cut"):
            kept, full = attachment.get("kept_tokens"), attachment.get("full_tokens")
            cut = QLabel(
                self.tr("Cut to fit: only the first {kept} of {full} tokens were sent.").format(
                    kept=f"{kept:,}" if isinstance(kept, int) else "?",
                    full=f"{full:,}" if isinstance(full, int) else "?",
                )
            )
            cut.setObjectName("attachmentCut")
            cut.setWordWrap(True)
            layout.addWidget(cut)
        layout.addWidget(self.text, 1)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)
        self.resize(640, 480)


def _count(attachment: dict[str, object], key: str) -> int:
    value = attachment.get(key)
    return value if isinstance(value, int) else 0


class PictureDialog(QDialog):
    """A picture sent with a prompt, fitted to the window; decoded on a thread of its own."""

    def __init__(self, attachment: dict[str, object], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("pictureDialog")
        follow_theme(self)
        name = str(attachment.get("name", ""))
        self.setWindowTitle(name)
        summary = QLabel(
            " · ".join([name, self.tr("picture"), size_text(_count(attachment, "size"))])
        )
        summary.setTextFormat(Qt.TextFormat.PlainText)
        self.picture = QLabel(self.tr("Loading the picture…"))
        self.picture.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.picture.setMinimumSize(320, 240)
        self.picture.setAccessibleName(self.tr("Picture {name}").format(name=name))
        layout = QVBoxLayout(self)
        layout.addWidget(summary)
        layout.addWidget(self.picture, 1)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)
        self.resize(860, 680)
        digest = attachment.get("digest")
        if isinstance(digest, str):
            load_picture(picture_path(digest), QSize(800, 600), self, self._show)
        else:
            self._show(QImage())

    @Slot(QImage)
    def _show(self, image: QImage) -> None:
        if image.isNull():
            self.picture.setText(self.tr("The picture could not be shown: its file is missing."))
            return
        self.picture.setPixmap(QPixmap.fromImage(image))


class SoundDialog(QDialog):
    """A sound sent with a prompt: what it is, and a button that plays it in the system's player.

    Floodgate does not play sound itself (no audio output of its own to set up, and every
    desktop has a player that does it better).
    """

    def __init__(self, attachment: dict[str, object], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("soundDialog")
        follow_theme(self)
        name = str(attachment.get("name", ""))
        self.setWindowTitle(name)
        summary = QLabel(
            " · ".join([name, self.tr("sound"), size_text(_count(attachment, "size"))])
        )
        summary.setTextFormat(Qt.TextFormat.PlainText)
        digest = attachment.get("digest")
        self.path = sound_path(digest) if isinstance(digest, str) else None
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        self.play = buttons.addButton(self.tr("Play"), QDialogButtonBox.ButtonRole.ActionRole)
        self.play.setIcon(icon("music"))
        self.play.setToolTip(self.tr("Play it in this computer's own player"))
        self.play.clicked.connect(self._play)
        self.note = QLabel()
        self.note.setTextFormat(Qt.TextFormat.PlainText)
        self.note.setWordWrap(True)
        self.note.hide()
        layout = QVBoxLayout(self)
        layout.addWidget(summary)
        layout.addWidget(self.note)
        layout.addWidget(buttons)
        self.play.setEnabled(False)  # until its file is found, off the UI thread
        if self.path is None:
            self._found(False)
        else:
            find_file(self.path, self, self._found)

    @Slot(bool)
    def _found(self, there: bool) -> None:
        if there:
            self.play.setEnabled(True)
        else:
            self._say(self.tr("The sound could not be played: its file is missing."))

    def _say(self, text: str) -> None:
        self.play.setEnabled(False)
        self.note.setText(text)
        self.note.show()

    @Slot()
    def _play(self) -> None:
        if self.path is None or not QDesktopServices.openUrl(QUrl.fromLocalFile(str(self.path))):
            self._say(self.tr("No player on this computer opened the sound."))


def show_attachment(parent: QWidget, attachment: dict[str, object]) -> QDialog:
    """Open a sent attachment in a window of its own (not modal): text, picture or sound."""
    dialog: QDialog
    kinds: dict[object, type[PictureDialog | SoundDialog]] = {
        "picture": PictureDialog,
        "sound": SoundDialog,
    }
    media = kinds.get(attachment.get("kind"))
    if media is not None:
        dialog = media(attachment, parent.window())
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.show()
        return dialog
    dialog = AttachmentDialog(attachment, parent.window())
    dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    dialog.show()
    return dialog
