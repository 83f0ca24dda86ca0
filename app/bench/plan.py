"""What the bench measures, how much of it, and the targets its figures are held to."""

from __future__ import annotations

import random
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from app.engine import EngineOptions, GenerationSettings

FRAME = 1 / 60
STORY = "Write a long story about a dragon who learns to read."
CHECK = "What is the capital of France?"
LONG_PROMPT = "The quick brown fox jumps over the lazy dog. " * 150  # about 1,500 tokens
FIREHOSE_RATE = 5000
LONG_SECTION = """## A section of a long answer

The model explains something at length here, with **bold words**, some `inline code`, and a
[link to the docs](https://example.com/docs). Paragraphs like this one are what most replies
are made of, so they are most of what the long reply streams.

- a first point, short
- a second point that runs a little longer than the first one
- a third point with `code` in it

```python
def area(width: float, height: float) -> float:
    '''The area of a rectangle.'''
    return width * height
```

| name | value |
| --- | --- |
| width | 3 |
| height | 4 |

A closing paragraph sums the section up before the next one begins, in two sentences. It
ends with a full stop.

"""


@dataclass(frozen=True)
class Target:
    """One figure held to a target.

    Attributes:
        path: the figure in the JSON, dotted (``"throughput.ratio"``).
        op: ``">="``, ``"<="`` or ``"=="``.
        value: the target, or the factor applied to ``of``.
        of: when set, the target is ``value`` times this other figure (``"ttft_ms.cold.ms"``).
        ci_floor: when set, the lower end of the figure's confidence interval
            (``<path>_ci``) must reach this too.
    """

    path: str
    op: str
    value: float
    of: str | None = None
    ci_floor: float | None = None


SHAPES = ("list_5000", "table_2000", "line_100000", "delimiters_20000", "brackets_10000")
"""The hostile shapes of a long reply (issue 13): a list, a table, one line, delimiter runs."""

LARGE_CASES = (
    "reopen_markdown",
    "reopen_line",
    "one_piece_markdown",
    "one_piece_line",
    "table_streamed",
    "new_chat",
    "send_paste",
)
"""One large message (issue 16): a saved reply reopened and a reply arriving in one piece
(Markdown, and one line), a 5,000-row table streamed at 1,000 rows a second, New chat after a
large reply, and a large paste sent as a prompt."""

TARGETS: list[Target] = [
    Target("throughput.ratio", ">=", 1.03),
    Target("throughput.native_ratio", ">=", 0.97, ci_floor=0.95),
    # Issue 30's targets for a two-core machine (they were 0.90 and 16.7 ms before it).
    Target("throughput.best_native_ratio", ">=", 0.95, ci_floor=0.90),
    Target("prefill.ratio", ">=", 0.99),
    Target("prefill.best_ratio", ">=", 0.95),
    Target("loop_lag_ms.p99", "<=", 16.7),
    Target("loop_lag_ms.max", "<=", 50.0),
    Target("token_to_screen_ms.p95", "<=", 12.0),
    Target("stop_decode_ms.p95", "<=", 10.0),
    Target("stop_prefill_ms.p95", "<=", 25.0),
    Target("stop_long_ms.p95", "<=", 10.0),
    Target("next_reply_consistent", "==", 1.0),
    Target("firehose.lost", "==", 0.0),
    Target("firehose.loop_lag_ms.p99", "<=", 16.7),
    Target("firehose.queue_headroom", ">=", 0.0),
    Target("long_reply.ratio", "<=", 1.5),
    *(Target(f"long_reply.shapes.{shape}.late_update_ms", "<=", 4.0) for shape in SHAPES),
    Target("ttft_ms.follow_up_after_long_reply.ms", "<=", 1.5, of="ttft_ms.same_conversation.ms"),
    Target("ttft_ms.switch_back.ms", "<=", 2.0, of="ttft_ms.same_conversation.ms"),
    Target("ttft_ms.after_restart.ms", "<=", 3.0, of="ttft_ms.same_conversation.ms"),
    Target("ttft_ms.resume_after_prefill_stop.ms", "<=", 0.6, of="ttft_ms.cold.ms"),
    Target("ttft_ms.prefill_progress_cost", ">=", 0.97),
    Target("ttft_ms.cache_consistent", "==", 1.0),
    Target("diagnostics_panel.ratio", ">=", 0.98),
    Target("diagnostics_panel.loop_lag_ms_shown.p99", "<=", 16.7),
    Target("diagnostics_panel.loop_lag_ms_shown.max", "<=", 50.0),
    Target("trace.ratio", ">=", 0.97),
    *(Target(f"large_messages.{case}.stall_ms", "<=", 50.0) for case in LARGE_CASES),
    Target("server.throughput.ratio", ">=", 0.97),
    Target("server.stop_on_disconnect_ms.prefill.p95", "<=", 25.0),
    Target("server.stop_on_disconnect_ms.decode.p95", "<=", 10.0),
    Target("server.loop_lag_ms.p99", "<=", 16.7),
    Target("server.ttft_second_turn_ratio", "<=", 2.0),
    Target("server.slow_reader_rss_mb", "<=", 5.0),
    Target("download.ratio", ">=", 0.9),
    Target("download.loop_lag_ms.p99", "<=", 16.7),
    Target("window_cost.cpu_share", "<=", 0.03),
    Target("window_cost.decode_busy", ">=", 0.95),
    Target("parallel.native_ratio", ">=", 0.90),
    Target("parallel.prefill_stall_ratio", "<=", 2.0),
    Target("parallel.stop_ms.prompt.p95", "<=", 25.0),
    Target("parallel.stop_ms.decode.p95", "<=", 10.0),
    Target("parallel.slow_reader.ratio", ">=", 0.95),
    Target("parallel.slow_reader.rss_growth_mb", "<=", 5.0),
    Target("speculative.grounded.ratio", ">=", 1.8),
    Target("speculative.open.ratio", ">=", 0.98),
    Target("speculative.same_text", ">=", 1.0),
    # The tests' projector (random weights, 1,024 patches, 12 blocks) on the bundled model.
    Target("vision.follow_up_ratio", "<=", 1.5),
    Target("vision.stop_encode_ms.p95", "<=", 50.0),
    Target("vision.encode_hook_ratio", ">=", 0.95),
    Target("vision.sound.follow_up_ratio", "<=", 1.5),
    Target("vision.sound.stop_encode_ms.p95", "<=", 50.0),
    Target("vision.sound.encode_hook_ratio", ">=", 0.95),
    # On a real GPU, every layer offloaded (lavapipe, a Vulkan driver on the CPU, gets none).
    Target("gpu.native_ratio", ">=", 0.95),
    Target("gpu.stop_prefill_ms.p95", "<=", 25.0),
    Target("gpu.stop_decode_ms.p95", "<=", 10.0),
]


