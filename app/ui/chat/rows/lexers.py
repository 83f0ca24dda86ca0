"""The lexers and formatters that highlight code blocks, made off the UI thread.

A Pygments lexer imports its module and compiles its rules the first time one is made: about
45 ms for Python, more for some languages. A formatter imports its style's module and works out
the style's colours: 25-35 ms the first time (a 2-core VM). Made on the UI thread, that stalled
the window when a reply's first code block (or its first in a language) arrived. So they are
made on a thread of their own; until both are ready the code is shown plain, and
:attr:`LexerShelf.ready` tells the rows showing it to draw it again, highlighted.
"""

from __future__ import annotations

import contextlib
import functools
import queue
import sys
import threading
from collections.abc import Iterator

from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import TextLexer, get_lexer_by_name
from pygments.lexers._mapping import LEXERS  # the names alone: no lexer module imported
from PySide6.QtCore import QObject, Signal

PLAIN: Lexer = TextLexer()
"""Shows code as it is: for no language, an unknown one, or one whose lexer is being made."""


@functools.cache
def _aliases() -> frozenset[str]:
    return frozenset(alias for entry in LEXERS.values() for alias in entry[2])


SHARING_SWITCH_S = 0.0005
"""How often Python hands its lock between threads while a lexer or formatter is made."""


@contextlib.contextmanager
def _sharing_the_lock() -> Iterator[None]:
    """Python's lock passed between threads every 0.5 ms, not 5 ms, while this thread works.

    Making a lexer or a formatter is tens of milliseconds of Python, which holds the lock
    that the UI thread needs for each handler it runs in Python. At the interpreter's 5 ms
    each of them waited that long: a turn of the loop that runs a few took 40-50 ms (reopening
    a 1 MB reply while its first lexer was made, a 2-core VM).
    """
    before = sys.getswitchinterval()
    sys.setswitchinterval(min(before, SHARING_SWITCH_S))
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def _make_formatter(style: str) -> HtmlFormatter[str]:
    return HtmlFormatter(nowrap=True, noclasses=True, style=style)


class LexerShelf(QObject):
    """The lexers and formatters made so far, and one thread making the ones asked for, in turn.

    Signals:
        ready(str): a language's lexer or a style's formatter is made (emitted on the UI
            thread, with the language or the style).
    """

    ready = Signal(str)

    def __init__(self) -> None:
        super().__init__()
        self._lexers: dict[str, Lexer] = {}
        self._formatters: dict[str, HtmlFormatter[str]] = {}
        self._asked: set[tuple[str, str]] = set()
        self._lock = threading.Lock()
        self._wanted: queue.SimpleQueue[tuple[str, str]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def lexer(self, language: str) -> Lexer | None:
        """The lexer for ``language`` if it is ready; None while it is being made.

        A language Pygments does not know (checked by name, without importing anything) is
        shown plain at once.
        """
        name = language.strip().lower()
        if not name or name not in _aliases():
            return PLAIN
        with self._lock:
            made = self._lexers.get(name)
        if made is None:
            self._ask("lexer", name)
        return made

    def formatter(self, style: str) -> HtmlFormatter[str] | None:
        """The HTML formatter for the Pygments style ``style``; None while it is being made."""
        with self._lock:
            made = self._formatters.get(style)
        if made is None:
            self._ask("style", style)
        return made

    def _ask(self, kind: str, name: str) -> None:
        if (kind, name) in self._asked:
            return
        self._asked.add((kind, name))
        self._wanted.put((kind, name))
        if self._thread is None:
            # A daemon: a lexer being made never holds up quitting.
            self._thread = threading.Thread(target=self._make, name="lexers", daemon=True)
            self._thread.start()

    def _make(self) -> None:
        while True:
            kind, name = self._wanted.get()
            with _sharing_the_lock():
                self._make_one(kind, name)
            self.ready.emit(name)

    def _make_one(self, kind: str, name: str) -> None:
        if kind == "style":
            try:
                formatter = _make_formatter(name)
            except Exception:  # a style Pygments lacks: its default colours
                formatter = _make_formatter("default")
            with self._lock:
                self._formatters[name] = formatter
        else:
            try:
                lexer = get_lexer_by_name(name)
            except Exception:  # any failure of a lexer's module: the code is shown plain
                lexer = PLAIN
            with self._lock:
                self._lexers[name] = lexer


@functools.cache
def shelf() -> LexerShelf:
    """The application's lexers (made on first use, on the UI thread, which it reports to)."""
    return LexerShelf()
