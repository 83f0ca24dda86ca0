"""The attachments of the next prompt, as chips under the composer, and files from drops.

Each file the user attaches gets a chip: while it is read, its progress and a Cancel; once
read, its name, size, length in the open model's tokens and how long the model will take to
read it; if it cannot be attached, the sentence that says why. Under the chips, their total
against the room left in the context. Names come from anywhere and are shown as plain text,
never as markup.

The tray only shows and forwards intent: reading is :class:`~app.flow.attachments.
AttachmentReader`'s work, and the window wires the two together.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Final

from PySide6.QtCore import QCoreApplication, QEvent, QMimeData, QSize, Qt, QUrl, Signal
from PySide6.QtGui import QColor, QImage, QPalette, QPixmap, QResizeEvent
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)
from typing_extensions import override

from app.documents import Attachment
from app.store.media_files import picture_path
from app.ui.composer.attachment_wording import (
    duration_text,
    rooms_in_order,
    summary_text,
    total_text,
)
from app.ui.look.colors import theme_for
from app.ui.look.icon_button import ICON_PX
from app.ui.look.icons import icon
from app.ui.look.pictures import THUMBNAIL_PX, load_picture

MIN_PART_TOKENS: Final = 64
"""Less room than this, and offering "the part that fits" would offer almost nothing."""

NAME_WIDTH_EM: Final = 24
"""A chip shows at most this many average characters of a name; the rest is elided."""

LINES_SHOWN: Final = 14
"""The tray grows to this many lines of text (four chips or so); more scroll."""


class ChipState(Enum):
    """Where a chip's file is."""

    READING = "reading"
    READY = "ready"
    FAILED = "failed"


@dataclass
class _Entry:
    chip: AttachmentChip
    state: ChipState
    attachment: Attachment | None = None
    seconds: float | None = None
    before_cut: tuple[Attachment, float | None] | None = None
    """While the part that fits is being measured: what to go back to on Cancel."""
    problem: str = ""
    """Why the file cannot be attached, or why the part that fits could not be measured."""


def _error_color(widget: QWidget) -> QColor:
    return QColor(theme_for(widget.palette()).error)


