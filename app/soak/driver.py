"""The soak's driver: a restless user's random cycles on the window, and what they saw.

It uses the window's and the session's public methods only (what a user's clicks call).
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Slot

from app.flow.reply import ReplyEnd
from app.soak.report import (
    ReplyRecord,
    Sample,
    SoakReport,
    check_history,
    os_threads,
    rss_mb,
    write_report,
)

if TYPE_CHECKING:
    from app.ui.window.main_window import MainWindow

PROBE = "List the first five planets of the solar system, one per line."
"""The prompt asked in a fresh chat now and then: its greedy reply must never change."""

TOPICS = (
    "Name three rivers in Europe.",
    "Write a haiku about rain.",
    "What is 17 times 3?",
    "Give me a tip for learning to cook.",
    "Describe a cat in two sentences.",
    "Why is the sky blue?",
    "Suggest a name for a red bicycle.",
    "Tell me a short joke about computers.",
    "What do bees make?",
    "Explain what a library is to a child.",
    "List four colours of the rainbow.",
    "How do you say hello in French?",
)

LONG_PROMPT = (
    "Read this carefully before you answer. "
    + "The old lighthouse keeper climbed the spiral stairs every evening, counting each of "
    "the one hundred and twelve steps, listening to the sea against the rocks below. "
    * 6
    + "Now summarise the story in one sentence."
)
"""About 250 tokens: long enough that a Stop can land while the prompt is being read."""

ACTIONS = (
    ("complete", 14),
    ("stop_immediately", 10),
    ("stop_mid_prompt", 10),
    ("stop_mid_reply", 18),
    ("stop_twice", 8),
    ("send_while_stopping", 10),
    ("regenerate", 12),
    ("switch", 8),
    ("new_chat", 6),
    ("close", 2),
)
"""What a cycle does, and how often (weights)."""

WAIT_S = 180.0
"""Longer than anything should take: past it the run reports a hang and ends."""

MAX_TURNS = 14
"""A conversation this long gets a new chat first (keeps prompts and cycles short)."""


class SoakStuckError(Exception):
    """Something the soak waited for did not happen in time."""


class ReplyWatcher(QObject):
    """Records each reply from the session's signals: what was shown, and how it ended."""

    def __init__(self, window: MainWindow, cycle: Callable[[], int]) -> None:
        super().__init__(window)
        self._window = window
        self._cycle = cycle
        self.current: ReplyRecord | None = None
        self.records: list[ReplyRecord] = []
        session = window.session
        session.reply_started.connect(self._started)
        session.reply_text.connect(self._text)
        session.reply_ended.connect(self._ended)

    @Slot()
    def _started(self) -> None:
        session = self._window.session
        prompt, reply = session.conversation.messages[-2:]
        self.current = ReplyRecord(
            cycle=self._cycle(),
            conversation_id=session.conversation.id,
            prompt_id=prompt.id,
            prompt=prompt.content,
            reply_id=reply.id,
        )
        self.records.append(self.current)

    @Slot(str)
    def _text(self, text: str) -> None:
        if self.current is not None:
            self.current.shown += text

    @Slot(ReplyEnd)
    def _ended(self, end: ReplyEnd) -> None:
        if self.current is not None:
            self.current.status, self.current.note, self.current.ended = end.status, end.note, True
            self.current = None


