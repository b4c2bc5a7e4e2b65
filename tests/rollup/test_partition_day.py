"""The per-partition kernel on its own (no Spark): the edge cases a day's window pass had rules for."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa

from mirrorlag.rollup.partition_day import _CODE_BITS, _NULL_TS, summarise
from mirrorlag.rollup.schema import GONE, IN_SYNC, STALLED, STATE_CODES, UNRECOGNIZED

H = 3_600_000
START = 1_700_000_000_000 - 1_700_000_000_000 % (24 * H)
END = START + 24 * H
CAP = 60_000
LAGGING = STATE_CODES["LAGGING"]


def _bucket(v: int | None) -> int | None:
    return None if v is None else v if v < 100 else 100 + math.floor(math.log(v / 100) / math.log(1.01))


def _day(samples: list[tuple[int | None, int, int | None]]) -> dict:
    """samples: (ts_ms or None, state code, record lag or None); time lag = record lag * 10."""
    key = [((_NULL_TS if ts is None else ts) << _CODE_BITS) | (code + 1) for ts, code, _ in samples]
    lags = [lag for *_, lag in samples]
    tls = [None if lag is None else lag * 10 for lag in lags]
    return summarise(pa.array(key, pa.int64()), pa.array(lags, pa.int64()), pa.array([_bucket(v) for v in lags], pa.int64()),
                     pa.array(tls, pa.int64()), pa.array([_bucket(v) for v in tls], pa.int64()),
                     start_ms=START, end_ms=END, cap_ms=CAP).as_py()


def test_intervals_in_time_order_whatever_the_input_order():
    m = 60_000
    samples = [(START + 2 * m, STALLED, 5), (START, IN_SYNC, 1), (START + 3 * m, IN_SYNC, 2),
               (START + m, STALLED, 7), (START + 10 * m, GONE, None), (START + 4 * m, STALLED, 3)]
    day = _day(samples)
    # 0..1 in sync, 1..3 stalled (one episode), 3..4 in sync, 4..10 stalled (capped at 60 s), GONE: nothing.
    assert day["samples"] == 6
    assert day["covered_ms"] == 4 * m + CAP
    assert day["stalled_ms"] == 2 * m + CAP
    assert day["out_of_sync_ms"] == 2 * m + CAP
    assert (day["stall_episodes"], day["longest_stall_ms"]) == (2, 2 * m)
    assert (day["first_ms"], day["last_ms"]) == (START, START + 10 * m)
    assert day["hours_ms"][0] == 2 * m + CAP and sum(day["hours_ms"]) == 2 * m + CAP
    assert day == _day(list(reversed(samples)))


def test_null_times_come_first_and_account_for_the_cap_in_hour_zero():
    day = _day([(None, LAGGING, 1), (START + 23 * H + 59 * 60_000, IN_SYNC, 1), (None, UNRECOGNIZED, None)])
    assert day["covered_ms"] == 2 * CAP + 60_000  # the last sample runs to midnight (60 s)
    assert day["out_of_sync_ms"] == 2 * CAP
    assert day["covered_hours_ms"][0] == 2 * CAP and day["covered_hours_ms"][23] == 60_000
    assert day["unknown_state_samples"] == 1
    assert day["first_ms"] == day["last_ms"] == START + 23 * H + 59 * 60_000


def test_lag_figures_are_nearest_rank_within_one_percent_and_nulls_counted_apart():
    rng = np.random.default_rng(3)
    lags = rng.integers(0, 1_000_000, 997).tolist() + [None] * 3
    day = _day([(START + i * 15_000, IN_SYNC, lag) for i, lag in enumerate(lags)])
    known = np.array([v for v in lags if v is not None])
    assert day["null_record_lag_samples"] == day["null_time_lag_samples"] == 3
    assert (day["record_lag_min"], day["record_lag_max"]) == (known.min(), known.max())
    assert day["record_lag_avg"] == known.astype(float).sum() / known.size
    assert day["time_lag_max_s"] == known.max() * 10 / 1000.0
    for q in (50, 95, 99):
        exact = np.percentile(known, q, method="inverted_cdf")
        got = day[f"record_lag_p{q}"]
        assert got in known and exact <= got <= exact * 1.01
    hist = day["record_lag"]
    assert sum(hist["n"]) == 1000 and hist["bucket"][-1] is None and hist["n"][-1] == 3


def test_a_partition_without_lags_has_null_figures():
    day = _day([(START, IN_SYNC, None)])
    assert day["record_lag_min"] is None and day["record_lag_p99"] is None and day["time_lag_avg_s"] is None
    assert day["null_record_lag_samples"] == 1
    assert day["record_lag"] == {"bucket": [None], "n": [1], "vmin": [None], "vmax": [None], "vsum": [None]}
