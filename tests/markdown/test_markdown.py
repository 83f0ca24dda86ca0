"""Streaming Markdown: what is shown at every step equals the text so far rendered at once."""

from __future__ import annotations

import html
import itertools
import json
import random
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from markdown_it.token import Token

from app.markdown import stream as markdown_stream
from app.markdown.stream import (
    SEGMENT_CHARS,
    SEGMENT_LINES,
    Block,
    MarkdownStream,
    join_segments,
    make_parser,
    render_blocks,
)
from app.store.conversation import Conversation
from app.store.thinking import ThinkSplitter, strip_thinking
from tests.support.markdown_corpus import CORPUS, REASONING


def stream_in_pieces(text: str, seed: int) -> tuple[list[Block], list[list[Block]]]:
    """Feed ``text`` in random pieces; returns the final blocks and what was shown each step."""
    rng = random.Random(seed)
    stream = MarkdownStream()
    closed: list[Block] = []
    shown: list[list[Block]] = []
    i = 0
    while i < len(text):
        n = rng.choice([1, 1, 2, 3, 5, 8, 20])
        update = stream.feed(text[i : i + n])
        i += n
        closed += update.closed
        shown.append(closed + update.open)
    closed += stream.finish().closed
    return closed, shown


@pytest.mark.parametrize("name", list(CORPUS))
def test_streamed_in_random_pieces_renders_as_the_whole_text(name: str) -> None:
    text = CORPUS[name]
    whole = render_blocks(text)
    for seed in range(40):
        final, _ = stream_in_pieces(text, seed)
        assert final == whole, f"seed {seed}"


@pytest.mark.parametrize("name", list(CORPUS))
def test_every_frame_shows_the_text_so_far_as_if_rendered_at_once(name: str) -> None:
    rng = random.Random(7)
    assert_each_frame_renders_the_text_so_far(CORPUS[name], iter(lambda: rng.randint(1, 6), 0))


def assert_each_frame_renders_the_text_so_far(text: str, sizes: Iterator[int]) -> MarkdownStream:
    """Feed ``text`` in pieces of ``sizes``; every frame must show what a parse of it shows."""
    stream = MarkdownStream()
    closed: list[Block] = []
    i = 0
    while i < len(text):
        n = next(sizes)
        update = stream.feed(text[i : i + n])
        i += n
        closed += update.closed
        if text[i - 1 : i] == "\r":
            continue  # a lone CR waits for the next piece to say whether it is CRLF
        assert closed + update.open == render_blocks(text[:i]), repr(text[:i])
    return stream


def test_blocks_join_into_what_markdown_it_renders_for_the_whole_text() -> None:
    text = "\n\n".join(v for k, v in CORPUS.items() if "fence" not in k and "indented" not in k)
    blocks = render_blocks(text)
    assert all(b.kind == "text" for b in blocks)
    assert "".join(b.html for b in blocks) == make_parser().render(text.replace("\r\n", "\n"))


def test_a_list_item_number_on_an_unfinished_line_does_not_close_the_list() -> None:
    stream = MarkdownStream()
    update = stream.feed("1. first\n\n2")
    # "2" alone would be a paragraph, but the line is not finished: the list stays open.
    assert update.closed == []
    update = stream.feed(". second\n\nAfter.\n")
    assert len(update.closed) == 1
    assert "<ol>" in update.closed[0].html
    assert "second" in update.closed[0].html


def test_final_blocks_are_not_parsed_again() -> None:
    stream = MarkdownStream()
    paragraph = "A paragraph of a long answer, with some words in it.\n\n"
    closed = 0
    for _ in range(300):
        closed += len(stream.feed(paragraph).closed)
    # Only the open tail is kept for re-parsing, however long the reply is.
    assert closed == 299
    assert stream.tail == paragraph
    assert stream.closed_count == 299