class AttachmentChip(QFrame):
    """One attachment: a summary line, a progress bar, a sentence, and its buttons.

    The tray drives it; the chip only lays out what it is told, and its buttons are the
    tray's to connect.
    """

    def __init__(self, name: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.name = name
        self.setObjectName("attachmentChip")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Maximum)
        self.summary = _plain_label(self)
        self.summary.setObjectName("attachmentSummary")
        self.progress = QProgressBar(self)
        self.progress.setMaximumWidth(self.fontMetrics().averageCharWidth() * 16)
        self.progress.setTextVisible(False)
        self.cancel_button = QToolButton(self)
        self.cancel_button.setObjectName("attachmentCancel")
        self.remove_button = QToolButton(self)
        self.remove_button.setObjectName("attachmentRemove")
        self.remove_button.setText("\N{MULTIPLICATION SIGN}")  # for a screen reader's outline
        self.remove_button.setIcon(icon("x"))
        self.remove_button.setIconSize(QSize(ICON_PX - 2, ICON_PX - 2))
        self.remove_button.setAutoRaise(True)
        for button in (self.cancel_button, self.remove_button):
            button.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.problem = _plain_label(self)
        self.problem.setObjectName("attachmentProblem")
        self.problem.setWordWrap(True)
        self.note = _plain_label(self)
        self.note.setObjectName("attachmentNote")
        self.note.setWordWrap(True)
        self.include_button = QPushButton(self)
        self.include_button.setObjectName("attachmentIncludePart")
        self.include_button.setFocusPolicy(Qt.FocusPolicy.StrongFocus)

        self.thumbnail = QLabel(self)
        self.thumbnail.setObjectName("attachmentThumbnail")
        self.thumbnail.hide()
        self._picture: str | None = None
        top = QHBoxLayout()
        top.setContentsMargins(0, 0, 0, 0)
        top.addWidget(self.thumbnail)
        top.addWidget(self.summary, 1)
        top.addWidget(self.progress)
        top.addWidget(self.cancel_button)
        top.addWidget(self.remove_button)
        below = QHBoxLayout()
        below.setContentsMargins(0, 0, 0, 0)
        below.addWidget(self.include_button)
        below.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 3, 3, 3)
        layout.setSpacing(2)
        layout.addLayout(top)
        layout.addWidget(self.note)
        layout.addWidget(self.problem)
        layout.addLayout(below)
        self.retranslate()
        self.apply_colors()

    def show_picture(self, digest: str) -> None:
        """A thumbnail of the picture kept under ``digest`` (decoded off the UI thread)."""
        if self._picture == digest:
            return
        self._picture = digest
        side = QSize(THUMBNAIL_PX, THUMBNAIL_PX)
        load_picture(picture_path(digest), side, self, self._set_thumbnail)

    def _set_thumbnail(self, image: QImage) -> None:
        if image.isNull():
            return
        self.thumbnail.setPixmap(QPixmap.fromImage(image))
        self.thumbnail.show()

    def shown_name(self) -> str:
        """The name as the chip shows it: elided in the middle when long."""
        width = self.fontMetrics().averageCharWidth() * NAME_WIDTH_EM
        return self.fontMetrics().elidedText(self.name, Qt.TextElideMode.ElideMiddle, width)

    def retranslate(self) -> None:
        """The buttons' words and the names a screen reader reads."""
        self.remove_button.setToolTip(self.tr("Remove this attachment"))
        self.remove_button.setAccessibleName(self.tr("Remove {name}").format(name=self.name))
        self.cancel_button.setText(self.tr("Cancel"))
        self.cancel_button.setAccessibleName(self.tr("Stop reading {name}").format(name=self.name))
        self.include_button.setText(self.tr("Include the part that fits"))
        self.include_button.setAccessibleName(
            self.tr("Include the part of {name} that fits").format(name=self.name)
        )
        self.progress.setAccessibleName(self.tr("Reading {name}").format(name=self.name))
        # Tooltips are rich text when they look like it: the name is escaped, never markup.
        self.summary.setToolTip(f"<p>{html.escape(self.name)}</p>")

    def apply_colors(self) -> None:
        """A sentence about a problem in the theme's error colour (set again on a new palette)."""
        self.problem.setPalette(_warning_palette(self))

    @override
    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        # Here and not from the tray: a palette reaches the tray before its chips.
        if event.type() == QEvent.Type.PaletteChange:
            self.apply_colors()


def _warning_palette(widget: QWidget) -> QPalette:
    """A palette that sets only the text colour, to the theme's error colour.

    Every other role keeps following the widget's parent, and so the light or dark theme.
    """
    palette = QPalette()
    palette.setColor(QPalette.ColorRole.WindowText, _error_color(widget))
    return palette


def _plain_label(parent: QWidget) -> QLabel:
    label = QLabel(parent)
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    return label


