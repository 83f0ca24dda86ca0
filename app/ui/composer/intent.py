"""What the composer asks of the session: send a prompt (or an edited one again), stop, edit."""

from __future__ import annotations

from PySide6.QtCore import QCoreApplication, QObject, Qt, Slot
from PySide6.QtGui import QPalette, QTextCursor
from PySide6.QtWidgets import QMainWindow

from app.flow.reply import attachments_of
from app.flow.session import ChatSession
from app.store.conversation import Message
from app.ui.composer.attachments import ComposerAttachments
from app.ui.composer.composer import Composer
from app.ui.composer.prompt_edit import PromptEdit
from app.ui.look.icon_button import IconButton
from app.ui.look.icons import icon


class ComposerIntent(QObject):
    """The composer's intent: Send (or Stop) on the round button, Enter, Esc, and editing.

    Owns the round Send/Stop button (:attr:`send_button`) and the sent message being edited
    (:attr:`edit`, with its banner). A prompt the model could not answer at all comes back
    into the composer when its reply ends (:meth:`reply_ended`).

    Its words are the window's: their translations are kept under its context ("MainWindow").

    Args:
        window: the main window (its status bar says why a prompt is not sent).
        session: the session prompts are sent to.
        composer: the text being written.
        attachments: the files attached to the next prompt.
    """

    def __init__(
        self,
        window: QMainWindow,
        session: ChatSession,
        composer: Composer,
        attachments: ComposerAttachments,
    ) -> None:
        super().__init__(window)
        self._window = window
        self._session = session
        self._composer = composer
        self._attachments = attachments
        self.send_button = IconButton(icon("arrow-up", QPalette.ColorRole.HighlightedText), side=18)
        self.send_button.setObjectName("sendButton")
        # Tab reaches it; a click leaves the focus in the composer, where typing goes on.
        self.send_button.setFocusPolicy(Qt.FocusPolicy.TabFocus)
        self.edit = PromptEdit()

    def wire(self) -> None:
        """Wire the composer's Enter and Esc and the round button to sending and stopping."""
        self._composer.submitted.connect(self.send)
        self._composer.stop_requested.connect(self.stop)
        self.send_button.clicked.connect(self._on_send_button)

    def retranslate(self) -> None:
        """Word the edit banner and the round button in the current language."""
        self.edit.retranslate()
        self.show_send_state()

    def show_send_state(self) -> None:
        """The round button: Send (an arrow), or Stop (a square) while a reply streams.

        Changed when a reply starts or ends, never per update; its words are its tooltip and
        the name a screen reader reads.
        """
        button = self.send_button
        generating = self._session.generating
        if not generating:
            button.setText(QCoreApplication.translate("MainWindow", "Send"))
            tip = QCoreApplication.translate("MainWindow", "Send the message (Enter)")
        elif button.isEnabled():
            button.setText(QCoreApplication.translate("MainWindow", "Stop"))
            tip = QCoreApplication.translate("MainWindow", "Stop the reply (Esc)")
        else:
            button.setText(QCoreApplication.translate("MainWindow", "Stopping…"))
            tip = button.text()
        shape = "arrow-up" if not generating else "square"
        if shape != button.property("shape"):
            button.setProperty("shape", shape)
            button.setIcon(icon(shape, QPalette.ColorRole.HighlightedText))
        button.setAccessibleName(button.text())
        button.setToolTip(tip)

    @Slot()
    def send(self) -> None:
        """Send what the composer holds, with the files attached; a blank prompt is not sent."""
        if self._session.generating:
            return
        text = self._composer.toPlainText()
        tray = self._attachments.tray
        problem = self._attachments.why_not_sendable()
        if problem is not None:
            self._window.statusBar().showMessage(*problem)
            return
        attachments = tray.attachments()
        editing = self.edit.message
        kept = [] if editing is None else attachments_of(editing)
        if not text.strip() and not attachments and not kept:
            self._window.statusBar().showMessage(
                QCoreApplication.translate("MainWindow", "Type a message first."), 3000
            )
            return
        self.edit.end()
        sent = (
            self._session.edit_and_resend(editing, text, [*kept, *attachments])
            if editing is not None
            else self._session.send(text, attachments)
        )
        if sent:
            self._composer.clear()
            tray.clear()

    @Slot()
    def stop(self) -> None:
        """Stop the reply in progress (pressing it twice is harmless); Esc also ends editing."""
        if self.edit.message is not None:
            self.edit.end()
            self._composer.clear()
            return
        if self._session.stop():
            self.send_button.setEnabled(False)
            self.show_send_state()

    @Slot()
    def _on_send_button(self) -> None:
        if self._session.generating:
            self.stop()
        else:
            self.send()

    def begin_edit(self, message: Message) -> None:
        """Put a sent message back into the composer; sending it starts a new branch.

        The message's attachments stay with it; files attached now are added to them.
        """
        if self._session.generating:
            return
        self.edit.begin(message)
        self._composer.setPlainText(message.content)
        self._composer.setFocus()

    @Slot(str)
    def fill(self, text: str) -> None:
        """An example prompt goes into the composer, to send or change."""
        self._composer.setPlainText(text)
        self._composer.moveCursor(QTextCursor.MoveOperation.End)
        self._composer.setFocus()

    def reply_started(self) -> None:
        """A reply streams: the round button becomes Stop."""
        self.send_button.setEnabled(True)
        self.show_send_state()

    def reply_ended(self) -> None:
        """The reply ended: Send again; a prompt that got no answer at all comes back."""
        self.send_button.setEnabled(True)
        self.show_send_state()
        prompt = self._session.conversation.messages[-2]
        if prompt.status == "error" and not self._composer.toPlainText():
            # The prompt got no answer at all: give it back so it can be sent again.
            self._composer.setPlainText(prompt.content)
            self._attachments.give_back(attachments_of(prompt))
        self._composer.setFocus()