def test_code_blocks_keep_their_code_and_language() -> None:
    (block,) = render_blocks("```Python extra words\nprint('hi')\n```\n")
    assert block.kind == "code"
    assert block.language == "Python"
    assert block.code == "print('hi')\n"
    (unclosed,) = render_blocks("```\nno end yet")
    assert unclosed.kind == "code"
    assert unclosed.code == "no end yet"


# -- model output is untrusted ----------------------------------------------------------------


def html_of(text: str) -> str:
    return "".join(b.html for b in render_blocks(text))


@pytest.mark.parametrize(
    "text",
    [
        "<script>alert(1)</script>",
        '<img src="http://example.com/x.png" onerror="alert(1)">',
        "inline <b>bold</b> and <iframe src=x></iframe>",
        "<div>\nblock html\n</div>",
    ],
)
def test_raw_html_is_shown_as_text(text: str) -> None:
    html = html_of(text)
    for tag in ("<script", "<img", "<b>", "<iframe", "<div"):
        assert tag not in html
    assert "&lt;" in html


def test_images_are_never_loaded_only_described() -> None:
    html = html_of("![a cat](http://example.com/cat.png)")
    assert "<img" not in html
    assert "a cat" in html
    assert "(http://example.com/cat.png)" in html


def test_links_show_their_address() -> None:
    html = html_of("See [the docs](https://example.com/docs) or <https://example.org>.")
    assert '<a href="https://example.com/docs">the docs</a>' in html
    assert "(https://example.com/docs)" in html
    # An autolink already shows its address: not repeated.
    assert html.count("https://example.org") == 2  # href and text, no "(…)"


def test_dangerous_link_schemes_are_not_links() -> None:
    html = html_of("[click](javascript:alert(1)) [data](data:text/html;base64,xx)")
    assert "<a " not in html


# -- thinking -----------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(30))
def test_thinking_split_across_pieces(seed: int) -> None:
    rng = random.Random(seed)
    splitter = ThinkSplitter()
    thinking = answer = ""
    started = ended = 0
    i = 0
    while i < len(REASONING):
        n = rng.randint(1, 5)
        update = splitter.feed(REASONING[i : i + n])
        i += n
        thinking += update.thinking
        answer += update.answer
        started += update.thinking_started
        ended += update.thinking_ended
    last = splitter.finish()
    thinking += last.thinking
    answer += last.answer
    assert (started, ended) == (1, 1)
    assert thinking == "\nFirst, 2 + 2.\nThat is 4.\n"
    assert answer == "The answer is **4**."


@pytest.mark.parametrize("text", ["<thing> is not a tag", "<", "<th", "Plain answer."])
def test_text_that_only_looks_like_a_thinking_tag_is_answer(text: str) -> None:
    splitter = ThinkSplitter()
    answer = ""
    for ch in text:
        update = splitter.feed(ch)
        assert update.thinking == ""
        answer += update.answer
    answer += splitter.finish().answer
    assert answer == text


def test_thinking_is_not_sent_back_as_history() -> None:
    conversation = Conversation()
    conversation.add("user", "2 + 2?")
    conversation.add("assistant", REASONING)
    conversation.add("user", "And 3 + 3?")
    conversation.add("assistant", "<think>still thinking when stopped", status="stopped")
    assert conversation.history() == [
        ("user", "2 + 2?"),
        ("assistant", "The answer is **4**."),
        ("user", "And 3 + 3?"),
    ]
    assert strip_thinking("No thinking here.") == "No thinking here."


# -- long blocks are shown in segments, so an update stays small --------------------------------


def stream_all(text: str, piece: int = 7) -> tuple[list[Block], int]:
    """Stream ``text``; returns the final blocks and the longest tail (in lines) kept open."""
    stream = MarkdownStream()
    blocks: list[Block] = []
    longest = 0
    for i in range(0, len(text), piece):
        blocks += stream.feed(text[i : i + piece]).closed
        longest = max(longest, stream.tail.count("\n"))
    blocks += stream.finish().closed
    return blocks, longest