@dataclass(frozen=True)
class Plan:
    """How much to measure: the full bench, or a short ``--quick`` run for tests.

    Attributes:
        pairs: throughput pairs per baseline (raw and native).
        max_tokens: tokens per throughput reply.
        lag_replies: replies streamed under the 5 ms heartbeat.
        panel_pairs: replies with the diagnostics panel shown and hidden.
        trace_pairs: replies while recording a flow trace and while not.
        decode_stops: Stops during decoding.
        prefill_stops: Stops during prompt processing.
        firehose_seconds: how long the fire hose pours.
        long_pieces: pieces before the long reply's late updates.
        shape_scale: the hostile shapes' share of their full size.
        shape_cap_s: the most time one shape may take before the rest is skipped.
        remote_pairs: pairs against a plain client of llama_cpp.server.
        prefill_pairs: prompt-processing pairs against llama-cpp-python.
        prefill_words: the length of their prompt, in words (250: about 330 tokens).
        ttft_runs: runs of the time-to-first-token steps (each figure is their median).
        ttft_plain_runs: runs of the same steps without the prompt cache (for comparison;
            most of them process the whole history, so each costs twice a cached run).
        ttft_history_tokens: tokens in the long conversation's history.
        ttft_reply_tokens: tokens of the replies a follow-up comes after (about 300).
        thread_rounds: rounds over every thread count in the ``threads`` section (each
            count's figure is the median of its rounds).
        large_chars: the size of the large messages built, cleared and sent.
        slow_reader_seconds: how long the API server's slow reader reads 100 bytes a second.
        download_pairs: downloads through Floodgate against a plain stream of the same file
            (per reference: written and synced, and written only).
        download_mib: the size of that file.
        gpu_prompt_words: the ``gpu`` section's prompt, in words (about 1.3 tokens each).
        gpu_decode_tokens: tokens per reply timed there.
        gpu_stops: Stops there, in prompt processing and in a reply each.
        window_cost_replies: replies the window's cost is measured over.
        window_floor_rounds: rounds of the native loop and the app's reply with no text shown,
            one line shown and all of it (:mod:`app.bench.window_floor`).
        parallel_rounds: rounds over 1, 2, 4 and 8 streams side by side (and pairs against
            the native batched loop at 4).
        parallel_tokens: tokens per stream in those rounds and per peer client.
        parallel_cycles: newcomers with a long prompt (each stopped in it) and Stops of a
            fourth reply, beside three streams.
        parallel_window_s: the window of the three streams alone before each newcomer.
        parallel_prompt_words: the newcomer's prompt, in words (about 1.3 tokens each).
        parallel_slow_seconds: each window of the slow-reader comparison.
        parallel_slow_rounds: slow readers, one after another, each between two windows.
        parallel_peer_rounds: rounds of four openai clients against each server.
        speculative_rounds: rounds over the grounded and the open prompts (drafts, the plain
            loop, the native loop, llama-cpp-python's prompt lookup, each prompt).
        speculative_tokens: the most tokens of each of those replies.
        speculative_same_prompts: prompts whose replies with drafts are compared with the
            plain loop's (the issue asks for 50 at least).
        speculative_same_tokens: the most tokens of each of those.
    """

    pairs: int
    max_tokens: int
    lag_replies: int
    panel_pairs: int
    trace_pairs: int
    decode_stops: int
    prefill_stops: int
    firehose_seconds: float
    long_pieces: int
    shape_scale: float
    shape_cap_s: float
    remote_pairs: int
    prefill_pairs: int
    prefill_words: int
    ttft_runs: int
    ttft_plain_runs: int
    ttft_history_tokens: int
    ttft_reply_tokens: int
    thread_rounds: int
    large_chars: int
    slow_reader_seconds: float
    download_pairs: int
    download_mib: int
    gpu_prompt_words: int
    gpu_decode_tokens: int
    gpu_stops: int
    window_cost_replies: int
    window_floor_rounds: int
    parallel_rounds: int
    parallel_tokens: int
    parallel_cycles: int
    parallel_window_s: float
    parallel_prompt_words: int
    parallel_slow_seconds: float
    parallel_slow_rounds: int
    parallel_peer_rounds: int
    speculative_rounds: int
    speculative_tokens: int
    speculative_same_prompts: int
    speculative_same_tokens: int

    @staticmethod
    def make(quick: bool, pairs: int | None = None) -> Plan:
        """The full plan, or the quick one.

        Args:
            quick: the short plan (for tests).
            pairs: if given, the pairs of the throughput ratios (per reference) and of the
                diagnostics panel's, instead of the plan's.
        """
        plan = _QUICK if quick else _FULL
        return plan if pairs is None else replace(plan, pairs=pairs, panel_pairs=pairs)


