"""One partition's day in numpy: all the daily tables need from its samples, in one call.

Spark groups the day's samples by partition (samples.partition_days: the day's one shuffle) and
hands each partition's columns to `summarise` as Arrow arrays, in no particular order. Sorted by
(ts, state code) here, they give what a window over time order gave before, with the same rules
(documented in __init__.py): each sample accounts for the time to the partition's next sample,
at most max_gap_s, the day's last one to midnight; a GONE sample for none; a stall episode is a
run of consecutive STALLED samples. Null times sort first and account for max_gap_s, as Spark's
window did (least() skips nulls); they count in hour 0.

The lag histograms (histograms.py) come out of the same call, as (bucket, n, vmin, vmax, vsum)
rows for the topic and flow levels to merge, with the partition's own min/avg/max/percentiles
computed from them as histograms.stats does. The buckets themselves are computed by Spark
(histograms.bucket), so they come from the very doubles Spark's log gives. Sums are of
integer-valued doubles, exact below 2**53 whatever the order, so they equal Spark's own sums (a
day of one partition's lags is far below that).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pyarrow as pa
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DataType, DoubleType, LongType, StructField, StructType

from mirrorlag.rollup.histograms import PERCENTILES
from mirrorlag.rollup.schema import AT_RISK, GONE, IN_SYNC, STALLED, STATE_CODES, UNRECOGNIZED

HOURS = 24
HOUR_MS = 3_600_000
_CODE_BITS = 4  # state codes -1 .. 14 as code + 1
assert len(STATE_CODES) < (1 << _CODE_BITS) - 1
# Below any real time (Spark's timestamps span years 1-9999: |ms| < 2**58), and still
# room for the code bits.
_NULL_TS = -(1 << 58)

_HIST_FIELDS = {"bucket": LongType(), "n": LongType(), "vmin": LongType(), "vmax": LongType(), "vsum": DoubleType()}
# Columns of lists, not a list of rows: PySpark converts each partition's value through Python
# objects, and lists of structs cost 9 times as much (measured: 6.3 -> 0.7 ms a partition).
HISTOGRAM = StructType([StructField(name, ArrayType(t)) for name, t in _HIST_FIELDS.items()])
HISTOGRAM_FIELDS = list(_HIST_FIELDS)
_ARROW = {LongType(): pa.int64(), DoubleType(): pa.float64()}
SCALES = {"record_lag": 1.0, "time_lag": 1000.0}  # time lag in seconds, as the tables have it


def _stat_fields(measure: str) -> dict[str, DataType]:
    """The partition's figures of one measure, named as in the tables (histograms.stats)."""
    scale = SCALES[measure]
    value = LongType() if scale == 1.0 else DoubleType()
    names = [f"{measure}_{stat}{'' if scale == 1.0 else '_s'}" for stat in ("min", "avg", "max", *PERCENTILES)]
    return {**dict(zip(names, [value, DoubleType(), *[value] * 4])), f"null_{measure}_samples": LongType()}


_FIELDS: dict[str, DataType] = {
    "samples": LongType(), "covered_ms": LongType(), "out_of_sync_ms": LongType(), "at_risk_ms": LongType(),
    "stalled_ms": LongType(), "unknown_state_samples": LongType(), "first_ms": LongType(), "last_ms": LongType(),
    "hours_ms": ArrayType(LongType(), containsNull=False), "covered_hours_ms": ArrayType(LongType(), containsNull=False),
    "stall_episodes": LongType(), "longest_stall_ms": LongType(),
    **_stat_fields("record_lag"), "record_lag": HISTOGRAM,
    **_stat_fields("time_lag"), "time_lag": HISTOGRAM,
}
# What `summarise` returns per partition, as Spark sees it.
DAY = StructType([StructField(name, t) for name, t in _FIELDS.items()])
PER_PARTITION = [name for name, t in _FIELDS.items() if t is not HISTOGRAM]


def _numpy(a: pa.Array) -> tuple[np.ndarray, np.ndarray | None]:
    """Values (nulls as 0) and the validity mask, None when there are no nulls."""
    if a.null_count == 0:
        return a.to_numpy(zero_copy_only=False), None
    return a.fill_null(0).to_numpy(zero_copy_only=False), a.is_valid().to_numpy(zero_copy_only=False)


def _list(values: pa.Array) -> pa.ListArray:
    """`values` as the one element of a list array."""
    return pa.ListArray.from_arrays(pa.array([0, len(values)], pa.int32()), values)


class Histogram(NamedTuple):
    """Known values per bucket, in bucket order, and how many samples had no value."""

    bucket: np.ndarray
    n: np.ndarray
    vmin: np.ndarray
    vmax: np.ndarray
    vsum: np.ndarray  # of integer-valued doubles, as Spark's sum of the values cast to double
    nulls: int


def histogram(values: pa.Array, buckets: pa.Array) -> Histogram:
    v, valid = _numpy(values)
    b, _ = _numpy(buckets)  # null exactly where the value is
    if valid is not None:
        v, b = v[valid], b[valid]
    order = np.argsort(b)
    v, b = v[order], b[order]
    nulls = 0 if valid is None else int(valid.size - valid.sum())
    if not b.size:
        return Histogram(b, b, v, v, v.astype(np.float64), nulls)
    starts = np.flatnonzero(np.diff(b, prepend=b[0] - 1))
    return Histogram(b[starts], np.diff(np.r_[starts, b.size]), np.minimum.reduceat(v, starts),
                     np.maximum.reduceat(v, starts), np.add.reduceat(v.astype(np.float64), starts), nulls)


