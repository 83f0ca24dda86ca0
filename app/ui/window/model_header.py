"""The header above the chat: the open model with its picker, its size and context, the title.

The picker lists the library's models (as their headers are read, off the UI thread), the
servers Floodgate connected to lately, and "Open model…"; choosing one switches models the way
File > Open model… and the library do, mid-conversation too. The header changes only when
the model, the list or the conversation's title changes: never while a reply streams.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QEvent, QSize, Qt, Signal, SignalInstance
from PySide6.QtGui import QAction, QActionGroup, QResizeEvent
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QMenu,
    QSizePolicy,
    QToolButton,
    QWidget,
)
from typing_extensions import override

from app.documents import size_text
from app.engine import ModelInfo
from app.engine.model_card import ModelCard
from app.flow.words import say_sentence
from app.ui.look.icon_button import ICON_PX
from app.ui.look.icons import icon


@dataclass(frozen=True)
class RemoteChoice:
    """A server the picker offers: its address and the model asked of it."""

    url: str
    model: str


def card_label(card: ModelCard) -> str:
    """A model as a list shows it: its name, its quantization and its size.

    The quantization tells apart two files of one model (their names are one).
    """
    return "  ·  ".join(filter(None, (card.name, card.quantization, size_text(card.size_bytes))))


class ModelHeader(QFrame):
    """The model in use (a button that opens the picker), what it is, and the chat's title.

    Signals:
        model_chosen(Path): a model of the library was picked.
        remote_chosen(RemoteChoice): a remembered server was picked.
        open_requested(): "Open model…" (a file dialog).
        connect_requested(): "Connect to a server…" (the server dialog).
        library_requested(): "Models and downloads…" (the library, with its Hub tab).
        menu_opening(): the picker is about to open (the list may be read again).
        draft_chosen(str): Draft model > a model of the open one's vocabulary, by its path
            ("" for none), to write ahead for it (the setting of that name).
    """

    model_chosen = Signal(Path)
    remote_chosen = Signal(RemoteChoice)
    open_requested = Signal()
    connect_requested = Signal()
    library_requested = Signal()
    menu_opening = Signal()
    draft_chosen = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("modelHeader")
        self.picker = QToolButton(self)
        self.picker.setObjectName("modelPicker")
        self.picker.setIcon(icon("cpu"))
        self.picker.setIconSize(QSize(ICON_PX, ICON_PX))
        self.picker.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.picker.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.picker.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.menu = QMenu(self.picker)
        self.menu.setObjectName("modelMenu")
        self.menu.aboutToShow.connect(self._fill_menu)
        self.picker.setMenu(self.menu)
        self.facts = QLabel(self)
        self.facts.setObjectName("modelFacts")
        self.facts.setTextFormat(Qt.TextFormat.PlainText)
        self.title = QLabel(self)
        self.title.setObjectName("conversationTitle")
        self.title.setTextFormat(Qt.TextFormat.PlainText)  # a title from anywhere: not markup
        self.title.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        # As wide as the room left (the title is elided to it), not as wide as the title.
        self.title.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        row = QHBoxLayout(self)
        row.setContentsMargins(10, 6, 14, 6)
        row.setSpacing(10)
        row.addWidget(self.picker)
        row.addWidget(self.facts)
        row.addStretch(1)
        row.addWidget(self.title, 2)
        self.model: ModelInfo | None = None
        self.cards: dict[Path, ModelCard] = {}
        self.remotes: list[RemoteChoice] = []
        self._title_text = ""
        self.retranslate()

    # -- what it shows --------------------------------------------------------------------------

    def show_model(self, info: ModelInfo | None) -> None:
        """The model now in use (None: none is open)."""
        self.model = info
        self._show_model()

    def show_loading(self, sentence: str) -> None:
        """A model is being opened: the sentence that says which, until it is ready."""
        self.facts.setText(sentence)

    def add_card(self, card: ModelCard) -> None:
        """A model of the library, read from its header (its size shows once it is known)."""
        self.cards[card.path.resolve()] = card
        if self.model is not None and card.path.resolve() == self.model.path.resolve():
            self._show_model()

    def add_problem(self, _sentence: str) -> None:
        """A file that could not be described is left out of the picker (the library says why)."""

    def set_remotes(self, remotes: list[RemoteChoice]) -> None:
        """The servers the picker offers (those connected to lately, most recent first)."""
        self.remotes = remotes

    def show_title(self, title: str) -> None:
        """The conversation's title (empty: a new chat)."""
        if title != self._title_text:
            self._title_text = title
            self._show_title()

    def _show_title(self) -> None:
        text = self._title_text or self.tr("New chat")
        room = self.title.width() if self.title.isVisible() else 400
        shown = self.title.fontMetrics().elidedText(text, Qt.TextElideMode.ElideRight, room)
        self.title.setText(shown)
        self.title.setToolTip(text if shown != text else "")

    def _show_model(self) -> None:
        info = self.model
        if info is None:
            self.picker.setText(self.tr("No model"))
            self.facts.setText("")
        else:
            self.picker.setText(info.name)
            self.facts.setText(self._facts(info))
            self.facts.setToolTip(self._where_details(info))
        self.picker.setAccessibleName(
            self.tr("Model: {name}. Choose another model").format(name=self.picker.text())
        )

    def _facts(self, info: ModelInfo) -> str:
        context = self.tr("{tokens} tokens of context").format(tokens=f"{info.n_ctx:,}")
        if info.chat_format == "remote":
            return self.tr("on a server") + " · " + context
        card = self.cards.get(info.path.resolve())
        facts = [context] if card is None else [size_text(card.size_bytes), context]
        if info.placement is not None:
            facts.append(say_sentence(info.placement.summary()))
        if info.sees or info.hears:
            senses = (
                self.tr("sees and hears")
                if info.sees and info.hears
                else self.tr("sees pictures")
                if info.sees
                else self.tr("hears sound")
            )
            facts.append(senses)
        return " · ".join(facts)

    def drafts(self) -> list[ModelCard]:
        """The models listed that can draft for the open one: its vocabulary's, smallest first.

        The tokenizer decides, not the name (a draft proposes token ids the model checks).
        """
        info = self.model
        card = self.cards.get(info.path.resolve()) if info is not None else None
        if card is None or not card.vocabulary:
            return []  # a remote, or a model not read yet
        return [
            other
            for path, other in sorted(self.cards.items(), key=lambda item: item[1].size_bytes)
            if other.vocabulary == card.vocabulary and path != card.path.resolve()
        ]

    @staticmethod
    def _where_details(info: ModelInfo) -> str:
        """Where the model runs and why, with what went wrong on the way (the tooltip)."""
        placement = info.placement
        if placement is None:
            return ""
        lines = [say_sentence(placement.details())]
        if placement.note is not None:
            lines.append(say_sentence(placement.note))
        return "\n".join(lines)

    def retranslate(self) -> None:
        """Every word of the header in the current language."""
        self.picker.setToolTip(self.tr("Choose the model that answers"))
        self._show_model()
        self._show_title()

    # -- the picker -----------------------------------------------------------------------------

    def _fill_menu(self) -> None:
        """Made anew each time it opens: cheap (a few entries), and never stale."""
        self.menu_opening.emit()
        menu = self.menu
        menu.clear()
        current = self.model.path.resolve() if self.model is not None else None
        menu.addSection(self.tr("On this computer"))
        if not self.cards:
            none = menu.addAction(self.tr("No models found yet"))
            none.setEnabled(False)
        for path, card in sorted(self.cards.items(), key=lambda item: item[1].name.lower()):
            action = menu.addAction(card_label(card))
            if path == current:
                action.setIcon(icon("check"))  # the one in use
            action.setToolTip(str(path))
            action.triggered.connect(lambda _=False, chosen=path: self.model_chosen.emit(chosen))
        self._add_drafts(menu)
        menu.addSection(self.tr("Servers"))
        for server in self.remotes:
            label = self.tr("{model} on {url}").format(model=server.model, url=server.url)
            action = menu.addAction(icon("server"), label)
            action.triggered.connect(lambda _=False, chosen=server: self.remote_chosen.emit(chosen))
        self._add(menu, "server", self.tr("Connect to a server…"), self.connect_requested)
        menu.addSeparator()
        self._add(menu, "folder-open", self.tr("Open model…"), self.open_requested)
        self._add(menu, "download", self.tr("Models and downloads…"), self.library_requested)

    def _add_drafts(self, menu: QMenu) -> None:
        """Draft model: None and each model that can write ahead for the open one, if any."""
        drafts = self.drafts()
        if not drafts or self.model is None:
            return
        submenu = menu.addMenu(self.tr("Draft model"))
        submenu.setObjectName("draftMenu")
        submenu.setToolTipsVisible(True)
        drafting = self.model.draft_model.resolve() if self.model.draft_model else None
        group = QActionGroup(submenu)
        choices = [(None, self.tr("None")), *((card.path, card_label(card)) for card in drafts)]
        for path, text in choices:
            action = submenu.addAction(text)
            action.setCheckable(True)
            action.setChecked(path is None if drafting is None else path == drafting)
            action.setToolTip(
                str(path)
                if path
                else self.tr("The open model writes every word itself, checking none ahead")
            )
            group.addAction(action)
            chosen = str(path) if path else ""
            action.triggered.connect(lambda _=False, chosen=chosen: self.draft_chosen.emit(chosen))

    @staticmethod
    def _add(menu: QMenu, name: str, text: str, signal: SignalInstance) -> QAction:
        action = menu.addAction(icon(name), text)
        action.triggered.connect(lambda _=False: signal.emit())
        return action

    @override
    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._show_title()  # elided to the room it has now

    @override
    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.LanguageChange:
            self.retranslate()
