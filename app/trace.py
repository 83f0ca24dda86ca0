"""Flow traces in the Chrome Trace Event Format, for Perfetto and ``chrome://tracing``.

One process-wide :data:`TRACE` records what the flow does while a trace is being recorded:
spans (complete events, ``"X"``), instants (``"i"``), counters (``"C"``) and thread names
(metadata, ``"M"``). Pure Python, no Qt: the engine, which may not import Qt, records into it
as well as the flow and the window.

When not recording, the whole cost at a call site is reading one attribute::

    if TRACE.recording:
        TRACE.counter("queue", depth=queue.depth)

and ``with TRACE.span(...)`` costs one call that returns a shared do-nothing context. While
recording, each event is one tuple appended to a bounded deque (atomic under the GIL, so any
thread may record); the JSON is built only when the recording stops, on the thread that writes
the file (:meth:`Tracer.stop_async` keeps that off the UI thread).

The file is ``{"traceEvents": [...], "displayTimeUnit": "ms"}`` with timestamps in
microseconds from :func:`time.perf_counter` (the clock the flow's metrics use, so a trace and
the timeline agree), ``pid`` the process id and ``tid`` the thread's native id.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from contextlib import AbstractContextManager
from pathlib import Path
from types import TracebackType
from typing import Any, Final

DEFAULT_LIMIT: Final = 400_000
"""Events kept while recording; past this the oldest fall off (about 150 bytes each)."""

_Event = tuple[str, str, str, float, float, int, Mapping[str, object] | None]
"""``(phase, name, category, ts_us, dur_us, tid, args)``: an event as recorded, cheap to make."""


def _now_us() -> float:
    return time.perf_counter() * 1_000_000


class _NoSpan(AbstractContextManager[None]):
    """What :meth:`Tracer.span` returns when not recording: nothing to do, nothing allocated."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None


_NO_SPAN: Final = _NoSpan()


class _Span(AbstractContextManager[None]):
    """One complete event: its start is taken on entry, the event is appended on exit."""

    __slots__ = ("_args", "_begin", "_cat", "_events", "_name")

    def __init__(
        self, events: deque[_Event], name: str, cat: str, args: Mapping[str, object] | None
    ) -> None:
        self._events = events
        self._name = name
        self._cat = cat
        self._args = args
        self._begin = 0.0

    def __enter__(self) -> None:
        self._begin = _now_us()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        end = _now_us()
        # Appended to the deque of the recording it began in: a span that outlives its
        # recording lands in a deque nobody reads any more, never in the next recording.
        self._events.append(
            (
                "X",
                self._name,
                self._cat,
                self._begin,
                end - self._begin,
                threading.get_native_id(),
                self._args,
            )
        )