def test_a_long_code_block_is_segmented_and_loses_nothing() -> None:
    code = "".join(f"value_{i} = compute({i})  # step {i}\n" for i in range(500))
    text = f"Intro.\n\n```python\n{code}```\n\nAfter the code.\n"
    blocks, longest = stream_all(text)
    assert longest <= SEGMENT_LINES + 2  # the open tail never grows with the block
    segments = [b for b in blocks if b.kind == "code"]
    assert len(segments) > 5
    assert [b.part for b in segments] == list(range(len(segments)))
    assert all(b.continued for b in segments[:-1])
    assert not segments[-1].continued
    assert {b.language for b in segments} == {"python"}
    assert "".join(b.code for b in segments) == code
    assert "".join(b.source for b in blocks) == text
    assert blocks[-1] == render_blocks(text)[-1]  # what follows is unaffected


def test_a_long_paragraph_of_lines_is_segmented_where_it_reads_the_same() -> None:
    lines = [f"line {i} of a poem that goes on" for i in range(300)]
    lines[100] = "*this emphasis"  # spans two lines: no cut may fall between them
    lines[101] = "goes on* here"
    text = "\n".join(lines) + "\n\nThe end.\n"
    blocks, longest = stream_all(text)
    assert longest <= SEGMENT_LINES + 10
    paragraph = [b for b in blocks if b.kind == "text"][:-1]
    assert len(paragraph) > 3
    # Seams read as the line breaks they replace: the same HTML as the whole paragraph.
    joined = "<br />\n".join(b.html.removeprefix("<p>").removesuffix("</p>\n") for b in paragraph)
    (whole, end) = render_blocks(text)
    assert "<p>" + joined + "</p>\n" == whole.html
    assert "<em>this emphasis<br />\ngoes on</em>" in whole.html
    assert end == blocks[-1]


def test_one_endless_line_is_segmented_by_its_length() -> None:
    # Plain words on one line: few lines and a low parse cost, but Qt lays a paragraph out
    # whole on every change, so the open part must stay short however long the line gets.
    text = "".join(f"word{i % 10} " for i in range(5000)) + "\n\nThe end.\n"
    stream = MarkdownStream()
    blocks: list[Block] = []
    longest = 0
    for i in range(0, len(text), 7):
        blocks += stream.feed(text[i : i + 7]).closed
        longest = max(longest, len(stream.tail))
    blocks += stream.finish().closed
    assert longest <= SEGMENT_CHARS + 100
    paragraph = [b for b in blocks if b.kind == "text"][:-1]
    assert len(paragraph) >= len(text) // SEGMENT_CHARS - 1
    assert all(b.continued for b in paragraph[:-1])
    assert "".join(b.source for b in blocks) == text


def test_the_fire_hose_text_keeps_a_small_open_tail() -> None:
    text = "".join(f"{i % 10}" + (" " if i % 7 else "\n") for i in range(20000))
    blocks, longest = stream_all(text, piece=80)
    assert longest <= SEGMENT_LINES + 10
    assert "".join(b.source for b in blocks) == text


# -- whatever the shape: nothing lost, streamed equals whole, bounded work per update ----------

SPEC = json.loads((Path(__file__).parents[1] / "data" / "commonmark_spec.json").read_text("utf-8"))


def stream_final(text: str, sizes: Iterator[int], md: MarkdownIt | None = None) -> list[Block]:
    """Feed ``text`` in pieces of the given sizes; returns what the view shows at the end."""
    stream = MarkdownStream(md)
    shown: list[Block] = []
    i = 0
    while i < len(text):
        n = next(sizes)
        update = stream.feed(text[i : i + n])
        i += n
        shown = shown[: stream.closed_count - len(update.closed)] + update.closed + update.open
    end = stream.finish()
    assert end.open == []
    return shown[: stream.closed_count - len(end.closed)] + end.closed


def piece_sizes(text: str, how: str, seed: int = 0) -> Iterator[int]:
    if how == "chars":
        return itertools.repeat(1)
    if how == "lines":
        return itertools.chain((len(line) for line in text.splitlines(keepends=True)), [1])
    rng = random.Random(seed)
    return iter(lambda: rng.randint(1, 9), None)


