"""The row stack: places the conversation's rows one under the other, without a QLayout.

Each row knows its height for a width, and :class:`RowStack` keeps the rows' tops itself, so
when the last row grows only that row and the stack's height change: the cost of an update
does not depend on how many rows are above it.
"""

from __future__ import annotations

import bisect
import functools
import time
from collections.abc import Callable

from PySide6.QtWidgets import QWidget
from shiboken6 import Shiboken

from app.ui.chat.rows.base import Row


class RowStack(QWidget):
    """Places rows one under the other, at the view's width.

    Positions are kept as running tops, so a change in a row's height moves only the rows
    below it. A reply grows at the bottom, so an update re-places one row.

    A new width (the window was resized) re-measures the rows on screen at once and leaves the
    others stale; :meth:`measure_stale` measures those a slice at a time, so a long
    conversation never stalls the window on a resize.
    """

    SYNC_ROWS = 120
    """Up to this many rows, a new width is laid out at once (it takes a few milliseconds)."""

    DELETE_NOW = 8
    """Rows removed from the bottom beyond this many are deleted by :meth:`sweep`."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.rows: list[Row] = []
        self._tops: list[int] = []
        self._heights: list[int] = []
        self._measured_at: list[int] = []
        self._index: dict[int, int] = {}
        self._hidden: set[int] = set()
        self.on_append: Callable[[int, Row], None] | None = None
        """Told of each row appended, with its index (the selection paints new rows)."""
        self.on_doomed: Callable[[], None] | None = None
        """Told when removed rows wait for :meth:`sweep` (the view sweeps them over turns);
        without it, removed rows are deleted on the next turn of the loop."""
        self._doomed: list[tuple[int, Row]] = []
        """Rows taken away by :meth:`take_all`, not hidden yet: their tops, highest first."""
        self._hidden_doomed: list[Row] = []
        """Rows taken away and hidden, waiting to be deleted."""

    @property
    def tops(self) -> list[int]:
        """Where each row starts, in the stack's coordinates."""
        return self._tops

    @property
    def stale(self) -> int:
        """Rows not measured at the current width yet."""
        width = self.width()
        return sum(1 for w in self._measured_at if w != width)

    def _measure(self, i: int) -> int:
        row = self.rows[i]
        width = self.width()
        self._measured_at[i] = width
        # Folded away, or not shown yet (measured when the view gets its width): no height.
        height = 0 if id(row) in self._hidden or width <= 0 else row.row_height(width)
        self._heights[i] = height
        return height

    def _bottom(self) -> int:
        return self._tops[-1] + self._heights[-1] if self.rows else 0

    def _grow_to(self, width: int, height: int) -> None:
        # Old rows still waiting to be deleted lie under the new ones; the stack's own height
        # clips them, so only those the new height uncovers need hiding, as it grows.
        doomed = self._doomed
        while doomed and doomed[-1][0] < height:
            row = doomed.pop()[1]
            row.hide()
            self._hidden_doomed.append(row)
        self.resize(width, height)

    def row_at(self, y: int) -> int:
        """The index of the row at height ``y`` (the last one if ``y`` is below all)."""
        return max(0, bisect.bisect_right(self._tops, y) - 1)

    def append(self, row: Row) -> None:
        """Add a row at the bottom."""
        row.setParent(self)
        self._index[id(row)] = len(self.rows)
        self._tops.append(self._bottom())
        self.rows.append(row)
        self._heights.append(0)
        self._measured_at.append(0)
        self._measure(len(self.rows) - 1)
        row.setGeometry(0, self._tops[-1], self.width(), self._heights[-1])
        row.show()
        row.height_changed.connect(functools.partial(self.refresh, row))
        self._grow_to(self.width(), self._bottom())
        if self.on_append is not None:
            self.on_append(len(self.rows) - 1, row)

    def index_of(self, row: Row) -> int:
        """The position of ``row`` in the stack (-1 if it is not there)."""
        return self._index.get(id(row), -1)

    def is_shown(self, i: int) -> bool:
        """Whether row ``i`` is shown (not folded away)."""
        return id(self.rows[i]) not in self._hidden

    def refresh(self, row: Row) -> None:
        """Re-measure a row whose content changed; moves the rows under it if it grew."""
        i = self._index.get(id(row))
        if i is None:
            return  # removed meanwhile
        before = self._heights[i]
        if self._measure(i) != before:
            self._place(i)
        else:
            row.setGeometry(0, self._tops[i], self.width(), before)

    def set_visible(self, rows: list[Row], visible: bool) -> None:
        """Fold rows away (height 0) or show them again."""
        if not rows:
            return
        for row in rows:
            if visible:
                self._hidden.discard(id(row))
            else:
                self._hidden.add(id(row))
            row.setVisible(visible)
            self._measure(self._index[id(row)])
        self._place(min(self._index[id(row)] for row in rows))

    def remove_tail(self, rows: list[Row]) -> None:
        """Remove rows that are the last ones in the stack."""
        if not rows:
            return
        first = min(self._index[id(row)] for row in rows)
        assert first + len(rows) == len(self.rows), "only the bottom rows can be removed"
        later = len(rows) > self.DELETE_NOW and self.on_doomed is not None
        for row in self.rows[first:]:
            del self._index[id(row)]
            self._hidden.discard(id(row))
            if not later:
                row.dispose()
                row.hide()
                row.deleteLater()
        if later:
            # Hiding and deleting 300 rows in one turn (a finished reply's held blocks) was a
            # 90 ms stall: they wait below the stack's new bottom, which clips them, as
            # take_all's rows do, and are deleted over the next turns.
            taken = list(zip(self._tops[first:], self.rows[first:], strict=True))
            self._doomed = sorted(self._doomed + taken, key=lambda pair: -pair[0])
        del self.rows[first:], self._tops[first:], self._heights[first:]
        del self._measured_at[first:]
        self._grow_to(self.width(), self._bottom())
        if later:
            assert self.on_doomed is not None
            self.on_doomed()

    def clear(self) -> None:
        """Remove every row."""
        if self.rows:
            self.remove_tail(list(self.rows))

    def take_all(self) -> int:
        """Remove every row at once, leaving their deletion to :meth:`sweep`.

        Nothing is done per row here: the stack shrinks to nothing, which hides them all, and
        a row is hidden only when new rows grow the stack over it. Returns how many rows wait.
        """
        taken = list(zip(self._tops, self.rows, strict=True))
        for row in self.rows:
            # Now, not row by row as they are deleted: a reply's header holds the reply's
            # structures, and with them every row's wrapper; dropped last, they were all
            # freed in one turn (90 ms for a 1 MB reply).
            row.dispose()
        self.rows, self._tops, self._heights, self._measured_at = [], [], [], []
        self._index.clear()
        self._hidden.clear()
        taken.reverse()
        self._doomed = sorted(self._doomed + taken, key=lambda pair: -pair[0])
        self._grow_to(self.width(), 0)
        return self.doomed

    @property
    def doomed(self) -> int:
        """Rows taken away (by :meth:`take_all` or :meth:`remove_tail`) and not deleted yet."""
        return len(self._doomed) + len(self._hidden_doomed)

    def sweep(self, deadline: float, most: int) -> bool:
        """Delete up to ``most`` taken rows until ``deadline``; returns whether none are left."""
        for _ in range(most):
            if self._hidden_doomed:
                row = self._hidden_doomed.pop()
            elif self._doomed:
                row = self._doomed.pop(0)[1]  # the lowest first: new rows uncover the top
            else:
                break
            row.dispose()
            Shiboken.delete(row)
            if time.perf_counter() > deadline:
                break
        return not self.doomed

    def set_width(self, width: int, shown_from: int = 0, shown_to: int = 0) -> int:
        """Take a new width (window resize, theme change); returns how many rows are stale.

        Rows between ``shown_from`` and ``shown_to`` (what the view shows, in the stack's
        coordinates) are measured at once; the others wait for :meth:`measure_stale`, unless
        there are few rows.
        """
        self.resize(width, self.height())
        self._measured_at = [0] * len(self.rows)  # everything is stale now, even at one width
        if not self.rows:
            return 0
        if len(self.rows) <= self.SYNC_ROWS:
            shown = range(len(self.rows))
        else:
            shown = range(self.row_at(shown_from), self.row_at(shown_to) + 1)
        for i in shown:
            self._measure(i)
        self._place(0)
        return self.stale

    def measure_stale(self, budget: float) -> int:
        """Measure stale rows for about ``budget`` seconds; returns how many are left."""
        deadline = time.perf_counter() + budget
        width = self.width()
        first = None
        for i, measured in enumerate(self._measured_at):
            if measured == width:
                continue
            first = i if first is None else first
            self._measure(i)
            if time.perf_counter() > deadline:
                break
        if first is not None:
            self._place(first)
        return self.stale

    def _place(self, start: int) -> None:
        """Position rows from ``start`` on; a stale row keeps its old size until measured."""
        width = self.width()
        for i in range(start + 1, len(self.rows)):
            self._tops[i] = self._tops[i - 1] + self._heights[i - 1]
        bottom = self._bottom()
        # Growing, the stack takes its new height before any row does: a view that follows
        # the reply scrolls then, while nothing on screen is invalid yet, so Qt moves what
        # is shown by a blit and paints only the uncovered strip. A row resized first left
        # its area invalid, and Qt painted every visible row again instead (it will not
        # blit "junk": QWidgetRepaintManager::bltRect).
        grows = bottom > self.height()
        if grows:
            self._grow_to(width, bottom)
        for i in range(start, len(self.rows)):
            if self._measured_at[i] == width:
                self.rows[i].setGeometry(0, self._tops[i], width, self._heights[i])
            else:
                self.rows[i].move(0, self._tops[i])
        if not grows:
            self._grow_to(width, bottom)
