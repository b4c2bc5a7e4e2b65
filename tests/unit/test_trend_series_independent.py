"""The independent trend-series generator makes what its docstring says: shapes, noise, AR(1),
growth from the onset, the odd days. Expected numbers are written out here from the docstring,
not read from the module's tables, so a change to the module's constants fails these tests."""

from __future__ import annotations

import numpy as np
import pytest

from tests.sim.trend_series_independent import GROWING, KIND, MIN_DAYS, ONSET, STEADY

ALL = {**STEADY, **{name: make for name, (make, _) in GROWING.items()}}
WEEKS = 52
LONG = 7 * WEEKS  # long series: per-weekday means good to ~1-3 %

# Monday .. Sunday, from the docstring
SHAPE = {
    "flat": [1, 1, 1, 1, 1, 1, 1],
    "weekend x3": [1, 1, 1, 1, 1, 3, 3],
    "weekend x1/3": [1, 1, 1, 1, 1, 1 / 3, 1 / 3],
    "Friday x2": [1, 1, 1, 1, 2, 1, 1],
    "ramp Mon x1 to Fri x2": [1, 1.25, 1.5, 1.75, 2, 1, 1],
}


def make(name: str, n: int, days: int, seed: int = 1) -> np.ndarray:
    return ALL[name](np.random.default_rng(seed), n, days)


