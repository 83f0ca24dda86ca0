"""The conversation list beside the chat: new, open, search, rename, delete with Undo."""

from __future__ import annotations

from collections.abc import Callable, Coroutine

from PySide6.QtCore import QObject, Qt, QTimer, Slot
from PySide6.QtWidgets import QDockWidget, QMainWindow, QPushButton

from app.flow.session import ChatSession
from app.ui.window.sidebar import Sidebar

UNDO_SHOWN_MS = 10_000
"""How long the Undo button stays after a conversation is deleted."""

Spawn = Callable[[Coroutine[object, object, object]], None]


class ConversationsDock(QObject):
    """The dock holding the :class:`Sidebar`, and what its buttons ask of the session.

    The list is read again (off the UI thread, at most one read at a time) whenever the
    session says the saved conversations changed. A deletion leaves an Undo button in the
    status bar for ten seconds.

    Args:
        window: the main window (the dock goes on its left; Undo in its status bar).
        session: the session whose conversations are listed.
        spawn: runs a coroutine on the loop, keeping it alive.
        open_conversation: shows a conversation (the window also moves the focus).
        new_chat: starts a new conversation (likewise).
    """

    def __init__(
        self,
        window: QMainWindow,
        session: ChatSession,
        spawn: Spawn,
        open_conversation: Callable[[str], None],
        new_chat: Callable[[], None],
    ) -> None:
        super().__init__(window)
        self._session = session
        self._spawn = spawn
        self._open = open_conversation
        self._refresh_pending = False
        self._deleted: str | None = None
        self.sidebar = Sidebar()
        self.dock = QDockWidget(window)
        self.dock.setObjectName("sidebarDock")
        self.dock.setWidget(self.sidebar)
        self.dock.setFeatures(
            QDockWidget.DockWidgetFeature.DockWidgetClosable
            | QDockWidget.DockWidgetFeature.DockWidgetMovable
        )
        window.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, self.dock)
        self.dock.setVisible(session.archive is not None)
        self.undo_button = QPushButton()
        self.undo_button.setObjectName("undoDelete")
        self.undo_button.hide()
        self.undo_button.clicked.connect(self.undo_delete)
        window.statusBar().addPermanentWidget(self.undo_button)
        self.sidebar.new_requested.connect(new_chat)
        self.sidebar.open_requested.connect(open_conversation)
        self.sidebar.rename_requested.connect(session.rename)
        self.sidebar.delete_requested.connect(self.delete_conversation)
        self.sidebar.search_changed.connect(lambda _: self.refresh())
        session.conversations_changed.connect(self.refresh)

    def retranslate(self) -> None:
        """Set the dock's texts in the current language."""
        self.dock.setWindowTitle(self.tr("Conversations"))
        self.sidebar.retranslate()
        self.undo_button.setText(self.tr("Undo delete"))

    @Slot()
    def refresh(self) -> None:
        """Read the conversation list again (coalesced: at most one read at a time)."""
        if self._session.archive is None or self._refresh_pending:
            return
        self._refresh_pending = True

        async def refresh() -> None:
            try:
                found = await self._session.list_conversations(self.sidebar.search.text())
            finally:
                self._refresh_pending = False
            self.sidebar.set_conversations(found, self._session.conversation.id)

        self._spawn(refresh())

    def show_current(self) -> None:
        """Select the conversation on screen in the list."""
        self.sidebar.set_conversations_current(self._session.conversation.id)

    @Slot(str)
    def delete_conversation(self, conversation_id: str) -> None:
        """Delete a conversation, with an Undo button for a while."""
        self._deleted = conversation_id
        self._spawn(self._session.delete(conversation_id))
        self.undo_button.show()
        QTimer.singleShot(UNDO_SHOWN_MS, self._forget_delete)

    @Slot()
    def undo_delete(self) -> None:
        """Bring back the conversation deleted last."""
        if self._deleted is not None:
            self._session.undelete(self._deleted)
            self._open(self._deleted)
        self._forget_delete()

    def _forget_delete(self) -> None:
        self._deleted = None
        self.undo_button.hide()
