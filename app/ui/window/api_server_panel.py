"""The local API server in the window: settings, address on the status line, requests panel.

The panel is a dock, like the diagnostics: the recent requests, a row each with its status
(streaming, paused for a slow reader, stopped…), its rate and the replies decoded side by side
with it, with Stop for each; over them, how many of the model's places for replies side by
side are in use (the window's reply counts too).

The window does not import the server; it drives :class:`~app.flow.serving.ApiServing`,
which the composition root gave a way to start it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine

from PySide6.QtCore import QEvent, QObject, Qt, QTimer, Slot
from PySide6.QtGui import QAction, QGuiApplication
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDockWidget,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.flow.preferences import PreferencesKeeper
from app.flow.requests import BatchUse, ServedRequest
from app.flow.serving import ApiServing
from app.flow.words import say_sentence
from app.store.preferences import API_SERVER_KEY_NAME, ApiServerPreferences
from app.store.secrets import load_api_key, save_api_key
from app.ui.dialogs.api_server_dialog import ApiServerDialog
from app.ui.window.main_window import MainWindow

REFRESH_MS = 500
"""How often the panel and the status line read the requests (a person reads them)."""

COLUMNS = 9

STATUS_COLUMN = 3
SIDE_BY_SIDE_COLUMN = 7


class ApiServerPanel(QWidget):
    """The recent requests, with the batch's use over them; Stop.

    A row each: time, client, endpoint, status, tokens, rate, replies side by side, duration.
    """

    def __init__(self, serving: ApiServing, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("serverPanel")
        self._serving = serving
        self.batch = QLabel()
        self.batch.setObjectName("serverBatch")
        self.batch.setWordWrap(True)
        self.batch.hide()
        self.table = QTableWidget(0, COLUMNS)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().hide()
        self.stop_button = QPushButton()
        self.stop_button.clicked.connect(self.stop_selected)
        row = QHBoxLayout()
        row.addStretch(1)
        row.addWidget(self.stop_button)
        layout = QVBoxLayout(self)
        layout.addWidget(self.batch)
        layout.addWidget(self.table)
        layout.addLayout(row)
        self._ids: list[int] = []
        self.retranslate()

    def retranslate(self) -> None:
        """Word the headers and the button in the current language."""
        self.table.setHorizontalHeaderLabels(
            [
                self.tr("Time"),
                self.tr("Client"),
                self.tr("Endpoint"),
                self.tr("Status"),
                self.tr("Prompt (cached)"),
                self.tr("Reply"),
                self.tr("tok/s"),
                self.tr("Side by side"),
                self.tr("Duration"),
            ]
        )
        header = self.table.horizontalHeaderItem(SIDE_BY_SIDE_COLUMN)
        if header is not None:
            header.setToolTip(
                self.tr(
                    "Replies the model decoded in the same step as this one, itself counted; "
                    "once it ended, the most there were."
                )
            )
        self.batch.setToolTip(
            self.tr(
                "Places: how many replies the model can write at once (Settings, Compute, "
                "Parallel replies), the window's and the API's. A paused reply waits out of "
                "the batch until its reader catches up; the others go on."
            )
        )
        self.stop_button.setText(self.tr("Stop request"))

    def show_batch(self, use: BatchUse | None) -> None:
        """Say how the batch's places are used (None: no local model, nothing to say)."""
        self.batch.setVisible(use is not None)
        text = say_sentence(use.sentence()) if use is not None else ""
        if self.batch.text() != text:
            self.batch.setText(text)

    def refresh(self) -> None:
        """Show the requests as they are now (newest first)."""
        requests = list(reversed(self._serving.board.recent()))
        selected = self._selected_id()
        self._ids = [r.id for r in requests]
        self.table.setRowCount(len(requests))
        for row, request in enumerate(requests):
            for column, text in enumerate(_cells(request)):
                item = self.table.item(row, column)
                if item is None:
                    item = QTableWidgetItem()
                    self.table.setItem(row, column, item)
                if item.text() != text:
                    item.setText(text)
            status = self.table.item(row, STATUS_COLUMN)
            paused = request.status() == "paused"
            if status is not None and (status.toolTip() != "") != paused:
                status.setToolTip(
                    self.tr(
                        "Its client reads slower than the model writes: the reply waits, out "
                        "of the batch, for it to catch up; the others go on."
                    )
                    if paused
                    else ""
                )
        if selected in self._ids:
            self.table.selectRow(self._ids.index(selected))

    def _selected_id(self) -> int | None:
        rows = self.table.selectionModel().selectedRows()
        if not rows or rows[0].row() >= len(self._ids):
            return None
        return self._ids[rows[0].row()]

    @Slot()
    def stop_selected(self) -> bool:
        """Stop the selected request (queued: dropped; running: aborted)."""
        selected = self._selected_id()
        stopped = selected is not None and self._serving.stop_request(selected)
        self.refresh()
        return stopped


