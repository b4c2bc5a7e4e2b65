"""The trend rule against simulated daily p95 series (tests/sim/trend_series.py): how often it
calls a steady series growing, and how soon it notices +10 %/week or a step. Fixed seeds; the
bigger run is `pytest -m soak` (numbers in tests/bench/RESULTS.md, "Issue 32")."""

from __future__ import annotations

import pytest

from tests.sim import trend_series as ts

# Issue 32's bars: <= 1 % of steady partition-days flagged, +10 %/week found within 14 days in
# >= 90 % of series. What the rule reaches on the suite's kinds, with some margin.
FALSE_ALARMS = {  # kind -> at most this share of partition-days
    "weekly AR(1) 0.8": 0.010,  # measured 0.95-0.97 %: the edge (a wandering level looks like growth)
    "weekly sd 20%": 0.010,  # measured 0.74-0.79 %
}
OTHER_STEADY = 0.005  # every other steady kind (measured <= 0.38 %)
DETECTED = {  # kind -> at least this share of series flagged within 14 days of the onset
    "stationary +10%/week": 0.92, "weekly +10%/week": 0.92, "weekly step +30%": 0.99,
    # measured, below issue 32's 90 %: said in RESULTS.md
    "weekly AR(1) 0.5 +10%/week": 0.80, "weekly AR(1) 0.8 +10%/week": 0.75, "weekly sd 10% +10%/week": 0.55,
}


def _check(n: int, seed: int) -> None:
    fa, det = ts.run(n, seed)
    for kind, share in fa.items():
        assert share <= FALSE_ALARMS.get(kind, OTHER_STEADY), (kind, share)
    pooled = sum(fa.values()) / len(fa)
    assert pooled <= 0.005, pooled  # the suite as a whole: half the bar
    for kind, least in DETECTED.items():
        assert det[kind].within >= least, (kind, det[kind])
    assert det["weekly +10%/week"].median_delay <= 12 and det["weekly step +30%"].median_delay <= 4
    assert det["weekly +5%/week"].within < 0.5  # growth too slow to see in two weeks: said, not hidden


def test_false_alarms_and_detection():
    _check(n=300, seed=1)


@pytest.mark.soak
def test_false_alarms_and_detection_many_series():
    _check(n=3000, seed=7)
