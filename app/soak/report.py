"""What the soak found: the replies the user saw, the process over time, the history check.

:func:`check_history` reads the SQLite file directly after Floodgate closed and finds in it every
prompt and reply the soak recorded, exactly as they were shown.
The driver is :mod:`app.soak.driver`.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass
class ReplyRecord:
    """One reply as the user saw it."""

    cycle: int
    conversation_id: str
    prompt_id: str
    prompt: str
    reply_id: str
    shown: str = ""
    status: str = ""
    note: str = ""
    ended: bool = False


@dataclass
class Sample:
    """The process at one moment of the soak."""

    cycle: int
    seconds: float
    threads: int
    python_threads: int
    rss_mb: float


@dataclass
class SoakReport:
    """What the soak found; :attr:`ok` sums it up."""

    seed: int
    cycles_planned: int
    cycles: int = 0
    seconds: float = 0.0
    longest_cycle_s: float = 0.0
    longest_cycle: int = -1
    longest_action: str = ""
    actions: dict[str, int] = field(default_factory=dict)
    stops: dict[str, int] = field(default_factory=dict)
    statuses: dict[str, int] = field(default_factory=dict)
    restarts: int = 0
    samples: list[Sample] = field(default_factory=list)
    probes: list[str] = field(default_factory=list)
    probes_identical: bool = True
    regenerations_compared: int = 0
    regenerations_identical: bool = True
    prompts_checked: int = 0
    replies_checked: int = 0
    missing: list[str] = field(default_factory=list)
    different: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No hang, identical greedy replies, everything in SQLite as shown."""
        return (
            not self.problems
            and self.probes_identical
            and self.regenerations_identical
            and not self.missing
            and not self.different
            and self.cycles == self.cycles_planned
        )

    def as_json(self) -> dict[str, object]:
        """The report as plain data (``--json``)."""
        data = asdict(self)
        data["ok"] = self.ok
        return data

    def summary(self) -> str:
        """A few lines for the terminal."""
        first, last = (self.samples[0], self.samples[-1]) if self.samples else (None, None)
        lines = [
            f"soak: {self.cycles}/{self.cycles_planned} cycles in {self.seconds:.0f} s "
            f"(seed {self.seed}, {self.restarts} restarts)",
            f"longest cycle: {self.longest_cycle_s:.2f} s (cycle {self.longest_cycle}, "
            f"{self.longest_action})",
            f"actions: {dict(sorted(self.actions.items()))}",
            f"stops: {dict(sorted(self.stops.items()))}",
            f"reply statuses: {dict(sorted(self.statuses.items()))}",
        ]
        if first and last:
            lines.append(
                f"threads {first.threads} -> {last.threads}, "
                f"RSS {first.rss_mb:.0f} -> {last.rss_mb:.0f} MB "
                f"(max {max(s.rss_mb for s in self.samples):.0f})"
            )
        lines += [
            f"probes: {len(self.probes)}, identical: {self.probes_identical}; "
            f"regenerations compared: {self.regenerations_compared}, "
            f"identical: {self.regenerations_identical}",
            f"in SQLite: {self.prompts_checked} prompts and {self.replies_checked} replies "
            f"checked, {len(self.missing)} missing, {len(self.different)} different",
        ]
        lines += [f"problem: {p}" for p in self.problems]
        lines += [f"missing: {m}" for m in self.missing[:10]]
        lines += [f"different: {d}" for d in self.different[:10]]
        lines.append("soak: OK" if self.ok else "soak: FAILED")
        return "\n".join(lines)


def os_threads() -> int:
    """Threads of this process (llama.cpp's included), where the system says."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("Threads:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return threading.active_count()


def rss_mb() -> float:
    """Resident memory of this process, in MB."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError, AttributeError):
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return float(peak / 2**20 if sys.platform == "darwin" else peak / 2**10)


def check_history(path: Path, records: Sequence[ReplyRecord], report: SoakReport) -> None:
    """Find every prompt and every reply in the SQLite file, as they were shown.

    Read with ``sqlite3`` directly, after Floodgate closed; what is missing or different
    goes into ``report``.
    """
    if not path.exists():
        report.problems.append(f"no database at {path}")
        return
    connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        rows = connection.execute(
            "SELECT id, conversation_id, role, content, status FROM messages"
        ).fetchall()
    finally:
        connection.close()
    stored = {row[0]: row for row in rows}
    for record in records:
        report.statuses[record.status or "unended"] = (
            report.statuses.get(record.status or "unended", 0) + 1
        )
        prompt = stored.get(record.prompt_id)
        report.prompts_checked += 1
        if prompt is None:
            report.missing.append(f"cycle {record.cycle}: prompt {record.prompt[:40]!r}")
        elif prompt[3] != record.prompt or prompt[2] != "user":
            report.different.append(
                f"cycle {record.cycle}: prompt {record.prompt[:40]!r} stored as {prompt[3][:40]!r}"
            )
        reply = stored.get(record.reply_id)
        report.replies_checked += 1
        if reply is None:
            report.missing.append(
                f"cycle {record.cycle}: reply ({record.status}) {record.shown[:40]!r}"
            )
        elif record.ended and reply[3] != record.shown:
            report.different.append(
                f"cycle {record.cycle}: reply shown as {record.shown[-40:]!r} "
                f"({len(record.shown)} chars), stored as {reply[3][-40:]!r} "
                f"({len(reply[3])} chars, {reply[4]})"
            )
        elif not record.ended and not reply[3].startswith(record.shown):
            report.different.append(
                f"cycle {record.cycle}: the reply closed mid-way is stored without what "
                f"was shown ({len(record.shown)} chars shown, {len(reply[3])} stored)"
            )
        elif reply[4] == "streaming":
            report.different.append(
                f"cycle {record.cycle}: the reply is still 'streaming' in SQLite"
            )


def write_report(report: SoakReport, path: Path) -> None:
    """Write ``report`` as JSON."""
    path.write_text(json.dumps(report.as_json(), indent=2, ensure_ascii=False) + "\n")