def _cells(request: ServedRequest) -> list[str]:
    job = request.job
    report = job.report if job is not None else None
    prompt = f"{report.prompt_tokens} ({report.cached_tokens})" if report else ""
    reply = str(report.reply_tokens) if report else ""
    rate = request.tokens_per_second()
    side_by_side = request.side_by_side()
    return [
        time.strftime("%H:%M:%S", time.localtime(request.received_at)),
        request.client,
        request.endpoint,
        request.status(),
        prompt,
        reply,
        f"{rate:.1f}" if rate else "",
        str(side_by_side) if side_by_side else "",
        f"{request.duration():.1f} s",
    ]


class ApiServerFace(QObject):
    """Puts the API server into the window: a File menu item, the panel, the status line.

    Args:
        window: the main window.
        serving: the server as the flow drives it.
        keeper: where its preferences are kept (its key goes to the keyring).
    """

    def __init__(self, window: MainWindow, serving: ApiServing, keeper: PreferencesKeeper) -> None:
        super().__init__(window)
        self._window = window
        self._serving = serving
        self._keeper = keeper
        self._tasks: set[asyncio.Future[object]] = set()
        self._key = ""
        self.panel = ApiServerPanel(serving)
        self.dock = QDockWidget(window)
        self.dock.setObjectName("serverDock")
        self.dock.setWidget(self.panel)
        window.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, self.dock)
        self.dock.hide()
        self.settings_action = QAction(window)
        self.settings_action.triggered.connect(self.open_settings)
        window.menus.file_menu.insertAction(window.menus.settings_action, self.settings_action)
        window.menus.view_menu.insertAction(
            window.menus.theme_menu.menuAction(), self.dock.toggleViewAction()
        )
        self.address_button = QToolButton()
        self.address_button.setObjectName("apiServerAddress")
        self.address_button.setAutoRaise(True)
        self.address_button.clicked.connect(self.copy_address)
        self.address_button.hide()
        window.statusBar().addPermanentWidget(self.address_button)
        serving.changed.connect(self.refresh)
        self._timer = QTimer(self)
        self._timer.setInterval(REFRESH_MS)
        self._timer.timeout.connect(self.refresh)
        self._timer.start()
        window.installEventFilter(self)
        self.retranslate()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        """Follow the window's language."""
        if event.type() == QEvent.Type.LanguageChange:
            self.retranslate()
        return False

    def retranslate(self) -> None:
        """Word the menu item, the dock and the status in the current language."""
        self.settings_action.setText(self.tr("Local API server…"))
        self.dock.setWindowTitle(self.tr("Server requests"))
        self.address_button.setToolTip(self.tr("Copy the API server's address"))
        self.panel.retranslate()
        self.refresh()

    @Slot()
    def refresh(self) -> None:
        """The status line's address and counts, and the panel while it is shown."""
        status = self._serving.status()
        self.address_button.setVisible(bool(status))
        if self.address_button.text() != status:
            self.address_button.setText(status)
        if self.dock.isVisible():
            self.panel.show_batch(self.batch_use())
            self.panel.refresh()

    def batch_use(self) -> BatchUse | None:
        """How the local model's places are used by the requests and the window's reply.

        None: no local model, or one that does not say how many places it has.
        """
        session = self._window.session
        model = session.host.served_model
        if model is None or model.parallel <= 0:
            return None
        return self._serving.board.batch_use(model.parallel, [session.runner.report])

    @Slot()
    def copy_address(self) -> None:
        """Put the address on the clipboard."""
        address = self._serving.address
        clipboard = QGuiApplication.clipboard()
        if address and clipboard is not None:
            clipboard.setText(address)
            self._window.statusBar().showMessage(
                self.tr("Copied {address}").format(address=address), 3000
            )

    async def start(self) -> None:
        """Serve as the kept preferences say (off by default), with the key from the keyring."""
        kept: str | None = await asyncio.to_thread(load_api_key, API_SERVER_KEY_NAME)
        self._key = kept or ""
        await self._apply(self._keeper.preferences.api_server)

    async def _apply(self, preferences: ApiServerPreferences) -> None:
        await self._serving.apply(preferences, self._key or None)
        problem = self._serving.problem()
        if problem:
            self._window.view.add_note(problem, error=True)

    @Slot()
    def open_settings(self) -> None:
        """The Local API server dialog; OK applies, keeps the preferences and the key."""
        dialog = ApiServerDialog(self._keeper.preferences.api_server, self._key, self._window)
        dialog.set_problem(self._serving.problem())
        dialog.chosen.connect(self._choose)
        dialog.finished.connect(dialog.deleteLater)
        dialog.open()

    def _choose(self, preferences: ApiServerPreferences, key: str) -> None:
        self._keeper.preferences.api_server = preferences
        self._keeper.save()
        self._key = key
        self._spawn(asyncio.to_thread(save_api_key, API_SERVER_KEY_NAME, key))
        self._spawn(self._apply(preferences))

    def _spawn(self, coroutine: Coroutine[object, object, object]) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)  # strong references: the loop keeps only weak ones
        task.add_done_callback(self._tasks.discard)
