"""The conversation view: Markdown replies streamed into real widgets, offscreen."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator

import pytest
from PySide6.QtCore import QObject, QPoint, QRect, Qt, QUrl, Slot
from PySide6.QtGui import (
    QDesktopServices,
    QFont,
    QFontInfo,
    QGuiApplication,
    QImage,
    QPaintEvent,
    QPalette,
    QTextDocument,
)
from PySide6.QtWidgets import QApplication, QLabel, QWidget
from pytestqt.qtbot import QtBot

from app.markdown.stream import render_blocks
from app.store.database import ConversationSummary
from app.ui.chat.chat_view import ChatView
from app.ui.chat.rows import tail as tails
from app.ui.chat.rows.base import Row
from app.ui.chat.rows.code import CodeRow
from app.ui.chat.rows.document_text import appended_text
from app.ui.chat.rows.header import HeaderRow
from app.ui.chat.rows.tail import TailPlace
from app.ui.chat.rows.text import FOLD_LINES, TextRow, ThinkingRow, theme_for
from app.ui.chat.rows.text_block import TextBlock
from app.ui.window.sidebar import Sidebar
from tests.support.markdown_corpus import CORPUS, REASONING

REPLY = "\n\n".join(CORPUS[k] for k in ("nested lists", "table row by row", "cjk and emoji"))
REPLY += (
    "\n\n```python\nprint('a line of code long enough to need a horizontal scroll bar"
    " to be read in full')\n```\n"
)


def stream(view: ChatView, text: str, seed: int = 0) -> None:
    rng = random.Random(seed)
    view.begin_reply("Model")
    i = 0
    while i < len(text):
        n = rng.randint(1, 7)
        view.append_to_reply(text[i : i + n])
        i += n
    view.end_reply()


def body_rows(view: ChatView) -> list[Row]:
    return [r for r in view.stack.rows if not isinstance(r, HeaderRow | ThinkingRow)]


def test_a_streamed_reply_has_one_row_per_markdown_block(view: ChatView) -> None:
    stream(view, REPLY)
    blocks = render_blocks(REPLY)
    rows = body_rows(view)
    assert [r.kind for r in rows] == [b.kind for b in blocks]
    assert [r.block for r in rows if isinstance(r, TextRow | CodeRow)] == blocks
    # Rows are stacked top to bottom without overlap, and the view can scroll to all of them.
    tops = [r.geometry().top() for r in view.stack.rows]
    assert tops == sorted(tops)
    assert view.stack.height() == sum(r.height() for r in view.stack.rows)


def test_final_rows_are_not_rendered_again_however_long_the_reply(view: ChatView) -> None:
    view.begin_reply()
    for i in range(200):
        view.append_to_reply(f"Paragraph {i} of a long answer.\n\n")
    rows = body_rows(view)
    before = [r.renders for r in rows]
    view.append_to_reply("One more word")
    after = [r.renders for r in body_rows(view)]
    assert after[: len(before) - 1] == before[:-1]  # everything above the tail: untouched
    assert len(after) == len(before) + 1  # the new paragraph got its own row


def test_the_view_follows_until_scrolled_up_with_markdown(view: ChatView) -> None:
    bar = view.verticalScrollBar()
    view.begin_reply("Model")
    view.append_to_reply(REPLY * 3)
    assert bar.maximum() > 0
    assert bar.value() == bar.maximum()  # following the reply
    assert view.pinned
    bar.setValue(bar.maximum() // 2)  # the user scrolls up to read
    assert not view.pinned
    reading = bar.value()
    for piece in REPLY.split(" "):
        view.append_to_reply(piece + " ")
    assert bar.maximum() > 2 * reading  # the reply grew below
    assert bar.value() == reading  # and what the user reads stayed put
    bar.setValue(bar.maximum())  # back to the bottom: following again
    assert view.pinned
    view.append_to_reply("\n\n" + REPLY)
    view.end_reply()
    assert bar.value() == bar.maximum()


def test_code_block_shows_language_copies_and_scrolls_long_lines(
    view: ChatView, qtbot: QtBot
) -> None:
    stream(view, REPLY)
    (code,) = [r for r in view.stack.rows if isinstance(r, CodeRow)]
    assert code.block is not None
    assert code.block.language == "python"
    assert code.language_label.text() == "python"
    qtbot.mouseClick(code.copy_button, Qt.MouseButton.LeftButton)
    assert QGuiApplication.clipboard().text() == code.code
    assert code.code.startswith("print('a line of code")
    # A long line scrolls sideways instead of wrapping.
    assert code.scroll_bar().maximum() > 0


def test_copy_a_whole_reply_as_markdown(view: ChatView, qtbot: QtBot) -> None:
    stream(view, REPLY)
    header = [r for r in view.stack.rows if isinstance(r, HeaderRow)][-1]
    qtbot.mouseClick(header.copy_button, Qt.MouseButton.LeftButton)
    assert QGuiApplication.clipboard().text() == REPLY


def test_user_messages_are_plain_text(view: ChatView) -> None:
    view.add_user_message("**not bold** <b>tag</b>")
    row = view.stack.rows[-1]
    assert isinstance(row, TextRow)
    assert row.label.textFormat() == Qt.TextFormat.PlainText
    assert row.label.text() == "**not bold** <b>tag</b>"


class LinkCatcher(QObject):
    def __init__(self) -> None:
        super().__init__()
        self.opened: list[str] = []

    @Slot(QUrl)
    def open(self, url: QUrl) -> None:
        self.opened.append(url.toString())


@pytest.fixture
def links() -> Iterator[LinkCatcher]:
    catcher = LinkCatcher()
    for scheme in ("https", "http", "file", "mailto"):
        QDesktopServices.setUrlHandler(scheme, catcher, "open")
    yield catcher
    for scheme in ("https", "http", "file", "mailto"):
        QDesktopServices.unsetUrlHandler(scheme)


def test_a_clicked_link_opens_in_the_browser_only_if_it_is_web_or_mail(
    view: ChatView, links: LinkCatcher
) -> None:
    stream(view, "Read [the docs](https://example.com/docs).")
    (row,) = body_rows(view)
    assert isinstance(row, TextRow)
    assert "(https://example.com/docs)" in row.label.text()  # the address is shown
    row.label.link_activated.emit("https://example.com/docs")
    row.label.link_activated.emit("file:///etc/passwd")
    assert links.opened == ["https://example.com/docs"]


def test_thinking_folds_away_once_the_answer_starts(view: ChatView, qtbot: QtBot) -> None:
    stream(view, REASONING)
    (toggle,) = [r for r in view.stack.rows if isinstance(r, ThinkingRow)]
    assert not toggle.expanded
    assert toggle.seconds is not None
    assert "Thought for" in toggle.button.text()
    thinking = [r for r in body_rows(view) if isinstance(r, TextRow) and r.role == "thinking"]
    assert thinking
    assert all(r.height() == 0 or not r.isVisible() for r in thinking)
    assert "That is 4." not in view.toPlainText()
    assert "The answer is **4**." in view.toPlainText()
    qtbot.mouseClick(toggle.button, Qt.MouseButton.LeftButton)
    assert toggle.expanded
    assert all(r.isVisible() and r.height() > 0 for r in thinking)
    assert "That is 4." in view.toPlainText()


def test_stopped_while_thinking_keeps_the_thinking(view: ChatView) -> None:
    view.begin_reply()
    view.append_to_reply("<think>Considering the options")
    view.end_reply("Stopped.")
    (toggle,) = [r for r in view.stack.rows if isinstance(r, ThinkingRow)]
    assert toggle.seconds is not None
    toggle.button.click()
    assert "Considering the options" in view.toPlainText()


def test_a_dark_palette_restyles_every_row(view: ChatView) -> None:
    stream(view, REPLY)
    assert not view.theme.dark
    dark = QPalette(view.palette())
    dark.setColor(QPalette.ColorRole.Window, Qt.GlobalColor.black)
    dark.setColor(QPalette.ColorRole.Base, Qt.GlobalColor.black)
    dark.setColor(QPalette.ColorRole.Text, Qt.GlobalColor.white)
    dark.setColor(QPalette.ColorRole.WindowText, Qt.GlobalColor.white)
    view.setPalette(dark)
    assert view.theme.dark
    (code,) = [r for r in view.stack.rows if isinstance(r, CodeRow)]
    assert code.theme.dark
    texts = [r for r in body_rows(view) if isinstance(r, TextRow)]
    assert all(r.label.style_sheet == view.theme.css for r in texts)
    # The document shows it: the code spans' background is the dark one.
    assert any(view.theme.code_background in r.label.document.toHtml() for r in texts)


def test_copying_a_long_code_block_copies_all_its_segments(view: ChatView, qtbot: QtBot) -> None:
    code = "".join(f"print({i})\n" for i in range(400))
    stream(view, f"```python\n{code}```\n")
    rows = [r for r in view.stack.rows if isinstance(r, CodeRow)]
    assert len(rows) > 3
    assert rows[0].copy_button.isVisibleTo(rows[0])
    assert not rows[1].copy_button.isVisibleTo(rows[1])  # one header for the whole block
    qtbot.mouseClick(rows[0].copy_button, Qt.MouseButton.LeftButton)
    assert QGuiApplication.clipboard().text() == code


def fill(view: ChatView, exchanges: int) -> None:
    for i in range(exchanges):
        view.add_user_message(f"question {i}")
        view.add_reply(
            "Model",
            f"answer {i}, long enough to wrap differently at another width: "
            + "words " * 40
            + f"\n\n- one\n- two\n- three\n\nThe end of answer {i}.",
        )


def consistent(view: ChatView) -> bool:
    stack = view.stack
    heights = [row.height() for row in stack.rows]
    tops = [row.geometry().top() for row in stack.rows]
    return (
        tops == stack.tops
        and all(tops[i] + heights[i] == tops[i + 1] for i in range(len(tops) - 1))
        and stack.height() == tops[-1] + heights[-1]
        and all(
            h == row.row_height(stack.width()) for h, row in zip(heights, stack.rows, strict=True)
        )
    )


def test_a_new_width_measures_the_rows_on_screen_first_and_the_rest_in_slices(
    view: ChatView, qtbot: QtBot
) -> None:
    fill(view, 40)  # 40 exchanges, 280 rows: more than RowStack.SYNC_ROWS
    assert len(view.stack.rows) > view.stack.SYNC_ROWS
    assert consistent(view)
    bar = view.verticalScrollBar()
    assert bar.value() == bar.maximum()  # following the bottom
    view.resize(420, 500)
    assert 0 < view.stack.stale < len(view.stack.rows)  # the rest waits for later slices
    last = view.stack.rows[-1]
    assert last.height() == last.row_height(view.stack.width())  # what is shown is right
    qtbot.waitUntil(lambda: view.stack.stale == 0)
    assert consistent(view)
    assert bar.value() == bar.maximum()  # still at the bottom


def test_rows_above_change_height_without_moving_what_the_reader_looks_at(
    view: ChatView, qtbot: QtBot
) -> None:
    fill(view, 40)
    bar = view.verticalScrollBar()
    bar.setValue(bar.maximum() // 2)  # the user scrolled up to read
    assert not view.pinned
    row = view.stack.row_at(bar.value())
    offset = bar.value() - view.stack.tops[row]
    before = view.stack.tops[row]
    view.resize(380, 500)  # narrower: rows above grow taller
    qtbot.waitUntil(lambda: view.stack.stale == 0)
    assert view.stack.tops[row] > before  # the rows above did grow
    assert consistent(view)
    assert bar.value() - view.stack.tops[row] == offset


HOSTILE = "<b>BOLD</b><img src='x'>"


def sweep(root: QWidget, hostile: str) -> int:
    """Check every widget under ``root`` that shows ``hostile`` shows it as text; count them."""
    shown = 0
    for label in root.findChildren(QLabel):
        if "BOLD" in label.text():
            assert label.textFormat() == Qt.TextFormat.PlainText, label.objectName()
            shown += 1
    for block in root.findChildren(TextBlock):
        if "BOLD" in block.plain_text():
            # Shown as the characters the model wrote (rich rows carry them escaped).
            assert "<b>BOLD</b>" in block.plain_text()
            assert block.textFormat() == Qt.TextFormat.PlainText or "<b>BOLD" not in block.text()
            shown += 1
    for widget in [root, *root.findChildren(QWidget)]:
        tip = widget.toolTip()
        assert "<b>BOLD" not in tip or not Qt.mightBeRichText(tip)
    return shown


def test_untrusted_text_is_never_shown_as_markup(view: ChatView) -> None:
    view.add_user_message(HOSTILE)
    header = view.begin_reply(f"<i>model</i>{HOSTILE}")  # a model's name from its file
    header.set_variant(1, 2)
    view.append_to_reply(f"```{HOSTILE}\nprint(1)\n```\n\nSome {HOSTILE} and `{HOSTILE}`.\n")
    view.end_reply(f"Server said: {HOSTILE}", error=True)
    view.add_note(HOSTILE)
    (code,) = [r for r in view.stack.rows if isinstance(r, CodeRow)]
    assert code.language_label.textFormat() == Qt.TextFormat.PlainText
    assert code.language_label.text() == "<b>BOLD</b><img"  # the fence's first word, as text
    # The prompt, the model's name, the code's language, the paragraph, the error, the note.
    assert sweep(view, HOSTILE) == 6


def test_a_conversation_title_is_never_shown_as_markup(qtbot: QtBot) -> None:
    sidebar = Sidebar()
    qtbot.addWidget(sidebar)
    sidebar.set_conversations([ConversationSummary("c1", HOSTILE, 0.0)], "c1")
    item = sidebar.list.item(0)
    assert item.text() == HOSTILE  # list items are always plain text
    assert "&lt;b&gt;BOLD&lt;/b&gt;" in item.toolTip()
    assert "<b>BOLD" not in item.toolTip()
    sweep(sidebar, HOSTILE)


def test_a_long_prompt_folds_and_copy_and_edit_keep_all_of_it(view: ChatView, qtbot: QtBot) -> None:
    prompt = "\n".join(f"line {i} of a long pasted prompt" for i in range(60))
    header = view.add_user_message(prompt)
    row = view.stack.rows[-1]
    assert isinstance(row, TextRow)
    assert row.fold_button is not None
    line = row.label.line_height()
    folded = row.height()
    assert folded < (FOLD_LINES + 4) * line  # about twelve lines, not sixty
    assert row.fold_button.isVisible()
    assert row.fold_button.text() == "Show all"
    qtbot.mouseClick(header.copy_button, Qt.MouseButton.LeftButton)
    assert QGuiApplication.clipboard().text() == prompt  # Copy: the whole prompt
    assert header.message_text() == prompt  # what Edit puts back in the composer
    # Keyboard: the fold button is among the message's tab stops, and Space opens it.
    assert view.focus_message(0)
    while QGuiApplication.focusObject() is not row.fold_button:
        qtbot.keyClick(QGuiApplication.focusObject(), Qt.Key.Key_Tab)
    qtbot.keyClick(row.fold_button, Qt.Key.Key_Space)
    assert row.expanded
    assert row.fold_button.text() == "Show less"
    assert row.height() > 55 * line
    assert view.stack.height() == sum(r.height() for r in view.stack.rows)
    row.fold_button.click()
    assert row.height() == folded


def test_a_short_prompt_does_not_fold(view: ChatView) -> None:
    view.add_user_message("\n".join(f"line {i}" for i in range(FOLD_LINES + 2)))
    row = view.stack.rows[-1]
    assert isinstance(row, TextRow)
    assert row.fold_button is not None
    assert not row.fold_button.isVisible()
    assert row.label.height() >= row.label.height_for(row.label.width())


PROSE = (
    "A plain paragraph that grows word by word, with *emphasis that grows*, **strong words**,"
    ' `code spans`, a [link](https://example.org) and & < > "quotes" and  double  spaces.\n\n'
    "- a list item that grows\n- and another one, *ending in emphasis*\n\n"
    "# A heading that grows\n\nLast words, ending plainly"
)


def _rows_show_their_html(view: ChatView) -> int:
    """Check each text row's document against its HTML laid out afresh; returns words typed.

    The rows' counts of updates typed into their documents are taken (set back to 0).
    """
    typed = 0
    for row in body_rows(view):
        if not isinstance(row, TextRow):
            continue
        label = row.label
        typed += label.typed
        label.typed = 0
        fresh = TextBlock()
        fresh.set_html(label.text(), style_sheet=label.style_sheet)
        assert label.document.toHtml() == fresh.document.toHtml(), label.text()
    return typed


@pytest.mark.parametrize("name", ["prose", *CORPUS])
def test_words_typed_into_a_streaming_paragraph_show_what_its_html_shows(
    view: ChatView, name: str
) -> None:
    # A row whose paragraph grew by plain words has them typed at its end instead of its HTML
    # set again: after every update, each row's document must be what its HTML makes.
    text = PROSE if name == "prose" else CORPUS[name]
    rng = random.Random(7)
    view.begin_reply("Model")
    typed = 0
    i = 0
    while i < len(text):
        n = rng.randint(1, 6)
        view.append_to_reply(text[i : i + n])
        i += n
        typed += _rows_show_their_html(view)
    view.end_reply()
    if name == "prose":
        assert typed > 20  # the fast way was taken, not only the whole HTML every time


def test_words_that_fit_on_the_last_line_measure_and_place_no_rows(
    view: ChatView, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Most words fit on the streaming paragraph's last line: its row keeps its height and the
    # stack is not asked to measure it again; a word that starts a line grows the row at once.
    refreshed: list[Row] = []
    refresh = view.stack.refresh

    def counting(row: Row) -> None:
        refreshed.append(row)
        refresh(row)

    monkeypatch.setattr(view.stack, "refresh", counting)
    view.begin_reply("Model")
    view.append_to_reply("A paragraph that grows")
    heights, updates = [], 0
    for i in range(120):
        view.append_to_reply(f" word{i}")
        updates += 1
        (row,) = [r for r in body_rows(view) if isinstance(r, TextRow)]
        assert row.height() == row.row_height(view.stack.width())  # placed as measured afresh
        assert row.label.height() == row.label.height_for(row.label.width())
        heights.append(row.height())
    grew = sum(1 for before, after in itertools.pairwise(heights) if after != before)
    assert grew >= 5  # the paragraph wrapped onto new lines as it grew
    assert grew <= len(refreshed) <= grew + 2  # measured where it grew (and its first words)
    assert row.label.typed >= updates - 2  # every word typed, none set as HTML again


def test_words_after_an_inline_element_or_a_double_space_show_what_the_html_shows(
    view: ChatView,
) -> None:
    # Pieces cut where the fast lane must refuse: after "</strong>" a cursor would type in
    # bold, and a double space typed would show two where the HTML shows one.
    pieces = ["Hello **bold**", " ", "word", " and", " more  ", "spaced", " words", " end"]
    view.begin_reply("Model")
    typed = 0
    for piece in pieces:
        view.append_to_reply(piece)
        typed += _rows_show_their_html(view)
    assert typed >= 3  # " and", " words", " end": typed where they can be
    (row,) = [r for r in body_rows(view) if isinstance(r, TextRow)]
    assert row.label.document.toPlainText() == "Hello bold word and more spaced words end"


def test_words_after_punctuation_and_quotes_are_typed_as_their_html_shows(
    view: ChatView,
) -> None:
    # What a model writes most: words after a comma or a full stop, a quoted name (a quote
    # is "&quot;" in the HTML and typed as itself), a bracket, a dash, letters beyond ASCII.
    # Each piece after the first is typed, and the document shows what the HTML shows.
    pieces = ["Once", " upon", " a time,", " a dragon", ' named "Eira"', " (the", " one/only)"]
    pieces += ["—", "a", " café…", " she", " said."]
    view.begin_reply("Model")
    typed = 0
    for piece in pieces:
        view.append_to_reply(piece)
        typed += _rows_show_their_html(view)
    assert typed == len(pieces) - 1
    (row,) = [r for r in body_rows(view) if isinstance(r, TextRow)]
    assert row.label.document.toPlainText() == "".join(pieces)


@pytest.mark.parametrize(
    ("old", "new", "added"),
    [
        ("<p>Hello</p>\n", "<p>Hello world</p>\n", " world"),
        ("<p>a <em>b</em></p>", "<p>a <em>bc</em></p>", "c"),
        ("<p>a <em>b</em></p>", "<p>a <em>b</em> c</p>", None),  # after a closed tag
        ("<p>a</p>", "<p>a &amp; b</p>", None),  # an entity
        ("<p>a</p>", "<p>a  b</p>", None),  # HTML folds a double space
        ("<p>a</p>", "<p>a\nb</p>", None),  # and a line break
        ("<p>a</p>", "<p>a b </p>", None),  # and a space at the end
        ("<p>a</p>", "<p>b</p>", None),
        ("<table><tr><td>a</td></tr></table>", "<table><tr><td>ab</td></tr></table>", None),
        ("<p>a</p>", "<p>a</p><p>b</p>", None),
    ],
)
def test_only_plain_words_at_the_end_are_typed(old: str, new: str, added: str | None) -> None:
    assert appended_text(old, new) == added


PARAGRAPHS = (
    "Once upon a time a dragon lived in the hills and read every book about the sea it found, " * 8
    + "\n\n"
) * 6
"""Paragraphs of several lines each: a streamed one grows line by line."""


def _on_screen(view: ChatView) -> QImage:
    """What the window's backing store holds (the offscreen platform grabs it, not a new paint)."""
    screen = QGuiApplication.primaryScreen()
    return screen.grabWindow(view.winId()).toImage()


