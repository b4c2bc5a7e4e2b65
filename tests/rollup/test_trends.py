"""Trends on daily tables written by hand: slopes and t-statistics against numpy's least squares."""

from __future__ import annotations

import math
from datetime import date, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mirrorlag.rollup.trends import compute_trends

DAY = date(2024, 5, 31)
NOISE = [0, 30, -20, 10, -40, 25, -10, 5, 15, -30]
NOISY = [300, 420, 250, 380, 260, 390, 270, 300, 350, 310]


def _series() -> dict[int, dict[date, tuple[float, float]]]:
    """partition -> {day: (p95 record lag, out-of-sync seconds)}"""
    days = [DAY - timedelta(days=9 - k) for k in range(10)]
    return {
        0: {d: (1000 + 500 * k + NOISE[k], 60.0 * k) for k, d in enumerate(days)},  # growing
        1: {**{d: (200, 0.0) for d in days}, DAY - timedelta(days=30): (10**9, 0.0)},  # flat; old outlier outside 28 d
        2: {d: (NOISY[k], 10.0) for k, d in enumerate(days)},  # noise, no trend
        3: {DAY - timedelta(days=2 - k): (100 + 100 * k, 0.0) for k in range(3)},  # steep but only 3 days
        4: {d: (50, 5.0) for d in days if d != DAY - timedelta(days=1)},  # yesterday missing
        5: {DAY - timedelta(days=1): (999, 1.0)},  # not there today: no trend row
    }


def _write(out: Path) -> None:
    data = _series()
    rows: dict[date, list[dict]] = {}
    for p, by_day in data.items():
        for d, (p95, oos) in by_day.items():
            rows.setdefault(d, []).append({"source": "A", "target": "B", "topic": "t", "partition": p,
                                           "record_lag_p95": int(p95), "out_of_sync_seconds": oos})
    for d, rs in rows.items():
        for level, keys in (("partition", ["source", "target", "topic", "partition"]), ("topic", ["source", "target", "topic"]),
                            ("flow", ["source", "target"])):
            directory = out / f"{level}_daily" / f"date={d.isoformat()}"
            directory.mkdir(parents=True, exist_ok=True)
            sel = rs if level == "partition" else [rs[0]]  # one topic and flow row per day: partition 0's
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
    p95 = [1000 + 500 * k + NOISE[k] for k in range(10)]
    slope7, t7 = _numpy_fit(p95[-7:])
    slope28, t28 = _numpy_fit(p95)
    assert r["slope_7d"] == pytest.approx(slope7) and r["slope_7d_t"] == pytest.approx(t7)
    assert r["slope_28d"] == pytest.approx(slope28) and r["slope_28d_t"] == pytest.approx(t28)
    assert slope28 == pytest.approx(500, rel=0.02)
    assert (r["days_7d"], r["days_28d"], r["growing"]) == (7, 10, True)
    assert r["record_lag_p95"] == p95[-1]
    assert r["record_lag_p95_dod"] == p95[-1] - p95[-2] and r["record_lag_p95_wow"] == p95[-1] - p95[-8]
    assert r["out_of_sync_seconds_dod"] == 60.0 and r["out_of_sync_seconds_wow"] == 7 * 60.0


def test_flat_lag_has_zero_slope_and_no_t(trend_rows):
    r = trend_rows[("partition", 1)]
    assert r["slope_7d"] == 0.0 and r["slope_28d"] == 0.0  # the outlier 30 days back is outside
    assert r["slope_28d_t"] is None and r["growing"] is False
    assert r["days_28d"] == 10


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