class Tracer:
    """Records flow events in memory and writes them as a Chrome trace when stopped.

    Args:
        limit: how many events to keep while recording; older ones fall off, so a recording
            left running uses bounded memory (the file then says ``"truncated": true``).

    Attributes:
        recording: whether events are being recorded. A plain attribute, so checking it is
            the whole cost of a call site while not recording.
        path: where the current (or last) recording is written.
    """

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self.recording = False
        self.path: Path | None = None
        self._limit = limit
        self._events: deque[_Event] = deque(maxlen=limit)
        # Thread names are kept apart from the bounded events so they survive truncation,
        # and are remembered across recordings: a thread named before ``start`` (the UI
        # thread at launch, a worker already running) is still named in every file.
        self._thread_names: dict[int, str] = {}
        self._lock = threading.Lock()

    def start(self, path: Path) -> None:
        """Begin recording; the file is written to ``path`` by :meth:`stop`.

        Starting while already recording discards what was recorded and starts over.
        """
        with self._lock:
            self.path = Path(path)
            self._events = deque(maxlen=self._limit)
            self.recording = True

    def stop(self) -> Path | None:
        """Stop recording and write the file on this thread; its path, or None if not recording.

        Raises:
            OSError: the file could not be written (the events are lost).
        """
        taken = self._take()
        if taken is None:
            return None
        path, events, names = taken
        write_trace(path, events, names, truncated=len(events) >= self._limit)
        return path

    def stop_async(
        self, done: Callable[[Future[Path | None]], object] | None = None
    ) -> Future[Path | None]:
        """Stop recording now and write the file on a thread of its own.

        Recording stops at once (what happens after this call is not in the file); building
        and writing the JSON, which for a long recording takes a fraction of a second, happens
        on a short-lived writer thread.

        Args:
            done: called with the future once the file is written or failed, on the writer
                thread (a Qt caller should forward it to its own thread, e.g. with a signal).

        Returns:
            A future with the file's path (None if nothing was being recorded), or the
            :class:`OSError` that writing raised.
        """
        future: Future[Path | None] = Future()
        if done is not None:
            future.add_done_callback(done)
        taken = self._take()
        if taken is None:
            future.set_result(None)
            return future
        path, events, names = taken

        def write() -> None:
            try:
                write_trace(path, events, names, truncated=len(events) >= self._limit)
            except OSError as error:
                future.set_exception(error)
            else:
                future.set_result(path)

        threading.Thread(target=write, name="trace writer", daemon=True).start()
        return future

    def _take(self) -> tuple[Path, list[_Event], dict[int, str]] | None:
        with self._lock:
            if not self.recording or self.path is None:
                return None
            self.recording = False
            events = self._events
            self._events = deque(maxlen=self._limit)
            # One C call under the GIL: no other thread appends halfway through the copy.
            return self.path, list(events), dict(self._thread_names)

    def span(self, name: str, cat: str = "flow", **args: object) -> AbstractContextManager[None]:
        """A span (complete event) on the calling thread, for a ``with`` block.

        Spans on one thread nest (a span begun inside another ends inside it), which is how
        trace viewers stack them.
        """
        if not self.recording:
            return _NO_SPAN
        return _Span(self._events, name, cat, args or None)

    def instant(self, name: str, cat: str = "flow", **args: object) -> None:
        """A moment on the calling thread's track (Stop pressed, computation ended...)."""
        if self.recording:
            self._events.append(
                ("i", name, cat, _now_us(), 0.0, threading.get_native_id(), args or None)
            )

    def instant_at(self, name: str, at: float, cat: str = "flow", **args: object) -> None:
        """An instant that happened at ``at`` (``time.perf_counter()`` seconds), on this track.

        For moments read from elsewhere after the fact, such as the engine's
        ``compute_ended_at`` seen by the UI thread.
        """
        if self.recording:
            self._events.append(
                ("i", name, cat, at * 1_000_000, 0.0, threading.get_native_id(), args or None)
            )

    def complete(
        self, name: str, begin: float, end: float, cat: str = "flow", **args: object
    ) -> None:
        """A span whose ends were measured elsewhere, as ``time.perf_counter()`` seconds.

        For steps timed by code that already keeps its own clock readings (the engine's
        ``prefill_started_at``/``prefill_ended_at``): the span lands on the calling thread.
        """
        if self.recording:
            self._events.append(
                (
                    "X",
                    name,
                    cat,
                    begin * 1_000_000,
                    max(0.0, end - begin) * 1_000_000,
                    threading.get_native_id(),
                    args or None,
                )
            )

    def counter(self, name: str, **values: float) -> None:
        """One reading of a counter track (each keyword is a series: ``depth=3, bound=64``)."""
        if self.recording:
            self._events.append(("C", name, "flow", _now_us(), 0.0, 0, values))

    def name_thread(self, name: str) -> None:
        """Name the calling thread in traces ("UI", "worker", "archive").

        Cheap and kept across recordings, so call it once when the thread starts, whether or
        not a trace is being recorded.
        """
        self._thread_names[threading.get_native_id()] = name


TRACE: Final = Tracer()
"""The process's tracer: the app, the flow, the engine and the bench all record into it."""