@pytest.mark.parametrize("name", ["prose", "nested lists", "table row by row"])
def test_what_is_on_screen_after_each_update_is_a_fresh_paint_of_the_view(
    view: ChatView, qtbot: QtBot, name: str
) -> None:
    # Updates repaint only what changed (the growing paragraph from its last line down; a
    # scroll by a blit of what was shown): the screen must still be what painting the whole
    # view anew gives, at every update, past the first screenful and its scrolls.
    text = PARAGRAPHS + (
        PROSE + CORPUS["closed fence then text"] if name == "prose" else CORPUS[name] * 3
    )
    rng = random.Random(3)
    view.begin_reply("Model")
    i = compared = 0
    while i < len(text):
        n = rng.randint(1, 6)
        view.append_to_reply(text[i : i + n])
        i += n
        QApplication.processEvents()  # the update request: Qt paints the dirty parts
        if rng.random() < 0.2 or i >= len(text):
            shown = _on_screen(view)
            fresh = view.grab().toImage().convertToFormat(shown.format())
            assert shown == fresh, f"after {i} of {len(text)} characters"
            compared += 1
    assert view.verticalScrollBar().value() > 0  # it scrolled while streaming
    assert compared > 10


def test_following_a_reply_paints_only_the_row_being_written(
    view: ChatView, qtbot: QtBot, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Once the reply fills the view, a new line scrolls it: what was shown moves by a blit and
    # only the growing row is painted (every visible row was painted again before).
    painted: list[TextBlock] = []
    paint = TextBlock.paintEvent

    def counting(block: TextBlock, event: QPaintEvent) -> None:
        painted.append(block)
        paint(block, event)

    monkeypatch.setattr(TextBlock, "paintEvent", counting)
    view.begin_reply("Model")
    text = PARAGRAPHS
    scrolled = others = updates = 0
    for i in range(0, len(text), 5):
        rows = len(view.stack.rows)
        top = view.verticalScrollBar().value()
        painted.clear()
        view.append_to_reply(text[i : i + 5])
        QApplication.processEvents()
        if len(view.stack.rows) != rows or top == 0:
            continue  # a new row, or the first screenful (the scroll bar appears)
        growing = view.stack.rows[-1]
        assert isinstance(growing, TextRow)
        updates += 1
        scrolled += view.verticalScrollBar().value() != top
        others += sum(block is not growing.label for block in painted)
    assert scrolled > 5
    assert others == 0, f"{others} paints of other rows in {updates} updates"


def test_a_paragraph_growing_by_a_line_paints_that_line_not_the_paragraph(
    view: ChatView, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A reply's row and text have static contents: a line added below the others paints the
    # strip it adds (and the line before it, which the typed word changed), not every line
    # of the paragraph again with the row and the stack beneath it.
    painted: list[tuple[TextBlock, int]] = []
    paint = TextBlock.paintEvent

    def recording(block: TextBlock, event: QPaintEvent) -> None:
        painted.append((block, event.rect().height()))
        paint(block, event)

    monkeypatch.setattr(TextBlock, "paintEvent", recording)
    view.begin_reply("Model")
    paragraph = PARAGRAPHS.split("\n\n")[0]
    grown = 0
    before = 0
    for i in range(0, len(paragraph), 5):
        painted.clear()
        view.append_to_reply(paragraph[i : i + 5])
        QApplication.processEvents()
        (row,) = [r for r in body_rows(view) if isinstance(r, TextRow)]
        label = row.label
        grew, before = row.height() != before, row.height()
        if not grew or label.height() < 4 * label.line_height():
            continue
        grown += 1
        heights = [height for block, height in painted if block is label]
        assert heights, "the grown paragraph was not painted"
        assert max(heights) <= 2 * label.line_height() + 2, (heights, label.height())
    assert grown >= 3


def test_a_paragraph_that_closes_unchanged_is_not_laid_out_again(view: ChatView) -> None:
    # As the next paragraph begins, the last one becomes final: its source gained the line
    # break, its HTML did not, so its row keeps what it laid out and painted.
    view.begin_reply("Model")
    view.append_to_reply("Once upon a time a dragon lived in the hills.")
    (first,) = [r for r in body_rows(view) if isinstance(r, TextRow)]
    renders = first.renders
    view.append_to_reply("\n\nThe next")
    view.append_to_reply(" day it flew.")
    rows = [r for r in body_rows(view) if isinstance(r, TextRow)]
    assert len(rows) == 2
    assert rows[0] is first
    assert first.renders == renders
    assert first.label.document.toPlainText() == "Once upon a time a dragon lived in the hills."
    assert first.block is not None
    assert first.block.source.endswith("\n")


def test_a_reply_row_a_few_pixels_wider_paints_its_text_anew(qtbot: QtBot) -> None:
    # A row alone (no view above it repainting all): a few pixels wider, its lines break
    # elsewhere and its height stays, so only its width grew. Static contents would be
    # given the added strip alone to paint; the text is painted whole.
    window = QWidget()
    qtbot.addWidget(window)
    window.resize(600, 300)
    row = TextRow(theme_for(QPalette()), "reply", window)
    row.set_block(render_blocks(PARAGRAPHS.split("\n\n")[0][:400])[0])
    row.resize(500, row.row_height(500))
    window.show()
    qtbot.waitExposed(window)
    same_height = 0
    for width in range(504, 560, 4):
        height = row.height()
        row.resize(width, row.row_height(width))
        QApplication.processEvents()
        same_height += row.height() == height
        shown = QGuiApplication.primaryScreen().grabWindow(window.winId()).toImage()
        assert shown == window.grab().toImage().convertToFormat(shown.format()), f"{width} px"
    assert same_height > 3


STORY_WORDS = (
    "Once upon a time a dragon named Eira lived in the hills above the sea, and every"
    " morning she flew down to the shore to read the books the tide had left, (one"
    " by one) until the sun was high: a café's menu, a sailor's log — and letters."
) * 4


def _label_on_screen(view: ChatView, label: TextBlock) -> QImage:
    """The part of the window's backing store (see :func:`_on_screen`) the label covers."""
    top_left = label.mapTo(view.window(), label.rect().topLeft())
    return _on_screen(view).copy(top_left.x(), top_left.y(), label.width(), label.height())


def _growing_label(view: ChatView) -> TextBlock:
    (row,) = [r for r in body_rows(view) if isinstance(r, TextRow)]
    return row.label


@pytest.mark.parametrize("start", ["", "- "])
def test_words_drawn_after_the_last_line_show_what_typing_them_in_shows(
    view: ChatView, start: str
) -> None:
    # Words that fit on the streaming paragraph's last line are drawn after it (its tail) and
    # typed into its document later. What the screen shows after any update must be what the
    # document shows with them typed in: at points along the stream, the label's part of the
    # screen is compared with the same label painted whole once the tail is typed in.
    rng = random.Random(5)
    words = STORY_WORDS.split(" ")
    view.begin_reply("Model")
    view.append_to_reply(start + words[0])
    compared = grown = 0
    for i, word in enumerate(words[1:], 1):
        view.append_to_reply(" " + word)
        QApplication.processEvents()
        label = _growing_label(view)
        tail = label.tail
        if tail is None or (rng.random() > 0.3 and i < len(words) - 1):
            continue
        grown += tail[0].count(" ") > 1  # several words drawn as one tail
        shown = _label_on_screen(view, label)
        label.settle()
        assert label.tail is None
        label.repaint()
        assert _label_on_screen(view, label) == shown, f"after {i} of {len(words)} words"
        compared += 1
    assert compared > 10
    assert grown > 5
    assert label.document.toPlainText() == STORY_WORDS


def test_words_that_fit_on_the_last_line_leave_the_document_as_it_was(view: ChatView) -> None:
    # Typing a word into the document lays its paragraph out again; drawn as the tail, the
    # document is not touched until a word does not fit, about once a line.
    view.begin_reply("Model")
    view.append_to_reply("Once")
    label = _growing_label(view)
    changes: list[int] = []
    label.shown_document.contentsChanged.connect(lambda: changes.append(1))
    words = STORY_WORDS.split(" ")[1:]
    heights = []
    for word in words:
        view.append_to_reply(" " + word)
        QApplication.processEvents()
        heights.append(label.height())
    lines = len(set(heights))
    assert lines > 5  # the paragraph wrapped onto new lines as it grew
    assert label.tailed > len(words) // 2
    assert len(changes) <= lines + 2  # typed in where a word began a line
    assert label.document.toPlainText() == STORY_WORDS


def _with_tail(view: ChatView, *, line: int = 0) -> tuple[TextBlock, str]:
    """Stream words until the paragraph's tail holds a few, on the ``line``-th line or below.

    Returns the label and the paragraph's whole text.
    """
    view.begin_reply("Model")
    text = "Once"
    view.append_to_reply(text)
    for word in STORY_WORDS.split(" ")[1:]:
        view.append_to_reply(" " + word)
        text += " " + word
        label = _growing_label(view)
        tail = label.tail
        if tail is not None and tail[0].count(" ") >= 3 and tail[1].top >= line * 12:
            return label, text
    raise AssertionError("no tail of three words")


def test_the_tail_is_typed_in_before_the_text_is_read(view: ChatView) -> None:
    label, text = _with_tail(view)
    assert label.plain_text() == text
    assert label.tail is None  # reading it typed the words in
    assert label.length() == len(text)


def test_the_tail_is_typed_in_before_a_point_is_hit_tested(view: ChatView) -> None:
    label, text = _with_tail(view)
    (tail, place) = label.tail or ("", None)
    assert place is not None
    end = QPoint(int(place.x + place.metrics.horizontalAdvance(tail)) + 5, place.baseline)
    assert label.position_at(end) == len(text)
    assert label.word_at(len(text) - 1)[1] == len(text)


def test_the_tail_is_typed_in_before_a_selection_is_copied_or_painted(view: ChatView) -> None:
    label, text = _with_tail(view)
    label.set_selection(0, len(text))
    label.repaint()
    assert label.tail is None
    assert label.selected_text() == text


def test_a_tail_is_laid_out_with_its_paragraph_at_a_new_width(view: ChatView) -> None:
    label, text = _with_tail(view)
    fresh = TextBlock()
    fresh.set_html(label.text(), style_sheet=label.style_sheet)
    for width in (label.width() - 97, label.width() + 41):
        assert label.height_for(width) == fresh.height_for(width)
    view.resize(view.width() - 120, view.height())
    QApplication.processEvents()
    assert label.tail is None
    assert label.document.toPlainText() == text


def test_a_tail_given_up_with_its_document_is_in_the_document_made_again(
    view: ChatView,
) -> None:
    label, text = _with_tail(view)
    label.release()
    assert not label.holds_document
    assert label.plain_text() == text
    assert label.document.toPlainText() == text


def test_a_new_font_types_the_tail_in_first(view: ChatView) -> None:
    label, text = _with_tail(view)
    font = label.font()
    font.setPointSizeF(font.pointSizeF() * 1.5)
    label.setFont(font)
    assert label.tail is None
    assert label.document.toPlainText() == text


@pytest.mark.parametrize(
    ("start", "piece"),
    [
        ("שלום עולם", " ועוד"),  # right to left: a line may be reordered
        ("Mixed שלום", " words"),  # a line that holds right-to-left text
        ("Left to right", " שלום"),  # right-to-left words after left-to-right text
        ("A word", "s"),  # not at a space: shaped with the word before it
    ],
)
def test_words_that_cannot_be_drawn_as_a_tail_are_typed_in(
    view: ChatView, start: str, piece: str
) -> None:
    view.begin_reply("Model")
    view.append_to_reply(start)
    label = _growing_label(view)
    QApplication.processEvents()
    view.append_to_reply(piece)
    assert label.tail is None
    assert label.typed >= 1
    assert label.shown_document.toPlainText() == start + piece


def test_a_repaint_reaching_above_the_tail_paints_the_lines_there_too(view: ChatView) -> None:
    # The frames of a streaming reply paint only the tail's new words; a repaint that also
    # covers lines above it (an overlay, a widget beside it) must paint them too.
    label, _text = _with_tail(view, line=2)
    QApplication.processEvents()
    tail = label.tail
    assert tail is not None
    assert tail[1].top > 0  # a tail below the first line
    shown = _label_on_screen(view, label)
    label.repaint(QRect(int(tail[1].clear) + 2, 0, label.width(), tail[1].bottom))
    assert _label_on_screen(view, label) == shown


@pytest.mark.parametrize("width", range(96, 136, 2))
def test_a_tail_whose_last_glyph_overhangs_the_line_is_typed_in_where_qt_breaks_it(
    qtbot: QtBot, width: int
) -> None:
    # Qt breaks a line where its text and its last glyph's overhang pass the line's end (an
    # italic-like "f" in a serif reaches 3 pixels past its advance at 28 pixels): a word whose
    # advance fits but whose overhang does not starts a new line, so it is no tail.
    font = QFont("DejaVu Serif")
    font.setPixelSize(28)
    if QFontInfo(font).family() != "DejaVu Serif":
        pytest.skip("needs the DejaVu Serif font")
    label = TextBlock()
    qtbot.addWidget(label)
    label.setFont(font)
    label.set_html("<p>Hello</p>")
    label.height_for(width)  # laid out at that width, as a row's text is
    label.set_html("<p>Hello elf</p>", typed=" elf")
    fresh = TextBlock()
    qtbot.addWidget(fresh)
    fresh.setFont(font)
    fresh.set_html("<p>Hello elf</p>")
    assert label.height_for(width) == fresh.height_for(width)
    assert label.resized == (fresh.height_for(width) != fresh.height_for(1000))
    assert label.document.toPlainText() == "Hello elf"


def test_a_paragraph_that_takes_no_tail_is_not_asked_again_at_every_word(
    view: ChatView, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Right-to-left text stays in its paragraph: finding that out once a paragraph is enough
    # (each asking reads the paragraph's text and format, at every word it would cost a
    # streaming reply in Hebrew or Arabic more than the tail saves others).
    asked: list[int] = []
    tail_of = tails.tail_of

    def counting(document: QTextDocument) -> TailPlace | None:
        asked.append(1)
        return tail_of(document)

    monkeypatch.setattr(tails, "tail_of", counting)
    view.begin_reply("Model")
    view.append_to_reply("שלום")
    for i in range(30):
        QApplication.processEvents()
        view.append_to_reply(" עולם" if i % 2 else " word")
    label = _growing_label(view)
    assert label.tailed == 0
    assert label.typed >= 25
    assert 1 <= len(asked) <= 2
    view.append_to_reply("\n\nA new paragraph")  # asked again for the next paragraph
    QApplication.processEvents()
    view.append_to_reply(" in English")
    last = [r for r in body_rows(view) if isinstance(r, TextRow)][-1]
    assert last.label is not label
    assert last.label.tailed == 1
