"""The multi-line prompt editor: Enter sends, Shift+Enter starts a new line."""

from __future__ import annotations

import math

from PySide6.QtCore import QEvent, QMimeData, Qt, QTimer, Signal
from PySide6.QtGui import QImage, QKeyEvent, QResizeEvent
from PySide6.QtWidgets import QPlainTextEdit, QSizePolicy, QWidget
from typing_extensions import override

from app.ui.composer.attachment_tray import has_files, paths_from_mime

MOST_LINES = 8
"""The composer grows with its text up to this many lines; longer text scrolls inside it."""


class Composer(QPlainTextEdit):
    """Where the user types. Emits :attr:`submitted` on Enter; never clears itself.

    Signals:
        submitted(): Enter (or keypad Enter) was pressed without Shift.
        stop_requested(): Esc was pressed (the window's Esc shortcut covers other widgets).
        picture_pasted(QImage): a picture itself (a screenshot) was pasted here.
        files_pasted(list[Path]): files copied in a file manager were pasted (or dropped) here;
            they are for attaching, so their addresses are not inserted as text.
    """

    submitted = Signal()
    stop_requested = Signal()
    files_pasted = Signal(list)
    picture_pasted = Signal(QImage)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("composer")
        self.setTabChangesFocus(True)
        self.setFrameShape(QPlainTextEdit.Shape.NoFrame)  # the rounded box around it is the frame
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        # Both: a new width re-wraps the text (size changed), and appended text changes the
        # line count without that signal; the count is right once the edit is laid out, so
        # the fit waits for the next turn of the loop (one timer, however fast the typing).
        self._refit = QTimer(self)
        self._refit.setSingleShot(True)
        self._refit.setInterval(0)
        self._refit.timeout.connect(self._fit)
        self.retranslate()
        self.document().documentLayout().documentSizeChanged.connect(self._fit)
        self.textChanged.connect(self._refit.start)
        self._fit()

    def _fit(self) -> None:
        """As tall as its text, from one line to :data:`MOST_LINES` (then it scrolls).

        Empty, as tall as its placeholder: in a narrow window (the diagnostics panel open)
        the hint wraps, and its second line was cut in half.
        """
        lines = min(MOST_LINES, max(1, math.ceil(self.document().size().height())))
        if self.document().isEmpty() and self.placeholderText():
            lines = min(MOST_LINES, max(lines, self._placeholder_lines()))
        margins = self.contentsMargins()
        frame = 2 * self.document().documentMargin() + margins.top() + margins.bottom()
        height = math.ceil(lines * self.fontMetrics().lineSpacing() + frame)
        # A scroll bar only once the text is taller than the composer may grow.
        self.setVerticalScrollBarPolicy(
            Qt.ScrollBarPolicy.ScrollBarAsNeeded
            if lines >= MOST_LINES
            else Qt.ScrollBarPolicy.ScrollBarAlwaysOff
        )
        if height != self.height() or self.minimumHeight() != height:
            self.setFixedHeight(height)

    def _placeholder_lines(self) -> int:
        """Lines the placeholder takes, wrapped at the width its text would have."""
        width = self.viewport().width() - 2 * math.ceil(self.document().documentMargin())
        if width <= 0:
            return 1
        metrics, flags = self.fontMetrics(), int(Qt.TextFlag.TextWordWrap)
        wrapped = metrics.boundingRect(0, 0, width, 1 << 20, flags, self.placeholderText())
        return max(1, math.ceil(wrapped.height() / metrics.lineSpacing()))

    @override
    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if self.document().isEmpty():
            self._refit.start()  # a new width wraps the placeholder anew

    def retranslate(self) -> None:
        """Set the placeholder and the name a screen reader reads, in the current language."""
        self.setAccessibleName(self.tr("Message"))
        self.setPlaceholderText(
            self.tr("Message the model… (Enter sends, Shift+Enter for a new line)")
        )
        self._refit.start()  # another language, another placeholder's length

    @override
    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.FontChange:
            self._fit()  # another language may bring another font (Chinese)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        """Send on Enter, stop on Esc; Shift+Enter is a new line."""
        if event.key() == Qt.Key.Key_Escape:
            # Handled here, not only by the window's shortcut: the editor is where the focus
            # is while a reply streams, and a shortcut needs the window to be active.
            event.accept()
            self.stop_requested.emit()
            return
        enter = event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter)
        if enter and not event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
            event.accept()
            self.submitted.emit()
            return
        super().keyPressEvent(event)

    @override
    def canInsertFromMimeData(self, source: QMimeData) -> bool:
        return has_files(source) or source.hasImage() or super().canInsertFromMimeData(source)

    @override
    def insertFromMimeData(self, source: QMimeData) -> None:
        """Files (pasted or dropped) become attachments; anything else is inserted as text."""
        paths = paths_from_mime(source)
        if paths:
            self.files_pasted.emit(paths)
            return
        # Office apps put a picture of the selection beside its text: the text is what was
        # copied. A picture alone (a screenshot) is attached.
        if source.hasImage() and not source.text().strip():
            image = source.imageData()
            if isinstance(image, QImage) and not image.isNull():
                self.picture_pasted.emit(image)
                return
        super().insertFromMimeData(source)