def _rows(h: Histogram) -> pa.StructArray:
    """As the rows Spark's group-by by bucket gave: a null bucket (null vmin, vmax, vsum) for
    the samples without a value."""
    tail = [h.nulls] if h.nulls else []
    mask = np.r_[np.zeros(h.bucket.size, bool), np.ones(len(tail), bool)]

    def column(a: np.ndarray) -> pa.Array:
        return pa.array(np.r_[a, np.zeros(len(tail), a.dtype)], mask=mask)

    n = pa.array(np.r_[h.n, tail].astype(np.int64))
    return pa.StructArray.from_arrays([_list(a) for a in (column(h.bucket), n, column(h.vmin), column(h.vmax), column(h.vsum))],
                                      names=HISTOGRAM_FIELDS)


def _stats(h: Histogram, scale: float) -> list:
    """histograms.stats for one partition: min, avg, max, p50, p95, p99 and the null count, with
    the same arithmetic (a percentile is the vmax of the bucket holding its nearest rank)."""
    total = int(h.n.sum())
    if not total:
        return [None] * 6 + [h.nulls]
    cum = np.cumsum(h.n)
    ranks = [max(1, (total * per_mille + 999) // 1000) for per_mille in PERCENTILES.values()]
    quantiles = h.vmax[np.searchsorted(cum, ranks)]

    def scaled(x: np.integer) -> int | float:  # scale 1 keeps the values' own type (records stay integers)
        return x / scale if scale != 1.0 else int(x)

    return [scaled(h.vmin.min()), float(h.vsum.sum()) / total / scale, scaled(h.vmax.max()),
            *[scaled(q) for q in quantiles], h.nulls]


def _by_hour(hour: np.ndarray, ms: np.ndarray) -> pa.ListArray:
    # bincount sums in doubles: exact, as these are integers far below 2**53.
    return _list(pa.array(np.bincount(hour, weights=ms, minlength=HOURS).astype(np.int64)))


def time_and_code(ts_ms: Column, code: Column) -> Column:
    """A sample's time and state code in one long that orders as (ts_ms, code), nulls first:
    one column less through the shuffle, and the sort key `summarise` needs."""
    return F.shiftleft(F.coalesce(ts_ms, F.lit(_NULL_TS)), _CODE_BITS).bitwiseOR((code + 1).cast("long"))


def summarise(time_code: pa.Array, record_lag: pa.Array, record_bucket: pa.Array,
              time_lag: pa.Array, time_bucket: pa.Array, *, start_ms: int, end_ms: int, cap_ms: int) -> pa.StructScalar:
    """One partition's samples (any order; `time_code` from time_and_code) -> one DAY value."""
    key = time_code.to_numpy(zero_copy_only=False)  # never null
    # The samples arrive as a few time-ordered runs (one per segment), which a stable sort
    # (timsort) merges many times faster than it sorts at random.
    key = key[np.argsort(key, kind="stable")]
    ts, codes = key >> _CODE_BITS, (key & ((1 << _CODE_BITS) - 1)) - 1
    timed = ts != _NULL_TS
    gap = np.r_[ts[1:], end_ms] - ts  # a null time is followed by times or nulls only: masked below
    interval = np.where(timed, np.clip(gap, 0, cap_ms), cap_ms)
    interval[codes == GONE] = 0
    hour = np.where(timed, np.clip((ts - start_ms) // HOUR_MS, 0, HOURS - 1), 0)
    out_of_sync = np.where((codes != IN_SYNC) & (codes != GONE), interval, 0)
    stalled = codes == STALLED
    # Samples so far that are not STALLED: constant within a run of STALLED samples, different
    # between runs, so it names each stall episode.
    episode = np.cumsum(~stalled)[stalled]
    stall_ms = interval[stalled]
    episode_starts = np.flatnonzero(np.diff(episode, prepend=-1))
    longest = int(np.add.reduceat(stall_ms, episode_starts).max()) if episode_starts.size else 0
    first = int(ts[timed][0]) if timed.any() else None
    values = [
        ts.size, int(interval.sum()), int(out_of_sync.sum()), int(interval[codes == AT_RISK].sum()),
        int(stall_ms.sum()), int((codes == UNRECOGNIZED).sum()), first, int(ts[-1]) if first is not None else None,
    ]
    row = [pa.array([x], pa.int64()) for x in values] + [
        _by_hour(hour, out_of_sync), _by_hour(hour, interval),
        pa.array([episode_starts.size], pa.int64()), pa.array([longest], pa.int64()),
    ]
    for name, lags, buckets in (("record_lag", record_lag, record_bucket), ("time_lag", time_lag, time_bucket)):
        h = histogram(lags, buckets)
        row += [pa.array([x], _ARROW[t]) for x, t in zip(_stats(h, SCALES[name]), _stat_fields(name).values())]
        row.append(_rows(h))
    return pa.StructArray.from_arrays(row, names=list(_FIELDS))[0]