def assert_streams_as_whole(text: str, hows: Sequence[str] = ("chars", "random", "lines")) -> None:
    whole = render_blocks(text)
    for how in hows:
        final = stream_final(text, piece_sizes(text, how, seed=len(text)))
        assert join_segments(final) == whole, how


@pytest.mark.parametrize("how", ["chars", "random", "lines"])
def test_every_commonmark_spec_example_streams_as_the_whole(how: str) -> None:
    failures = []
    for example in SPEC:
        text = example["markdown"]
        final = stream_final(text, piece_sizes(text, how, seed=example["example"]))
        if join_segments(final) != render_blocks(text):
            failures.append(example["example"])
    assert failures == []


def lines_of(n: int, template: str = "Line {i} of a long paragraph that keeps going.") -> str:
    return "".join(template.format(i=i) + "\n" for i in range(n))


REALISTIC = {
    "a definition after its use": (
        "See [foo] and [bar][] here.\n\nMore text.\n\n[foo]: https://a.example\n"
        "[bar]: https://b.example 'B'\n"
    ),
    "a second paragraph using an earlier definition": (
        "[foo]: https://x.example\n\nFirst paragraph.\n\nThe second uses [foo].\n"
    ),
    "a definition at the very end, after a long paragraph using it": (
        lines_of(100, "Line {i} cites [note] here.") + "\n[note]: https://n.example\n"
    ),
    "a definition after a long list using it": (
        "".join(f"- item [ref{i % 3}]\n" for i in range(100)) + "\n[ref1]: /one\n"
    ),
    "a long paragraph then a setext underline": lines_of(60) + "---\n\nAfter.\n",
    "a long paragraph then an = underline": lines_of(60) + "===\n",
    "emphasis across a segment cut": (
        lines_of(45) + "*start of emphasis\n" + lines_of(70) + "end* of it\n" + lines_of(50)
    ),
    "a code span across a segment cut": (
        lines_of(45) + "`start of code\n" + lines_of(70) + "end` of it\n" + lines_of(50)
    ),
    "a link across a segment cut": (
        lines_of(45) + "[a link\n" + lines_of(70) + "end](https://x.example) ok\n" + lines_of(50)
    ),
    "a long paragraph then a table": lines_of(60) + "a | b\n--|--\n1 | 2\n",
    "a tight list that turns loose late": (
        "".join(f"- item {i}\n" for i in range(120)) + "\n- loose one\n- more\n\nEnd.\n"
    ),
    "a loose list": "".join(f"- item {i}\n\n" for i in range(120)) + "End.\n",
    "an ordered list numbered 1. 1. 1.": "".join(f"1. step {i}\n" for i in range(150)),
    "an ordered list from 3)": "".join(f"{i + 3}) step {i}\n" for i in range(150)) + "\nEnd.\n",
    "a table": (
        "| a | b |\n|---|--:|\n" + "".join(f"| r{i} | {i} |\n" for i in range(200)) + "\nafter\n"
    ),
    "a table with short rows": (
        "| a | b | c |\n|---|---|---|\n" + "".join(f"| r{i} |\n" for i in range(200))
    ),
    "a long code block": "```py\n" + "".join(f"x = {i}\n" for i in range(300)) + "```\nafter\n",
    "a long line of prose": " ".join(f"word{i} *em{i}* `c{i}`," for i in range(700)),
    "a long line with a table-like end": "a " * 1500 + "| x | y |\n|---|---|\n| 1 | 2 |\n",
}


@pytest.mark.parametrize("name", list(REALISTIC))
def test_realistic_replies_stream_as_the_whole(name: str) -> None:
    assert_streams_as_whole(REALISTIC[name], ("random", "lines"))


def test_a_late_definition_turns_earlier_brackets_into_links() -> None:
    final = stream_final(REALISTIC["a definition after its use"], itertools.repeat(3))
    assert '<a href="https://a.example">foo</a>' in final[0].html
    assert '<a href="https://b.example" title="B">bar</a>' in final[0].html


