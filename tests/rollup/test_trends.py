"""Trends on daily tables written by hand: slopes and t-statistics against numpy's least squares,
`growing` and `out_of_sync_growing` with their parts against trend_rule's numpy reference on the
same series."""

from __future__ import annotations

import math
from datetime import date, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mirrorlag.rollup import trend_rule
from mirrorlag.rollup.trends import compute_trends

DAY = date(2024, 5, 31)
NOISE = [0, 30, -20, 10, -40, 25, -10, 5, 15, -30]
NOISY = [300, 420, 250, 380, 260, 390, 270, 300, 350, 310]
WEEK = [1.0, 1.05, 1.1, 1.15, 1.2, 0.6, 0.6]
MONTH = [DAY - timedelta(days=27 - k) for k in range(28)]
WINDOW = [DAY - timedelta(days=trend_rule.WINDOW - 1 - k) for k in range(trend_rule.WINDOW)]  # 8 weeks
RNG = np.random.default_rng(32)


def _weekly(level: float, per_week: float = 0.0, sd: float = 0.05) -> list[float]:
    """8 weeks of a weekly shape ending on a Friday (the day the old rule flagged most)."""
    return [round(level * WEEK[(k + 5) % 7] * (1 + per_week) ** (k / 7) * (1 + RNG.normal(0, sd))) for k in range(56)]


# Partitions judged by the growth rule (8 weeks): name -> p95 per day of WINDOW (None: no row).
RULE_SERIES: dict[int, list[float | None]] = {
    10: _weekly(10_000),  # a steady weekly shape: not growing
    11: _weekly(10_000, per_week=0.10),  # +10 % a week
    12: [0.0] * 54 + [1.0, 1.0],  # the 0,0,0,0,0,1,1 of issue 32: +1 record is no growth
    13: [None if k % 6 == 0 else v for k, v in enumerate(_weekly(10_000, per_week=0.15))],  # days missing
    14: [5000.0] * 49 + [5000.0, 5000.0, 5000.0, 5000.0, 5000.0, 5000.0, 40_000.0],  # one incident day
    15: [5000.0] * 49 + [6000.0] * 7,  # a step of +20 %
    16: [None] * 35 + [1000.0] * 14 + [2000.0] * 7,  # three weeks of history: too few to know the noise
}
# Partitions judged on out-of-sync seconds (p95 a flat 100 records): name -> seconds per day.
OOS_RULE_SERIES: dict[int, list[float | None]] = {
    20: _weekly(3_600, sd=0.10),  # an hour a day with a weekly shape: not growing
    21: [3_600.0] * 49 + [4_680.0] * 7,  # a step of +30 % (+1,080 s)
    22: [180.0] * 49 + [360.0] * 7,  # minutes a day doubled: +180 s is under the 600 s floor
    23: [None if k % 6 == 0 else v for k, v in enumerate(_weekly(7_200, per_week=0.15))],  # days missing
    24: [3_600.0] * 55 + [40_000.0],  # one incident day
    25: [86_400.0] * 56,  # out of sync all day, every day: capped, nothing to grow
    26: [0.0] * 49 + [900.0] * 7,  # in sync for 7 weeks, then 15 minutes a day: ratio inf
    # A topic's incidents on 6 of 21 days (the same 3 weeks again before them), then incidents on
    # 3 of 7: a week that holds a few more incidents is not growth (under MIN_UP days up).
    27: [0.0, 12_000.0, 0.0, 0.0, 3_000.0, 0.0, 0.0, 0.0, 0.0, 15_000.0, 0.0, 0.0, 2_000.0, 0.0, 0.0, 9_000.0,
         0.0, 0.0, 0.0, 4_000.0, 0.0] * 2 + [0.0, 12_000.0, 0.0, 0.0, 3_000.0, 0.0, 0.0]
        + [6_000.0, 0.0, 9_000.0, 0.0, 0.0, 0.0, 6_000.0],
}


def _series() -> dict[int, dict[date, tuple[float, float]]]:
    """partition -> {day: (p95 record lag, out-of-sync seconds)}"""
    days = [DAY - timedelta(days=9 - k) for k in range(10)]
    return {
        0: {d: (1000 + 500 * k + NOISE[k % 10], 60.0 * k) for k, d in enumerate(MONTH)},  # growing
        1: {**{d: (200, 0.0) for d in days}, DAY - timedelta(days=30): (10**9, 0.0)},  # flat; old outlier outside 28 d
        2: {d: (NOISY[k], 10.0) for k, d in enumerate(days)},  # noise, no trend
        3: {DAY - timedelta(days=2 - k): (100 + 100 * k, 0.0) for k in range(3)},  # steep but only 3 days
        4: {d: (50, 5.0) for d in days if d != DAY - timedelta(days=1)},  # yesterday missing
        5: {DAY - timedelta(days=1): (999, 1.0)},  # not there today: no trend row
        **{p: {d: (v, 0.0) for d, v in zip(WINDOW, values) if v is not None} for p, values in RULE_SERIES.items()},
        **{p: {d: (100, v) for d, v in zip(WINDOW, values) if v is not None} for p, values in OOS_RULE_SERIES.items()},
    }


