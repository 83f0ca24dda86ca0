"""Large messages in the chat view: built, streamed and cleared a bounded slice at a time.

Each test counts the work done per event-loop turn (characters fed to the Markdown stream,
rows made), never the time it takes.
"""

from __future__ import annotations

import gc
import threading
import weakref

import pytest
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pytestqt.qtbot import QtBot

from app.bench.large_messages import large_markdown
from app.markdown.stream import MarkdownStream
from app.ui.chat import row_sweeper as row_sweeper_module
from app.ui.chat.chat_view import BUILD_ROWS, FEED_CHARS, SLICE_CHARS, ChatView
from app.ui.chat.rows import code as code_row_module
from app.ui.chat.rows import document_text as document_text_module
from app.ui.chat.rows import lexers
from app.ui.chat.rows.base import Row
from app.ui.chat.rows.code import CodeRow
from app.ui.chat.rows.header import HeaderRow
from app.ui.chat.rows.text import PREVIEW_CHARS, TextRow


def words(text: str) -> str:
    """The text without its white space (rows join blocks and segments with a line break)."""
    return "".join(text.split())


def shows(view: ChatView, text: str) -> bool:
    """Whether the view shows all of ``text``, in order."""
    return words(text) in words(view.toPlainText())


def markdown(size: int) -> str:
    """Mixed Markdown (headings, lists, code, tables, quotes) of ``size`` characters."""
    return large_markdown(size)


@pytest.fixture
def feeds(monkeypatch: pytest.MonkeyPatch, view: ChatView) -> list[tuple[int, int]]:
    """Every feed to a Markdown stream, as (the view's slice number, characters fed)."""
    seen: list[tuple[int, int]] = []
    feed = MarkdownStream.feed

    def counting(stream: MarkdownStream, text: str) -> object:
        seen.append((view.slices, len(text)))
        return feed(stream, text)

    monkeypatch.setattr(MarkdownStream, "feed", counting)
    return seen