def test_a_long_paragraph_shown_in_segments_becomes_one_heading() -> None:
    text = REALISTIC["a long paragraph then a setext underline"]
    stream = MarkdownStream()
    shown_segments = 0
    for i in range(0, len(text) - 20, 7):
        update = stream.feed(text[i : i + 7])
        shown_segments = max(shown_segments, sum(b.continued for b in update.open))
    assert shown_segments > 0  # it was shown in segments while it streamed
    final = stream_final(text, itertools.repeat(7))
    assert final[0].html.startswith("<h2>Line 0")
    assert final[0].html.endswith("keeps going.</h2>\n")
    assert final == render_blocks(text)


def test_later_list_segments_keep_the_numbering_and_looseness_of_the_list() -> None:
    text = "".join(f"1. step {i}\n" for i in range(200))
    stream = MarkdownStream()
    opened: list[Block] = []
    for i in range(0, len(text), 11):
        opened = stream.feed(text[i : i + 11]).open
    assert len(opened) > 2, "a long list is shown in segments"
    assert opened[0].html.startswith("<ol>\n")
    items_before = 0
    for block in opened:
        if block.part:
            # "1." each time, as models write: the segment still counts on from the last one.
            assert block.html.startswith(f'<ol start="{items_before + 1}">\n')
        items_before += block.source.count("\n")
    # Tight: no paragraphs inside items, in the segments as in the whole.
    assert all("<p>" not in b.html for b in opened)


def test_a_list_that_turns_loose_renders_every_segment_loose() -> None:
    text = REALISTIC["a tight list that turns loose late"]
    final = stream_final(text, itertools.repeat(13))
    items = [b for b in final if "<li>" in b.html]
    assert len(items) > 2
    assert all("<li>\n<p>" in b.html for b in items)


def nesting_outline(depth: int) -> str:
    return "".join("  " * d + f"- level {d}\n" for d in range(depth))


def visible_text(blocks: Sequence[Block]) -> str:
    """What a reader sees: the HTML's text, tags dropped and entities decoded."""
    text = "".join(b.html if b.kind == "text" else b.code for b in blocks)
    return html.unescape(re.sub(r"<[^>]*>", "", text)).replace("\xa0", " ")


@pytest.mark.parametrize("depth", [12, 25, 60])
def test_an_outline_nested_deeper_than_the_parser_goes_loses_nothing(depth: int) -> None:
    text = nesting_outline(depth) + "\nThe paragraph after.\n"
    blocks = render_blocks(text)
    seen = visible_text(blocks)
    for d in range(depth):
        assert f"level {d}" in seen
    assert blocks[-1].html == "<p>The paragraph after.</p>\n"
    assert_streams_as_whole(text, ("random",))


def test_thousands_of_nested_quotes_lose_nothing() -> None:
    text = ">" * 5000 + "x\n\nafter\n"
    blocks = render_blocks(text)
    seen = visible_text(blocks)
    assert "x" in seen
    assert seen.count(">") > 4900
    assert blocks[-1].html == "<p>after</p>\n"
    assert_streams_as_whole(text, ("random",))


def test_a_list_of_50000_increasing_indents_loses_nothing() -> None:
    text = "".join(" " * (2 * (i % 40)) + f"- item {i}\n" for i in range(50_000))
    seen = visible_text(render_blocks(text))
    assert sorted(int(n) for n in re.findall(r"item (\d+)", seen)) == list(range(50_000))


def test_an_increasing_indent_staircase_streams_as_the_whole() -> None:
    text = "".join(" " * (i % 200) + f"- step {i}\n" for i in range(600)) + "\nEnd.\n"
    assert "step 599" in visible_text(render_blocks(text))
    assert_streams_as_whole(text, ("random",))


