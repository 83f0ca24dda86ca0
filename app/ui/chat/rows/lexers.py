"""The lexers that highlight code blocks, made off the UI thread.

A Pygments lexer imports its module and compiles its rules the first time one is made: about
45 ms for Python, more for some languages. Made on the UI thread, that stalled the window when a
reply's first code block in a language arrived. So a language's lexer is made on a thread of its
own; until it is ready the language's code is shown plain, and :attr:`LexerShelf.ready` tells the
rows showing it to draw it again, highlighted.
"""

from __future__ import annotations

import functools
import queue
import threading

from pygments.lexer import Lexer
from pygments.lexers import TextLexer, get_lexer_by_name
from pygments.lexers._mapping import LEXERS  # the names alone: no lexer module imported
from PySide6.QtCore import QObject, Signal

PLAIN: Lexer = TextLexer()
"""Shows code as it is: for no language, an unknown one, or one whose lexer is being made."""


@functools.cache
def _aliases() -> frozenset[str]:
    return frozenset(alias for entry in LEXERS.values() for alias in entry[2])


class LexerShelf(QObject):
    """The lexers made so far, and one thread making the ones asked for, in turn.

    Signals:
        ready(str): the lexer for this language is made (emitted on the UI thread).
    """

    ready = Signal(str)

    def __init__(self) -> None:
        super().__init__()
        self._lexers: dict[str, Lexer] = {}
        self._asked: set[str] = set()
        self._lock = threading.Lock()
        self._wanted: queue.SimpleQueue[str] = queue.SimpleQueue()
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
        if made is not None:
            return made
        if name not in self._asked:
            self._asked.add(name)
            self._wanted.put(name)
            if self._thread is None:
                # A daemon: a lexer being made never holds up quitting.
                self._thread = threading.Thread(target=self._make, name="lexers", daemon=True)
                self._thread.start()
        return None

    def _make(self) -> None:
        while True:
            name = self._wanted.get()
            try:
                lexer = get_lexer_by_name(name)
            except Exception:  # any failure of a lexer's module: the code is shown plain
                lexer = PLAIN
            with self._lock:
                self._lexers[name] = lexer
            self.ready.emit(name)


@functools.cache
def shelf() -> LexerShelf:
    """The application's lexers (made on first use, on the UI thread, which it reports to)."""
    return LexerShelf()
