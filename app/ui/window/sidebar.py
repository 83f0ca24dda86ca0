"""The conversation list: newest first, searchable, rename in place, delete (with Undo)."""

from __future__ import annotations

import html
import time
from collections.abc import Sequence

from PySide6.QtCore import QPoint, Qt, Signal, Slot
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.store.database import ConversationSummary

ID_ROLE = Qt.ItemDataRole.UserRole


class Sidebar(QWidget):
    """Lists conversations and forwards what the user does with them.

    Signals:
        new_requested(): the New chat button.
        open_requested(str): a conversation was chosen.
        rename_requested(str, str): a conversation's title was edited in place.
        delete_requested(str): Delete (key or context menu) on a conversation.
        search_changed(str): the search text changed.
    """

    new_requested = Signal()
    open_requested = Signal(str)
    rename_requested = Signal(str, str)
    delete_requested = Signal(str)
    search_changed = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("sidebar")
        self.search = QLineEdit()
        self.search.setObjectName("conversationSearch")
        self.search.setClearButtonEnabled(True)
        self.new_button = QPushButton()
        self.new_button.setObjectName("newChat")
        self.list = QListWidget()
        self.list.setObjectName("conversationList")
        self.list.setEditTriggers(
            QListWidget.EditTrigger.DoubleClicked | QListWidget.EditTrigger.EditKeyPressed
        )
        self.list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        # Long titles end in "…" (the whole title is in the tooltip) rather than scrolling.
        self.list.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.list.setUniformItemSizes(True)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.addWidget(self.new_button)
        layout.addWidget(self.search)
        layout.addWidget(self.list, 1)
        self._filling = False
        self.delete_action = QAction(self)
        self.delete_action.setShortcut(QKeySequence(QKeySequence.StandardKey.Delete))
        self.delete_action.setShortcutContext(Qt.ShortcutContext.WidgetShortcut)
        self.delete_action.triggered.connect(self._delete_current)
        self.list.addAction(self.delete_action)
        self.rename_action = QAction(self)
        self.rename_action.triggered.connect(self._rename_current)

        self.new_button.clicked.connect(self.new_requested)
        self.search.textChanged.connect(self.search_changed)
        self.list.itemActivated.connect(self._on_activated)
        self.list.itemClicked.connect(self._on_activated)
        self.list.itemChanged.connect(self._on_item_changed)
        self.list.customContextMenuRequested.connect(self._context_menu)
        self.retranslate()

    def retranslate(self) -> None:
        """Set the texts in the current language."""
        self.search.setPlaceholderText(self.tr("Search conversations"))
        self.search.setAccessibleName(self.tr("Search conversations"))
        self.list.setAccessibleName(self.tr("Conversations"))
        self.new_button.setText(self.tr("New chat"))
        self.delete_action.setText(self.tr("Delete"))
        self.rename_action.setText(self.tr("Rename"))

    def set_conversations(
        self, summaries: Sequence[ConversationSummary], current_id: str | None
    ) -> None:
        """Show ``summaries`` (newest first), with the current conversation selected."""
        self._filling = True
        try:
            self.list.clear()
            for summary in summaries:
                item = QListWidgetItem(summary.title or self.tr("Untitled"))
                item.setData(ID_ROLE, summary.id)
                when = time.strftime("%Y-%m-%d %H:%M", time.localtime(summary.updated_at))
                # A tooltip is rich text whenever it looks like HTML: a title is a person's (or
                # a model's) words, so it is escaped, never interpreted.
                item.setToolTip(f"<p>{html.escape(summary.title)}<br>{when}</p>")
                item.setFlags(item.flags() | Qt.ItemFlag.ItemIsEditable)
                self.list.addItem(item)
                if summary.id == current_id:
                    item.setSelected(True)
                    self.list.setCurrentItem(item)
        finally:
            self._filling = False

    def set_conversations_current(self, current_id: str) -> None:
        """Select the conversation shown (nothing, if it is not listed yet)."""
        self.list.clearSelection()
        for i in range(self.list.count()):
            item = self.list.item(i)
            if item.data(ID_ROLE) == current_id:
                item.setSelected(True)
                self.list.setCurrentItem(item)

    @Slot(QListWidgetItem)
    def _on_activated(self, item: QListWidgetItem) -> None:
        self.open_requested.emit(str(item.data(ID_ROLE)))

    @Slot(QListWidgetItem)
    def _on_item_changed(self, item: QListWidgetItem) -> None:
        if not self._filling:
            self.rename_requested.emit(str(item.data(ID_ROLE)), item.text())

    @Slot()
    def _delete_current(self) -> None:
        item = self.list.currentItem()
        if item is not None:
            self.delete_requested.emit(str(item.data(ID_ROLE)))

    @Slot()
    def _rename_current(self) -> None:
        item = self.list.currentItem()
        if item is not None:
            self.list.editItem(item)

    @Slot(QPoint)
    def _context_menu(self, position: QPoint) -> None:
        item = self.list.itemAt(position)
        if item is None:
            return
        self.list.setCurrentItem(item)
        menu = QMenu(self)
        menu.addAction(self.rename_action)
        menu.addAction(self.delete_action)
        menu.popup(self.list.viewport().mapToGlobal(position))
