"""The pace by cost (:class:`SharePace`): a job run as often as its cost allows within a share."""

from __future__ import annotations

import pytest

from app.flow.pacing import SharePace


def test_a_job_runs_whenever_asked_until_its_cost_is_known() -> None:
    pace = SharePace(0.01, most=1.0)
    assert pace.gap == 0.0
    assert pace.due(10.0)
    pace.ran(10.0)  # its cost is not known yet
    assert pace.due(10.001)


def test_the_gap_is_the_cost_over_the_share_up_to_the_most() -> None:
    pace = SharePace(0.005, most=1.0)
    pace.ran(0.0, cost=0.002)
    assert pace.gap == pytest.approx(0.4)  # 2 ms a run, 5 ms a second: 2.5 runs a second
    assert not pace.due(0.39)
    assert pace.due(0.4)
    dear = SharePace(0.005, most=1.0)
    dear.ran(0.0, cost=0.050)
    assert dear.gap == 1.0  # 10 s at that cost: the most it waits instead
    cheap = SharePace(0.005, most=1.0)
    cheap.ran(0.0, cost=0.0002)
    assert cheap.gap == pytest.approx(0.04)


def test_a_job_asked_on_a_timer_runs_at_the_nearest_ask() -> None:
    pace = SharePace(0.005, most=1.0, step=0.2)
    pace.ran(0.0, cost=0.0024)  # due 0.48 s after: the ask at 0.4 is nearer than 0.6
    assert not pace.due(0.2)
    assert pace.due(0.4)
    # A timer firing a little early is not taken for one too soon.
    cheap = SharePace(0.005, most=1.0, step=0.2)
    cheap.ran(0.0, cost=0.0008)  # due after 0.16 s: every ask
    assert cheap.due(0.19)


def test_the_cost_is_a_moving_average_of_the_runs() -> None:
    pace = SharePace(0.01, most=10.0)
    pace.ran(0.0, cost=0.004)
    pace.ran(1.0, cost=0.012)  # one dear run moves it a quarter of the way
    assert pace.cost == pytest.approx(0.006)
    for at in range(2, 12):
        pace.ran(float(at), cost=0.012)  # a machine that stays busy: most of the way
    assert pace.cost == pytest.approx(0.012, rel=0.1)


def test_a_clock_that_goes_back_is_due() -> None:
    pace = SharePace(0.001, most=1.0)
    pace.ran(100.0, cost=0.01)
    assert not pace.due(100.5)
    assert pace.due(50.0)  # another clock: nothing to count from


@pytest.mark.parametrize(
    ("share", "most", "step"), [(0, 1, 0), (1.5, 1, 0), (0.1, 0, 0), (0.1, 1, -1)]
)
def test_a_pace_that_means_nothing_is_refused(share: float, most: float, step: float) -> None:
    with pytest.raises(ValueError, match="no pace"):
        SharePace(share, most, step)