class _ChipList(QScrollArea):
    """The chips, scrolling once they are taller than :data:`LINES_SHOWN` lines."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setWidgetResizable(True)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Maximum)
        self.setFocusPolicy(Qt.FocusPolicy.NoFocus)  # Tab goes from the prompt to the chips
        inner = QWidget(self)
        self.column = QVBoxLayout(inner)
        self.column.setContentsMargins(0, 0, 0, 0)
        self.column.setSpacing(3)
        self.column.addStretch(1)  # spare height below the chips, not inside them
        self.setWidget(inner)
        self.viewport().setAutoFillBackground(False)
        inner.setAutoFillBackground(False)

    @override
    def sizeHint(self) -> QSize:
        inner = self.widget()
        width = self.viewport().width()
        height = inner.heightForWidth(width) if inner is not None else -1
        if height < 0 and inner is not None:
            height = inner.sizeHint().height()
        cap = self.fontMetrics().lineSpacing() * LINES_SHOWN
        return QSize(super().sizeHint().width(), min(max(height, 0), cap))

    @override
    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self.updateGeometry()  # wrapped sentences take more or fewer lines at a new width

    @override
    def minimumSizeHint(self) -> QSize:
        return QSize(0, min(self.sizeHint().height(), self.fontMetrics().lineSpacing() * 2))


class AttachmentTray(QWidget):
    """The chips of the next prompt's attachments, and their total against the context.

    Feed it from an :class:`~app.flow.attachments.AttachmentReader`: ``started`` to
    :meth:`add_reading`, ``progress`` to :meth:`show_progress`, ``ready`` to
    :meth:`show_ready`, ``failed`` to :meth:`show_failed`, ``cancelled`` to
    :meth:`show_cancelled`. Tell it the room left with :meth:`set_room`.

    Signals:
        removed(str name): the user removed a read (or failed) attachment.
        cancel_requested(str name): the user cancelled a reading (its chip is gone already,
            or back to the whole file when it was the part that fits being measured).
        include_part_requested(str name): the user wants the part of an attachment that fits
            in :meth:`room_for` tokens; the chip shows it is being measured until
            :meth:`show_ready` brings the cut attachment.
    """

    removed = Signal(str)
    cancel_requested = Signal(str)
    include_part_requested = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("attachmentTray")
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Maximum)
        self._entries: dict[str, _Entry] = {}
        self._room: int | None = None
        self._list = _ChipList(self)
        self.total = _plain_label(self)
        self.total.setObjectName("attachmentTotal")
        self.total.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addWidget(self._list)
        layout.addWidget(self.total)
        self.setAccessibleName(self.tr("Attachments"))
        self.setVisible(False)

    # What the window asks.

    def names(self) -> list[str]:
        """Every chip's name, in order (reading, read and failed alike)."""
        return list(self._entries)

    def attachments(self) -> list[Attachment]:
        """The attachments read and ready to send, in order (failed and reading ones left out)."""
        return [
            e.attachment
            for e in self._entries.values()
            if e.state is ChipState.READY and e.attachment is not None
        ]

    def attachment(self, name: str) -> Attachment | None:
        """The attachment ``name``, if it is read."""
        entry = self._entries.get(name)
        return entry.attachment if entry is not None else None

    def chip(self, name: str) -> AttachmentChip | None:
        """The chip of ``name``, if there is one."""
        entry = self._entries.get(name)
        return entry.chip if entry is not None else None

    def state(self, name: str) -> ChipState | None:
        """Where ``name`` is: reading, ready or failed (None: no such chip)."""
        entry = self._entries.get(name)
        return entry.state if entry is not None else None

    @property
    def busy(self) -> bool:
        """Some file is still being read (Send should wait or say so)."""
        return any(e.state is ChipState.READING for e in self._entries.values())

    @property
    def tokens(self) -> int:
        """The tokens of the attachments ready to send."""
        return sum(a.tokens or 0 for a in self.attachments())

    @property
    def over(self) -> bool:
        """The attachments need more room than the context has left."""
        return self._room is not None and self.tokens > self._room

    def room_for(self, name: str) -> int | None:
        """The tokens ``name`` may take: the room left once the chips before it that fit are in.

        None when the room is not known (no model open). This is the number to cut to when
        :attr:`include_part_requested` asks.
        """
        return self._rooms().get(name)

    # What the reader reports.

    def add_reading(self, name: str) -> None:
        """A chip for a file being read: its name, a progress bar and a Cancel."""
        if name in self._entries:
            self._drop(name)
        chip = AttachmentChip(name, self._list.widget())
        chip.remove_button.clicked.connect(lambda: self._remove_clicked(name))
        chip.cancel_button.clicked.connect(lambda: self._cancel_clicked(name))
        chip.include_button.clicked.connect(lambda: self._include_clicked(name))
        self._entries[name] = _Entry(chip, ChipState.READING)
        self._list.column.insertWidget(self._list.column.count() - 1, chip)
        chip.show()  # now, not when the layout gets round to it: the tray may be shown already
        self._update()

    def show_progress(self, name: str, done: int, total: int) -> None:
        """Progress of a file being read (pages of a PDF, or bytes)."""
        entry = self._entries.get(name)
        if entry is None or entry.state is not ChipState.READING:
            return
        progress = entry.chip.progress
        progress.setRange(0, max(total, 0))
        progress.setValue(min(done, total))

    def show_ready(self, attachment: Attachment, seconds: float | None) -> None:
        """The file is read: its figures (a result for a chip removed meanwhile is dropped)."""
        entry = self._entries.get(attachment.name)
        if entry is None:
            return
        entry.state = ChipState.READY
        entry.attachment = attachment
        entry.seconds = seconds
        entry.before_cut = None
        entry.problem = ""
        self._update()

    def show_failed(self, name: str, sentence: str) -> None:
        """The file cannot be attached: the sentence on its chip, the others untouched."""
        entry = self._entries.get(name)
        if entry is None:
            return
        entry.problem = sentence
        if entry.before_cut is not None:  # measuring the part failed: the whole one stays
            entry.attachment, entry.seconds = entry.before_cut
            entry.before_cut = None
            entry.state = ChipState.READY
        else:
            entry.state = ChipState.FAILED
            entry.attachment = None
        self._update()

    def show_cancelled(self, name: str) -> None:
        """A reading stopped: the chip goes (or returns to the whole file after a cut)."""
        entry = self._entries.get(name)
        if entry is None or entry.state is not ChipState.READING:
            return
        if entry.before_cut is not None:
            entry.attachment, entry.seconds = entry.before_cut
            entry.before_cut = None
            entry.state = ChipState.READY
            self._update()
        else:
            self._drop(name)

    def set_room(self, tokens: int | None) -> None:
        """The tokens left in the context for the attachments (None: no model, unknown)."""
        if tokens != self._room:
            self._room = tokens
            self._update()

    def remove(self, name: str) -> None:
        """Take a chip away without a signal (the window's own doing)."""
        if name in self._entries:
            self._drop(name)

    def clear(self) -> None:
        """Take every chip away (the prompt was sent)."""
        for name in list(self._entries):
            self._drop(name)

    # Clicks.

    def _remove_clicked(self, name: str) -> None:
        entry = self._entries.get(name)
        if entry is None:
            return
        names = list(self._entries)
        index = names.index(name)
        if entry.state is ChipState.READING:
            self.cancel_requested.emit(name)
        self._drop(name)
        self.removed.emit(name)
        self._focus_near(names, index)

    def _cancel_clicked(self, name: str) -> None:
        entry = self._entries.get(name)
        if entry is None or entry.state is not ChipState.READING:
            return
        names = list(self._entries)
        self.show_cancelled(name)
        self.cancel_requested.emit(name)
        if name not in self._entries:
            self._focus_near(names, names.index(name))
        else:
            entry.chip.remove_button.setFocus(Qt.FocusReason.OtherFocusReason)

    def _include_clicked(self, name: str) -> None:
        entry = self._entries.get(name)
        if entry is None or entry.state is not ChipState.READY or entry.attachment is None:
            return
        entry.before_cut = (entry.attachment, entry.seconds)
        entry.state = ChipState.READING
        entry.problem = ""
        self._update()
        entry.chip.cancel_button.setFocus(Qt.FocusReason.OtherFocusReason)
        self.include_part_requested.emit(name)

    def _focus_near(self, names: list[str], index: int) -> None:
        """After a chip went, the focus goes to the chip that took its place (or the one before)."""
        rest = [n for n in names if n in self._entries]
        if not rest:
            return
        chip = self._entries[rest[min(index, len(rest) - 1)]].chip
        chip.remove_button.setFocus(Qt.FocusReason.OtherFocusReason)

    # Drawing.

    def _drop(self, name: str) -> None:
        entry = self._entries.pop(name)
        # Hidden first, so Qt moves a focus it had elsewhere now rather than at deletion.
        entry.chip.hide()
        self._list.column.removeWidget(entry.chip)
        entry.chip.deleteLater()
        self._update()

    def _rooms(self) -> dict[str, int]:
        """The room for each ready chip: the context left once the others that fit are in.

        The chips fill the context in order; one that does not fit where it comes is left
        out and takes no room, so the ones after it may still fit.
        """
        if self._room is None:
            return {}
        # A chip whose part that fits is being measured still holds its whole attachment: it
        # keeps its place, so room_for() answers for it while include_part_requested is handled.
        ready = {
            name: entry.attachment.tokens or 0
            for name, entry in self._entries.items()
            if entry.attachment is not None
            and (entry.state is ChipState.READY or entry.before_cut is not None)
        }
        return rooms_in_order(self._room, ready)

    def _update(self) -> None:
        rooms = self._rooms()
        for name in self._entries:
            _render_chip(self._entries[name], rooms.get(name))
        self._render_total()
        self.setVisible(bool(self._entries))
        self._list.updateGeometry()

    def duration_text(self, seconds: float) -> str:
        """``"about 19 s to read"`` / ``"about 3 min to read"``, in the current language."""
        return duration_text(seconds)

    def _render_total(self) -> None:
        ready = [e for e in self._entries.values() if e.state is ChipState.READY and e.attachment]
        counted = [e for e in ready if e.attachment is not None and e.attachment.tokens is not None]
        if not counted:
            self.total.setVisible(False)
            return
        seconds = [e.seconds for e in counted if e.seconds is not None]
        all_timed = bool(seconds) and len(seconds) == len(counted) and not self.over
        self.total.setText(total_text(self.tokens, self._room, sum(seconds) if all_timed else None))
        self.total.setPalette(_warning_palette(self) if self.over else QPalette())
        self.total.setVisible(True)

    @override
    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        kind = event.type()
        if kind == QEvent.Type.LanguageChange:
            self.setAccessibleName(self.tr("Attachments"))
            for entry in self._entries.values():
                entry.chip.retranslate()
            self._update()
        elif kind == QEvent.Type.PaletteChange:
            self._render_total()


