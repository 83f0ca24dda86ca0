"""The Markdown parser behind the streaming renderer, and the blocks it makes.

No Qt here. :func:`make_parser` is markdown-it with CommonMark, GFM tables and strikethrough,
adapted to untrusted model output: raw HTML escaped, images never loaded, a link's address shown
next to its text, nothing nested too deep dropped, a run of more than :data:`LONG_RUN` non-blank
characters shown as written. The helpers below cut a token stream into top-level groups and turn
each into a :class:`Block`; :mod:`app.markdown.stream` streams with them.
"""

from __future__ import annotations

import bisect
import re
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import markdown_it.rules_block.list as _md_list
from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml, normalizeReference
from markdown_it.parser_block import ParserBlock
from markdown_it.renderer import RendererHTML
from markdown_it.rules_block import StateBlock
from markdown_it.rules_inline import StateInline
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict

BlockKind = Literal["text", "code"]

LONG_RUN = 1000
"""A run of more non-blank characters than this is shown as written (no Markdown inside it)."""


@dataclass(frozen=True)
class Block:
    """One top-level Markdown block, ready to show.

    Attributes:
        kind: ``"code"`` for a fenced or indented code block, ``"text"`` for everything else.
        html: the block as (safe) HTML, for ``"text"`` blocks.
        code: the code, for ``"code"`` blocks (the fence's content, without the fences).
        language: the fence's info word (``python``), or ``""``.
        source: the Markdown the block was made from.
        part: for a long block shown in segments, which segment this is (0: the first).
        continued: more segments of the same block follow this one.
    """

    kind: BlockKind
    html: str = ""
    code: str = ""
    language: str = ""
    source: str = ""
    part: int = 0
    continued: bool = False


# -- the parser -------------------------------------------------------------------------------


