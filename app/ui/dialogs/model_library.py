"""The model library: the GGUF files Floodgate knows, described from their headers."""

from __future__ import annotations

import html
from pathlib import Path

from PySide6.QtCore import Qt, Signal, SignalInstance, Slot
from PySide6.QtGui import QAction
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QMenu,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.engine.model_card import ModelCard, short_count
from app.flow.hub_downloads import HubDownloads
from app.ui.dialogs.hub_panel import HubPanel
from app.ui.look.style import follow_theme

PATH_ROLE = Qt.ItemDataRole.UserRole


def _size(n: int) -> str:
    for unit, size in (("GB", 2**30), ("MB", 2**20), ("KB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def _plain_tooltip(text: str) -> str:
    """``text`` as a tooltip that shows it as it is (Qt guesses rich text in tooltips)."""
    return f"<p style='white-space:pre'>{html.escape(text)}</p>"


class ModelLibrary(QDialog):
    """A table of model files; rows arrive as their headers are read (off the UI thread).

    With ``hub``, a second tab searches the Hugging Face Hub and downloads models; a finished
    download is added to the table (by the caller, through :meth:`add_card`).

    Signals:
        open_requested(Path): Open (or a double-click) on a model.
        add_requested(): Add a file….
        projector_requested(Path): Projector > Choose a file… for the selected model.
        no_projector_requested(Path): Projector > None: it reads text only.
        projector_reset_requested(Path): Projector > The one in its folder (forget a choice).
    """

    open_requested = Signal(Path)
    add_requested = Signal()
    projector_requested = Signal(Path)
    no_projector_requested = Signal(Path)
    projector_reset_requested = Signal(Path)

    def __init__(
        self,
        current: Path | None,
        parent: QWidget | None = None,
        hub: HubDownloads | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("modelLibrary")
        follow_theme(self)
        self.setWindowTitle(self.tr("Models"))
        self.resize(900, 560 if hub is not None else 360)
        self._current = current.resolve() if current else None
        self.table = self._build_table()
        self.problems = QLabel()
        # File names and header strings come from files anyone can make: never markup.
        self.problems.setTextFormat(Qt.TextFormat.PlainText)
        self.problems.setWordWrap(True)
        self.problems.hide()
        buttons = self._build_buttons()
        local = QWidget()
        local_layout = QVBoxLayout(local)
        local_layout.addWidget(self.table, 1)
        local_layout.addWidget(self.problems)
        local_layout.addLayout(buttons)
        layout = QVBoxLayout(self)
        self.hub_panel: HubPanel | None = None
        if hub is None:
            layout.addWidget(local)
            return
        self.hub_panel = HubPanel(hub)
        self.hub_panel.open_requested.connect(self._open_downloaded)
        self.tabs = QTabWidget()
        self.tabs.addTab(local, self.tr("On this computer"))
        self.tabs.addTab(self.hub_panel, self.tr("Hugging Face Hub"))
        layout.addWidget(self.tabs)

    def _build_table(self) -> QTableWidget:
        """The table of model files, one row each; a double-click opens one."""
        table = QTableWidget(0, 7)
        table.setHorizontalHeaderLabels(
            [
                self.tr("Name"),
                self.tr("Architecture"),
                self.tr("Parameters"),
                self.tr("Quantization"),
                self.tr("Context"),
                self.tr("Size"),
                self.tr("Chat template"),
            ]
        )
        table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        table.verticalHeader().hide()
        # The name takes the room; the facts beside it are as wide as their words (and headers).
        header = table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        table.cellDoubleClicked.connect(lambda row, _: self._open_row(row))
        return table

    def _build_buttons(self) -> QHBoxLayout:
        """Add a file…, Projector (a menu), Open (the default) and Close."""
        self.open_button = QPushButton(self.tr("Open"))
        self.open_button.setDefault(True)
        self.open_button.clicked.connect(lambda: self._open_row(self.table.currentRow()))
        add = QPushButton(self.tr("Add a file…"))
        add.clicked.connect(self.add_requested)
        self.projector_button = QPushButton(self.tr("Projector"))
        self.projector_button.setToolTip(
            self.tr(
                "The projector (an mmproj file) that lets the selected model see pictures: "
                "one chosen by hand, none, or the one in the model's folder"
            )
        )
        menu = QMenu(self.projector_button)
        self.projector_actions: list[QAction] = []
        """Choose a file…, None, The one in its folder."""
        for text, signal in (
            (self.tr("Choose a file…"), self.projector_requested),
            (self.tr("None: read text only"), self.no_projector_requested),
            (self.tr("The one in its folder"), self.projector_reset_requested),
        ):
            action = menu.addAction(text)
            action.triggered.connect(lambda _=False, signal=signal: self._for_selected(signal))
            self.projector_actions.append(action)
        self.projector_button.setMenu(menu)
        close = QPushButton(self.tr("Close"))
        close.clicked.connect(self.reject)
        for other in (add, self.projector_button, close):
            other.setAutoDefault(False)  # Enter opens the selected model, wherever the focus is
        buttons = QHBoxLayout()
        buttons.addWidget(add)
        buttons.addWidget(self.projector_button)
        buttons.addStretch(1)
        buttons.addWidget(self.open_button)
        buttons.addWidget(close)
        return buttons

    @Slot(Path)
    def _open_downloaded(self, path: Path) -> None:
        self.open_requested.emit(path)
        self.accept()

    def add_card(self, card: ModelCard) -> None:
        """Show one model (the one in use is marked and selected); each path once.

        A model already listed is shown again as ``card`` says (a projector chosen for it).
        """
        listed = [p.resolve() for p in self.paths()]
        if card.path.resolve() in listed:
            row = listed.index(card.path.resolve())
        else:
            row = self.table.rowCount()
            self.table.insertRow(row)
        in_use = self._current is not None and card.path.resolve() == self._current
        marker = self.tr("in use")
        name = f"{card.name}  ({marker})" if in_use else card.name
        if card.sees:
            name += "  · " + self.tr("sees pictures")
        if card.hears:
            name += "  · " + self.tr("hears sound")
        cells = [
            name,
            card.architecture,
            short_count(card.parameters),
            card.quantization,
            str(card.context_length or ""),
            _size(card.size_bytes),
            self.tr("yes") if card.has_chat_template else self.tr("no (generic format)"),
        ]
        for column, text in enumerate(cells):
            item = QTableWidgetItem(text)
            item.setData(PATH_ROLE, str(card.path))
            where = str(card.path)
            if card.projector is not None:
                where += "\n" + self.tr("Projector: {path}").format(path=card.projector)
            item.setToolTip(_plain_tooltip(where))
            self.table.setItem(row, column, item)
        if in_use or self.table.currentRow() < 0:
            self.table.selectRow(row)

    def add_problem(self, sentence: str) -> None:
        """Say that a file could not be described (it is left out of the table)."""
        text = self.problems.text()
        self.problems.setText(f"{text}\n{sentence}" if text else sentence)
        self.problems.show()

    def _path(self, row: int) -> Path | None:
        item = self.table.item(row, 0)
        return Path(item.data(PATH_ROLE)) if item is not None else None

    def paths(self) -> list[Path]:
        """The models listed, top to bottom."""
        found = (self._path(r) for r in range(self.table.rowCount()))
        return [p for p in found if p is not None]

    def _for_selected(self, signal: SignalInstance) -> None:
        path = self._path(self.table.currentRow())
        if path is not None:
            signal.emit(path)

    @Slot(int)
    def _open_row(self, row: int) -> None:
        path = self._path(row) if row >= 0 else None
        if path is None:
            return
        self.open_requested.emit(path)
        self.accept()