def trace_events(
    events: Iterable[_Event], thread_names: Mapping[int, str], pid: int | None = None
) -> list[dict[str, Any]]:
    """Recorded events as Chrome trace event dictionaries, metadata first, then by time."""
    pid = os.getpid() if pid is None else pid
    out: list[dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": "Floodgate"}}
    ]
    events = list(events)
    # Only threads with events get a track: a thread named in an earlier recording and idle
    # (or gone) in this one would otherwise be an empty row in the viewer.
    used = {event[5] for event in events if event[0] != "C"}
    named = sorted((tid, name) for tid, name in thread_names.items() if tid in used)
    for sort_index, (tid, name) in enumerate(named):
        out.append(
            {"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}}
        )
        out.append(
            {
                "name": "thread_sort_index",
                "ph": "M",
                "pid": pid,
                "tid": tid,
                "args": {"sort_index": sort_index},
            }
        )
    # Spans are appended when they end, so an outer span follows the ones inside it; ordered
    # by start they read naturally. The list is nearly sorted already, which Timsort is fast at.
    for phase, name, cat, ts, dur, tid, args in sorted(events, key=_start):
        event: dict[str, Any] = {
            "name": name,
            "cat": cat,
            "ph": phase,
            "ts": round(ts, 3),
            "pid": pid,
            "tid": tid,
        }
        if phase == "X":
            event["dur"] = round(dur, 3)
        elif phase == "i":
            event["s"] = "t"
        if args:
            event["args"] = dict(args)
        out.append(event)
    return out


def _start(event: _Event) -> float:
    return event[3]


def write_trace(
    path: Path,
    events: Iterable[_Event],
    thread_names: Mapping[int, str],
    *,
    truncated: bool = False,
) -> None:
    """Write events as a Chrome trace JSON file (atomically: a temporary file, then a rename).

    Each event is encoded on its own rather than the whole list at once, so a writer thread
    gives the GIL back to the window between events instead of holding it for the whole file.
    """
    path = Path(path)
    temporary = path.with_name(path.name + ".part")
    encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str).encode
    try:
        with temporary.open("w", encoding="utf-8") as out:
            out.write('{"displayTimeUnit":"ms","otherData":')
            out.write(
                encode(
                    {"app": "Floodgate", "python": sys.version.split()[0], "truncated": truncated}
                )
            )
            out.write(',"traceEvents":[\n')
            for index, event in enumerate(trace_events(events, thread_names)):
                if index:
                    out.write(",\n")
                out.write(encode(event))
            out.write("\n]}\n")
        temporary.replace(path)
    except OSError:
        temporary.unlink(missing_ok=True)
        raise


_PHASE_FIELDS: Final[Mapping[str, tuple[str, ...]]] = {
    "X": ("name", "cat", "ts", "dur", "pid", "tid"),
    "B": ("name", "ts", "pid", "tid"),
    "E": ("ts", "pid", "tid"),
    "i": ("name", "ts", "pid", "tid", "s"),
    "I": ("name", "ts", "pid", "tid"),
    "C": ("name", "ts", "pid", "args"),
    "M": ("name", "pid", "tid", "args"),
}


