"""One partition's day: what the daily tables need from its samples, as Spark sees it.

The pass (samples.partition_days, computed by partials.py in numpy) gives one row per partition
with these fields. The rules (documented in __init__.py): the samples of the writers that count
(writers.py: one sidecar's view where several wrote the history), ordered by (ts, state code),
each account for the time to the partition's next sample, at most the cap (writers.caps: 4 poll
intervals of the writer, or --max-gap-seconds for rows that do not say theirs), the day's last
one to midnight; a GONE sample for none; a stall episode is a run of consecutive STALLED
samples. Null times sort first and account for the cap; they count in hour 0. A span may also
reach back before its sample (partials.accounted_ms): the day's first timed sample's to midnight,
at most the cap; a run's first STALLED sample's to where its time lag says the partition fell
behind, at most to the previous sample and the cap (the map side carries each STALLED sample's
time lag for this, `stall_since`). A span counts in its sample's hour.

The lag histograms (histograms.py) come as (bucket, n, vmin, vmax, vsum) rows for the topic and
flow levels to merge, with the partition's own min/avg/max/percentiles computed from them as
partials.stats does for every level. Buckets are exactly Spark's (buckets.py). Sums are of integer-valued
doubles, exact below 2**53 whatever the order, so they equal Spark's own sums (a day of one
partition's lags is far below that).
"""

from __future__ import annotations

from pyspark.sql.types import ArrayType, DataType, DoubleType, LongType, StructField, StructType

from mirrorlag.rollup.histograms import PERCENTILES
from mirrorlag.rollup.schema import STATE_CODES

HOURS = 24
HOUR_MS = 3_600_000
CODE_BITS = 4  # a sample's time and state code in one long, ordering as (ts, code): code + 1 in the low bits
assert len(STATE_CODES) < (1 << CODE_BITS) - 1
# A STALLED sample's look-back (its time lag, in ms) travels beside its time of the day in one
# long: both fit in LOOK_BITS (a day is 86,400,000 ms < 2**27); a longer time lag is clipped,
# which changes nothing (a look-back never passes midnight).
LOOK_BITS = 27
LOOK_MAX = (1 << LOOK_BITS) - 1
assert HOURS * HOUR_MS <= LOOK_MAX
# Below any real time (Spark's timestamps span years 1-9999: |ms| < 2**58), and still
# room for the code bits.
NULL_TS = -(1 << 58)

_HIST_FIELDS = {"bucket": LongType(), "n": LongType(), "vmin": LongType(), "vmax": LongType(), "vsum": DoubleType()}
# Columns of lists, not a list of rows: PySpark converts each partition's value through Python
# objects, and lists of structs cost several times as much.
HISTOGRAM = StructType([StructField(name, ArrayType(t)) for name, t in _HIST_FIELDS.items()])
SCALES = {"record_lag": 1.0, "time_lag": 1000.0}  # time lag in seconds, as the tables have it


def _stat_fields(measure: str) -> dict[str, DataType]:
    """The partition's figures of one measure, named as in the tables."""
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
# A partition's day as the pass gives it (partials.merge), as Spark sees it.
DAY = StructType([StructField(name, t) for name, t in _FIELDS.items()])
PER_PARTITION = [name for name, t in _FIELDS.items() if t is not HISTOGRAM]
STAT_NAMES = {measure: list(_stat_fields(measure)) for measure in SCALES}