def counting_parser() -> tuple[MarkdownIt, list[int]]:
    """A parser that records how many characters each parse covered."""
    md = make_parser()
    sizes: list[int] = []
    parse = md.parse

    def counted(src: str, env: Any = None) -> list[Token]:
        sizes.append(len(src))
        return parse(src, env)

    md.parse = counted  # type: ignore[method-assign]
    return md, sizes


HOSTILE = {
    "a list of 5,000 items": "".join(f"- item {i}: a few words about it\n" for i in range(5000)),
    "a table of 2,000 rows": "| name | value |\n| --- | ---: |\n"
    + "".join(f"| row {i} | {i * 7} |\n" for i in range(2000)),
    "a line of 100,000 characters": "".join(
        f"Sentence {i} has *emphasis*, a `span`, words - and: more! " for i in range(2000)
    )[:100_000],
    "20,000 alternating delimiters": "*a" * 20_000,
    "10,000 unmatched brackets": "[" * 10_000,
    "a long ordinary reply": "".join(
        f"## Part {i}\n\nSome **bold** and `code` in a [link](https://x.example/{i}).\n\n"
        f"- one\n- two\n\n```py\nx = {i}\n```\n\n"
        for i in range(300)
    ),
}


SHOWN_AS_MARKDOWN = {
    "a list of 5,000 items": "<li>item 4999",
    "a table of 2,000 rows": "<td>row 1999</td>",
    "a line of 100,000 characters": "<em>emphasis</em>",
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_the_work_of_an_update_does_not_grow_with_the_block(name: str) -> None:
    text = HOSTILE[name]
    md, sizes = counting_parser()
    stream = MarkdownStream(md)
    per_update = []
    for i in range(0, len(text), 60):
        before = len(sizes)
        stream.feed(text[i : i + 60])
        per_update.append(sum(sizes[before:]))
        assert len(stream.tail) < 20_000 or stream._overflow is not None
    if name in SHOWN_AS_MARKDOWN:
        # Still Markdown while it streams (segments, not plain text), up to its last part.
        assert SHOWN_AS_MARKDOWN[name] in stream.feed("").open[-1].html
    before = len(sizes)
    closed = stream.finish().closed
    # Every update parses a bounded amount of text, however far into the block it is...
    assert max(per_update) < 12_000
    # ...and the whole reply is parsed a bounded number of times over, not once per update.
    assert sum(per_update) < 40 * len(text)
    assert sum(sizes[before:]) <= len(text) + 1
    del closed


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_shapes_stream_as_the_whole_and_lose_nothing(name: str) -> None:
    text = HOSTILE[name]
    final = stream_final(text, itertools.repeat(60))
    assert join_segments(final) == render_blocks(text)


def test_a_run_too_long_to_parse_is_shown_as_written() -> None:
    (block,) = render_blocks("*a" * 20_000)
    assert visible_text([block]).strip() == "*a" * 20_000
    (block,) = render_blocks("[" * 10_000 + "](x)")
    assert visible_text([block]).strip() == "[" * 10_000 + "](x)"
    # Short runs are Markdown as ever.
    (block,) = render_blocks("*a*" + " [b](https://x.example)")
    assert "<em>a</em>" in block.html
    assert '<a href="https://x.example">' in block.html


def test_an_overflowing_block_is_plain_text_until_it_ends() -> None:
    stream = MarkdownStream()
    opened: list[Block] = []
    for i in range(0, 6000, 50):
        opened = stream.feed(("[" * 6000)[i : i + 50]).open
    assert "[" * 100 in visible_text(opened)  # shown as written while it streams
    update = stream.feed("\n\nNext paragraph.\n\nAnd one more")
    assert any("Next paragraph." in b.html for b in update.closed + update.open)
    assert_streams_as_whole("[" * 6000 + "\n\nNext paragraph.\n\nAnd one more", ("random",))


def test_join_segments_rebuilds_the_whole_blocks() -> None:
    text = lines_of(200) + "\n" + "".join(f"- item {i}\n" for i in range(200))
    final = stream_final(text, itertools.repeat(17))
    assert len(final) > len(render_blocks(text))  # shown in segments
    assert join_segments(final) == render_blocks(text)


_FRAGMENTS = [
    "word",
    "other words",
    " ",
    "\n",
    "\n",
    "\n\n",
    "*",
    "**",
    "_",
    "`",
    "[",
    "]",
    "(x)",
    "[a]",
    "[a]: /u\n",
    "- ",
    "1. ",
    "2) ",
    "> ",
    "# ",
    "---\n",
    "===\n",
    "| a | b |\n",
    "|---|---|\n",
    "    ",
    "```\n",
    "~~",
    "\\",
    "<http://x>",
    "&amp;",
    "x  \n",
    "\t",
    "![i](s)",
    "  - ",
]


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    pieces=st.lists(st.sampled_from(_FRAGMENTS), min_size=1, max_size=80),
    cuts=st.lists(st.integers(1, 8), min_size=1, max_size=20),
)
def test_any_text_in_any_pieces_ends_as_the_whole(pieces: list[str], cuts: list[int]) -> None:
    text = "".join(pieces)
    # Tiny thresholds, so that segments and plain-text overflow happen in short texts.
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(markdown_stream, "SEGMENT_LINES", 3)
        mp.setattr(markdown_stream, "SEGMENT_COST", 30.0)
        mp.setattr(markdown_stream, "OVERFLOW_COST", 90.0)
        final = stream_final(text, itertools.cycle(cuts))
    assert join_segments(final) == render_blocks(text)


