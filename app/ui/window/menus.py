"""The main window's menus: File, Chat and View, their shortcuts and their words."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import QObject, Signal, SignalInstance
from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import QDockWidget, QMainWindow, QMenu

from app.ui.composer.attachments import ATTACH_SHORTCUT
from app.ui.look.language import LANGUAGE_CHOICES
from app.ui.look.theme import THEME_CHOICES

Shortcut = QKeySequence.StandardKey | str | None


class WindowMenus(QObject):
    """Builds the menu bar of ``window`` and says which item was chosen.

    Each item either calls the window's method given for it or emits one of the signals
    below, which the application wires to dialogs.

    Signals:
        theme_chosen(str), language_chosen(str): a View > Theme or View > Language choice.
        settings_requested(), models_requested(), server_requested(): a File menu dialog.
    """

    theme_chosen = Signal(str)
    language_chosen = Signal(str)
    settings_requested = Signal()
    models_requested = Signal()
    server_requested = Signal()

    def __init__(
        self,
        window: QMainWindow,
        actions: dict[str, Callable[[], object]],
        docks: Sequence[tuple[QDockWidget, str]],
    ) -> None:
        """Build the menus.

        Args:
            window: the window whose menu bar this is.
            actions: what the window does for ``open``, ``clear_cache``, ``quit``, ``new``,
                ``attach``, ``regenerate``,
                ``system_prompt``, ``conversation_settings``, ``export_markdown``,
                ``export_json`` and ``import``.
            docks: the dock widgets View shows and hides, each with its shortcut.
        """
        super().__init__(window)
        self._window = window
        bar = window.menuBar()
        self.file_menu = bar.addMenu("")
        self.open_action = self._add(self.file_menu, actions["open"], QKeySequence.StandardKey.Open)
        self.models_action = self._add(self.file_menu, self.models_requested.emit, "Ctrl+M")
        self.server_action = self._add(self.file_menu, self.server_requested.emit)
        self.settings_action = self._add(self.file_menu, self.settings_requested.emit, "Ctrl+,")
        self.clear_cache_action = self._add(self.file_menu, actions["clear_cache"])
        self.file_menu.addSeparator()
        self.quit_action = self._add(self.file_menu, actions["quit"], QKeySequence.StandardKey.Quit)

        self.chat_menu = bar.addMenu("")
        chat = self.chat_menu
        self.new_action = self._add(chat, actions["new"], QKeySequence.StandardKey.New)
        self.attach_action = self._add(chat, actions["attach"], ATTACH_SHORTCUT)
        self.regenerate_action = self._add(chat, actions["regenerate"], "Ctrl+R")
        self.system_prompt_action = self._add(chat, actions["system_prompt"])
        self.conversation_settings_action = self._add(chat, actions["conversation_settings"])
        chat.addSeparator()
        self.export_markdown_action = self._add(chat, actions["export_markdown"])
        self.export_json_action = self._add(chat, actions["export_json"])
        self.import_action = self._add(chat, actions["import"])

        self.view_menu = bar.addMenu("")
        for dock, shortcut in docks:
            toggle = dock.toggleViewAction()
            toggle.setShortcut(QKeySequence(shortcut))
            self.view_menu.addAction(toggle)
        self.view_menu.addSeparator()
        self.theme_menu = self.view_menu.addMenu("")
        self.theme_actions = self._choices(self.theme_menu, THEME_CHOICES, self.theme_chosen)
        self.language_menu = self.view_menu.addMenu("")
        self.language_actions = self._choices(
            self.language_menu, LANGUAGE_CHOICES, self.language_chosen
        )

    def _add(self, menu: QMenu, slot: Callable[[], object], shortcut: Shortcut = None) -> QAction:
        action = QAction(self._window)
        if shortcut is not None:
            action.setShortcut(QKeySequence(shortcut))
        action.triggered.connect(lambda _=False: slot())
        menu.addAction(action)
        return action

    def _choices(
        self, menu: QMenu, choices: Sequence[str], chosen: SignalInstance
    ) -> dict[str, QAction]:
        group = QActionGroup(self._window)
        actions = {}
        for choice in choices:
            action = QAction(self._window)
            action.setCheckable(True)
            action.setData(choice)
            action.triggered.connect(lambda _=False, c=choice: chosen.emit(c))
            group.addAction(action)
            menu.addAction(action)
            actions[choice] = action
        return actions

    def show_choices(self, theme: str, language: str) -> None:
        """Tick the theme and language in effect."""
        self.theme_actions[theme].setChecked(True)
        self.language_actions[language].setChecked(True)

    def retranslate(self) -> None:
        """Set every menu text in the current language."""
        self.file_menu.setTitle(self.tr("&File"))
        self.open_action.setText(self.tr("&Open model…"))
        self.settings_action.setText(self.tr("&Settings…"))
        self.clear_cache_action.setText(self.tr("Clear the &prompt cache"))
        self.models_action.setText(self.tr("&Models…"))
        self.server_action.setText(self.tr("&Connect to a server…"))
        self.quit_action.setText(self.tr("&Quit"))
        self.view_menu.setTitle(self.tr("&View"))
        self.chat_menu.setTitle(self.tr("&Chat"))
        self.new_action.setText(self.tr("&New chat"))
        self.attach_action.setText(self.tr("&Attach files…"))
        self.regenerate_action.setText(self.tr("&Regenerate the last reply"))
        self.system_prompt_action.setText(self.tr("&System prompt…"))
        self.conversation_settings_action.setText(self.tr("Sampling for this &conversation…"))
        self.export_markdown_action.setText(self.tr("Export as &Markdown…"))
        self.export_json_action.setText(self.tr("Export as &JSON…"))
        self.import_action.setText(self.tr("&Import a conversation…"))
        self.theme_menu.setTitle(self.tr("&Theme"))
        self.theme_actions["system"].setText(self.tr("Follow the system"))
        self.theme_actions["light"].setText(self.tr("Light"))
        self.theme_actions["dark"].setText(self.tr("Dark"))
        self.language_menu.setTitle(self.tr("&Language"))
        self.language_actions["system"].setText(self.tr("Follow the system"))
        # Each language is named in itself, so it can be found whatever is shown now.
        self.language_actions["en"].setText("English")
        self.language_actions["zh_CN"].setText("中文（简体）")
