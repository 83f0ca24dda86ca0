"""The settings dialog: each value checked as it is typed, with a sentence under it if wrong."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from PySide6.QtCore import QCoreApplication, Signal, Slot
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.store.settings import FIELDS, Field, Settings, parse, shown
from app.ui.look.colors import theme_for
from app.ui.look.style import follow_theme


class SettingsDialog(QDialog):
    """Edits :class:`Settings`; OK stays disabled while any value is out of range.

    Signals:
        settings_chosen(Settings): OK was pressed with valid values.
        measure_threads(): "Measure again" was pressed (the decode threads of the open model).
    """

    settings_chosen = Signal(object)
    measure_threads = Signal()

    def __init__(
        self,
        settings: Settings,
        parent: QWidget | None = None,
        *,
        only: Sequence[str] | None = None,
        title: str = "",
        threads: str = "",
    ) -> None:
        super().__init__(parent)
        self.setObjectName("settingsDialog")
        follow_theme(self)
        self.setWindowTitle(title or self.tr("Settings"))
        self._settings = settings
        self._fields = [f for f in FIELDS if only is None or f.name in only]
        self.editors: dict[str, QLineEdit | QPlainTextEdit] = {}
        self.problems: dict[str, QLabel] = {}
        form = QFormLayout()
        error = QColor(theme_for(self.palette()).error)
        for field in self._fields:
            editor: QLineEdit | QPlainTextEdit
            if field.kind == "text":
                editor = QPlainTextEdit(getattr(settings, field.name))
                editor.setMaximumHeight(editor.fontMetrics().lineSpacing() * 5)
                editor.textChanged.connect(self._check)
            else:
                editor = QLineEdit(shown(settings, field))
                editor.textChanged.connect(self._check)
            editor.setObjectName(f"setting_{field.name}")
            problem = QLabel()
            problem.setObjectName(f"problem_{field.name}")
            palette = problem.palette()
            palette.setColor(QPalette.ColorRole.WindowText, error)
            problem.setPalette(palette)
            problem.hide()
            column = QVBoxLayout()
            column.setContentsMargins(0, 0, 0, 0)
            column.addWidget(editor)
            column.addWidget(problem)
            holder = QWidget()
            holder.setLayout(column)
            form.addRow(QCoreApplication.translate("Floodgate", field.label), holder)
            self.editors[field.name] = editor
            self.problems[field.name] = problem
        self.note = QLabel(
            self.tr("Context size, threads and batch size apply when the model is opened again.")
        )
        self.note.setWordWrap(True)
        self.note.setVisible(any(f.reload for f in self._fields))
        # The open model's threads as measured or set, and a way to measure them again.
        self.threads = QLabel(threads)
        self.threads.setObjectName("threadsNow")
        self.threads.setWordWrap(True)
        self.measure = QPushButton(self.tr("Measure decode threads again"))
        self.measure.setObjectName("measureThreads")
        self.measure.setToolTip(
            self.tr("A few seconds of decoding at each thread count; the fastest is kept.")
        )
        self.measure.clicked.connect(self._measure)
        shows_threads = bool(threads) and any(f.name == "decode_threads" for f in self._fields)
        self.threads.setVisible(shows_threads)
        self.measure.setVisible(shows_threads)
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        self.buttons.accepted.connect(self._accept)
        self.buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.threads)
        layout.addWidget(self.measure)
        layout.addWidget(self.note)
        layout.addWidget(self.buttons)
        self._check()

    def _text(self, field: Field) -> str:
        editor = self.editors[field.name]
        return editor.toPlainText() if isinstance(editor, QPlainTextEdit) else editor.text()

    def values(self) -> tuple[dict[str, Any], bool]:
        """The values typed, and whether all of them are valid."""
        values: dict[str, Any] = {}
        valid = True
        for field in self._fields:
            value, problem = parse(field, self._text(field))
            label = self.problems[field.name]
            if problem is None:
                values[field.name] = value
                label.hide()
            else:
                valid = False
                label.setText(
                    QCoreApplication.translate("Floodgate", problem.template).format(
                        **problem.fields
                    )
                )
                label.show()
        return values, valid

    @Slot()
    def _check(self) -> None:
        _, valid = self.values()
        ok = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        ok.setEnabled(valid)

    @Slot()
    def _measure(self) -> None:
        self.measure.setEnabled(False)
        self.threads.setText(self.tr("Measuring; the status line shows the progress."))
        self.measure_threads.emit()

    @Slot()
    def _accept(self) -> None:
        values, valid = self.values()
        if not valid:
            return
        self.settings_chosen.emit(replace(self._settings, **values))
        self.accept()