def check_trace(document: object) -> list[str]:
    """What is wrong with a Chrome trace document (an empty list when nothing is).

    Checks what trace viewers rely on: the object form with a ``traceEvents`` list, the fields
    each phase needs with the right types, ``dur >= 0``, ``B``/``E`` pairs matched per
    thread, spans on one thread nested (none ends halfway through another), timestamps
    that never go back per thread in file order, counter values that are numbers, and a
    name for every thread that has events. The tests and the bench use it.
    """
    if not isinstance(document, dict) or not isinstance(document.get("traceEvents"), list):
        return ['not a trace: expected {"traceEvents": [...]}']
    problems: list[str] = []
    named: set[tuple[int, int]] = set()
    used: set[tuple[int, int]] = set()
    spans: dict[tuple[int, int], list[tuple[float, float, str]]] = {}
    open_begins: dict[tuple[int, int], list[tuple[str, float]]] = {}
    last_ts: dict[tuple[int, int], float] = {}
    for index, event in enumerate(document["traceEvents"]):
        where = f"event {index}"
        problem = _form_problem(where, event)
        if problem is not None:
            problems.append(problem)
            continue
        phase = event["ph"]
        thread = (event["pid"], event.get("tid", 0))
        if phase == "M":
            if event["name"] == "thread_name":
                named.add(thread)
            continue
        if phase == "C":
            problem = _counter_problem(where, event)
            if problem is not None:
                problems.append(problem)
            continue
        used.add(thread)
        ts = float(event["ts"])
        if ts < last_ts.get(thread, -float("inf")):
            problems.append(f"{where}: {phase} at {ts} goes back in time on thread {thread[1]}")
        last_ts[thread] = ts
        if phase == "X":
            if not _is_number(event["dur"]) or event["dur"] < 0:
                problems.append(f"{where}: span {event['name']!r} has dur < 0")
                continue
            spans.setdefault(thread, []).append((ts, ts + float(event["dur"]), event["name"]))
        elif phase in ("B", "E"):
            stack = open_begins.setdefault(thread, [])
            if phase == "B":
                stack.append((event["name"], ts))
            elif not stack:
                problems.append(f"{where}: an end with no begin on thread {thread[1]}")
            else:
                stack.pop()
        elif phase == "i" and event["s"] not in ("t", "p", "g"):
            problems.append(f"{where}: instant scope {event['s']!r} is not t, p or g")
    for thread, stack in open_begins.items():
        for name, _ in stack:
            problems.append(f"begin {name!r} on thread {thread[1]} has no end")
    for thread, thread_spans in spans.items():
        problems.extend(_check_nesting(thread, thread_spans))
    for thread in sorted(used - named):
        problems.append(f"thread {thread[1]} has events but no thread_name")
    return problems


def _form_problem(where: str, event: object) -> str | None:
    """What makes ``event`` no well-formed trace event, if anything: phase, fields, types."""
    if not isinstance(event, dict):
        return f"{where}: not an object"
    phase = event.get("ph")
    if not isinstance(phase, str) or phase not in _PHASE_FIELDS:
        return f"{where}: unknown phase {phase!r}"
    missing = [key for key in _PHASE_FIELDS[phase] if key not in event]
    if missing:
        return f"{where} ({phase}): missing {', '.join(missing)}"
    if "ts" in event and not _is_number(event["ts"]):
        return f"{where}: ts is not a number"
    if not isinstance(event.get("pid"), int) or not isinstance(event.get("tid", 0), int):
        return f"{where}: pid and tid must be integers"
    return None


def _counter_problem(where: str, event: dict[str, Any]) -> str | None:
    """What is wrong with a counter event's values, if anything."""
    values = event["args"]
    if not isinstance(values, dict) or not values:
        return f"{where}: a counter needs its values in args"
    if not all(_is_number(value) for value in values.values()):
        return f"{where}: counter {event['name']!r} has a value not a number"
    return None


def _check_nesting(thread: tuple[int, int], spans: list[tuple[float, float, str]]) -> list[str]:
    problems: list[str] = []
    # By start, the longer first when two start together: then each span must end before the
    # next starts or contain it (allowing the rounding of timestamps to the nanosecond).
    enclosing: list[tuple[float, float, str]] = []
    for begin, end, name in sorted(spans, key=lambda span: (span[0], -span[1])):
        while enclosing and enclosing[-1][1] <= begin + 0.002:
            enclosing.pop()
        if enclosing and end > enclosing[-1][1] + 0.002:
            problems.append(
                f"span {name!r} on thread {thread[1]} overlaps {enclosing[-1][2]!r} "
                "without nesting in it"
            )
            continue
        enclosing.append((begin, end, name))
    return problems


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