_QUICK = Plan(
    pairs=3,
    max_tokens=24,
    lag_replies=1,
    panel_pairs=1,
    trace_pairs=2,
    decode_stops=3,
    prefill_stops=2,
    firehose_seconds=1.0,
    long_pieces=1_000,
    shape_scale=0.02,
    shape_cap_s=2.0,
    remote_pairs=2,
    prefill_pairs=3,
    prefill_words=40,
    ttft_runs=1,
    ttft_plain_runs=1,
    ttft_history_tokens=100,
    ttft_reply_tokens=40,
    thread_rounds=1,
    large_chars=40_000,
    slow_reader_seconds=3.0,
    download_pairs=2,
    download_mib=32,
    # lavapipe (the tests' GPU) computes a token in about a second.
    gpu_prompt_words=24,
    gpu_decode_tokens=6,
    gpu_stops=2,
    window_cost_replies=2,
    window_floor_rounds=2,
    parallel_rounds=1,
    parallel_tokens=16,
    parallel_cycles=2,
    parallel_window_s=0.5,
    parallel_prompt_words=200,
    parallel_slow_seconds=2.0,
    parallel_slow_rounds=1,
    parallel_peer_rounds=1,
    speculative_rounds=1,
    speculative_tokens=160,
    speculative_same_prompts=4,
    speculative_same_tokens=24,
)
"""The short ``--quick`` run, for tests."""

# Fifteen pairs per baseline: single pairs spread over +-6 % on a 2-core machine, and a
# median of nine moved by 2 % between runs of the same code (README, "Measured").
_FULL = Plan(
    pairs=15,
    max_tokens=256,
    lag_replies=4,
    panel_pairs=9,
    trace_pairs=7,
    decode_stops=20,
    prefill_stops=10,
    firehose_seconds=10.0,
    long_pieces=8_000,
    shape_scale=1.0,
    shape_cap_s=10.0,
    remote_pairs=15,
    prefill_pairs=15,
    prefill_words=250,
    ttft_runs=5,
    ttft_plain_runs=3,
    ttft_history_tokens=1_200,
    ttft_reply_tokens=300,
    thread_rounds=3,
    large_chars=1_000_000,
    slow_reader_seconds=30.0,
    download_pairs=15,
    download_mib=256,
    gpu_prompt_words=1_000,
    gpu_decode_tokens=128,
    gpu_stops=20,
    window_cost_replies=7,
    window_floor_rounds=9,
    parallel_rounds=3,
    parallel_tokens=128,
    parallel_cycles=6,
    parallel_window_s=1.5,
    parallel_prompt_words=1_500,
    parallel_slow_seconds=6.0,
    parallel_slow_rounds=3,
    parallel_peer_rounds=2,
    speculative_rounds=3,
    speculative_tokens=400,
    speculative_same_prompts=50,
    speculative_same_tokens=96,
)
"""The full bench."""


def _log_to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@dataclass
class Setup:
    """What every section of one bench run shares: the model, the plan, the settings."""

    model: Path
    plan: Plan
    options: EngineOptions
    rng: random.Random = field(default_factory=lambda: random.Random(1234))
    log: Callable[[str], None] = _log_to_stderr
    real_pieces: list[str] = field(default_factory=list)
    """The real model's token pieces (from the warm-up), replayed by the per-piece designs."""

    @property
    def greedy(self) -> GenerationSettings:
        """Greedy sampling, the plan's reply length."""
        return GenerationSettings(temperature=0.0, max_tokens=self.plan.max_tokens)