def test_paragraphs_that_start_with_a_bracket_do_not_pile_up_in_the_tail() -> None:
    # "[1]: …" could be a link reference definition until its line ends as something else.
    text = "".join(f"[{i}]: not a definition, {i}.\n\n" for i in range(400))
    stream = MarkdownStream()
    longest = 0
    for i in range(0, len(text), 60):
        stream.feed(text[i : i + 60])
        longest = max(longest, stream.tail.count("\n"))
    assert longest <= 6
    assert_streams_as_whole(text, ("random",))


_TYPING_FRAGMENTS = [
    "word",
    "a _b_",
    "a *b*",
    " ",
    "  ",
    "Ab",
    "é",
    "中文",
    "1",
    "12",
    ",",
    "?",
    "!",
    "'",
    ":",
    ".",
    ")",
    "\n",
    "\n\n",
    "*",
    "**",
    "_",
    "`",
    "~~",
    "[",
    "]",
    "(x)",
    "&amp",
    ";",
    "\\",
    "#",
    "-",
    "=",
    "|",
    ">",
    "<",
    '"',
    "(",
    "/",
    "—",
    "“",
    "é…",
    "\u00a0",
    "\u200d",
    "\t",
    "    ",
    "[a]: /u",
]

_typing_examples = settings(max_examples=400, deadline=None, derandomize=True)(
    given(
        pieces=st.lists(st.sampled_from(_TYPING_FRAGMENTS), min_size=1, max_size=40),
        cuts=st.lists(st.integers(1, 6), min_size=1, max_size=12),
    )
)
"""Texts of typing fragments, cut into pieces of the sizes given (cycled)."""


@_typing_examples
def test_words_typed_onto_a_paragraph_show_what_a_parse_shows(
    pieces: list[str], cuts: list[int]
) -> None:
    # Words added to the open paragraph are shown without parsing it again: every frame
    # must still be what rendering the text so far at once gives.
    assert_each_frame_renders_the_text_so_far("".join(pieces), itertools.cycle(cuts))


@_typing_examples
def test_words_typed_through_the_fast_lane_show_what_a_parse_shows(
    pieces: list[str], cuts: list[int]
) -> None:
    # A consumer that tries the fast lane first (as the chat view's rows do) and feeds the
    # piece when it is refused: after every piece, its blocks are what a parse gives.
    text = "".join(pieces)
    stream = MarkdownStream()
    closed: list[Block] = []
    shown: list[Block] = []
    sizes = itertools.cycle(cuts)
    i = 0
    while i < len(text):
        piece = text[i : i + next(sizes)]
        i += len(piece)
        typed = stream.type_words(piece, shown[-1]) if shown else None
        if typed is None:
            update = stream.feed(piece)
            closed += update.closed
            shown = update.open
        else:
            block, added = typed
            # The paragraph's HTML is the one it had, with the words at the end of its text.
            words = added.replace('"', "&quot;")
            assert block.html == shown[-1].html.removesuffix("</p>\n") + words + "</p>\n"
            shown = [*shown[:-1], block]
        assert closed + shown == render_blocks(text[:i]), repr(text[:i])


