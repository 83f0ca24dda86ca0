"""Streaming Markdown: a reply's text cut into blocks as it arrives, each final once closed.

No Qt and nothing of the window: :mod:`~app.markdown.stream` (the stream a reply feeds),
:mod:`~app.markdown.parser` (the markdown-it parser and the blocks it makes) and
:mod:`~app.markdown.segments` (complete blocks that may still change, long blocks shown in
segments). The conversation view (:mod:`app.ui.chat`) draws what they make.
"""
