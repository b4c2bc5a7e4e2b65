"""Daily series for measuring the rollup's "growing" rule, written without sight of the rule.

One value per day, oldest day first, n series at once: a maker is `make(rng, n, days)` and returns
a float array of shape (n, days). The caller runs the rule; this module only makes the series.

- `STEADY[name]`: no growth; every flag on them is a false alarm.
- `GROWING[name] = (make, onset)`: day index `onset` is the first grown day; onset = `ONSET` = 56
  (8 steady weeks) except the "sustained" family (onset 0, grown from day 0: judge its last day).
  Pass days >= `MIN_DAYS` (onset + 35, i.e. 5 grown weeks).
- `KIND[name]`: "records" (a day's p95 replication lag in records of one partition) or "seconds"
  (the seconds a day that partition was out of sync), so the caller picks the rule's units.

How a value is made (all families unless the family says otherwise):

    value[d] = level × shape[weekday(d)] × growth[d] × m[d]

- level: 10,000 records for the "records" families (well above the rule's ~100-record floor, so
  the relative test decides), 3,600 s/day for the "seconds" ones; it is the level of a shape-1 day.
- weekday(d) = (w0 + d) mod 7 with Monday = 0, and w0 drawn per series uniformly from 0..6:
  every series starts on its own random weekday.
- shape (per weekday Mon..Sun), named in the family:
  "flat" 1,1,1,1,1,1,1; "weekend x3" 1,1,1,1,1,3,3; "weekend x1/3" 1,1,1,1,1,1/3,1/3;
  "Friday x2" 1,1,1,1,2,1,1; "ramp Mon x1 to Fri x2" 1,1.25,1.5,1.75,2,1,1.
- m: multiplicative day-to-day noise, lognormal with mean 1 and standard deviation sd ("sd 10%"
  means sd(m) = 0.10): m = exp(s·z − s²/2) with s² = ln(1 + sd²), z ~ N(0, 1), so values stay
  > 0. "AR(1) rho r" makes z a stationary AR(1) (z[d] = r·z[d−1] + sqrt(1 − r²)·ε, z[0] ~ N(0,1)):
  the marginal sd of m is still sd, and ln m has lag-1 autocorrelation r. Otherwise z is i.i.d.
- growth: 1 before onset; "+g%/week" compounds daily from onset, growth[d] = (1 + g)^((d − onset
  + 1)/7) for d >= onset (×(1+g) after the first grown week, not a weekly staircase);
  "step +30%" is 1.3 from onset on.
- "seconds" families are capped at 86,400 s (a day).

Steady families (sd = noise sd as above, level 10,000 records unless said):
- "<shape>, sd 5% | 10% | 20%" for each shape above (flat, weekend x3, weekend x1/3, Friday x2,
  ramp Mon x1 to Fri x2): 15 families.
- "weekend x3, sd 10%, monthly day x5" and "... monthly day x0.2": additionally, every 30th day
  from a random phase in 0..29 (per series) is ×5 (a month-end job) or ×0.2 (a monthly holiday).
- "weekend x3, sd 10%, outage days 2% x10-50": each day independently with probability 0.02 is
  ×U(10, 50) (a stall that day).
- "weekend x3, sd 10%, level drop to 30-80%": from a day drawn uniformly in 1..days−1 on, the
  level is ×U(0.3, 0.8) (one draw per series) and stays there.
- "weekend x3, AR(1) rho 0.5 | 0.8, sd 10% | 20%": noise as above, four families.
- "weekend x3, sd 10%, one day x5" and "... one day x50": exactly one day per series, uniform in
  0..days−1, is ×5 or ×50.
- "level 200, weekend x3, Poisson": Poisson(200 × shape) records, no other noise (integers).
- "level 200, flat, sd 20%, rounded": round(200 × m), m with sd 20% (integers).
- "sparse, 20% of days 1+Poisson(4)": each day independently 0 with probability 0.8, else
  1 + Poisson(4) records (integers).
- "out-of-sync incidents, 5% of days 600-20000 s" (seconds): each day independently 0 with
  probability 0.95, else log-uniform in [600, 20,000] s.
- "out-of-sync 3600 s/day, weekend x3, sd 10%" (seconds): level 3,600 s, capped at 86,400.
- "weekend x3, sd 10%, 10% days missing": each day independently nan with probability 0.1 (the
  only family with nan).

Growing families (weekend x3 shape, onset 56 unless said):
- "weekend x3, +10%/week, sd 5% | 10% | 20%", "weekend x3, +20%/week, sd 10%",
  "weekend x3, +5%/week, sd 10%", "weekend x3, +10%/week, AR(1) rho 0.5, sd 10%",
  "weekend x3, step +30%, sd 10%" (records, level 10,000).
- "weekend x3, sustained +10%/week from day 0, sd 10%": onset 0, growth over the whole series.
- "out-of-sync 3600 s/day, weekend x3, +10%/week, sd 10%" and "... +20%/week ..." (seconds,
  level 3,600 s, capped at 86,400).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

Rng = np.random.Generator
Maker = Callable[[Rng, int, int], np.ndarray]

ONSET = 56
MIN_DAYS = ONSET + 35
LEVEL = 10_000.0  # records: a p95 lag far above the rule's absolute floor
OOS_LEVEL = 3_600.0  # seconds out of sync per day
DAY_S = 86_400.0

SHAPES: dict[str, tuple[float, ...]] = {  # Monday .. Sunday
    "flat": (1, 1, 1, 1, 1, 1, 1),
    "weekend x3": (1, 1, 1, 1, 1, 3, 3),
    "weekend x1/3": (1, 1, 1, 1, 1, 1 / 3, 1 / 3),
    "Friday x2": (1, 1, 1, 1, 2, 1, 1),
    "ramp Mon x1 to Fri x2": (1, 1.25, 1.5, 1.75, 2, 1, 1),
}


def weekly(rng: Rng, n: int, days: int, shape: str) -> np.ndarray:
    """(n, days) shape factors; each series starts on its own weekday so no weekday is favoured."""
    start = rng.integers(0, 7, size=(n, 1))
    return np.asarray(SHAPES[shape])[(start + np.arange(days)) % 7]


def noise(rng: Rng, n: int, days: int, sd: float, rho: float = 0.0) -> np.ndarray:
    """Lognormal factors, mean 1 and sd `sd`; ln of them AR(1) with lag-1 correlation `rho`."""
    s = np.sqrt(np.log1p(sd * sd))
    z = rng.standard_normal((n, days))
    if rho:
        inno = np.sqrt(1 - rho * rho)  # keeps every z[d] ~ N(0, 1): the stated sd is the marginal one
        for d in range(1, days):
            z[:, d] = rho * z[:, d - 1] + inno * z[:, d]
    return np.exp(s * z - s * s / 2)


def growth(days: int, onset: int, rate: float = 0.0, step: float = 1.0) -> np.ndarray:
    """(days,) factors: 1 before onset; from onset (1 + rate)^((d − onset + 1)/7) × step."""
    k = np.arange(days) - onset + 1
    return np.where(k > 0, step * (1 + rate) ** (np.maximum(k, 0) / 7), 1.0)


def _base(rng: Rng, n: int, days: int, shape: str = "weekend x3", sd: float = 0.10,
          rho: float = 0.0, level: float = LEVEL) -> np.ndarray:
    return level * weekly(rng, n, days, shape) * noise(rng, n, days, sd, rho)


def _plain(shape: str, sd: float, rho: float = 0.0) -> Maker:
    return lambda rng, n, days: _base(rng, n, days, shape, sd, rho)


def _monthly(mult: float) -> Maker:
    def make(rng: Rng, n: int, days: int) -> np.ndarray:
        v = _base(rng, n, days)
        phase = rng.integers(0, 30, size=(n, 1))
        v[(np.arange(days) - phase) % 30 == 0] *= mult
        return v
    return make


def _outages(rng: Rng, n: int, days: int) -> np.ndarray:
    v = _base(rng, n, days)
    hit = rng.random((n, days)) < 0.02
    return np.where(hit, v * rng.uniform(10, 50, (n, days)), v)


def _level_drop(rng: Rng, n: int, days: int) -> np.ndarray:
    v = _base(rng, n, days)
    at = rng.integers(1, max(days, 2), size=(n, 1))
    to = rng.uniform(0.3, 0.8, size=(n, 1))
    return v * np.where(np.arange(days) >= at, to, 1.0)


def _one_day(mult: float) -> Maker:
    def make(rng: Rng, n: int, days: int) -> np.ndarray:
        v = _base(rng, n, days)
        v[np.arange(n), rng.integers(0, days, n)] *= mult
        return v
    return make


def _poisson_200(rng: Rng, n: int, days: int) -> np.ndarray:
    return rng.poisson(200 * weekly(rng, n, days, "weekend x3")).astype(float)


def _rounded_200(rng: Rng, n: int, days: int) -> np.ndarray:
    return np.round(200 * noise(rng, n, days, 0.20))


def _sparse(rng: Rng, n: int, days: int) -> np.ndarray:
    some = rng.random((n, days)) < 0.2
    return np.where(some, 1 + rng.poisson(4, (n, days)), 0).astype(float)


def _incidents(rng: Rng, n: int, days: int) -> np.ndarray:
    hit = rng.random((n, days)) < 0.05
    return np.where(hit, np.exp(rng.uniform(np.log(600), np.log(20_000), (n, days))), 0.0)


def _oos(rate: float = 0.0, onset: int = ONSET) -> Maker:
    def make(rng: Rng, n: int, days: int) -> np.ndarray:
        if rate and days <= onset:
            raise ValueError(f"days={days} has no day at or after onset {onset}")
        return np.minimum(_base(rng, n, days, level=OOS_LEVEL) * growth(days, onset, rate), DAY_S)
    return make


def _missing(rng: Rng, n: int, days: int) -> np.ndarray:
    v = _base(rng, n, days)
    v[rng.random((n, days)) < 0.1] = np.nan
    return v


def _growing(rate: float = 0.0, sd: float = 0.10, rho: float = 0.0, step: float = 1.0,
             onset: int = ONSET) -> Maker:
    def make(rng: Rng, n: int, days: int) -> np.ndarray:
        if days <= onset:  # a "growing" series with no grown day would be a silent steady one
            raise ValueError(f"days={days} has no day at or after onset {onset}")
        return _base(rng, n, days, sd=sd, rho=rho) * growth(days, onset, rate, step)
    return make


def _pct(x: float) -> str:
    return f"{x * 100:g}%"


STEADY: dict[str, Maker] = {
    **{f"{shape}, sd {_pct(sd)}": _plain(shape, sd) for shape in SHAPES for sd in (0.05, 0.10, 0.20)},
    "weekend x3, sd 10%, monthly day x5": _monthly(5.0),
    "weekend x3, sd 10%, monthly day x0.2": _monthly(0.2),
    "weekend x3, sd 10%, outage days 2% x10-50": _outages,
    "weekend x3, sd 10%, level drop to 30-80%": _level_drop,
    **{f"weekend x3, AR(1) rho {rho:g}, sd {_pct(sd)}": _plain("weekend x3", sd, rho)
       for rho in (0.5, 0.8) for sd in (0.10, 0.20)},
    "weekend x3, sd 10%, one day x5": _one_day(5.0),
    "weekend x3, sd 10%, one day x50": _one_day(50.0),
    "level 200, weekend x3, Poisson": _poisson_200,
    "level 200, flat, sd 20%, rounded": _rounded_200,
    "sparse, 20% of days 1+Poisson(4)": _sparse,
    "out-of-sync incidents, 5% of days 600-20000 s": _incidents,
    "out-of-sync 3600 s/day, weekend x3, sd 10%": _oos(),
    "weekend x3, sd 10%, 10% days missing": _missing,
}

GROWING: dict[str, tuple[Maker, int]] = {
    **{f"weekend x3, +10%/week, sd {_pct(sd)}": (_growing(0.10, sd), ONSET) for sd in (0.05, 0.10, 0.20)},
    "weekend x3, +20%/week, sd 10%": (_growing(0.20), ONSET),
    "weekend x3, +5%/week, sd 10%": (_growing(0.05), ONSET),
    "weekend x3, +10%/week, AR(1) rho 0.5, sd 10%": (_growing(0.10, rho=0.5), ONSET),
    "weekend x3, step +30%, sd 10%": (_growing(step=1.3), ONSET),
    "weekend x3, sustained +10%/week from day 0, sd 10%": (_growing(0.10, onset=0), 0),
    "out-of-sync 3600 s/day, weekend x3, +10%/week, sd 10%": (_oos(0.10), ONSET),
    "out-of-sync 3600 s/day, weekend x3, +20%/week, sd 10%": (_oos(0.20), ONSET),
}

KIND: dict[str, str] = {
    name: "seconds" if name.startswith("out-of-sync") else "records" for name in (*STEADY, *GROWING)
}
