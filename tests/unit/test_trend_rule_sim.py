"""The trend rule against simulated daily p95 and out-of-sync-seconds series
(tests/sim/trend_series.py): how often it calls a steady series growing, and how soon it notices
+10 %/week or a step. Fixed seeds; the bigger run is `pytest -m soak` (numbers in
tests/bench/RESULTS.md, "Issue 32", "Issue 32: out-of-sync seconds trended" and "Issue 32: the
topic's wobble")."""

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


# Out-of-sync seconds (MIN_CHANGE_SECONDS, the root mean square wobble NOISE_SECONDS). Measured at
# 300 series (seeds 1, 2, 5) and 3,000 (seed 7); RESULTS.md, "the topic's wobble".
SECONDS_FALSE_ALARMS = {
    # 0.99-1.43 %: the edge, as for p95 (the same relative minimum decides; 0.91-1.33 % with the median)
    "7,200 s/day weekly AR(1) 0.8 sd 5%": 0.0125,
    # A sum of many partitions' sporadic incidents: 0.85-0.91 % (2.3-2.6 % with the median wobble,
    # which ignored its few large week-to-week changes).
    "topic of 20 incident partitions": 0.010,
    "minutes: mean 600 s/day": 0.010,  # 0.38-0.65 %
    "topic of 20 minutes partitions": 0.008,  # 0.46-0.59 %
}
SECONDS_OTHER_STEADY = 0.005  # every other kind (<= 0.17 %)
SECONDS_DETECTED = {  # kind -> (at least, below) this share flagged within 14 days
    "3,600 s/day sd 10% step +30%": (0.97, 1.01),  # 99.7-100 %
    "7,200 s/day sd 10% +10%/week": (0.55, 1.01),  # 59-61 %: as p95 at sd 10 % (the noise gate)
    "14,400 s/day sd 10% +10%/week": (0.55, 1.01),  # 59-64 %
    # The 600 s floor decides under ~6,000 s/day: +10 %/week of 3,600 s is seen late or not at all.
    "3,600 s/day sd 10% +10%/week": (0.20, 0.40),  # 27-31 %, median 17 days
    "1,800 s/day sd 20% +10%/week": (0.0, 0.10),  # 1.7-4.0 %
    "minutes 180 s/day step x5": (0.38, 0.60),  # 44-48 %: +720 s/day, just past the floor
    "minutes 180 s/day +10%/week": (0.0, 0.02),  # 0 %: minutes a day are not growth
}


def _check_seconds(n: int, seed: int) -> None:
    fa, det = ts.run_seconds(n, seed)
    for kind, share in fa.items():
        assert share <= SECONDS_FALSE_ALARMS.get(kind, SECONDS_OTHER_STEADY), (kind, share)
    pooled = sum(fa.values()) / len(fa)
    assert pooled <= 0.0045, pooled  # measured 0.30-0.35 % (0.47-0.50 % with the median wobble)
    for kind, (least, below) in SECONDS_DETECTED.items():
        assert least <= det[kind].within < below, (kind, det[kind])
    assert det["3,600 s/day sd 10% step +30%"].median_delay <= 6


def test_seconds_false_alarms_and_detection():
    _check_seconds(n=300, seed=1)


@pytest.mark.soak
def test_seconds_false_alarms_and_detection_many_series():
    _check_seconds(n=3000, seed=7)