def _link_close(
    renderer: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    # Show where a link goes: "text (https://…)" unless the text already is the address.
    depth = 0
    for i in range(idx - 1, -1, -1):
        token = tokens[i]
        if token.type == "link_close":
            depth += 1
        elif token.type == "link_open":
            if depth:
                depth -= 1
                continue
            href = str(token.attrGet("href") or "")
            label = "".join(
                t.content for t in tokens[i + 1 : idx] if t.type in ("text", "code_inline")
            )
            shown = href.removeprefix("mailto:")
            if label.strip() in (href, shown):
                return "</a>"
            return f'</a> <span class="address">({escapeHtml(href)})</span>'
    return "</a>"


def _image(
    renderer: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    # Never fetched: an image is shown as its description and its address.
    token = tokens[idx]
    alt = "".join(t.content for t in (token.children or []))
    src = str(token.attrGet("src") or "")
    return (
        f'<span class="image">[{escapeHtml(alt) or "image"}]</span> '
        f'<span class="address">({escapeHtml(src)})</span>'
    )


def _table_open(
    renderer: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    # Qt's rich text draws no cell borders unless the table asks for them.
    return '<table class="md" border="1" cellspacing="0" cellpadding="4">\n'


def plain_lines(text: str) -> str:
    """Text shown as written: escaped, one line per line, leading spaces kept."""
    out = []
    for line in text.split("\n"):
        body = line.lstrip(" ")
        out.append("&nbsp;" * (len(line) - len(body)) + escapeHtml(body))
    return "<br />\n".join(out)


def _plain(
    renderer: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    return plain_lines(tokens[idx].content)


class _BlockParser(ParserBlock):
    """markdown-it's block tokenizer, except that nothing nested too deep is dropped.

    At its nesting limit markdown-it skips the rest of the container *and*, inside a list item,
    everything after it to the end of the text. Here the container's remaining lines are kept
    as one paragraph of plain text instead, and parsing goes on after them. (The limit stays:
    it bounds the parser's recursion.)
    """

    def tokenize(self, state: StateBlock, startLine: int, endLine: int) -> None:  # noqa: N803
        # The loop of ParserBlock.tokenize (markdown-it-py 4.x, MIT), but for the nesting limit.
        rules = self.ruler.getRules("")
        line = startLine
        max_nesting = state.md.options.maxNesting
        has_empty_lines = False
        while line < endLine:
            state.line = line = state.skipEmptyLines(line)
            if line >= endLine:
                break
            if state.sCount[line] < state.blkIndent:
                break
            if state.level >= max_nesting:
                _keep_as_plain_text(state, line, endLine)
                break
            ok = False
            for rule in rules:
                ok = rule(state, line, endLine, False)
                if ok:
                    if state.line <= line:
                        raise RuntimeError("block rule didn't increment state.line")
                    break
            if not ok:
                raise RuntimeError("none of the block rules matched")
            state.tight = not has_empty_lines
            line = state.line
            if (line - 1) < endLine and state.isEmpty(line - 1):
                has_empty_lines = True
            if line < endLine and state.isEmpty(line):
                has_empty_lines = True
                line += 1
                state.line = line


def _keep_as_plain_text(state: StateBlock, line: int, end_line: int) -> None:
    """Emit the rest of the current container (from ``line``) as one plain-text paragraph."""
    first = last = line
    while line < end_line:
        if not state.isEmpty(line):
            if state.sCount[line] < state.blkIndent:
                break
            last = line + 1
        line += 1
    texts = []
    for i in range(first, last):
        if state.isEmpty(i):
            texts.append("")
            continue
        extra = max(0, state.sCount[i] - state.blkIndent)
        texts.append(" " * extra + state.src[state.bMarks[i] + state.tShift[i] : state.eMarks[i]])
    token = state.push("paragraph_open", "p", 1)
    token.map = [first, last]
    token = state.push("fg_plain", "", 0)
    token.content = "\n".join(texts)
    token.map = [first, last]
    state.push("paragraph_close", "p", -1)
    state.line = last


_RUNS: weakref.WeakKeyDictionary[StateInline, list[tuple[int, int]]] = weakref.WeakKeyDictionary()
_LONG_RUN_RE = re.compile(rf"\S{{{LONG_RUN + 1},}}")


def _long_run(state: StateInline, silent: bool) -> bool:
    """Take a run of more than LONG_RUN non-blank characters as it is written.

    Parsing such a run costs markdown-it up to several microseconds a character (``*a*a*a…``,
    ``[[[[…``), and nothing a reader wants is written that way; shown as written, every
    character of it stays visible.
    """
    if len(state.src) <= LONG_RUN:
        return False
    runs = _RUNS.get(state)
    if runs is None:
        runs = [(m.start(), m.end()) for m in _LONG_RUN_RE.finditer(state.src)]
        _RUNS[state] = runs
    i = bisect.bisect_right(runs, (state.pos, len(state.src) + 1)) - 1
    if i < 0 or not runs[i][0] <= state.pos < runs[i][1]:
        return False
    end = min(runs[i][1], state.posMax)
    if not silent:
        state.pending += state.src[state.pos : end]
    state.pos = end
    return True


def _note_open_delimiters(state: StateInline) -> None:
    # A delimiter that could still open emphasis (``*``, ``_``, ``~~``) may pair with one
    # written later: text cut before it could render differently once the rest arrives.
    if any(d.open and d.end < 0 for d in state.delimiters):
        state.env["fg_open_delimiters"] = True


_mark_tight_paragraphs = _md_list.markTightParagraphs


def _mark_tight(state: StateBlock, idx: int) -> None:
    # markdown-it decides whether a list is tight but keeps the answer to itself; a list cut
    # into segments needs it to render every segment as the whole list would be.
    state.tokens[idx].meta["tight"] = True
    _mark_tight_paragraphs(state, idx)


_md_list.markTightParagraphs = _mark_tight


def make_parser() -> MarkdownIt:
    """CommonMark plus GFM tables, strikethrough and hard line breaks; raw HTML off."""
    # ``breaks``: models write poems, addresses and steps one per line and expect them to stay
    # on their own lines, as chat apps show them; CommonMark alone would join them.
    md = MarkdownIt("commonmark", {"html": False, "breaks": True})
    block = _BlockParser()
    block.ruler = md.block.ruler
    md.block = block
    md.enable(["table", "strikethrough"])
    md.inline.ruler.before("text", "fg_long_run", _long_run)
    md.inline.ruler2.push("fg_open_delimiters", _note_open_delimiters)

    md.add_render_rule("link_close", _link_close)
    md.add_render_rule("image", _image)
    md.add_render_rule("table_open", _table_open)
    md.add_render_rule("fg_plain", _plain)
    return md


PARSER = make_parser()


# -- blocks -----------------------------------------------------------------------------------

References = dict[str, Any]


def top_groups(tokens: list[Token]) -> list[list[Token]]:
    """Split a token stream into its top-level blocks."""
    groups: list[list[Token]] = []
    depth = 0
    for token in tokens:
        if depth == 0:
            groups.append([])
        groups[-1].append(token)
        depth += token.nesting
    return groups


def group_start(group: list[Token]) -> int:
    """The line the group starts on."""
    first = group[0].map
    return first[0] if first else 0


def render_tokens(md: MarkdownIt, tokens: list[Token], env: EnvType) -> str:
    """The tokens as HTML."""
    html: str = md.renderer.render(tokens, md.options, env)
    return html


def to_block(
    group: list[Token], lines: list[str], end_line: int, md: MarkdownIt, env: EnvType
) -> Block:
    """The group (ending before line ``end_line``) as a block."""
    first = group[0]
    source = "".join(lines[group_start(group) : end_line])
    if first.type in ("fence", "code_block"):
        return Block("code", code=first.content, language=fence_language(first), source=source)
    return Block("text", html=render_tokens(md, group, env), source=source)


def group_ends(groups: list[list[Token]], count: int) -> list[int]:
    """The line each group ends before (the next one's start; ``count`` for the last)."""
    return [
        group_start(groups[i + 1]) if i + 1 < len(groups) else count for i in range(len(groups))
    ]


def blocks_of(
    groups: list[list[Token]], lines: list[str], md: MarkdownIt, env: EnvType
) -> list[Block]:
    """Every group as a block."""
    ends = group_ends(groups, len(lines))
    return [to_block(g, lines, end, md, env) for g, end in zip(groups, ends, strict=True)]


def parse_text(md: MarkdownIt, text: str, refs: References) -> tuple[list[Token], EnvType]:
    """The text's tokens, parsed knowing the definitions ``refs``, and what parsing left."""
    env: EnvType = {"references": dict(refs)}
    return md.parse(text, env), env


def fence_language(fence: Token) -> str:
    """The fence's info word (``python``), or ``""``."""
    info = fence.info.strip()
    return info.split(maxsplit=1)[0] if info else ""


LABEL = re.compile(r"\[((?:[^\[\]\\]|\\.){1,999})\]", re.DOTALL)


def undefined_labels(source: str, refs: References) -> frozenset[str]:
    """Bracketed labels in ``source`` that would become links if defined later."""
    if "[" not in source:
        return frozenset()
    found = set()
    for match in LABEL.finditer(source):
        label = normalizeReference(match.group(1))
        if label and label not in refs:
            found.add(label)
    return frozenset(found)


def is_list(group: list[Token]) -> bool:
    """Whether the group is a bullet or ordered list."""
    return group[0].type in ("bullet_list_open", "ordered_list_open")


_SPECIAL = re.compile(r"[!#$%&*+\-:<=>@\\\]^_`{}~|]")


def parse_cost(text: str) -> float:
    """A rough estimate of what parsing ``text`` costs, in microseconds on a slow machine.

    markdown-it spends little on plain words and most on the characters where its inline rules
    fire (every one of ``[`` costs a link-label scan as deep as the nesting limit).
    """
    return (
        len(text) / 40
        + 2.5 * len(_SPECIAL.findall(text))
        + 2.5 * (text.count("*") + text.count("_") + text.count("~"))
        + 6.0 * text.count("[")
        + 10.0 * text.count("\n")
    )


def plain_block(text: str) -> Block:
    """The text shown as written, as one block."""
    return Block("text", html=f"<p>{plain_lines(text.removesuffix(chr(10)))}</p>\n", source=text)
