"""Daily p95 record-lag series for measuring the trend rule (trend_rule.py): how often it calls a
steady series growing (false alarms, per partition-day) and how soon it sees real growth.

Numpy only, seeded. A series is `level × weekly shape × (1 + noise)` per day, noise normal with
standard deviation `sd` ("±10 %" here: sd 5 %, 95 % of days within ±10 %), independent or AR(1)
with that marginal sd; growth multiplies from `onset` on. Every window the rule reads is judged,
from the 7th day of a series on (a young history: the days before it are missing).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from mirrorlag.rollup.trend_rule import WINDOW, judge

LEVEL = 10_000.0  # records: MIN_CHANGE (100) is 1 % of it, so the relative rule decides
WEEK = np.array([1.0, 1.05, 1.1, 1.15, 1.2, 0.6, 0.6])  # Monday .. Sunday
DAYS = 84  # a steady series: 12 weeks
ONSET = 42  # a growing one: 6 steady weeks, then growth
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
           level: float = LEVEL) -> np.ndarray:
    y = np.full((n, days), level)
    if weekly:  # each series starts on a random weekday
        y = y * WEEK[(np.arange(days)[None, :] + rng.integers(0, 7, n)[:, None]) % 7]
    return np.round(y * np.clip(1 + noise(rng, n, days, sd, rho), 0.05, None))


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


Rule = Callable[[np.ndarray], np.ndarray]  # (..., 28) windows -> flagged


def growing(windows: np.ndarray) -> np.ndarray:
    return judge(windows).growing


def flags(y: np.ndarray, rule: Rule = growing) -> np.ndarray:
    """(series, day) -> flagged that day, for every day from the 7th on (the days before the
    series are missing)."""
    padded = np.concatenate([np.full((y.shape[0], WINDOW - 1), np.nan), y], axis=1)
    return rule(sliding_window_view(padded, WINDOW, axis=1))[:, 6:]


def false_alarms(y: np.ndarray, rule: Rule = growing) -> float:
    """Share of partition-days flagged."""
    return float(flags(y, rule).mean())


@dataclass(frozen=True)
class Detection:
    within: float  # share of series flagged on one of the first WITHIN days of growth
    median_delay: float  # days from the onset (day 1: the first grown day) to the first flag
    p90_delay: float  # inf: more than a tenth never flagged in AFTER days
    before: float  # share of series flagged before the onset (false alarms)


def detection(y: np.ndarray, rule: Rule = growing, onset: int = ONSET) -> Detection:
    f = flags(y, rule)
    t = np.arange(6, y.shape[1]) - onset + 1  # the day of growth each column judges
    after = f & (t >= 1)[None, :]
    first = np.where(after.any(axis=1), t[np.argmax(after, axis=1)], np.inf)
    return Detection(float(np.mean(first <= WITHIN)), float(np.median(first)), float(np.quantile(first, 0.9)),
                     float(np.mean((f & (t < 1)[None, :]).any(axis=1))))


# The suite: name -> series maker (rng, n). Steady ones for false alarms ...
STEADY: dict[str, Callable[[Rng, int], np.ndarray]] = {
    "stationary sd 5%": lambda rng, n: steady(rng, n, weekly=False),
    "weekly sd 5%": lambda rng, n: steady(rng, n),
    "weekly sd 10%": lambda rng, n: steady(rng, n, sd=0.10),
    "weekly sd 20%": lambda rng, n: steady(rng, n, sd=0.20),
    "weekly AR(1) 0.5": lambda rng, n: steady(rng, n, rho=0.5),
    "weekly AR(1) 0.8": lambda rng, n: steady(rng, n, rho=0.8),
    "weekly, 1% incident days x3": spiky,
    "weekly, 10% days missing": gappy,
    "low level 200 sd 10%": lambda rng, n: steady(rng, n, sd=0.10, level=200.0),
    "sparse: 85% zero": sparse,
    "bursty: 90% zero": bursty,
}
# ... and growing ones for detection.
GROWING: dict[str, Callable[[Rng, int], np.ndarray]] = {
    "stationary +10%/week": lambda rng, n: grown(steady(rng, n, ONSET + AFTER, weekly=False), 0.10),
    "weekly +10%/week": lambda rng, n: grown(steady(rng, n, ONSET + AFTER), 0.10),
    "weekly step +30%": lambda rng, n: grown(steady(rng, n, ONSET + AFTER), step=0.30),
    "weekly AR(1) 0.5 +10%/week": lambda rng, n: grown(steady(rng, n, ONSET + AFTER, rho=0.5), 0.10),
    "weekly AR(1) 0.8 +10%/week": lambda rng, n: grown(steady(rng, n, ONSET + AFTER, rho=0.8), 0.10),
    "weekly sd 10% +10%/week": lambda rng, n: grown(steady(rng, n, ONSET + AFTER, sd=0.10), 0.10),
    "weekly +5%/week": lambda rng, n: grown(steady(rng, n, ONSET + AFTER), 0.05),
}


def run(n: int, seed: int, rule: Rule = growing) -> tuple[dict[str, float], dict[str, Detection]]:
    """False-alarm share per steady series kind and detection per growing kind, n series each."""
    rng = np.random.default_rng(seed)
    fa = {name: false_alarms(make(rng, n), rule) for name, make in STEADY.items()}
    det = {name: detection(make(rng, n), rule) for name, make in GROWING.items()}
    return fa, det