def rows_per_slice(view: ChatView, qtbot: QtBot, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Let the view build, a slice per turn; returns how many rows each slice added."""
    per: dict[int, int] = {}
    append = view.stack.append

    def counting(row: Row) -> None:
        per[view.slices] = per.get(view.slices, 0) + 1
        append(row)

    monkeypatch.setattr(view.stack, "append", counting)
    qtbot.waitUntil(lambda: not view.building, timeout=60000)
    return list(per.values())


def chars_per_slice(feeds: list[tuple[int, int]]) -> dict[int, int]:
    per: dict[int, int] = {}
    for slice_number, size in feeds:
        per[slice_number] = per.get(slice_number, 0) + size
    return per


def test_a_huge_piece_is_fed_in_bounded_pieces_a_slice_per_turn(
    view: ChatView, qtbot: QtBot, feeds: list[tuple[int, int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    text = markdown(200_000)
    view.begin_reply("Model")
    view.append_to_reply(text)
    assert view.building  # the call returned before the work was done
    assert sum(size for _, size in feeds) < len(text)
    made = rows_per_slice(view, qtbot, monkeypatch)
    view.end_reply()
    qtbot.waitUntil(lambda: not view.building, timeout=60000)
    assert max(size for _, size in feeds) <= FEED_CHARS
    assert max(chars_per_slice(feeds).values()) <= SLICE_CHARS
    assert max(made) <= BUILD_ROWS + 1
    assert sum(size for _, size in feeds) == len(text)
    assert shows(view, text)


def test_a_slice_whose_time_is_up_feeds_no_more(
    view: ChatView, qtbot: QtBot, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every slice's time is up at once: each does one piece of work, rows made from earlier
    # pieces or a piece fed (and its first row), never rows and then another piece. A slice
    # that did both ran to twice its budget, every slice of a 1 MB reply.
    monkeypatch.setattr(view.builder._builder, "budget", 0.0)
    seen: list[tuple[str, int]] = []
    feed, append = MarkdownStream.feed, view.stack.append

    def counting_feed(stream: MarkdownStream, text: str) -> object:
        seen.append(("feed", view.slices))
        return feed(stream, text)

    def counting_append(row: Row) -> None:
        seen.append(("row", view.slices))
        append(row)

    monkeypatch.setattr(MarkdownStream, "feed", counting_feed)
    monkeypatch.setattr(view.stack, "append", counting_append)
    text = markdown(60_000)
    view.add_reply("Model", text)
    qtbot.waitUntil(lambda: not view.building, timeout=60000)
    assert shows(view, text)
    fed_slices = {n for kind, n in seen if kind == "feed"}
    assert len(fed_slices) > 10
    for n in fed_slices:
        kinds = [kind for kind, m in seen if m == n]
        assert kinds.count("feed") == 1
        assert kinds[0] == "feed", f"slice {n}: rows made, then a piece fed: {kinds}"


def test_one_huge_line_is_fed_in_bounded_pieces(
    view: ChatView, qtbot: QtBot, feeds: list[tuple[int, int]]
) -> None:
    line = "word " * 40_000
    view.add_reply("Model", line)
    assert view.building
    qtbot.waitUntil(lambda: not view.building, timeout=60000)
    assert max(size for _, size in feeds) <= FEED_CHARS
    assert max(chars_per_slice(feeds).values()) <= SLICE_CHARS
    assert shows(view, line)


def test_later_calls_land_after_the_pending_pieces_in_order(view: ChatView, qtbot: QtBot) -> None:
    text = markdown(100_000)
    view.begin_reply("Model")
    view.append_to_reply(text)
    view.append_to_reply("\n\nTHE LAST WORDS")
    view.end_reply("Stopped.")
    view.add_user_message("the next prompt")
    assert view.building
    qtbot.waitUntil(lambda: not view.building, timeout=30000)
    shown = view.toPlainText()
    assert shown.index("THE LAST WORDS") > shown.index("Section 0")
    assert shown.index("Stopped.") > shown.index("THE LAST WORDS")
    assert shown.index("the next prompt") > shown.index("Stopped.")


def test_finish_building_does_everything_left_at_once(view: ChatView) -> None:
    text = markdown(60_000)
    view.add_reply("Model", text)
    view.add_note("after")
    assert view.building
    view.finish_building()
    assert not view.building
    shown = view.toPlainText()
    assert words(text) in words(shown)
    assert shown.endswith("after")


def test_a_reopened_huge_reply_is_built_over_turns_in_few_rows(
    view: ChatView, qtbot: QtBot, feeds: list[tuple[int, int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    text = markdown(200_000)
    view.add_reply("Model", text)
    made = rows_per_slice(view, qtbot, monkeypatch)
    assert len(made) > 10
    assert max(made) <= BUILD_ROWS + 1
    assert max(chars_per_slice(feeds).values()) <= SLICE_CHARS
    # Final text blocks share rows: far fewer widgets than blocks.
    text_rows = [row for row in view.stack.rows if isinstance(row, TextRow)]
    assert len(text_rows) < text.count("## Section") * 2
    assert shows(view, text)


def test_clear_hides_everything_at_once_and_deletes_it_a_slice_at_a_time(
    view: ChatView, qtbot: QtBot, monkeypatch: pytest.MonkeyPatch
) -> None:
    view.add_reply("Model", markdown(100_000))
    view.finish_building()
    count = len(view.stack.rows)
    monkeypatch.setattr(row_sweeper_module, "CLEAR_ROWS", 10)
    view.clear()
    assert view.stack.rows == []
    assert view.toPlainText() == ""
    assert view.stack.height() == 0  # nothing of the old rows can show
    assert view.clearing
    view.add_user_message("a new chat")
    assert view.toPlainText().endswith("a new chat")
    deleted: list[int] = []
    sweep = view.stack.sweep

    def counting(deadline: float, most: int) -> bool:
        left = view.stack.doomed
        done = sweep(deadline, most)
        deleted.append(left - view.stack.doomed)
        return done

    monkeypatch.setattr(view.stack, "sweep", counting)
    qtbot.waitUntil(lambda: not view.clearing, timeout=30000)
    assert max(deleted) <= 10
    assert sum(deleted) == count
    assert view.toPlainText().endswith("a new chat")


def test_a_huge_prompt_is_folded_without_laying_out_its_text(view: ChatView) -> None:
    prompt = "\n".join(f"line {i} of a long paste" for i in range(40_000))
    view.add_user_message(prompt)
    row = view.stack.rows[-1]
    assert isinstance(row, TextRow)
    assert row.label.document.characterCount() <= PREVIEW_CHARS + 1
    assert row.fold_button is not None
    assert not row.fold_button.isHidden()
    assert row.plain_text() == prompt
    view.select_all()
    assert view.selected_text().endswith("line 39999 of a long paste")
    row.fold_button.click()
    assert row.label.document.characterCount() == len(prompt) + 1


def test_a_huge_one_line_prompt_is_folded_too(view: ChatView) -> None:
    prompt = "word " * 200_000
    view.add_user_message(prompt)
    row = view.stack.rows[-1]
    assert isinstance(row, TextRow)
    assert row.label.document.characterCount() <= PREVIEW_CHARS + 1
    assert row.fold_button is not None
    assert not row.fold_button.isHidden()
    assert row.plain_text() == prompt


def test_a_table_streamed_fast_feeds_each_frame_once(
    view: ChatView, feeds: list[tuple[int, int]]
) -> None:
    lines = ["| a | b | c |\n", "|---|---|---|\n"]
    lines += [f"| {j} | {j * 2} | **{j * 3}** |\n" for j in range(5000)]
    view.begin_reply("Model")
    for i in range(0, len(lines), 17):  # 1,000 rows a second at 60 frames a second
        view.append_to_reply("".join(lines[i : i + 17]))
        assert not view.building  # a frame's piece is applied in the frame
    view.end_reply()
    assert len(feeds) == len(range(0, len(lines), 17))
    assert view.toPlainText().rstrip().endswith("| 4999 | 9998 | **14997** |")


def test_a_run_of_small_code_blocks_is_made_a_few_rows_per_slice(
    view: ChatView, qtbot: QtBot, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = "".join(f"```\nx = {i}\n```\n\n" for i in range(1500))  # no two share a row
    view.add_reply("Model", text)
    made = rows_per_slice(view, qtbot, monkeypatch)
    assert sum(made) >= 1500
    assert max(made) <= BUILD_ROWS + 1
    assert shows(view, text)


def test_only_recently_painted_blocks_keep_their_laid_out_text(
    view: ChatView, qtbot: QtBot
) -> None:
    text = markdown(300_000)
    view.add_reply("Model", text)
    qtbot.waitUntil(lambda: not view.building, timeout=60000)
    blocks = [b for b in (row.text_block() for row in view.stack.rows) if b is not None]
    assert len(blocks) > 2 * document_text_module.LIVE_DOCUMENTS
    holding = [block for block in blocks if block.holds_document]
    assert len(holding) <= document_text_module.LIVE_DOCUMENTS
    # A block that gave its document up makes it again when needed, with the same text, and
    # still knows its height without it.
    given_up = next(block for block in blocks if not block.holds_document)
    width = given_up.width()
    height = given_up.height_for(width)
    assert not given_up.holds_document
    plain = given_up.plain_text()
    given_up.set_selection(0, 5)
    assert given_up.selected_text() == plain[:5]
    assert given_up.holds_document
    assert given_up.height_for(width) == height
    view.select_all()
    assert view.selected_text().count("Section") == text.count("## Section")


def test_a_finished_reply_leaves_no_reference_cycles(view: ChatView, qtbot: QtBot) -> None:
    # Rows are built while the collector is kept off them: a cycle would outlive the rows.
    view.add_reply("Model", markdown(50_000))
    qtbot.waitUntil(lambda: not view.building, timeout=30000)
    rows = [weakref.ref(row) for row in view.stack.rows]
    assert any(isinstance(row(), CodeRow) for row in rows)
    assert any(isinstance(row(), HeaderRow) for row in rows)
    view.clear()
    qtbot.waitUntil(lambda: not view.clearing, timeout=30000)
    gc.disable()  # nothing may be collected: the rows must go with their last reference
    try:
        assert [row for row in rows if row() is not None] == []
    finally:
        gc.enable()


def test_built_rows_are_kept_out_of_the_collectors_scans(view: ChatView, qtbot: QtBot) -> None:
    view.add_reply("Model", markdown(50_000))
    qtbot.waitUntil(lambda: not view.building, timeout=30000)
    scanned = {id(o) for o in gc.get_objects()}
    assert not any(id(row) in scanned for row in view.stack.rows)
    view.clear()
    qtbot.waitUntil(lambda: not view.clearing, timeout=30000)
    assert gc.get_freeze_count() > 0  # what is left (the app) is kept out again


def test_many_rows_removed_at_once_are_deleted_over_turns(view: ChatView, qtbot: QtBot) -> None:
    # A finished reply replaces its open rows (up to HELD_LIMIT): 300 rows deleted in one turn
    # stalled the window.
    rows = [TextRow(view.theme, "reply") for _ in range(40)]
    for row in rows:
        row.set_plain("a row")
        view.stack.append(row)
    watched = [weakref.ref(row) for row in rows]
    del rows, row
    view.stack.remove_tail(list(view.stack.rows))
    assert view.stack.rows == []
    assert view.stack.height() == 0
    assert view.clearing
    qtbot.waitUntil(lambda: not view.clearing, timeout=10000)
    assert [row for row in watched if row() is not None] == []


def test_code_waits_for_its_lexer_shown_plain_then_highlighted(
    view: ChatView, qtbot: QtBot, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = threading.Event()
    make = lexers.get_lexer_by_name

    def slow(name: str) -> Lexer:
        made.wait(10)  # a lexer whose rules take long to compile
        return make(name)

    monkeypatch.setattr(lexers, "get_lexer_by_name", slow)
    shelf = lexers.LexerShelf()  # a fresh one: no language made yet
    monkeypatch.setattr(code_row_module, "shelf", lambda: shelf)
    view.add_reply("Model", "```python\ndef f():\n    return 1\n```\n\n```nosuchlanguage\nx\n```\n")
    code = [row for row in view.stack.rows if isinstance(row, CodeRow)]
    assert [row.code for row in code] == ["def f():\n    return 1\n", "x\n"]
    assert "color" not in code[0].text_block().text()  # plain while the lexer is made
    made.set()
    qtbot.waitUntil(lambda: "color" in code[0].text_block().text(), timeout=10000)
    assert code[0].text_block().plain_text() == "def f():\n    return 1"
    assert shelf.lexer("nosuchlanguage") is lexers.PLAIN  # unknown: plain, nothing made


def test_code_waits_for_its_style_made_off_the_ui_thread(
    view: ChatView, qtbot: QtBot, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A formatter imports its style's module and works out its colours: 25-35 ms the first
    # time, which was the longest stall of reopening a 1 MB reply.
    made = threading.Event()
    makers: list[threading.Thread] = []
    make = lexers._make_formatter

    def slow(style: str) -> HtmlFormatter[str]:
        makers.append(threading.current_thread())
        made.wait(10)
        return make(style)

    monkeypatch.setattr(lexers, "_make_formatter", slow)
    shelf = lexers.LexerShelf()
    monkeypatch.setattr(code_row_module, "shelf", lambda: shelf)
    view.add_reply("Model", "```python\ndef f():\n    return 1\n```\n")
    (code,) = [row for row in view.stack.rows if isinstance(row, CodeRow)]
    qtbot.waitUntil(lambda: shelf.lexer("python") is not None, timeout=10000)
    qtbot.wait(50)  # the lexer's signal handled: the style is still being made
    assert "color" not in code.text_block().text()
    assert code.text_block().plain_text() == "def f():\n    return 1"
    made.set()
    qtbot.waitUntil(lambda: "color" in code.text_block().text(), timeout=10000)
    assert code.text_block().plain_text() == "def f():\n    return 1"
    assert makers
    assert threading.main_thread() not in makers


def test_code_rows_make_their_header_when_shown(view: ChatView, qtbot: QtBot) -> None:
    view.hide()  # built while nothing is painted
    view.add_reply("Model", markdown(100_000))
    qtbot.waitUntil(lambda: not view.building, timeout=30000)
    code = [row for row in view.stack.rows if isinstance(row, CodeRow)]
    assert len(code) > 100
    assert [row for row in code if row._copy is not None] == []
    # Shown at the top: the rows there get their language and Copy on the next turn, and no
    # row moves when they do.
    tops = list(view.stack.tops)
    view.show()
    view.verticalScrollBar().setValue(0)
    first = code[0]
    qtbot.waitUntil(lambda: first._copy is not None, timeout=5000)
    assert first.language_label.text() == "python"
    assert first.copy_button.isVisible()
    assert view.stack.tops == tops
    assert code[-1]._copy is None  # never shown
    # A streamed code block has its header at once.
    view.clear()
    view.begin_reply("Model")
    view.append_to_reply("```python\nx = 1\n")
    (streamed,) = [row for row in view.stack.rows if isinstance(row, CodeRow)]
    assert streamed._copy is not None
