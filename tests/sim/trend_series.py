"""Daily p95 record-lag and out-of-sync-seconds series for measuring the trend rule
(trend_rule.py), written by the rule's author (tests/sim/trend_series_independent.py is the
generator written without sight of the rule): how often it calls a steady series growing (false
alarms, per judged partition-day) and how soon it sees real growth.

Numpy only, seeded. A series is `level × weekly shape × (1 + noise)` per day, noise normal with
standard deviation `sd` (clipped so a value stays above 5 % of its level), independent or AR(1)
with that marginal sd; growth multiplies from `onset` on. Every window the rule reads is judged,
from the 7th day of a series on (a young history: the days before it are missing), and only the
days the rule can judge (4 weeks of history) count.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from mirrorlag.rollup.trend_rule import MIN_CHANGE, MIN_CHANGE_SECONDS, WINDOW, Growth, judge

LEVEL = 10_000.0  # records: MIN_CHANGE (100) is 1 % of it, so the relative rule decides
SHAPES = {  # Monday .. Sunday
    "weekly": np.array([1.0, 1.05, 1.1, 1.15, 1.2, 0.6, 0.6]),
    "weekend x3": np.array([1.0, 1, 1, 1, 1, 3, 3]),
    "weekend x1/3": np.array([1.0, 1, 1, 1, 1, 1 / 3, 1 / 3]),
    "Friday peak": np.array([1.0, 1.05, 1.1, 1.2, 2.0, 0.8, 0.8]),
    "flat": np.ones(7),
}
WEEK = SHAPES["weekly"]
DAYS = 112  # a steady series: 16 weeks
ONSET = 56  # a growing one: 8 steady weeks, then growth
AFTER = 35  # days of a growing series after its onset
WITHIN = 14  # detection counts when flagged on one of the first 14 days of growth

Rng = np.random.Generator


def noise(rng: Rng, n: int, days: int, sd: float, rho: float = 0.0) -> np.ndarray:
    e = rng.normal(0.0, sd, (n, days))
    if rho:  # AR(1) whose marginal sd is sd
        s = np.sqrt(1 - rho * rho)
        for t in range(1, days):
            e[:, t] = rho * e[:, t - 1] + s * e[:, t]
    return e


def steady(rng: Rng, n: int, days: int = DAYS, *, sd: float = 0.05, rho: float = 0.0, weekly: bool = True,
           level: float = LEVEL, shape: str = "weekly") -> np.ndarray:
    y = np.full((n, days), level)
    if weekly:  # each series starts on a random weekday
        y = y * SHAPES[shape][(np.arange(days)[None, :] + rng.integers(0, 7, n)[:, None]) % 7]
    return np.round(y * np.clip(1 + noise(rng, n, days, sd, rho), 0.05, None))


def holiday(rng: Rng, n: int, factor: float = 5.0) -> np.ndarray:
    """Weekly series, sd 10 %, with one day in 30 (a random phase) at `factor` times."""
    y = steady(rng, n, sd=0.10)
    return np.where((np.arange(DAYS)[None, :] + rng.integers(0, 30, n)[:, None]) % 30 == 0, y * factor, y)


def outages(rng: Rng, n: int, share: float = 0.02) -> np.ndarray:
    """Weekly series, sd 10 %, with a share of days at 10-50 times (a stall that day)."""
    y = steady(rng, n, sd=0.10)
    return np.where(rng.random(y.shape) < share, y * rng.uniform(10, 50, y.shape), y)


def shifted_down(rng: Rng, n: int) -> np.ndarray:
    """Weekly series, sd 10 %, whose level drops to 30-80 % on a random day and stays there."""
    y = steady(rng, n, sd=0.10)
    at = rng.integers(0, DAYS, n)
    return np.where(np.arange(DAYS)[None, :] >= at[:, None], y * rng.uniform(0.3, 0.8, n)[:, None], y)


def one_day(rng: Rng, n: int, factor: float) -> np.ndarray:
    """Weekly series, sd 10 %, with one day (anywhere) at `factor` times."""
    y = steady(rng, n, sd=0.10)
    return np.where(np.arange(DAYS)[None, :] == rng.integers(0, DAYS, n)[:, None], y * factor, y)


def grown(y: np.ndarray, per_week: float | None = None, step: float | None = None, onset: int = ONSET) -> np.ndarray:
    """`y` multiplied from day `onset` on: by (1 + per_week) per week, compounding (the onset day
    itself already a day's growth), or by 1 + step."""
    t = np.arange(y.shape[1]) - onset + 1
    f = np.where(t >= 1, (1 + per_week) ** (t / 7) if per_week is not None else 1 + step, 1.0)
    return np.round(y * f[None, :])


def spiky(rng: Rng, n: int, share: float = 0.01, factor: float = 3.0) -> np.ndarray:
    """Weekly series with one-day incidents: a share of days at `factor` times."""
    return np.where(rng.random((n, DAYS)) < share, factor, 1.0) * steady(rng, n)


def sparse(rng: Rng, n: int, busy: float = 0.15, mean: float = 50.0) -> np.ndarray:
    """Mostly zero: on a share of days a p95 of a few records (geometric, mean `mean`)."""
    return np.where(rng.random((n, DAYS)) < busy, rng.geometric(1 / mean, (n, DAYS)), 0).astype(float)


def bursty(rng: Rng, n: int, busy: float = 0.1) -> np.ndarray:
    """Mostly zero, with bursts of 100 to 5,000 records on a share of days."""
    return np.where(rng.random((n, DAYS)) < busy, np.round(rng.uniform(100, 5000, (n, DAYS))), 0.0)


def gappy(rng: Rng, n: int, missing: float = 0.1) -> np.ndarray:
    """Weekly series with a share of days never rolled up."""
    y = steady(rng, n)
    return np.where(rng.random(y.shape) < missing, np.nan, y)


Rule = Callable[[np.ndarray], Growth]  # (..., 56) windows -> judgements


def growing(windows: np.ndarray) -> Growth:
    return judge(windows, MIN_CHANGE)


def growing_seconds(windows: np.ndarray) -> Growth:
    """The rule on out-of-sync seconds: its own minimum change."""
    return judge(windows, MIN_CHANGE_SECONDS)


def judgements(y: np.ndarray, rule: Rule = growing) -> Growth:
    """The rule on every day of each series (the days before the series are missing)."""
    padded = np.concatenate([np.full((y.shape[0], WINDOW - 1), np.nan), y], axis=1)
    return rule(sliding_window_view(padded, WINDOW, axis=1))


def flags(y: np.ndarray, rule: Rule = growing) -> np.ndarray:
    """(series, day) -> flagged that day."""
    return judgements(y, rule).growing


def false_alarms(y: np.ndarray, rule: Rule = growing) -> float:
    """Share of the partition-days the rule judges that it flags."""
    g = judgements(y, rule)
    judged = ~np.isnan(g.score)
    return float(g.growing[judged].mean()) if judged.any() else 0.0


@dataclass(frozen=True)
class Detection:
    within: float  # share of series flagged on one of the first WITHIN days of growth
    median_delay: float  # days from the onset (day 1: the first grown day) to the first flag
    p90_delay: float  # inf: more than a tenth never flagged in AFTER days
    before: float  # share of series flagged before the onset (false alarms)


def detection(y: np.ndarray, rule: Rule = growing, onset: int = ONSET) -> Detection:
    f = flags(y, rule)
    t = np.arange(y.shape[1]) - onset + 1  # the day of growth each column judges
    after = f & (t >= 1)[None, :]
    first = np.where(after.any(axis=1), t[np.argmax(after, axis=1)], np.inf)
    never = float(np.mean(np.isinf(first)))
    with np.errstate(invalid="ignore"):  # inf - inf between two never-flagged series
        p90 = np.inf if never > 0.1 else float(np.quantile(first, 0.9))
    return Detection(float(np.mean(first <= WITHIN)), float(np.median(first)), p90,
                     float(np.mean((f & (t < 1)[None, :]).any(axis=1))))


# The suite: name -> series maker (rng, n). Steady ones for false alarms ...
STEADY: dict[str, Callable[[Rng, int], np.ndarray]] = {
    **{f"{shape}, sd {sd:.0%}": (lambda shape, sd: lambda rng, n: steady(rng, n, sd=sd, shape=shape))(shape, sd)
       for shape in ("weekend x3", "weekend x1/3", "Friday peak", "flat") for sd in (0.05, 0.10, 0.20)},
    "weekly AR(1) 0.5, sd 10%": lambda rng, n: steady(rng, n, sd=0.10, rho=0.5),
    "weekly AR(1) 0.5, sd 20%": lambda rng, n: steady(rng, n, sd=0.20, rho=0.5),
    "weekly AR(1) 0.8, sd 10%": lambda rng, n: steady(rng, n, sd=0.10, rho=0.8),
    "weekly AR(1) 0.8, sd 20%": lambda rng, n: steady(rng, n, sd=0.20, rho=0.8),
    "weekly, monthly holiday x5": holiday,
    "weekly, monthly holiday x0.2": lambda rng, n: holiday(rng, n, 0.2),
    "weekly, outage days 2% x10-50": outages,
    "weekly, level shift down": shifted_down,
    "weekly, one day x5": lambda rng, n: one_day(rng, n, 5.0),
    "weekly, one day x50": lambda rng, n: one_day(rng, n, 50.0),
    "weekly, 1% incident days x3": spiky,
    "weekly, 10% days missing": gappy,
    "low level 200 sd 10%": lambda rng, n: steady(rng, n, sd=0.10, level=200.0),
    "sparse: 85% zero": sparse,
    "bursty: 90% zero": bursty,
}
# ... and growing ones for detection.
GROWN = ONSET + AFTER
GROWING: dict[str, Callable[[Rng, int], np.ndarray]] = {
    "weekly +10%/week, sd 5%": lambda rng, n: grown(steady(rng, n, GROWN), 0.10),
    "weekly +10%/week, sd 10%": lambda rng, n: grown(steady(rng, n, GROWN, sd=0.10), 0.10),
    "weekly +10%/week, sd 20%": lambda rng, n: grown(steady(rng, n, GROWN, sd=0.20), 0.10),
    "weekly +20%/week, sd 10%": lambda rng, n: grown(steady(rng, n, GROWN, sd=0.10), 0.20),
    "weekly +5%/week, sd 10%": lambda rng, n: grown(steady(rng, n, GROWN, sd=0.10), 0.05),
    "stationary +10%/week, sd 5%": lambda rng, n: grown(steady(rng, n, GROWN, weekly=False), 0.10),
    "weekly step +30%, sd 10%": lambda rng, n: grown(steady(rng, n, GROWN, sd=0.10), step=0.30),
    "weekly AR(1) 0.5 +10%/week, sd 10%": lambda rng, n: grown(steady(rng, n, GROWN, sd=0.10, rho=0.5), 0.10),
}
# ... and growth over the whole window, judged on its last day.
SUSTAINED: dict[str, Callable[[Rng, int], np.ndarray]] = {
    "weekly +10%/week over the whole window, sd 10%":
        lambda rng, n: grown(steady(rng, n, WINDOW, sd=0.10), 0.10, onset=0),
}


# --- out-of-sync seconds a day: 0 .. 86,400 for a partition, a sum over partitions for a topic

DAY_S = 86_400.0


def capped(y: np.ndarray) -> np.ndarray:
    return np.minimum(y, DAY_S)


def oos_steady(rng: Rng, n: int, days: int = DAYS, *, level: float = 3_600.0, sd: float = 0.10,
               rho: float = 0.0) -> np.ndarray:
    """A partition out of sync for about `level` seconds a day, with the weekly shape."""
    return capped(steady(rng, n, days, sd=sd, rho=rho, level=level))


def incidents(rng: Rng, n: int, days: int = DAYS, share: float = 0.05, low: float = 600.0,
              high: float = 20_000.0) -> np.ndarray:
    """In sync but on a share of days, then out of sync for `low`..`high` seconds (log-uniform:
    short incidents are the common ones)."""
    size = np.exp(rng.uniform(np.log(low), np.log(high), (n, days)))
    return np.round(np.where(rng.random((n, days)) < share, size, 0.0))


def minutes(rng: Rng, n: int, days: int = DAYS, mean: float = 180.0) -> np.ndarray:
    """Mostly in sync: a few minutes out of sync a day (exponential, mean `mean` seconds), none on
    a quarter of the days."""
    return np.round(np.where(rng.random((n, days)) < 0.25, 0.0, rng.exponential(mean, (n, days))))


def topic_of(make: Callable[[Rng, int, int], np.ndarray], partitions: int) -> Callable[[Rng, int, int], np.ndarray]:
    """A topic's row: the sum of `partitions` partitions' seconds."""
    return lambda rng, n, days=DAYS: make(rng, n * partitions, days).reshape(n, partitions, days).sum(axis=1)


def oos_grown(y: np.ndarray, per_week: float | None = None, step: float | None = None) -> np.ndarray:
    return capped(grown(y, per_week, step))


OOS_STEADY: dict[str, Callable[[Rng, int], np.ndarray]] = {
    "3,600 s/day weekly sd 10%": lambda rng, n: oos_steady(rng, n),
    "1,800 s/day weekly sd 20%": lambda rng, n: oos_steady(rng, n, level=1_800.0, sd=0.20),
    "7,200 s/day weekly AR(1) 0.8 sd 5%": lambda rng, n: oos_steady(rng, n, level=7_200.0, sd=0.05, rho=0.8),
    "80,000 s/day sd 10% (capped at 86,400)": lambda rng, n: oos_steady(rng, n, level=80_000.0),
    "incidents: 5% of days 600-20,000 s": incidents,
    "incidents: 20% of days 600-20,000 s": lambda rng, n: incidents(rng, n, share=0.20),
    "minutes: mean 180 s/day": minutes,
    "minutes: mean 600 s/day": lambda rng, n: minutes(rng, n, mean=600.0),
    "topic of 20 incident partitions": lambda rng, n: topic_of(incidents, 20)(rng, n),
    "topic of 20 minutes partitions": lambda rng, n: topic_of(minutes, 20)(rng, n),
}
OOS_GROWING: dict[str, Callable[[Rng, int], np.ndarray]] = {
    "3,600 s/day sd 10% +10%/week": lambda rng, n: oos_grown(oos_steady(rng, n, GROWN), 0.10),
    "1,800 s/day sd 20% +10%/week": lambda rng, n: oos_grown(oos_steady(rng, n, GROWN, level=1_800.0, sd=0.20), 0.10),
    "7,200 s/day sd 10% +10%/week": lambda rng, n: oos_grown(oos_steady(rng, n, GROWN, level=7_200.0), 0.10),
    "14,400 s/day sd 10% +10%/week": lambda rng, n: oos_grown(oos_steady(rng, n, GROWN, level=14_400.0), 0.10),
    "3,600 s/day sd 10% step +30%": lambda rng, n: oos_grown(oos_steady(rng, n, GROWN), step=0.30),
    "minutes 180 s/day step x5": lambda rng, n: oos_grown(minutes(rng, n, GROWN), step=4.0),
    "minutes 180 s/day +10%/week": lambda rng, n: oos_grown(minutes(rng, n, GROWN), 0.10),
}


def run(n: int, seed: int, rule: Rule = growing, steady_kinds: dict[str, Callable[[Rng, int], np.ndarray]] = STEADY,
        growing_kinds: dict[str, Callable[[Rng, int], np.ndarray]] = GROWING) -> tuple[dict[str, float], dict[str, Detection]]:
    """False-alarm share per steady series kind and detection per growing kind, n series each."""
    rng = np.random.default_rng(seed)
    fa = {name: false_alarms(make(rng, n), rule) for name, make in steady_kinds.items()}
    det = {name: detection(make(rng, n), rule) for name, make in growing_kinds.items()}
    return fa, det


def sustained(n: int, seed: int, rule: Rule = growing) -> dict[str, float]:
    """Share of each SUSTAINED kind's series flagged on the window's last day."""
    rng = np.random.default_rng(seed)
    return {name: float(rule(make(rng, n)).growing.mean()) for name, make in SUSTAINED.items()}


def run_seconds(n: int, seed: int, rule: Rule = growing_seconds) -> tuple[dict[str, float], dict[str, Detection]]:
    """run() on the out-of-sync-seconds kinds."""
    return run(n, seed, rule, OOS_STEADY, OOS_GROWING)
