"""View > Record a flow trace…: starting and stopping :data:`app.trace.TRACE` from the window.

:class:`TraceRecording` owns the recording state the window shows: a checkable action for the
View menu, and an indicator for the status bar that says a trace is being recorded (and for
how long) and, when it stops, that the file is being written. The file is written off the UI
thread (:meth:`Tracer.stop_async`).
"""

from __future__ import annotations

import time
from concurrent.futures import Future
from pathlib import Path

from PySide6.QtCore import QObject, QTimer, Signal, Slot
from PySide6.QtGui import QAction, QPalette
from PySide6.QtWidgets import QFileDialog, QLabel, QWidget

from app.trace import TRACE, Tracer
from app.ui.look.style import follow_theme


class TraceRecording(QObject):
    """Records a flow trace on demand, with an action to toggle it and an indicator.

    Wiring, in the main window::

        self.trace_recording = TraceRecording(self)
        self.view_menu.addAction(self.trace_recording.action)
        self.statusBar().addPermanentWidget(self.trace_recording.indicator)
        self.trace_recording.finished.connect(lambda text: self.statusBar().showMessage(text, 8000))
        # on language change: self.trace_recording.retranslate()

    and for ``floodgate --trace FILE``, once the window exists: ``trace_recording.start(path)``
    (before closing, :meth:`stop_now` writes the file on the spot).

    Signals:
        finished(str): a sentence for the user once the file is written, or why it was not.
        recording_changed(bool): recording started (True) or stopped (False).

    Args:
        parent: the window; file dialogs open over it.
        tracer: the tracer to drive (the process's :data:`TRACE` unless a test gives another).
    """

    finished = Signal(str)
    recording_changed = Signal(bool)
    _written = Signal(Future)

    def __init__(self, parent: QWidget, tracer: Tracer = TRACE) -> None:
        super().__init__(parent)
        self._window = parent
        self._tracer = tracer
        self._started_at = 0.0
        self._writing = False
        self.action = QAction(parent)
        self.action.setObjectName("recordTrace")
        self.action.setCheckable(True)
        self.action.triggered.connect(self._on_triggered)
        self.indicator = QLabel()
        self.indicator.setObjectName("traceIndicator")
        self.indicator.hide()
        self._clock = QTimer(self)
        self._clock.setInterval(1000)
        self._clock.timeout.connect(self._show_state)
        self._written.connect(self._on_written)
        self.retranslate()

    @property
    def recording(self) -> bool:
        """Whether a trace is being recorded."""
        return self._tracer.recording

    def retranslate(self) -> None:
        """Set the words in the current language."""
        self.action.setText(self.tr("Record a flow trace…"))
        self.action.setToolTip(
            self.tr("Record what the flow does, as a trace for Perfetto or chrome://tracing")
        )
        self._show_state()

    def choose_and_start(self) -> None:
        """Ask where to write the trace, then start recording (the dialog is not modal)."""
        dialog = QFileDialog(self._window, self.tr("Record a flow trace"), "floodgate-trace.json")
        dialog.setAcceptMode(QFileDialog.AcceptMode.AcceptSave)
        dialog.setNameFilter(self.tr("Trace files (*.json)"))
        dialog.setDefaultSuffix("json")
        dialog.fileSelected.connect(lambda name: self.start(Path(name)))
        dialog.rejected.connect(self._show_state)
        dialog.finished.connect(dialog.deleteLater)
        follow_theme(dialog)
        dialog.open()

    def start(self, path: Path) -> None:
        """Start recording into ``path`` (written when the recording stops)."""
        self._tracer.name_thread("UI")
        self._tracer.start(path)
        self._started_at = time.monotonic()
        self._clock.start()
        self._show_state()
        self.recording_changed.emit(True)

    def stop(self) -> None:
        """Stop recording; the file is written on a thread of its own, then :attr:`finished`."""
        if not self._tracer.recording:
            return
        self._clock.stop()
        self._writing = True
        # The callback runs on the writer thread; the signal brings the result to this one.
        self._tracer.stop_async(self._written.emit)
        self._show_state()
        self.recording_changed.emit(False)

    def stop_now(self) -> Path | None:
        """Stop and write the file before returning (at exit, when there is no later)."""
        if not self._tracer.recording:
            return None
        self._clock.stop()
        try:
            path = self._tracer.stop()
        except OSError as error:
            self.finished.emit(self._failed_text(error))
            path = None
        self._show_state()
        self.recording_changed.emit(False)
        return path

    @Slot(bool)
    def _on_triggered(self, checked: bool) -> None:
        if self._tracer.recording:
            self.stop()
        else:
            self.choose_and_start()
        self._show_state()

    @Slot(Future)
    def _on_written(self, future: Future[Path | None]) -> None:
        self._writing = False
        error = future.exception()
        if error is not None:
            self.finished.emit(self._failed_text(error))
        else:
            path = future.result()
            if path is not None:
                self.finished.emit(self.tr("Flow trace written to {path}").format(path=path))
        self._show_state()

    def _failed_text(self, error: BaseException) -> str:
        return self.tr("The flow trace could not be written: {reason}").format(reason=error)

    @Slot()
    def _show_state(self) -> None:
        recording = self._tracer.recording
        # The action's check mark follows the recording, also when a dialog was cancelled.
        self.action.setChecked(recording)
        if recording:
            seconds = int(time.monotonic() - self._started_at)
            self.indicator.setText(
                self.tr("● Recording a flow trace ({time})").format(
                    time=f"{seconds // 60}:{seconds % 60:02d}"
                )
            )
            self.indicator.setToolTip(self.tr("View > Record a flow trace… again to stop"))
            self.indicator.setForegroundRole(QPalette.ColorRole.BrightText)
            self.indicator.show()
        elif self._writing:
            self.indicator.setText(self.tr("Writing the flow trace…"))
            self.indicator.setForegroundRole(QPalette.ColorRole.WindowText)
            self.indicator.show()
        else:
            self.indicator.hide()
