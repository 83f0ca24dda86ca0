"""Time to first token over a long conversation: with the prompt cache, and without it.

One scenario, run several times, drives the engine as a user drives the app: a long first
prompt in conversation A (``cold``, a short reply), a follow-up (``same_conversation``, a
reply of about 300 tokens), the next follow-up (``follow_up_after_long_reply``: the long
reply is in the KV cache already and is not processed again), a prompt in another
conversation B, a follow-up in A again (``switch_back``), the app closed and reopened on the
same cache folder and another follow-up (``after_restart``), then a long prompt in C stopped
half-way through its processing and sent again (``resume_after_prefill_stop``, timed from the
second send). The same steps run on an engine without the cache, for comparison. One engine
thread opens, drives and closes the engines, as the app's worker does.

Each follow-up carries the replies that run produced, as the app's history does: a reply
computed after a state restored from the cache may differ from one computed after processing
everything again, and a follow-up quoting another run's reply would not match the state the
engine holds. Each reply is compared with the one the state kept in place gives for the same
messages (``cache_consistent``): a state restored from RAM or disk must give exactly what the
kept state would have given.
"""

from __future__ import annotations

import statistics
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from app.bench.engine_drive import EngineThread, Reply, history
from app.bench.plan import Setup
from app.engine import ChatMessage, EngineOptions, GenerationReport, GenerationSettings
from app.engine.llama import LlamaBackend, open_llama

STEPS = (
    "cold",
    "same_conversation",
    "follow_up_after_long_reply",
    "switch_back",
    "after_restart",
    "resume_after_prefill_stop",
)
SHORT_REPLY = 16
"""Tokens of a reply nothing follows in the scenario, and of the cold step's: so that
``same_conversation`` is a follow-up after a short reply."""
LONG_REPLIES = ("same_conversation", "follow_up_after_long_reply", "switch_back")
"""The steps whose replies are long (the plan's ``ttft_reply_tokens``, about 300): the next
follow-up in A comes after each."""
FOLLOW_UPS = (
    # The first three ask for long stories: the default model answers "tell me at length" in
    # about ten tokens.
    "Now write a long story about the people in it.",
    "Write a long story about a dragon who learns to read.",
    "Now write a long story about the village.",
    "Say it again, more simply.",
)


@dataclass
class Script:
    """The messages every run starts from."""

    a: list[ChatMessage]
    b: list[ChatMessage]
    c: list[ChatMessage]

    def a_turn(self, replies: Sequence[str]) -> list[ChatMessage]:
        """Conversation A after one follow-up per reply in ``replies`` (that run's own)."""
        messages = list(self.a)
        for reply, follow_up in zip(replies, FOLLOW_UPS, strict=False):
            messages.append({"role": "assistant", "content": reply})
            messages.append({"role": "user", "content": follow_up})
        return messages


@dataclass
class Run:
    """One run's replies, by step."""

    replies: dict[str, Reply] = field(default_factory=dict)


def _settings(name: str, reply_tokens: int) -> GenerationSettings:
    tokens = reply_tokens if name in LONG_REPLIES else SHORT_REPLY
    return GenerationSettings(temperature=0.0, max_tokens=tokens)


A_STEPS = ("cold", "same_conversation", "follow_up_after_long_reply", "switch_back")
"""Conversation A's steps before the restart, each the next follow-up of the one before."""


class HalfWay:
    """Stop at about half of the prompt's processing, whatever the machine's speed.

    Stops at the first chunk boundary at or past half the prompt. A fast machine may read
    everything past the first chunk in one (chunks are sized to take a fixed time), with no
    boundary between half and the end: then it stops at the moment three quarters of the
    prompt should be done at the rate seen so far, inside that chunk, and the engine keeps
    the chunks before it. (Three quarters, not half: the rate of the first chunks overstates
    the later ones', and a Stop estimated from it must not come before the half-way boundary
    of a slower machine.)
    """

    def __init__(self) -> None:
        self._latest = (0, 0.0)  # the latest progress: tokens done, seconds

    def __call__(self, report: GenerationReport, seconds: float) -> bool:
        """Whether to Stop now, ``seconds`` after the prompt was sent."""
        total, done = report.prompt_tokens, report.prefill_done
        if total == 0 or done == 0:
            return False
        if done >= total // 2:
            return True
        if done != self._latest[0]:
            self._latest = (done, seconds)
        tokens, at = self._latest
        return seconds >= (total * 3 / 4) * at / tokens