@pytest.mark.parametrize(
    ("before", "words", "added"),
    [
        ("Hello", " world", " world"),
        ("Hello ", "world", " world"),  # the space held back comes with the word
        ("Hello ", " ", ""),  # spaces alone: nothing to show yet
        ("Hello **bold** ", "word", None),  # a cursor after </strong> would type bold
        ("Hello  ", "world", None),  # HTML folds the double space a cursor would type
        ("Hello", " a  b", None),
        ("Hello", " *b*", None),  # not plain words: feed parses them
        ("- item", " more", None),  # not a paragraph
    ],
)
def test_the_fast_lane_takes_only_words_a_document_can_type(
    before: str, words: str, added: str | None
) -> None:
    stream = MarkdownStream()
    shown = stream.feed(before).open
    typed = stream.type_words(words, shown[-1])
    if added is None:
        assert typed is None
        assert stream.tail == before  # nothing was taken: the words are fed instead
        update = stream.feed(words)
        assert update.closed + update.open == render_blocks(before + words)
    else:
        assert typed is not None
        assert typed[1] == added
        assert [*shown[:-1], typed[0]] == render_blocks(before + words)


def test_the_fast_lane_types_only_onto_the_paragraph_as_last_given_out() -> None:
    stream = MarkdownStream()
    shown = stream.feed("Hello").open
    stale = Block("text", html="<p>Hello</p>\n", source="Hello")  # equal, not the same
    assert stale == shown[-1]
    assert stream.type_words(" world", stale) is None
    typed = stream.type_words(" world", shown[-1])
    assert typed is not None
    assert stream.type_words(" again", shown[-1]) is None  # it was given out again since
    assert stream.type_words(" again", typed[0]) is not None


def test_a_paragraph_that_grows_by_words_is_not_parsed_again_for_each() -> None:
    md, parses = counting_parser()
    stream = MarkdownStream(md)
    words = [
        "The",
        "model",
        "explains",
        "something",
        "at",
        "length",
        "here,",
        "with",
        "words",
        "and",
        "more",
        "words",
    ]
    for word in words:
        stream.feed(word + " ")
    assert stream.typed >= len(words) - 2
    assert len(parses) <= 2


@pytest.mark.parametrize(
    ("before", "added"),
    [
        ("a _foo_", "bar"),  # the closer now has a letter after it: it closes nothing
        ("a *foo*", "bar"),
        ("Hello\n* ", "b"),  # a list item that interrupts the paragraph
        ("Hello\n1.", " b"),
        ("a &amp", ";"),  # an entity
        ("a \\", ","),  # an escape
        ("[a](b", ")"),  # a link
        ("a [b]", "(c)"),
        ("Hello ", "world"),
        ("Hello", "   "),
        ("a `b", " c`"),
        ("x" * 998, "yyyy"),  # a run too long to parse
        ("a\tb ", "c"),
        ("## Title\n\nThe", " model"),  # the heading is open until the paragraph's line ends
        ("- item\nword", " more"),  # a lazy continuation of the item
        ("> quote\nword", " more"),
        ("| a |\n| - |\n| 1 |\nword", " more"),
        ("Title\n===\n\nword", " more"),
    ],
)
def test_what_is_typed_onto_a_paragraph_reads_as_a_parse_reads_it(before: str, added: str) -> None:
    stream = MarkdownStream()
    closed = stream.feed(before).closed
    update = stream.feed(added)
    assert closed + update.closed + update.open == render_blocks(before + added)
