"""The settings dialog: each value checked as it is typed, with a sentence under it if wrong.

Grouped into sections as tabs (Replies, Compute, Memory); a dialog of one section's fields (a
conversation's own sampling) shows them without tabs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from PySide6.QtCore import QCoreApplication, Signal, Slot
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.flow.words import say_sentence
from app.store.settings import FIELDS, SECTIONS, Field, Settings, parse, shown
from app.ui.look.colors import theme_for
from app.ui.look.style import follow_theme

Editor = QLineEdit | QPlainTextEdit | QComboBox | QSpinBox | QCheckBox


class SettingsDialog(QDialog):
    """Edits :class:`Settings`; OK stays disabled while any value is out of range.

    Args:
        settings: the values to start from.
        parent: the window.
        only: the names of the fields to show (None: all).
        title: the window's title (default "Settings").
        threads: the open model's threads in words (shown under the thread fields).
        devices: the GPUs the "Run models on" choice offers, as (ggml name, description).
        placement: where the open model runs, in words (shown under the compute fields).
        parallel: the replies the open model writes side by side, shown beside "Auto" (0:
            not known, or no local model).
        drafts: the models the "Draft model" choice offers (those of the open model's
            vocabulary), as (file, name).
        from_command_line: the fields whose values the command line set for this run (each
            is marked so; changed here, it is the user's from then on).

    Signals:
        settings_chosen(Settings): OK was pressed with valid values.
        measure_threads(): "Measure again" was pressed (the decode threads of the open model).
    """

    settings_chosen = Signal(Settings)
    measure_threads = Signal()

    def __init__(
        self,
        settings: Settings,
        parent: QWidget | None = None,
        *,
        only: Sequence[str] | None = None,
        title: str = "",
        threads: str = "",
        devices: Sequence[tuple[str, str]] = (),
        placement: str = "",
        parallel: int = 0,
        drafts: Sequence[tuple[str, str]] = (),
        from_command_line: frozenset[str] = frozenset(),
    ) -> None:
        super().__init__(parent)
        self.setObjectName("settingsDialog")
        follow_theme(self)
        self.setWindowTitle(title or self.tr("Settings"))
        self._settings = settings
        self._fields = [f for f in FIELDS if only is None or f.name in only]
        self.editors: dict[str, Editor] = {}
        self.problems: dict[str, QLabel] = {}
        self._devices = devices
        self._parallel = parallel
        self._drafts = drafts
        self._from_command_line = from_command_line
        forms = self._build_sections(settings)
        self._build_compute_lines(forms, placement, threads)
        self.note = QLabel(
            self.tr("Compute and memory settings apply when the model is opened again.")
        )
        self.note.setWordWrap(True)
        self.note.setVisible(any(f.reload for f in self._fields))
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        self.buttons.accepted.connect(self._accept)
        self.buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.sections)
        layout.addWidget(self.note)
        layout.addWidget(self.buttons)
        self._check()

    def _build_sections(self, settings: Settings) -> dict[str, QFormLayout]:
        """A form of each section's fields, each form a tab; returns the forms by section."""
        forms: dict[str, QFormLayout] = {}
        for field in self._fields:
            form = forms.setdefault(field.section, QFormLayout())
            label = QLabel(QCoreApplication.translate("Floodgate", field.label))
            tip = [QCoreApplication.translate("Floodgate", field.help)] if field.help else []
            if field.name in self._from_command_line:
                label.setText(self.tr("{label} (command line)").format(label=label.text()))
                tip.insert(
                    0,
                    self.tr(
                        "Set on the command line for this run; changed here, your choice "
                        "applies and is saved."
                    ),
                )
            label.setToolTip("\n\n".join(tip))
            form.addRow(label, self._editor(field, settings))
        self.sections = QTabWidget(self)
        self.sections.setObjectName("settingsSections")
        for section, title_text in SECTIONS:
            if section in forms:
                page = QWidget()
                page.setLayout(forms[section])
                self.sections.addTab(page, QCoreApplication.translate("Floodgate", title_text))
        self.sections.tabBar().setVisible(self.sections.count() > 1)
        return forms

    def _build_compute_lines(
        self, forms: dict[str, QFormLayout], placement: str, threads: str
    ) -> None:
        """Under the compute fields: where the open model runs, its threads, Measure again."""
        # Where the open model runs, under the compute fields.
        self.placement = QLabel(placement)
        self.placement.setObjectName("placementNow")
        self.placement.setWordWrap(True)
        self.placement.setVisible(bool(placement) and "compute" in forms)
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
        if "compute" in forms:
            forms["compute"].addRow(self.placement)
            forms["compute"].addRow(self.threads)
            forms["compute"].addRow(self.measure)

    def _editor(self, field: Field, settings: Settings) -> QWidget:
        """The field's editor with its problem line under it."""
        editor: Editor
        if field.kind == "text":
            editor = QPlainTextEdit(getattr(settings, field.name))
            editor.setMaximumHeight(editor.fontMetrics().lineSpacing() * 5)
            editor.textChanged.connect(self._check)
        elif field.kind == "choice":
            editor = self._device_choice(getattr(settings, field.name))
            editor.currentIndexChanged.connect(self._check)
        elif field.kind == "model":
            editor = self._draft_choice(getattr(settings, field.name))
            editor.currentIndexChanged.connect(self._check)
        elif field.kind == "flag":
            editor = QCheckBox()
            editor.setChecked(bool(getattr(settings, field.name)))
            editor.toggled.connect(self._check)
        elif field.zero:
            editor = self._count(field, getattr(settings, field.name))
            editor.valueChanged.connect(self._check)
        else:
            editor = QLineEdit(shown(settings, field))
            editor.textChanged.connect(self._check)
        editor.setObjectName(f"setting_{field.name}")
        if field.help:
            editor.setToolTip(QCoreApplication.translate("Floodgate", field.help))
        problem = QLabel()
        problem.setObjectName(f"problem_{field.name}")
        palette = problem.palette()
        palette.setColor(QPalette.ColorRole.WindowText, QColor(theme_for(self.palette()).error))
        problem.setPalette(palette)
        problem.hide()
        column = QVBoxLayout()
        column.setContentsMargins(0, 0, 0, 0)
        column.addWidget(editor)
        column.addWidget(problem)
        holder = QWidget()
        holder.setLayout(column)
        self.editors[field.name] = editor
        self.problems[field.name] = problem
        return holder

    def _device_choice(self, current: str) -> QComboBox:
        """Auto, CPU only, then each GPU (and the saved one, if it is not there now)."""
        box = QComboBox()
        box.addItem(self.tr("Auto (the GPU, if there is one)"), "auto")
        box.addItem(self.tr("CPU only"), "cpu")
        for name, description in self._devices:
            box.addItem(f"{description} ({name})" if description else name, name)
        if box.findData(current) < 0:
            box.addItem(self.tr("{name} (not found now)").format(name=current), current)
        box.setCurrentIndex(box.findData(current))
        return box

    def _draft_choice(self, current: str) -> QComboBox:
        """None, then each model that can draft for the open one (and the saved one)."""
        box = QComboBox()
        box.addItem(self.tr("None"), "")
        for path, name in self._drafts:
            box.addItem(name, path)
        if box.findData(current) < 0:
            box.addItem(
                self.tr("{name} (not of the open model's vocabulary, or not found)").format(
                    name=Path(current).name
                ),
                current,
            )
        box.setCurrentIndex(box.findData(current))
        return box

    def _count(self, field: Field, current: int) -> QSpinBox:
        """A whole number in the field's range, its 0 in words ("Auto", with the open model's)."""
        box = QSpinBox()
        box.setRange(int(field.minimum), int(field.maximum))
        zero = QCoreApplication.translate("Floodgate", field.zero)
        if field.name == "parallel" and self._parallel > 0:
            zero = self.tr("{auto} ({n} now)").format(auto=zero, n=self._parallel)
        box.setSpecialValueText(zero)
        box.setValue(current)
        return box

    def _text(self, field: Field) -> str:
        editor = self.editors[field.name]
        if isinstance(editor, QSpinBox):
            return str(editor.value())
        if isinstance(editor, QComboBox):
            return str(editor.currentData())
        if isinstance(editor, QCheckBox):
            return "on" if editor.isChecked() else "off"
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
                label.setText(say_sentence(problem))
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
