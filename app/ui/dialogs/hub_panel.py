"""The model library's Hub tab: search the Hugging Face Hub, see what fits, download.

Everything from the Hub (names, licences, file names, sentences) is shown as plain text:
table cells are never markup, and the labels are set to plain text. The searches, listings
and downloads run off the UI thread (:class:`HubDownloads`); this only shows their rows.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from pathlib import Path

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QInputDialog,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.flow.hub_downloads import (
    DownloadRow,
    HubDownloads,
    HubError,
    RepoRow,
    RepoView,
    Sort,
)

_ID_ROLE = Qt.ItemDataRole.UserRole

_SORTS: dict[str, Sort] = {"downloads": "downloads", "likes": "likes", "recent": "last_modified"}


def _table(headers: list[str]) -> QTableWidget:
    table = QTableWidget(0, len(headers))
    table.setHorizontalHeaderLabels(headers)
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.verticalHeader().hide()
    # The name takes the room; the facts beside it are as wide as their words (and headers).
    header = table.horizontalHeader()
    header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
    return table


def _plain_label() -> QLabel:
    label = QLabel()
    label.setTextFormat(Qt.TextFormat.PlainText)  # names and sentences from the Hub
    label.setWordWrap(True)
    return label


def _set_row(table: QTableWidget, row: int, cells: list[str], key: object) -> None:
    for column, text in enumerate(cells):
        item = QTableWidgetItem(text)
        item.setData(_ID_ROLE, key)
        table.setItem(row, column, item)


class HubPanel(QWidget):
    """Search, a repository's GGUF models with their fit, and the downloads with their controls.

    Signals:
        open_requested(Path): Open on a finished download.
    """

    open_requested = Signal(Path)

    def __init__(self, downloads: HubDownloads, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("hubPanel")
        self.downloads = downloads
        self._tasks: set[asyncio.Future[object]] = set()

        search_row = self._build_search()
        choice_row = self._build_choices()
        controls = self._build_transfers()
        self.message = _plain_label()
        self.message.hide()

        layout = QVBoxLayout(self)
        layout.addLayout(search_row)
        layout.addWidget(self.message)
        layout.addWidget(self.results, 2)
        layout.addWidget(self.more_button, 0, Qt.AlignmentFlag.AlignRight)
        layout.addLayout(choice_row)
        layout.addWidget(self.choices, 2)
        layout.addWidget(self.transfers, 1)
        layout.addLayout(controls)

        self._rows: dict[int, int] = {}
        """A download's id -> its row in :attr:`transfers`."""
        self._view: RepoView | None = None
        self.token_dialog: QInputDialog | None = None
        downloads.changed.connect(self.show_download)
        for row in downloads.rows.values():
            self.show_download(row)
        self._enable_controls()

    def _build_search(self) -> QHBoxLayout:
        """The search field, its filters and Search; the results table and More results."""
        self.query = QLineEdit()
        self.query.setPlaceholderText(self.tr("Search GGUF models on the Hugging Face Hub"))
        self.query.returnPressed.connect(self._search)
        self.sort = QComboBox()
        for text, key in (
            (self.tr("Most downloaded"), "downloads"),
            (self.tr("Most liked"), "likes"),
            (self.tr("Recently updated"), "recent"),
        ):
            self.sort.addItem(text, key)
        self.sees = QCheckBox(self.tr("Sees pictures"))
        self.sees.setToolTip(self.tr("Only models that read pictures (with their projector)"))
        self.search_button = QPushButton(self.tr("Search"))
        self.search_button.clicked.connect(self._search)
        search_row = QHBoxLayout()
        search_row.addWidget(self.query, 1)
        search_row.addWidget(self.sees)
        search_row.addWidget(self.sort)
        search_row.addWidget(self.search_button)

        self.results = _table(
            [self.tr("Repository"), self.tr("Downloads"), self.tr("Likes"), self.tr("Updated")]
        )
        self.results.itemSelectionChanged.connect(self._show_repository)
        self.more_button = QPushButton(self.tr("More results"))
        self.more_button.clicked.connect(self._more)
        self.more_button.setEnabled(False)
        return search_row

    def _build_choices(self) -> QHBoxLayout:
        """A repository's facts, its GGUF files with their fit, Access token… and Download."""
        self.repo_facts = _plain_label()
        self.choices = _table(
            [
                self.tr("File"),
                self.tr("Quantization"),
                self.tr("Size"),
                self.tr("Memory needed"),
                self.tr("Fit"),
            ]
        )
        self.choices.cellDoubleClicked.connect(lambda _row, _column: self._download())
        self.download_button = QPushButton(self.tr("Download"))
        self.download_button.clicked.connect(self._download)
        self.download_button.setEnabled(False)
        self.token_button = QPushButton(self.tr("Access token…"))
        self.token_button.clicked.connect(self._ask_token)
        choice_row = QHBoxLayout()
        choice_row.addWidget(self.repo_facts, 1)
        choice_row.addWidget(self.token_button)
        choice_row.addWidget(self.download_button)
        return choice_row

    def _build_transfers(self) -> QHBoxLayout:
        """The downloads table and the row of its controls (Pause, Resume, Cancel, Open)."""
        self.transfers = _table([self.tr("Download"), self.tr("Progress"), self.tr("Status")])
        self.transfers.horizontalHeader().setSectionResizeMode(2, QHeaderView.ResizeMode.Stretch)
        self.transfers.itemSelectionChanged.connect(self._enable_controls)
        self.pause_button = QPushButton(self.tr("Pause"))
        self.resume_button = QPushButton(self.tr("Resume"))
        self.cancel_button = QPushButton(self.tr("Cancel download"))
        self.open_button = QPushButton(self.tr("Open"))
        self.pause_button.clicked.connect(lambda: self._control(self.downloads.pause))
        self.resume_button.clicked.connect(lambda: self._control(self.downloads.resume))
        self.cancel_button.clicked.connect(lambda: self._control(self.downloads.cancel))
        self.open_button.clicked.connect(self._open)
        controls = QHBoxLayout()
        controls.addStretch(1)
        for button in (self.pause_button, self.resume_button, self.cancel_button, self.open_button):
            controls.addWidget(button)
        return controls

    # Searching.

    def _spawn(self, coroutine: Coroutine[object, object, object]) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _say(self, text: str) -> None:
        self.message.setText(text)
        self.message.setVisible(bool(text))

    @Slot()
    def _search(self) -> None:
        self.search_button.setEnabled(False)
        self._say(self.tr("Searching…"))
        self._spawn(self._run_search(self.query.text(), str(self.sort.currentData())))

    async def _run_search(self, text: str, sort: str) -> None:
        try:
            rows, more = await self.downloads.search(
                text, _SORTS.get(sort, "downloads"), sees=self.sees.isChecked()
            )
        except HubError as exc:
            self._say(str(exc))
            rows, more = [], False
        else:
            self._say("" if rows else self.tr("No GGUF models match."))
        finally:
            self.search_button.setEnabled(True)
        self.results.setRowCount(0)
        self._add_results(rows, more)

    @Slot()
    def _more(self) -> None:
        self.more_button.setEnabled(False)
        self._spawn(self._run_more())

    async def _run_more(self) -> None:
        try:
            rows, more = await self.downloads.more()
        except HubError as exc:
            self._say(str(exc))
            return
        self._add_results(rows, more)

    def _add_results(self, rows: list[RepoRow], more: bool) -> None:
        for found in rows:
            row = self.results.rowCount()
            self.results.insertRow(row)
            name = found.repo_id + ("  " + self.tr("(gated)") if found.gated else "")
            _set_row(
                self.results,
                row,
                [name, f"{found.downloads:,}", f"{found.likes:,}", found.updated],
                found.repo_id,
            )
        self.more_button.setEnabled(more)

    # A repository.

    @Slot()
    def _show_repository(self) -> None:
        item = self.results.item(self.results.currentRow(), 0)
        if item is None:
            return
        repo_id = str(item.data(_ID_ROLE))
        self.choices.setRowCount(0)
        self.download_button.setEnabled(False)
        self.repo_facts.setText(self.tr("Reading {repo}…").format(repo=repo_id))
        self._spawn(self._run_repository(repo_id))

    async def _run_repository(self, repo_id: str) -> None:
        try:
            view = await self.downloads.repository(repo_id)
        except HubError as exc:
            self.repo_facts.setText(str(exc))
            return
        self.show_repository(view)

    def show_repository(self, view: RepoView) -> None:
        """Show a repository's models, the recommended one selected."""
        self._view = view
        facts = [
            view.repo_id,
            self.tr("licence: {licence}").format(licence=view.license or self.tr("not given")),
        ]
        if view.gated:
            facts.append(self.tr("gated: accept its terms on the Hub and give an access token"))
        if not view.choices:
            facts.append(self.tr("no GGUF model Floodgate can download"))
        if view.note:
            facts.append(view.note)
        self.repo_facts.setText(" · ".join(facts))
        self.choices.setRowCount(0)
        for choice in view.choices:
            row = self.choices.rowCount()
            self.choices.insertRow(row)
            label = choice.label
            if choice.parts > 1:
                label += "  " + self.tr("({n} parts)").format(n=choice.parts)
            if choice.projector:
                label += " " + choice.projector
            fit = choice.fit
            if choice.recommended:
                fit += " · " + self.tr("recommended")
            _set_row(
                self.choices,
                row,
                [label, choice.quantization, choice.size, choice.need, fit],
                choice.label,
            )
            if choice.recommended:
                self.choices.selectRow(row)
        self.download_button.setEnabled(bool(view.choices))

    @Slot()
    def _download(self) -> None:
        item = self.choices.item(self.choices.currentRow(), 0)
        if item is None:
            return
        row = self.downloads.download(str(item.data(_ID_ROLE)))
        if row is not None:
            self.show_download(row)

    @Slot()
    def _ask_token(self) -> None:
        # Opened, not exec()'d: a nested event loop would run the app's tasks inside it.
        dialog = QInputDialog(self)
        dialog.setWindowTitle(self.tr("Hugging Face access token"))
        dialog.setLabelText(
            self.tr(
                "A token lets Floodgate download gated and private models you have access "
                "to. It is kept in the system keyring."
            )
        )
        dialog.setTextEchoMode(QLineEdit.EchoMode.Password)
        dialog.textValueSelected.connect(lambda token: self._spawn(self._keep_token(token.strip())))
        dialog.finished.connect(dialog.deleteLater)
        dialog.open()
        self.token_dialog = dialog

    async def _keep_token(self, token: str) -> None:
        kept = await self.downloads.keep_token(token)
        if token and not kept:
            self._say(self.tr("There is no system keyring, so the token is not kept."))
        if self._view is not None:
            await self._run_repository(self._view.repo_id)

    # Downloads.

    @Slot(DownloadRow)
    def show_download(self, download: DownloadRow) -> None:
        """Show a download's progress (called at most every 0.1 s each)."""
        row = self._rows.get(download.id)
        if row is None:
            row = self.transfers.rowCount()
            self.transfers.insertRow(row)
            self._rows[download.id] = row
            made = QProgressBar()
            made.setRange(0, 1000)
            self.transfers.setCellWidget(row, 1, made)
        bar = self.transfers.cellWidget(row, 1)
        if isinstance(bar, QProgressBar):
            bar.setValue(round(download.fraction * 1000))
        status = download.progress + (f" · {download.sentence}" if download.sentence else "")
        _set_row(self.transfers, row, [download.label], download.id)
        status_item = QTableWidgetItem(status)
        status_item.setData(_ID_ROLE, download.id)
        self.transfers.setItem(row, 2, status_item)
        if self.transfers.currentRow() == row or self.transfers.currentRow() < 0:
            self._enable_controls()

    def _selected(self) -> DownloadRow | None:
        item = self.transfers.item(self.transfers.currentRow(), 0)
        if item is None:
            return None
        return self.downloads.rows.get(int(item.data(_ID_ROLE)))

    @Slot()
    def _enable_controls(self) -> None:
        row = self._selected()
        self.pause_button.setEnabled(row is not None and row.can_pause)
        self.resume_button.setEnabled(row is not None and row.can_resume)
        self.cancel_button.setEnabled(row is not None and row.can_cancel)
        self.open_button.setEnabled(row is not None and row.path is not None)

    def _control(self, action: object) -> None:
        row = self._selected()
        if row is not None and callable(action):
            action(row.id)

    @Slot()
    def _open(self) -> None:
        row = self._selected()
        if row is not None and row.path is not None:
            self.open_requested.emit(Path(row.path))