def _write(out: Path) -> None:
    data = _series()
    rows: dict[date, list[dict]] = {}
    for p, by_day in data.items():
        for d, (p95, oos) in by_day.items():
            rows.setdefault(d, []).append({"source": "A", "target": "B", "topic": "t", "partition": p,
                                           "record_lag_p95": int(p95), "out_of_sync_seconds": float(oos)})
    for d, rs in rows.items():
        for level, keys in (("partition", ["source", "target", "topic", "partition"]), ("topic", ["source", "target", "topic"]),
                            ("flow", ["source", "target"])):
            directory = out / f"{level}_daily" / f"date={d.isoformat()}"
            sel = rs if level == "partition" else [r for r in rs if r["partition"] == 0]  # topic, flow: partition 0's
            if not sel:
                continue
            directory.mkdir(parents=True, exist_ok=True)
            table = pa.Table.from_pylist([{k: r[k] for k in keys + ["record_lag_p95", "out_of_sync_seconds"]} for r in sel])
            pq.write_table(table, directory / "part-0.parquet")


def _numpy_fit(values: list[float]) -> tuple[float, float]:
    """Least-squares slope per day and its t-statistic (x: day index)."""
    y = np.array(values, dtype=float)
    x = np.arange(len(y), dtype=float) - (len(y) - 1)
    slope, intercept = np.polyfit(x, y, 1)
    sse = float(np.sum((y - (slope * x + intercept)) ** 2))
    se = math.sqrt(sse / (len(y) - 2) / float(np.sum((x - x.mean()) ** 2)))
    return slope, (slope / se if se > 0 else math.inf)


@pytest.fixture(scope="module")
def trend_rows(spark, tmp_path_factory):
    out = tmp_path_factory.mktemp("rollup-trends")
    _write(out)
    rows = [r.asDict() for r in compute_trends(spark, str(out), DAY).collect()]
    return {(r["level"], r["partition"]): r for r in rows}


def test_growing_lag(trend_rows):
    r = trend_rows[("partition", 0)]
    p95 = [1000 + 500 * k + NOISE[k % 10] for k in range(28)]
    slope7, t7 = _numpy_fit(p95[-7:])
    slope28, t28 = _numpy_fit(p95)
    assert r["slope_7d"] == pytest.approx(slope7) and r["slope_7d_t"] == pytest.approx(t7)
    assert r["slope_28d"] == pytest.approx(slope28) and r["slope_28d_t"] == pytest.approx(t28)
    assert slope28 == pytest.approx(500, rel=0.02)
    assert (r["days_7d"], r["days_28d"], r["growing"]) == (7, 28, True)
    assert r["record_lag_p95"] == p95[-1]
    assert r["record_lag_p95_dod"] == p95[-1] - p95[-2] and r["record_lag_p95_wow"] == p95[-1] - p95[-8]
    assert r["out_of_sync_seconds_dod"] == 60.0 and r["out_of_sync_seconds_wow"] == 7 * 60.0


def test_flat_lag_has_zero_slope_and_no_t(trend_rows):
    r = trend_rows[("partition", 1)]
    assert r["slope_7d"] == 0.0 and r["slope_28d"] == 0.0  # the outlier 30 days back is outside
    assert r["slope_28d_t"] is None and r["growing"] is False
    assert r["days_28d"] == 10


def test_ten_days_are_too_few_to_judge_growth(trend_rows):
    r = trend_rows[("partition", 2)]  # 10 days: a slope, but no 2 earlier weeks to compare with
    assert r["days_28d"] == 10 and r["compared_7d"] == 0 and r["change_7d"] is None and r["growing"] is False


def test_noise_is_not_growth(trend_rows):
    r = trend_rows[("partition", 2)]
    slope7, t7 = _numpy_fit(NOISY[-7:])
    slope28, t28 = _numpy_fit(NOISY)
    assert max(t7, t28) < 2  # the data really has no significant trend
    assert r["slope_7d_t"] == pytest.approx(t7) and r["slope_28d_t"] == pytest.approx(t28)
    assert r["growing"] is False


