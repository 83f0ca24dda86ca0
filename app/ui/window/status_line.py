"""The window's status line: the model's state (or the prompt's progress) and the flow's figures."""

from __future__ import annotations

from PySide6.QtCore import QCoreApplication, QObject, QSize, Qt, Slot
from PySide6.QtWidgets import QLabel

from app.flow.session import ChatSession


class StatusLine(QObject):
    """The labels of the status line: the model's state, the flow's figures, a download.

    :attr:`state_label`, :attr:`figures_label`, and :attr:`downloads_label` (a model
    downloading from the Hub, shown only while one is).
    """

    def __init__(self, session: ChatSession, parent: QObject) -> None:
        super().__init__(parent)
        self._session = session
        self.state_label = QLabel(session.describe_state())
        self.state_label.setObjectName("stateLabel")
        self.state_label.setTextFormat(Qt.TextFormat.PlainText)  # model names, server errors
        self.figures_label = QLabel("")
        self.figures_label.setObjectName("figuresLabel")
        self.downloads_label = QLabel("")
        self.downloads_label.setObjectName("downloadsLabel")
        self.downloads_label.setTextFormat(Qt.TextFormat.PlainText)  # file names from the Hub
        self.downloads_label.hide()

    def retranslate(self) -> None:
        """Word the model's state in the current language."""
        self.state_label.setText(self._session.describe_state())

    @Slot(str)
    def show_state(self, detail: str) -> None:
        """Show the model's state as the session words it."""
        self.state_label.setText(detail)

    @Slot(str)
    def show_progress(self, text: str) -> None:
        """Show the prompt's progress; an empty text means it is over."""
        self.state_label.setText(text or self._session.describe_state())

    @Slot(str)
    def show_downloads(self, text: str) -> None:
        """Show the download under way ("" hides the label)."""
        self.downloads_label.setText(text)
        self.downloads_label.setVisible(bool(text))

    @Slot()
    def show_figures(self) -> None:
        """Show the reply's rate and how full the queue is."""
        m = self._session.metrics
        rate = m.reply.tokens_per_s
        shown_rate = f"{rate:.1f}" if rate is not None else "-"
        parts = [
            QCoreApplication.translate("MainWindow", "{rate} tok/s").format(rate=shown_rate),
            QCoreApplication.translate("MainWindow", "queue {depth}/{bound}").format(
                depth=m.queue_depth, bound=m.queue_bound
            ),
        ]
        label = self.figures_label
        label.setText(" · ".join(parts))
        # Its size is fixed and only grows: a label whose size hint changes (other digits,
        # five times a second while a reply streams) has the status bar and the window laid
        # out again, 0.2 ms of the UI thread each time, taken from the decode threads.
        hint = label.sizeHint()
        size = QSize(max(hint.width(), label.minimumWidth()), hint.height())
        if label.minimumSize() != size or label.maximumSize() != size:
            label.setFixedSize(size)
