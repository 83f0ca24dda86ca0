"""Markdown replies the streaming and view tests share: awkward shapes, and a reply that thinks."""

from __future__ import annotations

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
"""Markdown that is hard to stream, by name: unclosed fences, tables, nested lists, CJK, CRLF."""

REASONING = "<think>\nFirst, 2 + 2.\nThat is 4.\n</think>\n\nThe answer is **4**."
"""A reply with its reasoning between ``<think>`` tags first."""