def _scenario(
    thread: EngineThread, open_engine: Callable[[], LlamaBackend], script: Script, tokens: int
) -> Run:
    run = Run()

    def step(
        engine: LlamaBackend, name: str, conversation: str, messages: list[ChatMessage]
    ) -> Reply:
        reply = thread.reply(engine, messages, _settings(name, tokens), conversation)
        run.replies[name] = reply
        return reply

    said: list[str] = []  # A's replies so far in this run

    def a_step(engine: LlamaBackend, k: int) -> None:
        said.append(step(engine, A_STEPS[k], "A", script.a_turn(said)).text)

    engine = thread.call(open_engine)
    try:
        for k in range(3):
            a_step(engine, k)
        thread.reply(engine, script.b, _settings("B", tokens), "B")
        a_step(engine, 3)
    finally:
        thread.close(engine)
    engine = thread.call(open_engine)  # the app closed and opened again, on the same folder
    try:
        step(engine, "after_restart", "A", script.a_turn(said))
        half = thread.reply(
            engine, script.c, _settings("C", tokens), "C",
            stop_when=HalfWay(),
        )  # fmt: skip
        resumed = step(engine, "resume_after_prefill_stop", "C", script.c)
        resumed.stopped_at = half.stopped_at
    finally:
        thread.close(engine)
    return run


def _kept_in_place(
    setup: Setup, thread: EngineThread, script: Script, tokens: int
) -> dict[str, str]:
    """The reply to each step's messages from the state kept in place, never restored.

    One engine without the prompt cache answers A's turns one after the other (each extends
    the state the one before left, reply included, as a restored state holds it), then C on
    an empty cache. A run whose replies all match these sent the same messages at every step.
    """
    engine = thread.open(setup.model, replace(setup.options, cache_ram_mb=0, cache_dir=None))
    expected: dict[str, str] = {}
    said: list[str] = []
    try:
        for name in (*A_STEPS, "after_restart"):
            reply = thread.reply(engine, script.a_turn(said), _settings(name, tokens), "A")
            expected[name] = reply.text
            said.append(reply.text)
        thread.call(engine.sequence.clear)
        name = "resume_after_prefill_stop"
        expected[name] = thread.reply(engine, script.c, _settings(name, tokens), "C").text
    finally:
        thread.close(engine)
    return expected


def _figures(runs: list[Run]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for name in STEPS:
        replies = [run.replies[name] for run in runs]
        times = [r.ttft_ms for r in replies]
        last = replies[-1].report
        result[name] = {
            "ms": round(statistics.median(times), 1),
            "runs_ms": [round(t, 1) for t in times],
            "prompt_tokens": last.prompt_tokens,
            "cached_tokens": last.cached_tokens,
        }
        if name == "resume_after_prefill_stop":
            result[name]["stopped_at_tokens"] = replies[-1].stopped_at
    return result


def ttft(setup: Setup, count_tokens: Callable[[str], int]) -> dict[str, Any]:
    """The ``ttft_ms`` section (without ``prefill_progress_cost``, which the prefill pairs give).

    Args:
        setup: the bench run.
        count_tokens: the model's token count of a text, to size the conversations.
    """
    size = setup.plan.ttft_history_tokens
    script = Script(
        a=history(count_tokens, 1, size, "What is this conversation about?"),
        b=[{"role": "user", "content": "Name three colours."}],
        c=history(count_tokens, 2, size, "Tell me what you remember of it."),
    )
    no_cache = replace(setup.options, cache_ram_mb=0, cache_dir=None)
    tokens = setup.plan.ttft_reply_tokens
    plain_runs: list[Run] = []
    cached_runs: list[Run] = []
    with (
        tempfile.TemporaryDirectory(prefix="floodgate-bench-cache-") as folder,
        EngineThread() as thread,
    ):
        for i in range(setup.plan.ttft_runs):
            if i < setup.plan.ttft_plain_runs:
                plain_runs.append(_scenario(thread, _opener(setup, no_cache), script, tokens))
            cached = _cached(setup.options, Path(folder) / f"run{i}")
            cached_runs.append(_scenario(thread, _opener(setup, cached), script, tokens))
            setup.log(
                f"  run {i + 1}: "
                + ", ".join(f"{s} {cached_runs[-1].replies[s].ttft_ms:.0f} ms" for s in STEPS)
            )
        expected = _kept_in_place(setup, thread, script, tokens)
    differing: dict[str, str] = {}
    for run in cached_runs:
        for name in STEPS:
            if run.replies[name].text != expected[name]:
                differing.setdefault(name, run.replies[name].text)
    for name, got in differing.items():
        setup.log(f"  {name}: {got!r} here, {expected[name]!r} from the state kept in place")
    first = cached_runs[0].replies["cold"].report.prompt_tokens
    long_reply = cached_runs[-1].replies["same_conversation"].report.pieces
    return {
        "history_tokens": first,
        "long_reply_tokens": long_reply,
        "runs": len(cached_runs),
        "runs_without_cache": len(plain_runs),
        **_figures(cached_runs),
        "cache_consistent": not differing,
        "cache_inconsistent_steps": sorted(differing),
        "without_cache": _figures(plain_runs),
    }


def _opener(setup: Setup, options: EngineOptions) -> Callable[[], LlamaBackend]:
    return lambda: open_llama(setup.model, options)  # called on the engine thread


def _cached(options: EngineOptions, folder: Path) -> EngineOptions:
    ram = options.cache_ram_mb if options.cache_ram_mb > 0 else EngineOptions().cache_ram_mb
    return replace(options, cache_ram_mb=ram, cache_dir=folder)
