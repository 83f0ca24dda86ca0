"""How the bench turns runs into figures: distributions, paired ratios, confidence intervals.

A throughput figure is a ratio of two rates measured on a shared machine, where one run can be
10 % off the next. The bench therefore measures in pairs (Floodgate and a reference, one right
after the other, the order alternating) and reports the median of the per-pair ratios with a
95 % bootstrap confidence interval over the pairs. An interval wider than +-3 % that reaches
the target is reported as too noisy for a verdict rather than as a yes or a no.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.flow.metrics import Distribution

NOISE_LIMIT = 0.03
"""The widest a confidence interval may be (either side, relative to the median) for a verdict."""

BOOTSTRAP_RESAMPLES = 4000
BOOTSTRAP_SEED = 20261130
"""Fixed, so the same pairs always give the same interval."""

Rate = Callable[[], Awaitable[float]]
"""Runs one measurement and returns its rate (tokens per second)."""


def summary(dist: Distribution) -> dict[str, float]:
    """A distribution's percentiles, rounded for the JSON."""
    return {k: round(v, 3) if isinstance(v, float) else v for k, v in dist.summary().items()}


def median_ci(values: Sequence[float], level: float = 0.95) -> tuple[float, float]:
    """A bootstrap confidence interval of the median of ``values`` (percentile method).

    Resamples the values with replacement, with a fixed seed, and returns the interval that
    holds ``level`` of the resampled medians.
    """
    if not values:
        raise ValueError("no values")
    rng = random.Random(BOOTSTRAP_SEED)
    n = len(values)
    medians = sorted(
        statistics.median(rng.choices(values, k=n)) for _ in range(BOOTSTRAP_RESAMPLES)
    )
    tail = (1 - level) / 2
    low = medians[int(tail * BOOTSTRAP_RESAMPLES)]
    high = medians[min(BOOTSTRAP_RESAMPLES - 1, int((1 - tail) * BOOTSTRAP_RESAMPLES))]
    return low, high


def median_with_ci(values: Sequence[float]) -> tuple[float, list[float]]:
    """The median of ``values`` and its bootstrap interval, rounded for the JSON."""
    low, high = median_ci(values)
    return round(statistics.median(values), 4), [round(low, 4), round(high, 4)]


def too_noisy(value: float, ci: Sequence[float]) -> bool:
    """Whether the interval reaches further than :data:`NOISE_LIMIT` from the value."""
    low, high = ci
    return max(value - low, high - value) > NOISE_LIMIT * abs(value)


@dataclass
class Pairs:
    """One reference's runs and the app's runs that were paired with them."""

    reference: list[float] = field(default_factory=list)
    app: list[float] = field(default_factory=list)

    @property
    def ratios(self) -> list[float]:
        """The app's rate over the reference's, pair by pair."""
        return [a / r for a, r in zip(self.app, self.reference, strict=True)]

    def figures(self, name: str, prefix: str = "") -> dict[str, Any]:
        """The JSON figures: the reference's median rate, the median ratio, its interval.

        Args:
            name: the reference's name in the key of its rate (``"raw"`` gives ``raw_tok_s``).
            prefix: put before the ratio's keys (``"native_"`` gives ``native_ratio``).
        """
        ratios = self.ratios
        ratio, interval = median_with_ci(ratios)
        return {
            f"{name}_tok_s": round(statistics.median(self.reference), 2),
            f"{prefix}ratio": ratio,
            f"{prefix}ratio_ci": interval,
            f"{prefix}pairs": [round(r, 4) for r in ratios],
        }


def faster_count(pairs: dict[str, Pairs], at_app: str, at_best: str) -> str:
    """Which of a reference's two thread counts ran faster in the pairs: the best count's name.

    The ``threads`` rows pick a reference's best count from a few rounds each, which the
    machine's noise can tip: on a 2-core VM they picked 1 decode thread for the native loop
    (124.3 against 122.0 tokens/s), and 40 pairs then ran it at 133.5 against 148.5 for 2,
    which made the app "1.07 of the native loop at its best". Where the rows' count is not
    the app's, the reference runs at both in every round of the pairs, so the best is the
    one whose runs were faster there.

    Args:
        pairs: the pairs by reference name.
        at_app: the reference at the app's count.
        at_best: the same reference at the rows' best count (absent where it is the app's).
    """
    if at_best not in pairs:
        return at_app  # the rows' best count is the app's: the same runs
    rows_best = statistics.median(pairs[at_best].reference)
    return at_best if rows_best > statistics.median(pairs[at_app].reference) else at_app


async def interleaved_pairs(
    rounds: int,
    references: dict[str, Rate],
    app: Rate,
    log: Callable[[str], None],
) -> dict[str, Pairs]:
    """Measure the app against each reference in pairs, ``rounds`` times.

    In each round every reference gets its own pair: its run and an app run, back to back.
    The order alternates from round to round, both inside a pair (reference first, then app
    first) and between the references, so a machine that slows down or speeds up during
    the run weighs on both sides of every ratio alike.
    """
    names = list(references)
    result = {name: Pairs() for name in names}
    for round_ in range(rounds):
        shift = round_ % len(names)
        for name in names[shift:] + names[:shift]:
            if round_ % 2 == 0:
                ref = await references[name]()
                mine = await app()
            else:
                mine = await app()
                ref = await references[name]()
            result[name].reference.append(ref)
            result[name].app.append(mine)
            log(f"  round {round_ + 1}: {name} {ref:.1f}, app {mine:.1f} (ratio {mine / ref:.3f})")
    return result
