"""Streaming Markdown: what is shown at every step equals the text so far rendered at once."""

from __future__ import annotations

import random

import pytest

from app.store.conversation import Conversation
from app.store.thinking import ThinkSplitter, strip_thinking
from app.ui.markdown import (
    SEGMENT_LINES,
    Block,
    MarkdownStream,
    make_parser,
    render_blocks,
)

CORPUS = {
    "unclosed fence": "Here is code:\n\n```python\ndef f(x):\n    return x * 2\n",
    "closed fence then text": "```js\nlet a = 1;\n```\nAfter the fence.\n",
    "table row by row": (
        "Results:\n\n| name | score |\n| --- | ---: |\n| ada | 10 |\n| bob | 7 |\n\nDone.\n"
    ),
    "nested lists": "- one\n  - one.a\n  - one.b\n    1. deep\n- two\n\n1. first\n2. second\n",
    "ordered list across a blank line": "1. first\n\n2. second\n\n3. third\n\nEnd.\n",
    "heading split across pieces": "# A heading that arrives slowly\n\nBody.\n## Second\ntext",
    "setext heading": "Title\n=====\n\nSub\n---\n\ntext\n",
    "cjk and emoji": (
        "## 你好，世界 🌏\n\n这是一个段落，包含**粗体**和`代码`。🎉👍🏽\n\n- 列表一\n- 列表二 🚀\n"
    ),
    "blockquote lazy continuation": "> quoted line\nlazy continuation\n\n> second quote\n",
    "indented code after a paragraph": "Text\n\n    indented code\n    more\n\nAfter.\n",
    "hard line breaks": (
        "Roses are red,\nviolets are blue,\nstreams never freeze,\nand Stop works too.\n"
    ),
    "thematic break vs list": "Para\n\n---\n\n- item\n* other list\n",
    "crlf line endings": "Line one\r\nLine two\r\n\r\n- item\r\n",
    "empty": "",
}


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
    text = CORPUS[name]
    rng = random.Random(7)
    stream = MarkdownStream()
    closed: list[Block] = []
    i = 0
    while i < len(text):
        n = rng.randint(1, 6)
        update = stream.feed(text[i : i + n])
        i += n
        closed += update.closed
        if text[i - 1 : i] == "\r":
            continue  # a lone CR waits for the next piece to say whether it is CRLF
        assert closed + update.open == render_blocks(text[:i]), repr(text[:i])


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

REASONING = "<think>\nFirst, 2 + 2.\nThat is 4.\n</think>\n\nThe answer is **4**."


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


def test_the_fire_hose_text_keeps_a_small_open_tail() -> None:
    text = "".join(f"{i % 10}" + (" " if i % 7 else "\n") for i in range(20000))
    blocks, longest = stream_all(text, piece=80)
    assert longest <= SEGMENT_LINES + 10
    assert "".join(b.source for b in blocks) == text