def _render_chip(entry: _Entry, room: int | None) -> None:
    """Show a chip's state: reading, failed, or ready with its summary and any problem."""
    chip = entry.chip
    reading = entry.state is ChipState.READING
    chip.progress.setVisible(reading)
    chip.cancel_button.setVisible(reading)
    chip.remove_button.setVisible(not reading)
    chip.note.setVisible(False)
    chip.include_button.setVisible(False)
    chip.problem.setText(entry.problem)
    chip.problem.setVisible(bool(entry.problem))
    if entry.state is ChipState.FAILED:
        chip.summary.setText(chip.shown_name())
        return
    if reading:
        if entry.before_cut is not None:
            text = QCoreApplication.translate(
                "AttachmentTray", "{name} · measuring the part that fits…"
            )
            chip.progress.setRange(0, 0)
        else:
            text = QCoreApplication.translate("AttachmentTray", "{name} · reading…")
        chip.summary.setText(text.format(name=chip.shown_name()))
        return
    attachment = entry.attachment
    assert attachment is not None
    chip.summary.setText(summary_text(chip.shown_name(), attachment, entry.seconds))
    if attachment.is_picture and attachment.digest is not None:
        chip.show_picture(attachment.digest)
    if attachment.cut and attachment.kept_tokens is not None:
        chip.note.setText(
            QCoreApplication.translate(
                "AttachmentTray", "Cut to fit: only the first {kept} of {full} tokens are included."
            ).format(kept=f"{attachment.kept_tokens:,}", full=f"{attachment.full_tokens or 0:,}")
        )
        chip.note.setVisible(True)
    over = room is not None and attachment.tokens is not None and attachment.tokens > room
    if over and room is not None and attachment.tokens is not None:
        if room >= MIN_PART_TOKENS:
            sentence = QCoreApplication.translate(
                "AttachmentTray",
                "{name} is {tokens} tokens, more than the {room} left in the context.",
            )
            chip.include_button.setVisible(True)
        else:
            sentence = QCoreApplication.translate(
                "AttachmentTray",
                "There is no room left in the context for {name}: remove another "
                "attachment, or start a new conversation.",
            )
        if not entry.problem:  # a failed measure of the part says why first
            chip.problem.setText(
                sentence.format(
                    name=attachment.name, tokens=f"{attachment.tokens:,}", room=f"{room:,}"
                )
            )
        chip.problem.setVisible(True)


def paths_from_mime(mime: QMimeData) -> list[Path]:
    """The local files in dragged or pasted data, in order, each once.

    Files copied in a file manager arrive as URLs (``text/uri-list``; GNOME's Files also puts
    ``x-special/gnome-copied-files``). Web addresses and plain text are not files: a pasted
    path typed as text stays text for the composer.
    """
    urls = list(mime.urls()) if mime.hasUrls() else []
    gnome = "x-special/gnome-copied-files"
    if not urls and mime.hasFormat(gnome):
        lines = bytes(mime.data(gnome).data()).decode("utf-8", "replace").splitlines()
        urls = [QUrl(line) for line in lines[1:] if line]  # the first line is copy or cut
    paths: list[Path] = []
    for url in urls:
        if url.isLocalFile():
            path = Path(url.toLocalFile())
            if path not in paths:
                paths.append(path)
    return paths


def has_files(mime: QMimeData) -> bool:
    """Whether dragged or pasted data holds local files (accept the drag, take the paste)."""
    return bool(paths_from_mime(mime))
