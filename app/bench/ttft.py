"""Time to first token over a long conversation: with the prompt cache, and without it.

One scenario, run several times, drives the engine as a user drives the app: a long first
prompt in conversation A (``cold``), a follow-up (``same_conversation``), a prompt in another
conversation B, a follow-up in A again (``switch_back``), the app closed and reopened on the
same cache folder and another follow-up (``after_restart``), then a long prompt in C stopped
half-way through its processing and sent again (``resume_after_prefill_stop``, timed from the
second send). The same steps run on an engine without the cache, for comparison.

Every run sends the same messages, so each reply can be compared with the one full
processing gives (``cache_consistent``).
"""

from __future__ import annotations

import statistics
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from app.bench.engine_drive import Reply, history, reply_on_thread
from app.bench.plan import Setup
from app.engine import ChatMessage, EngineOptions, GenerationSettings
from app.engine.llama import LlamaBackend, open_llama

STEPS = ("cold", "same_conversation", "switch_back", "after_restart", "resume_after_prefill_stop")
REPLY = GenerationSettings(temperature=0.0, max_tokens=16)
FOLLOW_UPS = (
    "Summarise that in one sentence.",
    "Which of those points matters most?",
    "Say it again, more simply.",
)


@dataclass
class Script:
    """The messages of every step. The first run fills in the replies the later ones reuse."""

    a: list[ChatMessage]
    b: list[ChatMessage]
    c: list[ChatMessage]
    replies: list[str] = field(default_factory=list)

    def a_turn(self, k: int) -> list[ChatMessage]:
        """Conversation A after ``k`` follow-ups (the replies before them from the script)."""
        messages = list(self.a)
        for i in range(k):
            messages.append({"role": "assistant", "content": self.replies[i]})
            messages.append({"role": "user", "content": FOLLOW_UPS[i]})
        return messages


@dataclass
class Run:
    """One run's replies, by step."""

    replies: dict[str, Reply] = field(default_factory=dict)


def _scenario(open_engine: Callable[[], LlamaBackend], script: Script) -> Run:
    run = Run()

    def step(
        engine: LlamaBackend, name: str, conversation: str, messages: list[ChatMessage]
    ) -> Reply:
        reply = reply_on_thread(engine, messages, REPLY, conversation)
        run.replies[name] = reply
        return reply

    engine = open_engine()
    try:
        for k, name in enumerate(("cold", "same_conversation")):
            reply = step(engine, name, "A", script.a_turn(k))
            if len(script.replies) <= k:
                script.replies.append(reply.text)
        reply_on_thread(engine, script.b, REPLY, "B")
        reply = step(engine, "switch_back", "A", script.a_turn(2))
        if len(script.replies) <= 2:
            script.replies.append(reply.text)
    finally:
        engine.close()
    engine = open_engine()  # the app closed and opened again, on the same cache folder
    try:
        step(engine, "after_restart", "A", script.a_turn(3))
        half = reply_on_thread(
            engine, script.c, REPLY, "C",
            stop_when=lambda r: r.prompt_tokens > 0 and r.prefill_done >= r.prompt_tokens // 2,
        )  # fmt: skip
        resumed = step(engine, "resume_after_prefill_stop", "C", script.c)
        resumed.stopped_at = half.stopped_at
    finally:
        engine.close()
    return run


def _full_processing(setup: Setup, script: Script, run: Run) -> dict[str, str]:
    """The reply to each step's messages after processing all of them, on a fresh cache.

    The run without the cache already processed ``cold``, ``switch_back`` and
    ``after_restart`` in full; ``same_conversation`` reused its prefix in place and the
    resumed prompt kept its first half, so those two are processed again here.
    """
    expected = {s: run.replies[s].text for s in ("cold", "switch_back", "after_restart")}
    engine = open_llama(setup.model, replace(setup.options, cache_ram_mb=0, cache_dir=None))
    try:
        for name, conversation, messages in (
            ("same_conversation", "A", script.a_turn(1)),
            ("resume_after_prefill_stop", "C", script.c),
        ):
            engine.sequence.clear()
            expected[name] = reply_on_thread(engine, messages, REPLY, conversation).text
    finally:
        engine.close()
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
    plain_runs: list[Run] = []
    cached_runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="floodgate-bench-cache-") as folder:
        for i in range(setup.plan.ttft_runs):
            if i < setup.plan.ttft_plain_runs:
                plain_runs.append(_scenario(_opener(setup, no_cache), script))
            cached = _cached(setup.options, Path(folder) / f"run{i}")
            cached_runs.append(_scenario(_opener(setup, cached), script))
            setup.log(
                f"  run {i + 1}: "
                + ", ".join(f"{s} {cached_runs[-1].replies[s].ttft_ms:.0f} ms" for s in STEPS)
            )
    expected = _full_processing(setup, script, plain_runs[0])
    differing: dict[str, str] = {}
    for run in cached_runs:
        for name in STEPS:
            if run.replies[name].text != expected[name]:
                differing.setdefault(name, run.replies[name].text)
    for name, got in differing.items():
        setup.log(f"  {name}: {got!r} after a restore, {expected[name]!r} after full processing")
    first = cached_runs[0].replies["cold"].report.prompt_tokens
    return {
        "history_tokens": first,
        "runs": len(cached_runs),
        "runs_without_cache": len(plain_runs),
        **_figures(cached_runs),
        "cache_consistent": not differing,
        "cache_inconsistent_steps": sorted(differing),
        "without_cache": _figures(plain_runs),
    }


def _opener(setup: Setup, options: EngineOptions) -> Callable[[], LlamaBackend]:
    return lambda: open_llama(setup.model, options)


def _cached(options: EngineOptions, folder: Path) -> EngineOptions:
    ram = options.cache_ram_mb if options.cache_ram_mb > 0 else EngineOptions().cache_ram_mb
    return replace(options, cache_ram_mb=ram, cache_dir=folder)
