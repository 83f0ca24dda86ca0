"""The files attached to the next prompt: reader, tray, paperclip, drops and pastes, send checks."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from pathlib import Path

from PySide6.QtCore import (
    QBuffer,
    QByteArray,
    QCoreApplication,
    QIODevice,
    QMimeData,
    QObject,
    Qt,
    Slot,
)
from PySide6.QtGui import QImage, QImageWriter, QKeySequence
from PySide6.QtWidgets import QFileDialog, QMainWindow
from shiboken6 import isValid

from app.documents import Attachment
from app.flow.attachments import AttachmentReader
from app.flow.session import ChatSession
from app.ui.composer.attachment_tray import AttachmentTray, has_files, paths_from_mime
from app.ui.look.icon_button import IconButton
from app.ui.look.icons import icon
from app.ui.look.style import follow_theme

ATTACH_SHORTCUT = "Ctrl+Shift+A"
"""Chat > Attach files… and the paperclip's tooltip, which names it."""


class ComposerAttachments(QObject):
    """The composer's attachments: the paperclip button, the tray of chips and their reader.

    Files come from the paperclip's file dialog, a drop on the window or a paste into the
    composer; the reader reads them off the UI thread and the tray shows each as a chip.
    """

    def __init__(
        self,
        window: QMainWindow,
        session: ChatSession,
        spawn: Callable[[Coroutine[object, object, object]], None],
    ) -> None:
        super().__init__(window)
        self._window = window
        self._session = session
        self._spawn = spawn
        self._room_asked = 0  # the newest question about the room left; older answers are stale
        self._file_dialog: QFileDialog | None = None
        self.attach_button = IconButton(icon("paperclip"), side=18)
        self.attach_button.setObjectName("attachButton")
        self.attach_button.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.tray = AttachmentTray()
        self.reader = AttachmentReader(
            session.count_tokens, prefill_rate=lambda: session.prefill_rate, parent=window
        )

    def wire(self) -> None:
        """Wire the paperclip, the reader and the tray to each other and to the session."""
        self.attach_button.clicked.connect(self.choose_attachments)
        reader, tray = self.reader, self.tray
        reader.started.connect(lambda started: tray.add_reading(started.name))
        reader.progress.connect(tray.show_progress)
        reader.ready.connect(lambda ready: tray.show_ready(ready.attachment, ready.seconds))
        reader.failed.connect(lambda failed: tray.show_failed(failed.name, failed.sentence))
        reader.cancelled.connect(tray.show_cancelled)
        tray.cancel_requested.connect(reader.cancel)
        tray.include_part_requested.connect(self._include_part)
        self._session.conversation_loaded.connect(self.refresh_room)

    def retranslate(self) -> None:
        """Word the paperclip in the current language."""
        self.attach_button.setAccessibleName(
            QCoreApplication.translate("MainWindow", "Attach files")
        )
        self.attach_button.setText(QCoreApplication.translate("MainWindow", "Attach…"))
        self.attach_button.setToolTip(
            QCoreApplication.translate(
                "MainWindow", "Attach files to the next message ({shortcut})"
            ).format(
                shortcut=QKeySequence(ATTACH_SHORTCUT).toString(
                    QKeySequence.SequenceFormat.NativeText
                )
            )
        )

    def why_not_sendable(self) -> tuple[str, int] | None:
        """Why the attachments cannot go with a prompt now, and for how long to say it."""
        if self.tray.busy:
            return QCoreApplication.translate(
                "MainWindow", "Some files are still being read: wait for them, or remove them."
            ), 5000
        model = self._session.model
        pictures = any(a.is_picture for a in self.tray.attachments())
        if pictures and (model is None or not model.sees):
            return (
                QCoreApplication.translate(
                    "MainWindow",
                    "The open model cannot see pictures. Open a model that can (one with a "
                    "projector, an mmproj file beside it), or remove the pictures.",
                ),
                8000,
            )
        sounds = any(a.is_sound for a in self.tray.attachments())
        if sounds and (model is None or not model.hears):
            return (
                QCoreApplication.translate(
                    "MainWindow",
                    "The open model cannot hear sound. Open a model that can (one whose "
                    "projector reads audio, with its mmproj file beside it), or remove the "
                    "sounds.",
                ),
                8000,
            )
        if self.tray.over:
            return (
                QCoreApplication.translate(
                    "MainWindow",
                    "The attached files do not fit in the context: remove one, or include the "
                    "part that fits.",
                ),
                6000,
            )
        return None

    def close(self) -> None:
        """Cancel the files being read and close the reader (the window is closing)."""
        for name in self.reader.reading:  # now: the loop may end before close() runs
            self.reader.cancel(name)
        self._spawn(self.reader.close())

    @Slot()
    def choose_attachments(self) -> None:
        """Chat > Attach files…: a file dialog for several files, which does not block."""
        if self._file_dialog is not None:
            self._file_dialog.raise_()
            return
        dialog = QFileDialog(self._window, QCoreApplication.translate("MainWindow", "Attach files"))
        dialog.setFileMode(QFileDialog.FileMode.ExistingFiles)
        dialog.filesSelected.connect(lambda files: self.attach([Path(f) for f in files]))
        dialog.finished.connect(lambda _result: self._forget_file_dialog(dialog))
        self._file_dialog = dialog
        follow_theme(dialog)
        dialog.open()

    def _forget_file_dialog(self, dialog: QFileDialog) -> None:
        if self._file_dialog is dialog:
            self._file_dialog = None
        dialog.deleteLater()

    @Slot(list)
    def attach(self, paths: list[Path]) -> None:
        """Read ``paths`` (off the UI thread) for the next prompt; a chip shows each."""
        if not paths:
            return
        self.reader.read(paths, taken=self.tray.names())
        self.refresh_room()

    @Slot()
    def refresh_room(self) -> None:
        """Tell the tray the room left in the context (counted off the UI thread)."""
        self._room_asked += 1
        asked = self._room_asked

        async def measure() -> None:
            room = await self._session.room_for_attachments()
            # The window may have closed while the worker counted.
            if asked == self._room_asked and isValid(self.tray):
                self.tray.set_room(room)

        self._spawn(measure())

    @Slot(str)
    def _include_part(self, name: str) -> None:
        attachment = self.tray.attachment(name)
        room = self.tray.room_for(name)
        if attachment is None or room is None:
            self.tray.show_failed(
                name,
                QCoreApplication.translate(
                    "MainWindow", "The room left in the context is not known yet."
                ),
            )
            return
        self.reader.cut(attachment, room)

    @Slot(QImage)
    def paste_picture(self, image: QImage) -> None:
        """A pasted picture (a screenshot): made a PNG and kept off the UI thread, then a chip."""
        name = QCoreApplication.translate("MainWindow", "Pasted picture.png")

        async def keep() -> None:
            data = await asyncio.to_thread(png_bytes, image.copy())
            if isValid(self.tray):
                self.reader.read_picture_bytes(data, name, taken=self.tray.names())

        self._spawn(keep())

    @staticmethod
    def carries_files(mime: QMimeData) -> bool:
        """Whether a drag carries files that can be attached."""
        return has_files(mime)

    def drop(self, mime: QMimeData) -> bool:
        """Attach the files a drop carries; whether it carried any."""
        paths = paths_from_mime(mime)
        if not paths:
            return False
        self.attach(paths)
        return True

    def give_back(self, attachments: list[Attachment]) -> None:
        """Show an unanswered prompt's attachments again, unless files are attached already."""
        if self.tray.names():
            return
        for attachment in attachments:
            self.tray.add_reading(attachment.name)
            self.tray.show_ready(attachment, self.reader.seconds_to_read(attachment.tokens))


def png_bytes(image: QImage) -> bytes:
    """``image`` as PNG bytes (on any thread: QImage is not a widget)."""
    buffer = QBuffer()
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    if not QImageWriter(buffer, QByteArray(b"png")).write(image):
        raise OSError("the pasted picture could not be made a PNG")
    return bytes(buffer.data().data())