def fit_shape(v: np.ndarray, shape: list[float]) -> tuple[np.ndarray, np.ndarray]:
    """Per series, the rotation of `shape` (i.e. start weekday) that best fits its per-weekday
    means in log terms: returns the (n, days) expected shape factors and the chosen rotations."""
    n, days = v.shape
    prof = np.log(v[:, : days // 7 * 7].reshape(n, -1, 7).mean(axis=1))
    rots = np.log([np.roll(shape, -r) for r in range(7)])  # rots[r][c]: class c is weekday (r + c) % 7
    err = [((prof - prof.mean(1, keepdims=True)) - (rot - rot.mean())) ** 2 for rot in rots]
    best = np.argmin(np.sum(err, axis=2), axis=0)
    return np.exp(rots[best][:, np.arange(days) % 7]), best


def lag1(x: np.ndarray) -> float:
    x = x - x.mean(axis=1, keepdims=True)
    return float(np.sum(x[:, 1:] * x[:, :-1]) / np.sum(x * x))


def test_every_family_has_a_kind_and_the_grid_is_there() -> None:
    assert set(KIND) == set(ALL) and set(KIND.values()) == {"records", "seconds"}
    assert len(STEADY) == 31 and len(GROWING) == 10 and not set(STEADY) & set(GROWING)
    assert {o for _, o in GROWING.values()} == {ONSET, 0} and ONSET == 56 and MIN_DAYS == 91
    assert all(KIND[n] == "seconds" for n in ALL if "out-of-sync" in n)


@pytest.mark.parametrize("name", list(ALL))
def test_shape_values_and_determinism(name: str) -> None:
    v = make(name, 50, MIN_DAYS)
    assert v.shape == (50, MIN_DAYS) and v.dtype == np.float64
    missing = np.isnan(v)
    assert missing.any() == ("missing" in name)
    assert np.all(v[~missing] >= 0)
    if KIND[name] == "seconds":
        assert np.all(v[~missing] <= 86_400)
    np.testing.assert_array_equal(v, make(name, 50, MIN_DAYS))
    assert not np.array_equal(v, make(name, 50, MIN_DAYS, seed=2), equal_nan=True)


@pytest.mark.parametrize("shape", list(SHAPE))
@pytest.mark.parametrize("sd", [0.05, 0.10, 0.20])
def test_weekly_shape_level_and_noise_sd(shape: str, sd: float) -> None:
    v = make(f"{shape}, sd {sd * 100:g}%", 300, LONG)
    expected, start = fit_shape(v, SHAPE[shape])
    if shape != "flat":
        assert len(set(start)) == 7  # every series starts on its own random weekday
        odd = np.abs(np.log(expected)) > 0.01  # the days whose shape is not 1 (weekend, Friday, ramp)
        ratio = v[odd].mean() / v[~odd].mean() / (expected[odd].mean() / expected[~odd].mean())
        assert ratio == pytest.approx(1, abs=0.03)  # e.g. weekend mean = 3 × weekday mean
    m = v / (10_000 * expected)  # the multiplicative noise, if level and shape are as documented
    assert m.mean() == pytest.approx(1, abs=0.01)
    assert m.std() == pytest.approx(sd, rel=0.08)
    assert abs(lag1(np.log(m))) < 0.03


@pytest.mark.parametrize("rho", [0.5, 0.8])
@pytest.mark.parametrize("sd", [0.10, 0.20])
def test_ar1_log_residual_correlation_and_marginal_sd(rho: float, sd: float) -> None:
    v = make(f"weekend x3, AR(1) rho {rho:g}, sd {sd * 100:g}%", 300, LONG)
    expected, _ = fit_shape(v, SHAPE["weekend x3"])
    m = v / (10_000 * expected)
    assert lag1(np.log(m)) == pytest.approx(rho, abs=0.04)
    assert m.std() == pytest.approx(sd, rel=0.1)


def test_ar1_growing_family_is_correlated_too() -> None:
    v = make("weekend x3, +10%/week, AR(1) rho 0.5, sd 10%", 300, MIN_DAYS)[:, :ONSET]
    expected, _ = fit_shape(v, SHAPE["weekend x3"])
    assert lag1(np.log(v / expected)) == pytest.approx(0.5, abs=0.06)


# name -> (weekly rate, step) from the docstring
GROWTH = {
    "weekend x3, +10%/week, sd 5%": (0.10, 1.0),
    "weekend x3, +10%/week, sd 10%": (0.10, 1.0),
    "weekend x3, +10%/week, sd 20%": (0.10, 1.0),
    "weekend x3, +20%/week, sd 10%": (0.20, 1.0),
    "weekend x3, +5%/week, sd 10%": (0.05, 1.0),
    "weekend x3, +10%/week, AR(1) rho 0.5, sd 10%": (0.10, 1.0),
    "weekend x3, step +30%, sd 10%": (0.0, 1.3),
    "out-of-sync 3600 s/day, weekend x3, +10%/week, sd 10%": (0.10, 1.0),
    "out-of-sync 3600 s/day, weekend x3, +20%/week, sd 10%": (0.20, 1.0),
}


@pytest.mark.parametrize("name", list(GROWTH))
def test_growth_from_the_onset(name: str) -> None:
    rate, step = GROWTH[name]
    v = make(name, 2000, MIN_DAYS)
    before = v[:, :ONSET].mean()
    assert v[:, 28:ONSET].mean() / v[:, :28].mean() == pytest.approx(1, abs=0.02)  # steady before
    # the last grown week is days onset+28 .. onset+34, i.e. 29 .. 35 days of growth
    want = step * np.mean((1 + rate) ** (np.arange(29, 36) / 7))
    assert v[:, ONSET + 28 : ONSET + 35].mean() / before == pytest.approx(want, rel=0.03)
    # day `onset` is the first grown day: compare with the same weekday a week earlier
    assert v[:, ONSET].mean() / v[:, ONSET - 7].mean() == pytest.approx(step * (1 + rate) ** (1 / 7), abs=0.02)
    assert v[:, ONSET - 1].mean() / v[:, ONSET - 8].mean() == pytest.approx(1, abs=0.02)


def test_sustained_growth_from_day_zero() -> None:
    make_, onset = GROWING["weekend x3, sustained +10%/week from day 0, sd 10%"]
    assert onset == 0
    v = make_(np.random.default_rng(1), 2000, MIN_DAYS)
    assert v[:, -7:].mean() / v[:, :7].mean() == pytest.approx(1.1 ** ((MIN_DAYS - 7) / 7), rel=0.03)
    assert v[:, 7:14].mean() / v[:, :7].mean() == pytest.approx(1.1, abs=0.02)


@pytest.mark.parametrize("name", list(STEADY))
def test_steady_families_do_not_grow(name: str) -> None:
    v = make(name, 8000, MIN_DAYS)  # enough for the heavy-tailed ones (incidents, outages) too
    ratio = np.nanmean(v[:, ONSET:]) / np.nanmean(v[:, :ONSET])
    if "level drop" in name:
        assert ratio < 0.9
    else:
        assert ratio == pytest.approx(1, abs=0.05)


@pytest.mark.parametrize("name, above, count", [
    ("weekend x3, sd 10%, one day x5", True, {1}),
    ("weekend x3, sd 10%, one day x50", True, {1}),
    ("weekend x3, sd 10%, monthly day x5", True, {12, 13}),  # every 30th of 364 days
    ("weekend x3, sd 10%, monthly day x0.2", False, {12, 13}),
])
def test_odd_days_per_series(name: str, above: bool, count: set[int]) -> None:
    v = make(name, 300, LONG)
    # each day against the median of its series' same weekday: noise at sd 10 % never reaches 3x
    med = np.median(v.reshape(300, WEEKS, 7), axis=1)[:, np.arange(LONG) % 7]
    odd = v / med > 3 if above else v / med < 1 / 3
    assert set(odd.sum(axis=1)) <= count


def test_outage_days_and_missing_days_rates() -> None:
    v = make("weekend x3, sd 10%, outage days 2% x10-50", 300, LONG)
    med = np.median(v.reshape(300, WEEKS, 7), axis=1)[:, np.arange(LONG) % 7]
    ratio = v / med
    assert np.mean(ratio > 5) == pytest.approx(0.02, abs=0.003)
    assert ratio[ratio > 5].min() > 6 and ratio.max() < 80  # x10-50 on sd 10 % noise
    assert np.isnan(make("weekend x3, sd 10%, 10% days missing", 300, LONG)).mean() == pytest.approx(0.1, abs=0.005)


def test_low_level_count_families() -> None:
    for name, level in [("level 200, weekend x3, Poisson", 200 * 11 / 7), ("level 200, flat, sd 20%, rounded", 200),
                        ("sparse, 20% of days 1+Poisson(4)", 0.2 * 5)]:
        v = make(name, 300, LONG)
        assert np.array_equal(v, np.round(v)), name
        assert v.mean() == pytest.approx(level, rel=0.02), name
    sparse = make("sparse, 20% of days 1+Poisson(4)", 300, LONG)
    assert np.mean(sparse == 0) == pytest.approx(0.8, abs=0.01)
    oos = make("out-of-sync incidents, 5% of days 600-20000 s", 300, LONG)
    hit = oos[oos > 0]
    assert hit.size / oos.size == pytest.approx(0.05, abs=0.005)
    assert 600 <= hit.min() and hit.max() <= 20_000
    assert np.median(hit) == pytest.approx(np.sqrt(600 * 20_000), rel=0.1)  # log-uniform: geometric midpoint
    daily = make("out-of-sync 3600 s/day, weekend x3, sd 10%", 300, LONG)
    assert daily.mean() == pytest.approx(3600 * 11 / 7, rel=0.02)
