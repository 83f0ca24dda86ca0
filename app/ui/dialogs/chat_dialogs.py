"""The dialogs of the Chat and File menus that act on the conversation or pick a file.

Each opens without blocking the event loop (``open()``, never ``exec()``) and hands its result
to the session. Their words keep the main window's translation context, where they were born.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from pathlib import Path

from PySide6.QtCore import QCoreApplication
from PySide6.QtWidgets import QFileDialog, QInputDialog, QWidget

from app.flow.session import ChatSession
from app.store.settings import SAMPLING, overrides
from app.ui.dialogs.settings_dialog import SettingsDialog
from app.ui.look.style import follow_theme

Spawn = Callable[[Coroutine[object, object, object]], None]


def choose_model_file(parent: QWidget, session: ChatSession) -> None:
    """Ask for a .gguf file, then open it."""
    current = session.model.path.parent if session.model else Path.home()
    dialog = QFileDialog(
        parent,
        QCoreApplication.translate("MainWindow", "Open model"),
        str(current),
        QCoreApplication.translate("MainWindow", "GGUF models (*.gguf);;All files (*)"),
    )
    dialog.setFileMode(QFileDialog.FileMode.ExistingFile)
    dialog.fileSelected.connect(lambda name: session.open_model(Path(name)))
    follow_theme(dialog)
    dialog.open()


def edit_system_prompt(parent: QWidget, session: ChatSession) -> None:
    """Edit this conversation's system prompt."""
    dialog = QInputDialog(parent)
    dialog.setWindowTitle(QCoreApplication.translate("MainWindow", "System prompt"))
    dialog.setLabelText(
        QCoreApplication.translate(
            "MainWindow", "Instructions the model gets before the conversation (empty: none):"
        )
    )
    dialog.setOption(QInputDialog.InputDialogOption.UsePlainTextEditForTextInput)
    dialog.setTextValue(session.conversation.system_prompt)
    dialog.textValueSelected.connect(session.set_system_prompt)
    follow_theme(dialog)
    dialog.open()


def edit_conversation_settings(parent: QWidget, session: ChatSession) -> None:
    """This conversation's own sampling settings; values equal to the app's are not kept."""
    base, own = session.sampling()
    dialog = SettingsDialog(
        own,
        parent,
        only=SAMPLING,
        title=QCoreApplication.translate("MainWindow", "Sampling for this conversation"),
    )
    dialog.settings_chosen.connect(
        lambda chosen: session.set_conversation_settings(overrides(chosen, base))
    )
    dialog.finished.connect(dialog.deleteLater)
    dialog.open()


def choose_export_file(parent: QWidget, session: ChatSession, kind: str, spawn: Spawn) -> None:
    """Ask where to export the conversation, then write it off the UI thread."""
    suffix = ".json" if kind == "json" else ".md"
    title = session.conversation.title or "conversation"
    name = "".join(c if c.isalnum() or c in " -_" else "_" for c in title).strip()
    dialog = QFileDialog(
        parent, QCoreApplication.translate("MainWindow", "Export conversation"), name + suffix
    )
    dialog.setAcceptMode(QFileDialog.AcceptMode.AcceptSave)
    dialog.setNameFilter(
        QCoreApplication.translate("MainWindow", "JSON (*.json)")
        if kind == "json"
        else QCoreApplication.translate("MainWindow", "Markdown (*.md)")
    )
    dialog.fileSelected.connect(lambda path: spawn(session.export_conversation(Path(path), kind)))
    follow_theme(dialog)
    dialog.open()


def choose_import_file(parent: QWidget, session: ChatSession, spawn: Spawn) -> None:
    """Ask for a conversation exported as JSON, then import it."""
    dialog = QFileDialog(
        parent,
        QCoreApplication.translate("MainWindow", "Import a conversation"),
        "",
        QCoreApplication.translate("MainWindow", "JSON (*.json)"),
    )
    dialog.setFileMode(QFileDialog.FileMode.ExistingFile)
    dialog.fileSelected.connect(lambda path: spawn(session.import_conversation(Path(path))))
    follow_theme(dialog)
    dialog.open()
