"""When a daily figure is "growing": the rule in numpy, which trends.py runs in Spark's Python workers.

The last 7 days are compared with the same weekdays of the 3 weeks before, so a weekly shape
(quiet weekends, a busy Friday) is never read as growth:

- each of the last 7 days with a value and at least `MIN_BASELINE_WEEKS` of its 3 earlier same
  weekdays gives a change: its value minus their mean;
- `change`: the mean of those changes without the largest and the smallest (so one incident
  day, or one quiet day, moves nothing), over at least `MIN_DAYS` of the 7 days;
- `ratio`: change over the mean of the days' baselines (inf when the baseline is 0 and the change
  positive);
- `noise`: the series' own week-to-week wobble, from the (up to 14) absolute changes from a day to
  the same weekday a week later in the 3 baseline weeks (0 when there is no such pair): by default
  (MEDIAN, p95 record lag) their median; RMS (out-of-sync seconds, NOISE_SECONDS) their root mean
  square;
- `growing`: at least MIN_UP of the 7 days above their baseline, and change ≥ `min_change` (the
  metric's units: MIN_CHANGE records of p95 record lag, MIN_CHANGE_SECONDS seconds out of sync a
  day), ratio ≥ MIN_RATIO and change ≥ NOISE_MULTIPLE[noise] × noise (1.5 × the median, 1 × the
  root mean square).

Why the root mean square for out-of-sync seconds: a topic's or flow's seconds are a sum of its
partitions' occasional incidents, a skewed series whose week-to-week changes are mostly small
with a few large ones; their median ignores the large ones and so understated the wobble (a
steady topic of 20 such partitions was flagged on 2.4 % of days). The root mean square counts
them, and on a series with symmetric noise it is about 1.5 × the median, so growth there is seen
as soon as before. Its price: one large incident day in the 3 baseline weeks raises the noise
until it leaves them. p95 record lag keeps the median: its kinds meet the bar with it, and with
the root mean square its most correlated kind went past 1 % (RESULTS.md, "the topic's wobble").

Why this and not a slope: a least-squares slope with t > 2 (the rule before) reads a weekly shape
and day-to-day correlation as growth (7-17 % of steady days flagged); weekly means over 28 days
did the same on noisy and correlated series, and a robust slope over 4 weekly points (Theil-Sen,
seasonal Mann-Kendall) did not see +10 %/week within 14 days. Slow growth (+5 %/week) takes
3-4 weeks to be flagged: the last week stays within 10 % of the three before.

The thresholds were picked by measurement (tests/unit/test_trend_rule_sim.py, the numbers in
tests/bench/RESULTS.md, "Issue 32"). Pure: no Spark, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

WINDOW = 28  # days a judgement reads: the day and the 27 before
BASELINE_WEEKS = 3
MIN_BASELINE_WEEKS = 2  # same weekdays a day's baseline needs
MIN_DAYS = 5  # of the last 7, days with a value and a baseline
MIN_CHANGE = 100.0  # records of p95 record lag
# Seconds out of sync a day. A partition out of sync for minutes a day swings by far more than
# 10 % from week to week, so there this floor, not the relative minimum, keeps steady days quiet;
# less lets such days through, more hides +10 %/week at an hour or two a day (RESULTS.md).
MIN_CHANGE_SECONDS = 600.0
MIN_RATIO = 0.10  # +10 % over the baseline
# How the week-to-week wobble is measured, and how far past it the change must be.
MEDIAN = "median"
RMS = "rms"
NOISE_MULTIPLE = {MEDIAN: 1.5, RMS: 1.0}
NOISE_SECONDS = RMS  # out-of-sync seconds: sums of incidents, skewed (see the docstring)
MIN_UP = 5  # of the last 7, days above their baseline


@dataclass(frozen=True)
class Growth:
    """Arrays of the leading shape of the input (one element per series)."""
    change: np.ndarray  # nan: fewer than MIN_DAYS days with a baseline
    ratio: np.ndarray
    noise: np.ndarray
    days: np.ndarray  # of the last 7, days with a value and a baseline
    up: np.ndarray  # of those, days above their baseline
    growing: np.ndarray


def judge(y: np.ndarray, min_change: float = MIN_CHANGE, noise: str = MEDIAN) -> Growth:
    """`y`: (..., 28) daily values, oldest first, the last one the day judged; nan: no value.
    `min_change`: the least change that is growth, in y's units (MIN_CHANGE: p95 record lag).
    `noise`: MEDIAN or RMS, how the wobble is measured (NOISE_SECONDS for out-of-sync seconds)."""
    y = np.asarray(y, dtype=float)
    if y.shape[-1] != WINDOW:
        raise ValueError(f"judge: the last axis holds {WINDOW} days, got {y.shape[-1]}")
    if noise not in NOISE_MULTIPLE:
        raise ValueError(f"judge: noise is one of {sorted(NOISE_MULTIPLE)}, got {noise!r}")
    last = y[..., WINDOW - 7:]
    weeks = np.stack([y[..., WINDOW - 7 * (w + 1) - 7: WINDOW - 7 * (w + 1)] for w in range(BASELINE_WEEKS)], axis=-1)
    present = ~np.isnan(weeks)
    count = present.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        base = np.where(count >= MIN_BASELINE_WEEKS, np.where(present, weeks, 0.0).sum(axis=-1) / count, np.nan)
        diff = last - base  # nan where the day or its baseline is missing
        ok = ~np.isnan(diff)
        days = ok.sum(axis=-1)
        up = (ok & (diff > 0)).sum(axis=-1)
        d0 = np.where(ok, diff, 0.0)
        top = np.where(ok, diff, -np.inf).max(axis=-1)
        bottom = np.where(ok, diff, np.inf).min(axis=-1)
        change = np.where(days >= MIN_DAYS, (d0.sum(axis=-1) - top - bottom) / (days - 2), np.nan)
        b = np.where(ok, base, 0.0).sum(axis=-1) / days
        ratio = np.where(b > 0, change / b, np.where(change > 0, np.inf, np.where(change < 0, -np.inf, 0.0)))
        ratio = np.where(np.isnan(change), np.nan, ratio)
    steps = np.abs(y[..., 7:21] - y[..., 0:14])  # a day to the same weekday a week later
    wobble = _median(steps) if noise == MEDIAN else _rms(steps)
    growing = (~np.isnan(change) & (up >= MIN_UP) & (change >= min_change) & (ratio >= MIN_RATIO)
               & (change >= NOISE_MULTIPLE[noise] * wobble))
    return Growth(change, ratio, wobble, days, up, growing)


def _median(v: np.ndarray) -> np.ndarray:
    """Median over the last axis of the values that are not nan; 0 where there are none."""
    s = np.sort(v, axis=-1)  # nan sorts last
    n = (~np.isnan(v)).sum(axis=-1)
    lo = np.take_along_axis(s, np.maximum((n - 1) // 2, 0)[..., None], axis=-1)[..., 0]
    hi = np.take_along_axis(s, np.maximum(n // 2, 0)[..., None], axis=-1)[..., 0]
    return np.where(n > 0, (lo + hi) / 2, 0.0)


def _rms(v: np.ndarray) -> np.ndarray:
    """Root mean square over the last axis of the values that are not nan; 0 where there are none."""
    n = (~np.isnan(v)).sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, np.sqrt(np.nansum(v * v, axis=-1) / n), 0.0)
