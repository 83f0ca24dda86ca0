"""The attachment chips under the composer, and the reader that feeds them off the UI thread."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QMimeData, Qt, QTranslator, QUrl
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QApplication, QPlainTextEdit, QVBoxLayout, QWidget
from pytestqt.qtbot import QtBot

from app.documents import Attachment
from app.flow import attachments as attachments_module
from app.flow.attachments import AttachmentReader
from app.ui.composer.attachment_tray import AttachmentTray, ChipState, has_files, paths_from_mime
from app.ui.look.colors import theme_for
from tests.support.documents import PNG_HEADER, write_pdf
from tests.support.loop import Loop, run_until


def attachment(name: str = "notes.txt", tokens: int | None = 2300, **fields: Any) -> Attachment:
    values: dict[str, Any] = {"kind": "text", "size": 12 * 1024, "text": "body"}
    values.update(fields)
    return Attachment(name=name, tokens=tokens, **values)


class Form(QWidget):
    """A composer with the tray under it, as the window will have them."""

    def __init__(self) -> None:
        super().__init__()
        self.composer = QPlainTextEdit(self)
        self.composer.setTabChangesFocus(True)
        self.tray = AttachmentTray(self)
        layout = QVBoxLayout(self)
        layout.addWidget(self.composer)
        layout.addWidget(self.tray)


@pytest.fixture
def form(qtbot: QtBot) -> Form:
    widget = Form()
    qtbot.addWidget(widget)
    widget.resize(700, 400)
    widget.show()
    qtbot.waitExposed(widget)
    return widget


def ready(tray: AttachmentTray, item: Attachment, seconds: float | None = None) -> None:
    tray.add_reading(item.name)
    tray.show_ready(item, seconds)


def record(signal: Any) -> list[tuple[Any, ...]]:
    seen: list[tuple[Any, ...]] = []
    signal.connect(lambda *args: seen.append(args))
    return seen


def record_fields(signal: Any) -> list[tuple[Any, ...]]:
    """What a signal that carries one dataclass said, each as a tuple of its fields."""
    seen: list[tuple[Any, ...]] = []
    signal.connect(lambda event: seen.append(tuple(getattr(event, f.name) for f in fields(event))))
    return seen


# The chips.


def test_the_tray_is_hidden_until_something_is_attached(form: Form) -> None:
    assert not form.tray.isVisible()
    form.tray.add_reading("notes.txt")
    assert form.tray.isVisible()
    form.tray.clear()
    assert not form.tray.isVisible()
    assert form.tray.names() == []


def test_a_chip_reads_then_shows_size_tokens_and_time(form: Form, qtbot: QtBot) -> None:
    tray = form.tray
    tray.add_reading("notes.txt")
    chip = tray.chip("notes.txt")
    assert chip is not None
    assert chip.summary.text() == "notes.txt · reading…"
    assert chip.progress.isVisible()
    assert chip.cancel_button.isVisible()
    assert not chip.remove_button.isVisible()
    assert tray.busy
    tray.show_progress("notes.txt", 3, 12)
    assert (chip.progress.value(), chip.progress.maximum()) == (3, 12)

    tray.show_ready(attachment(), 19.2)
    assert chip.summary.text() == "notes.txt · 12 KB · 2,300 tokens, about 19 s to read"
    assert not chip.progress.isVisible()
    assert chip.remove_button.isVisible()
    assert not tray.busy
    assert tray.attachments() == [attachment()]
    assert tray.total.text() == "2,300 tokens in all, about 19 s to read"  # no room known
    tray.set_room(3500)
    assert (
        tray.total.text()
        == "Takes 2,300 of the 3,500 tokens left in the context, about 19 s to read"
    )
    assert tray.total.isVisible()


def test_a_pdf_chip_says_its_pages_and_long_reads_in_minutes(form: Form) -> None:
    tray = form.tray
    ready(tray, attachment("r.pdf", 40_000, kind="pdf", size=3 * 2**20, pages=120), 400.0)
    chip = tray.chip("r.pdf")
    assert chip is not None
    assert chip.summary.text() == "r.pdf · 3.0 MB · 120 pages · 40,000 tokens, about 7 min to read"


def test_without_a_model_a_chip_shows_what_it_knows(form: Form) -> None:
    tray = form.tray
    ready(tray, attachment(tokens=None))
    chip = tray.chip("notes.txt")
    assert chip is not None
    assert chip.summary.text() == "notes.txt · 12 KB"
    assert not tray.total.isVisible()
    ready(tray, attachment("b.txt", 100))
    assert tray.total.text() == "100 tokens in all"


def test_totals_follow_the_chips_and_warn_when_over(form: Form) -> None:
    tray = form.tray
    tray.set_room(3500)
    ready(tray, attachment("a.txt", 1800), 15.0)
    ready(tray, attachment("b.txt", 1300), 11.0)
    assert (
        tray.total.text()
        == "Takes 3,100 of the 3,500 tokens left in the context, about 26 s to read"
    )
    assert not tray.over
    normal = tray.total.palette().color(QPalette.ColorRole.WindowText)

    ready(tray, attachment("c.txt", 900), 7.0)
    assert tray.over
    assert tray.total.text() == (
        "4,000 tokens: more than the 3,500 left in the context. Remove an attachment or "
        "include part of it."
    )
    warning = tray.total.palette().color(QPalette.ColorRole.WindowText)
    assert warning == QColor(theme_for(tray.palette()).error)
    assert warning != normal

    tray.remove("b.txt")
    assert not tray.over
    assert tray.total.text().startswith("Takes 2,700 of the 3,500 tokens left in the context")
    assert tray.total.palette().color(QPalette.ColorRole.WindowText) == normal


def test_remove_works_from_the_keyboard(form: Form, qtbot: QtBot) -> None:
    tray = form.tray
    ready(tray, attachment("a.txt", 100))
    ready(tray, attachment("b.txt", 200))
    tray.set_room(1000)
    removed = record(tray.removed)
    form.composer.setFocus()
    qtbot.waitUntil(form.composer.hasFocus)

    qtbot.keyClick(form.composer, Qt.Key.Key_Tab)  # from the prompt to the first chip
    first = tray.chip("a.txt")
    assert first is not None
    qtbot.waitUntil(first.remove_button.hasFocus)
    assert first.remove_button.accessibleName() == "Remove a.txt"
    qtbot.keyClick(first.remove_button, Qt.Key.Key_Space)

    assert removed == [("a.txt",)]
    assert tray.names() == ["b.txt"]
    assert tray.total.text() == "Takes 200 of the 1,000 tokens left in the context"
    second = tray.chip("b.txt")
    assert second is not None
    qtbot.waitUntil(second.remove_button.hasFocus)  # the focus stays in the tray
    qtbot.keyClick(second.remove_button, Qt.Key.Key_Space)
    assert removed == [("a.txt",), ("b.txt",)]
    assert not tray.isVisible()


def test_hostile_names_are_shown_as_plain_text(form: Form) -> None:
    tray = form.tray
    name = "<b>x</b>.txt"
    ready(tray, attachment(name, 10))
    chip = tray.chip(name)
    assert chip is not None
    assert chip.summary.textFormat() == Qt.TextFormat.PlainText
    assert chip.summary.text().startswith("<b>x</b>.txt · ")
    assert chip.remove_button.accessibleName() == "Remove <b>x</b>.txt"
    assert chip.summary.toolTip() == "<p>&lt;b&gt;x&lt;/b&gt;.txt</p>"
    tray.show_failed(name, f"{name} is empty: there is nothing in it to read.")
    assert chip.problem.textFormat() == Qt.TextFormat.PlainText
    assert chip.problem.text().startswith("<b>x</b>.txt is empty")


def test_a_very_long_name_is_elided_on_the_chip_but_whole_for_a_screen_reader(form: Form) -> None:
    name = "a-very-long-name-" * 20 + ".txt"
    ready(form.tray, attachment(name, 10))
    chip = form.tray.chip(name)
    assert chip is not None
    assert "…" in chip.summary.text()
    assert chip.summary.text().endswith(".txt · 12 KB · 10 tokens")
    assert chip.remove_button.accessibleName() == f"Remove {name}"
    assert form.tray.width() <= form.width()


def test_a_failed_file_shows_its_sentence_and_is_not_sent(form: Form) -> None:
    tray = form.tray
    ready(tray, attachment("good.txt", 10))
    tray.add_reading("photo.png")
    tray.show_failed("photo.png", "photo.png is an image.")
    chip = tray.chip("photo.png")
    assert chip is not None
    assert tray.state("photo.png") is ChipState.FAILED
    assert chip.problem.text() == "photo.png is an image."
    assert chip.problem.isVisible()
    assert chip.remove_button.isVisible()
    assert chip.summary.text() == "photo.png"
    assert [a.name for a in tray.attachments()] == ["good.txt"]
    removed = record(tray.removed)
    chip.remove_button.click()
    assert removed == [("photo.png",)]
    assert tray.names() == ["good.txt"]


def test_cancel_takes_a_reading_chip_away_and_late_results_are_dropped(form: Form) -> None:
    tray = form.tray
    tray.add_reading("big.pdf")
    cancels = record(tray.cancel_requested)
    chip = tray.chip("big.pdf")
    assert chip is not None
    assert chip.cancel_button.accessibleName() == "Stop reading big.pdf"
    chip.cancel_button.click()
    assert cancels == [("big.pdf",)]
    assert tray.names() == []
    tray.show_ready(attachment("big.pdf"), None)  # the reader's answer, too late
    tray.show_failed("big.pdf", "x")
    tray.show_progress("big.pdf", 1, 2)
    assert tray.names() == []


def test_a_file_too_large_for_the_context_offers_the_part_that_fits(
    form: Form, qtbot: QtBot
) -> None:
    tray = form.tray
    tray.set_room(3500)
    ready(tray, attachment("small.txt", 500))
    ready(tray, attachment("book.txt", 12_000), 100.0)
    ready(tray, attachment("tail.txt", 1000))  # fits: the book, left out, takes no room
    chip = tray.chip("book.txt")
    assert chip is not None
    assert chip.problem.text() == (
        "book.txt is 12,000 tokens, more than the 2,000 left in the context."
    )
    assert chip.include_button.isVisible()
    assert chip.include_button.text() == "Include the part that fits"
    assert tray.room_for("book.txt") == 2000  # what small.txt and tail.txt leave
    assert tray.room_for("small.txt") == 2500
    assert tray.room_for("tail.txt") == 3000
    tail = tray.chip("tail.txt")
    assert tail is not None
    assert not tail.problem.isVisible()
    small = tray.chip("small.txt")
    assert small is not None
    assert not small.include_button.isVisible()

    asked = record(tray.include_part_requested)
    rooms: list[int | None] = []
    tray.include_part_requested.connect(lambda name: rooms.append(tray.room_for(name)))
    chip.include_button.setFocus()
    qtbot.keyClick(chip.include_button, Qt.Key.Key_Space)
    assert asked == [("book.txt",)]
    assert rooms == [2000]  # the room to cut to, asked while the part is being measured
    assert tray.state("book.txt") is ChipState.READING
    assert chip.summary.text() == "book.txt · measuring the part that fits…"
    assert [a.name for a in tray.attachments()] == ["small.txt", "tail.txt"]

    cut = attachment("book.txt", 1990, cut=True, kept_tokens=1950, full_tokens=11_960)
    tray.show_ready(cut, 25.0)
    assert tray.state("book.txt") is ChipState.READY
    assert chip.note.text() == "Cut to fit: only the first 1,950 of 11,960 tokens are included."
    assert not chip.problem.isVisible()
    assert not chip.include_button.isVisible()
    assert not tray.over


def test_cancelling_the_measure_of_a_part_keeps_the_whole_file(form: Form) -> None:
    tray = form.tray
    tray.set_room(1000)
    ready(tray, attachment("book.txt", 12_000))
    chip = tray.chip("book.txt")
    assert chip is not None
    chip.include_button.click()
    chip.cancel_button.click()
    assert tray.state("book.txt") is ChipState.READY
    assert tray.attachment("book.txt") == attachment("book.txt", 12_000)
    assert chip.include_button.isVisible()
    # A failed measure keeps it too, and says why.
    chip.include_button.click()
    tray.show_failed("book.txt", "Open a model first.")
    assert tray.state("book.txt") is ChipState.READY
    assert chip.problem.text() == "Open a model first."


def test_no_room_at_all_is_said_without_an_offer(form: Form) -> None:
    tray = form.tray
    tray.set_room(40)
    ready(tray, attachment("book.txt", 12_000))
    chip = tray.chip("book.txt")
    assert chip is not None
    assert chip.problem.text().startswith("There is no room left in the context for book.txt")
    assert not chip.include_button.isVisible()


def test_the_warning_colour_follows_a_dark_palette(form: Form, qapp: QApplication) -> None:
    tray = form.tray
    tray.set_room(10)
    ready(tray, attachment("a.txt", 100))
    light = tray.total.palette().color(QPalette.ColorRole.WindowText)
    dark = QPalette()
    for role, colour in (
        (QPalette.ColorRole.Window, "#202124"),
        (QPalette.ColorRole.Base, "#1b1b1b"),
        (QPalette.ColorRole.WindowText, "#e8e8e8"),
        (QPalette.ColorRole.Text, "#e8e8e8"),
    ):
        dark.setColor(role, QColor(colour))
    form.setPalette(dark)
    shown = tray.total.palette().color(QPalette.ColorRole.WindowText)
    assert shown == QColor(theme_for(dark).error)
    assert shown != light
    chip = tray.chip("a.txt")
    assert chip is not None
    assert chip.problem.palette().color(QPalette.ColorRole.WindowText) == shown
    # The rest of the chip follows the palette it is given.
    assert chip.summary.palette().color(QPalette.ColorRole.WindowText) == QColor("#e8e8e8")


# Files from drops and pastes.


def test_paths_come_from_local_file_urls_only(tmp_path: Path) -> None:
    mime = QMimeData()
    a, b = tmp_path / "a.txt", tmp_path / "b c.pdf"
    mime.setUrls(
        [
            QUrl.fromLocalFile(str(a)),
            QUrl("https://example.com/x.txt"),
            QUrl.fromLocalFile(str(b)),
            QUrl.fromLocalFile(str(a)),
        ]
    )
    assert paths_from_mime(mime) == [a, b]
    assert has_files(mime)
    text = QMimeData()
    text.setText(str(a))  # a path typed as text stays text
    assert paths_from_mime(text) == []
    assert not has_files(text)


def test_files_copied_in_gnome_files_are_found(tmp_path: Path) -> None:
    mime = QMimeData()
    url = QUrl.fromLocalFile(str(tmp_path / "é x.md")).toString(
        QUrl.ComponentFormattingOption.FullyEncoded
    )
    mime.setData("x-special/gnome-copied-files", f"copy\n{url}".encode())
    assert paths_from_mime(mime) == [tmp_path / "é x.md"]


# The reader, off the UI thread.


@pytest.fixture
def main_thread() -> threading.Thread:
    return threading.current_thread()


def word_counter(calls: list[str]) -> Callable[[str], int]:
    def count(text: str) -> int:
        calls.append(threading.current_thread().name)
        return len(text.split())

    return count


@pytest.fixture
def reader(loop: Loop) -> Iterator[AttachmentReader]:
    made = AttachmentReader(lambda text: len(text.split()), prefill_rate=lambda: 100.0)
    yield made
    loop.run_until_complete(made.close())


class Signals:
    def __init__(self, reader: AttachmentReader) -> None:
        self.started = record_fields(reader.started)
        self.progress = record(reader.progress)
        self.ready = record_fields(reader.ready)
        self.failed = record_fields(reader.failed)
        self.cancelled = record(reader.cancelled)

    def ended(self) -> int:
        return len(self.ready) + len(self.failed) + len(self.cancelled)


def test_files_are_read_and_counted_off_the_ui_thread(
    loop: Loop, tmp_path: Path, main_thread: threading.Thread
) -> None:
    calls: list[str] = []
    reader = AttachmentReader(word_counter(calls), prefill_rate=lambda: 50.0)
    signals = Signals(reader)
    (tmp_path / "notes.txt").write_text("one two three\n")
    (tmp_path / "photo.png").write_bytes(PNG_HEADER)
    write_pdf(tmp_path / "r.pdf", [["alpha beta"], ["gamma"]])
    try:
        names = reader.read([tmp_path / "notes.txt", tmp_path / "photo.png", tmp_path / "r.pdf"])
        assert names == ["notes.txt", "photo.png", "r.pdf"]
        assert [s[0] for s in signals.started] == names
        run_until(loop, lambda: signals.ended() == 3)
    finally:
        loop.run_until_complete(reader.close())
    by_name = {item.name: (item, seconds) for item, seconds in signals.ready}
    notes, seconds = by_name["notes.txt"]
    # Counted as the model receives it: "File: notes.txt", the fences and the text.
    assert notes.tokens == 7  # File: notes.txt ``` one two three ```
    assert seconds == pytest.approx(7 / 50.0)
    assert notes.text == "one two three\n"
    assert by_name["r.pdf"][0].pages == 2
    # A picture now (its first bytes say so), but only a header: damaged, said when attached.
    damaged = "is not a picture Floodgate can read (PNG, JPEG, WebP, GIF or BMP), or it is damaged."
    assert signals.failed == [("photo.png", f"photo.png {damaged}")]
    assert ("r.pdf", 2, 2) in signals.progress
    assert calls
    assert main_thread.name not in calls
    assert reader.reading == []


def test_two_files_of_one_name_get_names_of_their_own(
    reader: AttachmentReader, loop: Loop, tmp_path: Path
) -> None:
    signals = Signals(reader)
    for folder in ("x", "y", "z"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "notes.txt").write_text(f"from {folder}\n")
    paths = [tmp_path / f / "notes.txt" for f in ("x", "y", "z")]
    names = reader.read(paths, taken=["notes.txt (3)"])
    assert names == ["notes.txt", "notes.txt (2)", "notes.txt (4)"]
    run_until(loop, lambda: len(signals.ready) == 3)
    texts = {item.name: item.text for item, _ in signals.ready}
    assert texts == {
        "notes.txt": "from x\n",
        "notes.txt (2)": "from y\n",
        "notes.txt (4)": "from z\n",
    }


def test_a_failure_is_named_as_its_chip_is(
    reader: AttachmentReader, loop: Loop, tmp_path: Path
) -> None:
    signals = Signals(reader)
    (tmp_path / "empty.txt").write_bytes(b"")
    reader.read([tmp_path / "empty.txt"], taken=["empty.txt"])
    run_until(loop, lambda: signals.ended() == 1)
    assert signals.failed == [
        ("empty.txt (2)", "empty.txt (2) is empty: there is nothing in it to read.")
    ]


def test_a_large_pdf_can_be_cancelled_between_pages(
    reader: AttachmentReader, loop: Loop, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    signals = Signals(reader)
    path = write_pdf(tmp_path / "long.pdf", [[f"Page {n}"] for n in range(30)])
    gate = threading.Event()
    real = attachments_module.read_document

    def read_slowly(path: Path, **kwargs: Any) -> Any:
        report = kwargs["progress"]

        def progress(done: int, total: int) -> None:
            report(done, total)
            gate.wait(5)  # a page that takes long: the UI hears of it and cancels

        return real(path, **{**kwargs, "progress": progress})

    monkeypatch.setattr(attachments_module, "read_document", read_slowly)
    reader.read([path])
    run_until(loop, lambda: bool(signals.progress))
    assert signals.progress[0] == ("long.pdf", 0, 30)
    reader.cancel("long.pdf")
    gate.set()
    run_until(loop, lambda: signals.ended() == 1)
    assert signals.cancelled == [("long.pdf",)]
    assert signals.ready == []
    assert max(done for _, done, _ in signals.progress) < 30
    assert reader.reading == []


def test_the_window_keeps_running_while_a_file_is_counted(loop: Loop, tmp_path: Path) -> None:
    release = threading.Event()

    def slow_count(text: str) -> int:
        release.wait(5)
        return 1

    reader = AttachmentReader(slow_count)
    signals = Signals(reader)
    (tmp_path / "a.txt").write_text("x")
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        import asyncio

        while not signals.ready:
            ticks += 1
            if ticks == 20:
                release.set()
            await asyncio.sleep(0.001)

    try:
        reader.read([tmp_path / "a.txt"])
        loop.run_until_complete(tick())
    finally:
        loop.run_until_complete(reader.close())
    assert ticks >= 20  # the loop ran on while the count waited
    assert signals.ready[0][0].tokens == 1


def test_without_a_model_a_file_is_read_but_not_counted(loop: Loop, tmp_path: Path) -> None:
    reader = AttachmentReader(lambda text: None, prefill_rate=lambda: 100.0)
    signals = Signals(reader)
    (tmp_path / "a.txt").write_text("x y")
    try:
        reader.read([tmp_path / "a.txt"])
        run_until(loop, lambda: signals.ended() == 1)
    finally:
        loop.run_until_complete(reader.close())
    item, seconds = signals.ready[0]
    assert item.tokens is None
    assert seconds is None


def test_a_counter_that_fails_gives_a_sentence(loop: Loop, tmp_path: Path) -> None:
    def broken(text: str) -> int:
        raise RuntimeError("model closed")

    reader = AttachmentReader(broken)
    signals = Signals(reader)
    (tmp_path / "a.txt").write_text("x y")
    try:
        reader.read([tmp_path / "a.txt"])
        run_until(loop, lambda: signals.ended() == 1)
    finally:
        loop.run_until_complete(reader.close())
    assert signals.failed == [("a.txt", "The tokens of a.txt could not be counted: model closed")]


def test_a_large_text_is_counted_in_pieces_that_add_up(loop: Loop, tmp_path: Path) -> None:
    calls: list[str] = []
    reader = AttachmentReader(word_counter(calls))
    signals = Signals(reader)
    (tmp_path / "big.txt").write_text("five words on this line\n" * 40_000)  # 960,000 chars
    try:
        reader.read([tmp_path / "big.txt"])
        run_until(loop, lambda: signals.ended() == 1)
    finally:
        loop.run_until_complete(reader.close())
    item, _ = signals.ready[0]
    assert item.tokens == 200_000 + 4  # File: big.txt ``` ```
    assert len(calls) >= 5


def test_the_part_that_fits_comes_back_cut(reader: AttachmentReader, loop: Loop) -> None:
    signals = Signals(reader)
    text = "".join(f"line {n} has five words\n" for n in range(200))
    whole = Attachment(name="book.txt", kind="text", size=len(text), text=text, tokens=1004)
    reader.cut(whole, 300)
    run_until(loop, lambda: signals.ended() == 1)
    cut, seconds = signals.ready[0]
    assert cut.name == "book.txt"
    assert cut.cut
    assert cut.tokens is not None
    assert cut.tokens <= 300
    assert cut.full_tokens == 1000
    assert seconds == pytest.approx(cut.tokens / 100.0)


def test_cutting_without_a_model_says_to_open_one(loop: Loop) -> None:
    reader = AttachmentReader(lambda text: None)
    signals = Signals(reader)
    whole = Attachment(name="book.txt", kind="text", size=9, text="a b c d e", tokens=None)
    try:
        reader.cut(whole, 3)
        run_until(loop, lambda: signals.ended() == 1)
    finally:
        loop.run_until_complete(reader.close())
    assert signals.failed == [
        (
            "book.txt",
            "Open a model first: the part of book.txt that fits is measured in its tokens.",
        )
    ]


def test_closing_does_not_wait_for_a_stuck_read(loop: Loop, tmp_path: Path) -> None:
    release, begun = threading.Event(), threading.Event()

    def stuck(text: str) -> int:
        begun.set()
        release.wait(10)
        return 1

    reader = AttachmentReader(stuck)
    signals = Signals(reader)
    (tmp_path / "a.txt").write_text("x")
    reader.read([tmp_path / "a.txt"])
    run_until(loop, begun.is_set)  # the count has begun on the reader's thread
    started = time.monotonic()
    loop.run_until_complete(reader.close())
    closed_in = time.monotonic() - started
    release.set()
    assert closed_in < 5  # not the 10 s the count would hold it
    assert signals.ready == []


def test_the_reader_and_the_tray_together(form: Form, loop: Loop, tmp_path: Path) -> None:
    reader = AttachmentReader(lambda text: len(text.split()), prefill_rate=lambda: 10.0)
    tray = form.tray
    reader.started.connect(lambda started: tray.add_reading(started.name))
    reader.progress.connect(tray.show_progress)
    reader.ready.connect(lambda ready: tray.show_ready(ready.attachment, ready.seconds))
    reader.failed.connect(lambda failed: tray.show_failed(failed.name, failed.sentence))
    reader.cancelled.connect(tray.show_cancelled)
    tray.cancel_requested.connect(reader.cancel)
    tray.set_room(1000)
    (tmp_path / "main.py").write_text("print('hello world')\n")
    (tmp_path / "folder").mkdir()
    try:
        reader.read([tmp_path / "main.py", tmp_path / "folder"], taken=tray.names())
        assert tray.names() == ["main.py", "folder"]
        run_until(loop, lambda: not tray.busy)
    finally:
        loop.run_until_complete(reader.close())
    chip = tray.chip("main.py")
    assert chip is not None
    assert chip.summary.text() == "main.py · 21 B · 6 tokens, about 1 s to read"
    failed = tray.chip("folder")
    assert failed is not None
    assert failed.problem.text() == "folder is a folder. Attach the files inside it instead."
    assert [a.name for a in tray.attachments()] == ["main.py"]


def test_the_counter_gets_one_text_at_a_time(loop: Loop, tmp_path: Path) -> None:
    # Files are read two at a time, but a tokenizer is not to be entered from two threads.
    guard = threading.Lock()
    active, most = 0, 0

    def count(text: str) -> int:
        nonlocal active, most
        with guard:
            active += 1
            most = max(most, active)
        time.sleep(0.02)
        with guard:
            active -= 1
        return 1

    reader = AttachmentReader(count)
    signals = Signals(reader)
    paths = []
    for n in range(6):
        (tmp_path / f"{n}.txt").write_text(f"file {n}")
        paths.append(tmp_path / f"{n}.txt")
    try:
        reader.read(paths)
        run_until(loop, lambda: signals.ended() == 6)
    finally:
        loop.run_until_complete(reader.close())
    assert len(signals.ready) == 6
    assert most == 1


def test_a_closed_reader_starts_nothing(loop: Loop, tmp_path: Path) -> None:
    reader = AttachmentReader(lambda text: 1)
    signals = Signals(reader)
    loop.run_until_complete(reader.close())
    (tmp_path / "a.txt").write_text("x")
    assert reader.read([tmp_path / "a.txt"]) == []
    assert signals.started == []


def test_a_name_being_read_is_taken(reader: AttachmentReader, loop: Loop, tmp_path: Path) -> None:
    signals = Signals(reader)
    (tmp_path / "a.txt").write_text("x")
    first = reader.read([tmp_path / "a.txt"])
    second = reader.read([tmp_path / "a.txt"])  # dropped twice before the first is read
    assert (first, second) == (["a.txt"], ["a.txt (2)"])
    run_until(loop, lambda: signals.ended() == 2)
    assert sorted(item.name for item, _ in signals.ready) == ["a.txt", "a.txt (2)"]


class Shouting(QTranslator):
    """A translation into capitals, for the tray's and chips' words only."""

    def translate(
        self, context: str, source: str, disambiguation: str | None = None, n: int = -1
    ) -> str:
        shouted = source
        if context in ("AttachmentTray", "AttachmentChip"):
            shouted = re.sub(r"(^|\})([^{]*)", lambda m: m.group(1) + m.group(2).upper(), source)
        # PySide's tr() asks again with each base class's name while the answer equals the
        # source, and reads the very object it passed in, handed back, as no translation: so
        # every context gets an answer, and always a new string.
        return shouted.encode().decode()

    def isEmpty(self) -> bool:
        return False  # an empty translator is skipped


def test_the_chips_follow_a_change_of_language(
    form: Form, qtbot: QtBot, qapp: QApplication
) -> None:
    tray = form.tray
    tray.set_room(5000)
    ready(tray, attachment("notes.txt", 2300), 19.0)
    chip = tray.chip("notes.txt")
    assert chip is not None
    translator = Shouting()
    qapp.installTranslator(translator)
    try:
        qtbot.waitUntil(lambda: chip.remove_button.accessibleName() == "REMOVE notes.txt")
        qtbot.waitUntil(lambda: "ABOUT 19 S TO READ" in chip.summary.text())
        assert chip.summary.text() == "notes.txt · 12 KB · 2,300 TOKENS, ABOUT 19 S TO READ"
        assert (
            tray.total.text()
            == "TAKES 2,300 OF THE 5,000 TOKENS LEFT IN THE CONTEXT, ABOUT 19 S TO READ"
        )
    finally:
        qapp.removeTranslator(translator)
    qtbot.waitUntil(lambda: chip.remove_button.accessibleName() == "Remove notes.txt")
    assert chip.summary.text() == "notes.txt · 12 KB · 2,300 tokens, about 19 s to read"