def test_three_days_are_not_enough(trend_rows):
    r = trend_rows[("partition", 3)]
    assert r["slope_7d"] == pytest.approx(100.0)
    assert r["slope_7d_t"] == math.inf  # a perfect line ...
    assert r["days_7d"] == 3 and r["growing"] is False  # ... over fewer than 4 days
    assert r["record_lag_p95_wow"] is None


def test_missing_days(trend_rows):
    r = trend_rows[("partition", 4)]
    assert r["record_lag_p95_dod"] is None and r["record_lag_p95_wow"] == 0
    assert r["days_7d"] == 6
    assert ("partition", 5) not in trend_rows  # no row today, no trend


def test_topic_and_flow_levels(trend_rows):
    for level in ("topic", "flow"):
        r = trend_rows[(level, None)]
        assert r["growing"] is True and r["slope_28d"] == pytest.approx(trend_rows[("partition", 0)]["slope_28d"])
    assert trend_rows[("flow", None)]["topic"] is None and trend_rows[("topic", None)]["topic"] == "t"
    assert all(str(r["date"]) == DAY.isoformat() for r in trend_rows.values())


def _window(p: int, measure: int) -> np.ndarray:
    """The partition's 8 weeks of one measure (0: p95 record lag, 1: out-of-sync seconds) as
    written; nan: no row."""
    by_day = _series()[p]
    return np.array([by_day[d][measure] if d in by_day else np.nan for d in WINDOW], dtype=float)


@pytest.mark.parametrize("p", sorted(RULE_SERIES) + sorted(OOS_RULE_SERIES))
@pytest.mark.parametrize("measure, prefix, min_change", [
    (0, "", trend_rule.MIN_CHANGE), (1, "out_of_sync_", trend_rule.MIN_CHANGE_SECONDS)])
def test_growth_equals_the_numpy_rule(trend_rows, p, measure, prefix, min_change):
    """Spark's growth figures and flag are trend_rule.judge's on the same 8 weeks, per measure
    (its own minimum change)."""
    r = {k[len(prefix):]: v for k, v in trend_rows[("partition", p)].items() if k.startswith(prefix)}
    ref = trend_rule.judge(_window(p, measure), min_change)
    assert r["compared_7d"] == int(ref.days) and r["up_7d"] == int(ref.up) and r["weeks_7d"] == int(ref.weeks)
    for name, field in (("change_7d", "change"), ("change_7d_ratio", "ratio"), ("noise_7d", "noise"),
                        ("score_7d", "score"), ("needed_7d", "needed"), ("daily_noise_7d", "daily_noise")):
        v = float(getattr(ref, field))
        if np.isnan(v):
            assert r[name] is None, name
        else:
            assert r[name] == pytest.approx(v, rel=1e-6, abs=1e-9), name  # summed in another order
    assert r["rising_7d"] is bool(ref.rising) and r["growing"] is bool(ref.growing)


def test_growth_verdicts(trend_rows):
    """What the series above are meant to show (the equality test alone would pass a wrong rule)."""
    growing = {p: trend_rows[("partition", p)]["growing"] for p in RULE_SERIES}
    assert growing == {10: False, 11: True, 12: False, 13: True, 14: False, 15: True, 16: False}
    assert trend_rows[("partition", 12)]["change_7d"] < 1  # under 100 records
    assert trend_rows[("partition", 15)]["change_7d_ratio"] == pytest.approx(0.2)


def test_out_of_sync_growth_verdicts(trend_rows):
    """Out-of-sync seconds: growth past 600 s a day and 10 %, not minutes, one incident, the cap or
    a week holding a few more incidents; `growing` stays the p95 rule's."""
    growing = {p: trend_rows[("partition", p)]["out_of_sync_growing"] for p in OOS_RULE_SERIES}
    assert growing == {20: False, 21: True, 22: False, 23: True, 24: False, 25: False, 26: True, 27: False}
    assert not any(trend_rows[("partition", p)]["growing"] for p in OOS_RULE_SERIES)
    assert not any(trend_rows[("partition", p)]["out_of_sync_growing"] for p in RULE_SERIES)
    assert trend_rows[("partition", 21)]["out_of_sync_change_7d"] == pytest.approx(1_080.0)
    assert trend_rows[("partition", 26)]["out_of_sync_change_7d_ratio"] == math.inf
    assert trend_rows[("topic", None)]["out_of_sync_growing"] is True  # partition 0's 60 s more a day
