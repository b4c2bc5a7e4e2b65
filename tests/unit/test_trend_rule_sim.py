"""The trend rule against simulated daily series, on both generators: the rule author's
(tests/sim/trend_series.py, p95 record lag and out-of-sync seconds) and one written without sight
of the rule (tests/sim/trend_series_independent.py). Issue 41's bars: at most 0.5 % of the judged
days of a steady family flagged (1 % where the level wanders: AR(1) 0.8); +10 %/week at 10 %
noise flagged within 14 days in at least 60 % of series, +20 %/week in 95 %, growth over the whole
window on its last day in 90 %. Fixed seeds; the bigger run is `pytest -m soak`; the published
figures are tests/bench/bench_trend_rule.py's (trend_figures.json)."""

from __future__ import annotations

import numpy as np
import pytest

from mirrorlag.rollup.trend_rule import MIN_CHANGE, MIN_CHANGE_SECONDS, WINDOW, judge
from tests.sim import trend_series as ts
from tests.sim import trend_series_independent as ind

UNITS = {"records": MIN_CHANGE, "seconds": MIN_CHANGE_SECONDS}


# Our own heaviest-tailed kind, outside the issue's list: a topic's seconds summing 20 partitions'
# sporadic incidents (0.39 % at 2,000 series, seed 7; 0.52 % at 300, seed 1).
EDGE = {"topic of 20 incident partitions": 0.0075}


def _bar(family: str) -> float:
    return EDGE.get(family, 0.010 if "0.8" in family else 0.005)


def _check_own(n: int, seed: int) -> None:
    fa, det = ts.run(n, seed)
    for kind, share in fa.items():
        assert share <= _bar(kind), (kind, share)
    assert det["weekly +10%/week, sd 10%"].within >= 0.60, det["weekly +10%/week, sd 10%"]
    assert det["weekly +10%/week, sd 5%"].within >= 0.90
    assert det["weekly +20%/week, sd 10%"].within >= 0.95
    assert det["weekly step +30%, sd 10%"].within >= 0.97 and det["weekly step +30%, sd 10%"].median_delay <= 5
    assert det["weekly +5%/week, sd 10%"].within < 0.5  # growth too slow to see in two weeks: said, not hidden
    assert all(v >= 0.90 for v in ts.sustained(n, seed).values())


def test_false_alarms_and_detection():
    _check_own(n=300, seed=1)


@pytest.mark.soak
def test_false_alarms_and_detection_many_series():
    _check_own(n=3000, seed=7)


# Out-of-sync seconds (MIN_CHANGE_SECONDS). Measured at 1,000 series, seed 1 (RESULTS.md, issue 41).
SECONDS_DETECTED = {  # kind -> (at least, below) this share flagged within 14 days
    "3,600 s/day sd 10% step +30%": (0.97, 1.01),  # 99 %
    "7,200 s/day sd 10% +10%/week": (0.55, 1.01),  # 70 %
    "14,400 s/day sd 10% +10%/week": (0.55, 1.01),  # 66 %
    # The 600 s floor damps the log scale under ~6,000 s/day: +10 %/week of 3,600 s is seen later.
    "3,600 s/day sd 10% +10%/week": (0.20, 0.50),  # 34 %
    "1,800 s/day sd 20% +10%/week": (0.0, 0.10),  # 2.7 %
    # A few minutes a day (exponential: the days swing by 100 %) stepped to x5: +720 s a day, just
    # past the floor, on days that are each an outlier of the week before: seen late (median 34 days).
    "minutes 180 s/day step x5": (0.05, 0.40),  # 20 %
    "minutes 180 s/day +10%/week": (0.0, 0.02),  # 0 %: minutes a day are not growth
}


def _check_seconds(n: int, seed: int) -> None:
    fa, det = ts.run_seconds(n, seed)
    for kind, share in fa.items():
        assert share <= _bar(kind), (kind, share)
    for kind, (least, below) in SECONDS_DETECTED.items():
        assert least <= det[kind].within < below, (kind, det[kind])


def test_seconds_false_alarms_and_detection():
    _check_seconds(n=300, seed=1)


@pytest.mark.soak
def test_seconds_false_alarms_and_detection_many_series():
    _check_seconds(n=3000, seed=7)


def _rule(family: str):
    return lambda w: judge(w, UNITS[ind.KIND[family]])


def _check_independent(n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    for family, make in ind.STEADY.items():
        share = ts.false_alarms(make(rng, n, ts.DAYS), _rule(family))
        assert share <= _bar(family), (family, share)
    within = {}
    for family, (make, onset) in ind.GROWING.items():
        if onset == 0:
            assert judge(make(rng, n, ind.MIN_DAYS)[:, :WINDOW], UNITS[ind.KIND[family]]).growing.mean() >= 0.90
            continue
        within[family] = ts.detection(make(rng, n, onset + ts.AFTER), _rule(family), onset).within
    assert within["weekend x3, +10%/week, sd 10%"] >= 0.60, within
    assert within["weekend x3, +20%/week, sd 10%"] >= 0.95, within


def test_the_independent_generator():
    _check_independent(n=300, seed=2)


@pytest.mark.soak
def test_the_independent_generator_many_series():
    _check_independent(n=3000, seed=8)


def test_one_extreme_day_adds_no_flag():
    """Issue 41: the same series with and without one 5x or 50x day (anywhere): every window
    flagged with it is flagged without it."""
    rng = np.random.default_rng(3)
    y = ts.steady(rng, 400, sd=0.10)
    at = rng.integers(0, ts.DAYS, len(y))
    plain = ts.flags(y)
    for factor in (5.0, 50.0):
        extreme = np.where(np.arange(ts.DAYS)[None, :] == at[:, None], y * factor, y)
        added = ts.flags(extreme) & ~plain
        assert added.sum() == 0, (factor, np.argwhere(added)[:5])