class Soak:
    """Drives windows (one per start of Floodgate) through the cycles; collects the report."""

    def __init__(
        self,
        cycles: int,
        seed: int,
        *,
        max_tokens: int = 48,
        probe_every: int = 25,
        sample_every: int = 25,
        log: Callable[[str], None] | None = None,
        json_path: Path | None = None,
    ) -> None:
        self.random = random.Random(seed)
        self.json_path = json_path
        self.report = SoakReport(seed=seed, cycles_planned=cycles)
        self.max_tokens = max_tokens
        self.probe_every = probe_every
        self.sample_every = sample_every
        self.log = log or (lambda _text: None)
        self.cycle = 0
        self.records: list[ReplyRecord] = []
        self.started_at = time.monotonic()
        self.finished = False
        self._actions = [name for name, _ in ACTIONS]
        self._weights = [weight for _, weight in ACTIONS]
        self._watcher: ReplyWatcher | None = None
        self._window: MainWindow | None = None

    # -- the driver ---------------------------------------------------------------------------

    async def drive(self, window: MainWindow) -> None:
        """Run cycles on ``window`` until they are done or a ``close`` cycle ends this start."""
        from app.flow.session import ModelState

        self._window = window
        self._watcher = ReplyWatcher(window, lambda: self.cycle)
        try:
            await self._until(lambda: window.session.state is ModelState.READY, "the model to load")
            self._greedy(window)
            if self.cycle == 0:
                self._sample()
            while self.cycle < self.report.cycles_planned:
                started = time.monotonic()
                action = await self._one_cycle(window)
                seconds = time.monotonic() - started
                self.cycle += 1
                self.report.cycles = self.cycle
                self.report.actions[action] = self.report.actions.get(action, 0) + 1
                if seconds > self.report.longest_cycle_s:
                    self.report.longest_cycle_s = seconds
                    self.report.longest_cycle = self.cycle
                    self.report.longest_action = action
                if self.cycle % self.sample_every == 0 or self.cycle == self.report.cycles_planned:
                    self._sample()
                if action == "close":
                    self.report.restarts += 1
                    return  # the window is closing mid-reply; Floodgate starts again
            self.finished = True
            await window.session.stop_and_wait()
            self._close(window)
        except SoakStuckError as exc:
            self.report.problems.append(f"cycle {self.cycle}: waited in vain for {exc}")
            self.finished = True
            self._close(window)
        except Exception as exc:  # the soak's own failure is reported, not a traceback
            self.report.problems.append(f"cycle {self.cycle}: {type(exc).__name__}: {exc}")
            self.finished = True
            self._close(window)
        finally:
            self.records.extend(self._watcher.records)

    def _greedy(self, window: MainWindow) -> None:
        from app.store.settings import Settings

        # Greedy, short replies: the same prompt must give the same reply every time.
        base, _ = window.session.sampling()
        settings = replace(
            base if isinstance(base, Settings) else Settings(),
            temperature=0.0,
            max_tokens=self.max_tokens,
            seed=0,
        )
        window.session.use_settings(settings)

    def _sample(self) -> None:
        sample = Sample(
            cycle=self.cycle,
            seconds=round(time.monotonic() - self.started_at, 1),
            threads=os_threads(),
            python_threads=threading.active_count(),
            rss_mb=round(rss_mb(), 1),
        )
        self.report.samples.append(sample)
        self.log(
            f"cycle {sample.cycle}: {sample.seconds:.0f} s, {sample.threads} threads, "
            f"{sample.rss_mb:.0f} MB"
        )

    async def _until(self, predicate: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + WAIT_S
        while not predicate():
            if time.monotonic() > deadline:
                raise SoakStuckError(what)
            await asyncio.sleep(0.003)

    async def _idle(self, window: MainWindow) -> None:
        await self._until(lambda: not window.session.generating, "the reply to end")
        # The view may still be building a conversation it was asked to show.
        await self._until(lambda: not window.rendering, "the conversation to be shown")

    def _prompt(self) -> str:
        return f"[{self.cycle}] {self.random.choice(TOPICS)}"

    async def _send(self, window: MainWindow, text: str) -> ReplyRecord:
        watcher = self._watcher
        assert watcher is not None
        records = len(watcher.records)
        window.composer.setPlainText(text)
        window.send()
        await self._until(lambda: len(watcher.records) > records, "the reply to start")
        return watcher.records[-1]

    async def _shown(self, record: ReplyRecord, characters: int) -> None:
        await self._until(
            lambda: len(record.shown) >= characters or record.ended, "text of the reply"
        )

    def _stop(self, window: MainWindow, kind: str, record: ReplyRecord) -> None:
        """Press Stop; tally how it was pressed and where it landed (prompt or reply)."""
        stops = self.report.stops
        if record.ended:
            key = "after_the_end"  # the reply had already ended by itself
            stops[key] = stops.get(key, 0) + 1
        else:
            where = "mid_reply" if record.shown else "mid_prompt"
            for key in {kind, where} - {"prompt", "reply"}:
                stops[key] = stops.get(key, 0) + 1
        window.stop()

    async def _one_cycle(self, window: MainWindow) -> str:
        session = window.session
        await self._idle(window)
        if self.probe_every and self.cycle % self.probe_every == 0:
            await self._probe(window)
            return "probe"
        action = self.random.choices(self._actions, self._weights)[0]
        if len(session.conversation.messages) >= MAX_TURNS and action not in ("switch",):
            action = "new_chat"
        if action == "complete":
            await self._send(window, self._prompt())
            await self._idle(window)
        elif action.startswith("stop_"):
            await self._send_and_stop(window, action)
        elif action == "send_while_stopping":
            await self._send_while_stopping(window)
        elif action == "regenerate":
            await self._regenerate(window)
        elif action == "switch":
            await self._switch(window)
        elif action == "new_chat":
            await self._new_chat(window)
        elif action == "close":
            record = await self._send(window, self._prompt())
            await self._shown(record, self.random.randint(0, 80))
            self._close(window)
        return action

    async def _send_and_stop(self, window: MainWindow, action: str) -> None:
        """Send, then press Stop: at once, while the prompt is read, mid-reply, or twice."""
        if action == "stop_immediately":
            record = await self._send(window, self._prompt())
            self._stop(window, "immediately", record)
            await self._idle(window)
        elif action == "stop_mid_prompt":
            record = await self._send(window, LONG_PROMPT + f" ({self.cycle})")
            await asyncio.sleep(self.random.uniform(0.02, 0.6))
            self._stop(window, "prompt", record)
            await self._idle(window)
            if self.random.random() < 0.5:
                await self._new_chat(window)
        elif action == "stop_mid_reply":
            record = await self._send(window, self._prompt())
            await self._shown(record, self.random.randint(1, 120))
            self._stop(window, "reply", record)
            await self._idle(window)
        elif action == "stop_twice":
            record = await self._send(window, self._prompt())
            await self._shown(record, self.random.randint(0, 60))
            self._stop(window, "twice", record)
            await asyncio.sleep(self.random.choice((0.0, 0.001, 0.01)))
            window.stop()  # pressing it again is harmless
            await self._idle(window)

    async def _send_while_stopping(self, window: MainWindow) -> None:
        watcher = self._watcher
        assert watcher is not None
        record = await self._send(window, self._prompt())
        await self._shown(record, self.random.randint(0, 60))
        self._stop(window, "while_stopping", record)
        typed = self._prompt() + " (typed while stopping)"
        window.composer.setPlainText(typed)
        window.send()  # refused while the reply ends: the text must stay in the composer
        await self._idle(window)
        if record.ended and watcher.records[-1].prompt == typed:
            await self._idle(window)  # the reply had ended by itself: the text went at once
            return
        if window.composer.toPlainText() != typed:
            self.report.problems.append(
                f"cycle {self.cycle}: the text typed while stopping was lost from the composer"
            )
            return
        records = len(watcher.records)
        window.send()
        await self._until(lambda: len(watcher.records) > records, "the reply to start")
        await self._idle(window)

    async def _regenerate(self, window: MainWindow) -> None:
        watcher = self._watcher
        assert watcher is not None
        session = window.session
        messages = session.conversation.messages
        if len(messages) < 2 or messages[-1].role != "assistant":
            await self._send(window, self._prompt())
            await self._idle(window)
            return
        before = messages[-1]
        records = len(watcher.records)
        if not session.regenerate():
            self.report.problems.append(f"cycle {self.cycle}: Regenerate was refused")
            return
        await self._until(lambda: len(watcher.records) > records, "the reply to start")
        record = watcher.records[-1]
        stop_it = self.random.random() < 0.3
        if stop_it:
            await self._shown(record, self.random.randint(0, 60))
            self._stop(window, "reply", record)
        await self._idle(window)
        finished = ("complete", "length")
        if before.status in finished and record.status in finished:
            self.report.regenerations_compared += 1
            if record.shown != before.content:
                self.report.regenerations_identical = False
                self.report.problems.append(
                    f"cycle {self.cycle}: a greedy regeneration differs: "
                    f"{before.content[:60]!r} then {record.shown[:60]!r}"
                )

    async def _switch(self, window: MainWindow) -> None:
        session = window.session
        listed = await session.list_conversations()
        others = [c.id for c in listed if c.id != session.conversation.id]
        if not others:
            await self._new_chat(window)
            return
        target = self.random.choice(others)
        window.open_conversation(target)
        await self._until(lambda: session.conversation.id == target, "the conversation to open")
        await self._idle(window)

    async def _new_chat(self, window: MainWindow) -> None:
        session = window.session
        before = session.conversation
        window.new_chat()
        # New chat runs on the loop (it stops and saves a reply first): wait until it is there.
        await self._until(
            lambda: session.conversation is not before and not session.conversation.messages,
            "a new chat",
        )
        await self._idle(window)

    async def _probe(self, window: MainWindow) -> None:
        await self._new_chat(window)
        record = await self._send(window, PROBE)
        await self._idle(window)
        if record.status in ("complete", "length"):
            self.report.probes.append(record.shown)
            if record.shown != self.report.probes[0]:
                self.report.probes_identical = False
                self.report.problems.append(
                    f"cycle {self.cycle}: the probe's greedy reply changed: "
                    f"{self.report.probes[0][:60]!r} then {record.shown[:60]!r}"
                )
        else:
            self.report.problems.append(
                f"cycle {self.cycle}: the probe ended {record.status}: {record.note}"
            )

    def _close(self, window: MainWindow) -> None:
        """Close the window; the report on disk says so until the run comes back from it.

        Floodgate ends the process outright when a thread will not end at close (after
        saving what it can): then this interim report is what remains, and it is a failure.
        """
        if self.json_path is not None:
            interim = replace(self.report, problems=[*self.report.problems])
            interim.problems.append(
                f"cycle {self.cycle}: the run did not come back from closing the window"
            )
            write_report(interim, self.json_path)
        window.close()

    # -- after the run ------------------------------------------------------------------------

    def check_database(self, path: Path) -> None:
        """Find every prompt and every reply in the SQLite file, as they were shown."""
        check_history(path, self.records, self.report)


__all__ = ["ReplyWatcher", "Soak", "SoakStuckError"]
