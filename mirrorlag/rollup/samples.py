"""One day of history: read, keyed by partition, and summarised per partition in one pass.

The pass groups the day's samples by partition (the day's one shuffle: a 64-bit key per
partition, the time, the state code and the four lags; strings never travel) and summarises each
partition's day with numpy (partition_day.py): seconds per state, stall episodes, the hour heat
map and both lag histograms come out of one call per partition. Spark's own row operators did
this in three passes (two histogram aggregations and a window over time order) at ~6 us a row.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from datetime import date, datetime, timezone
from functools import partial

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.functions import ArrowUDFType, arrow_udf

from mirrorlag.rollup import histograms, partition_day
from mirrorlag.rollup.schema import HISTORY_SCHEMA, PARTITION_KEY, STATE_CODES, UNRECOGNIZED

DAY_MS = 86_400_000


@dataclass(frozen=True)
class DayWindow:
    """The UTC day being rolled up, in epoch milliseconds."""

    day: date

    @property
    def start_ms(self) -> int:
        return int(datetime(self.day.year, self.day.month, self.day.day, tzinfo=timezone.utc).timestamp() * 1000)

    @property
    def end_ms(self) -> int:
        return self.start_ms + DAY_MS


def read_day(spark: SparkSession, day_path: str) -> DataFrame:
    """The day's segments with the history schema (Spark skips files starting with `.` or `_`)."""
    return spark.read.schema(HISTORY_SCHEMA).parquet(day_path)


def partition_id(*cols: str | Column) -> Column:
    """64-bit hash of the partition key. Sorting and grouping on one long is several times
    cheaper than on three strings and an int; the job checks the day's keys for a collision
    (job.py) and falls back to the strings if there ever is one."""
    return F.xxhash64(*cols)


def key_columns(key: list[str]) -> list[Column]:
    """The partition key as grouping columns: ["pid"] is the hash, else the key's own columns."""
    return [partition_id(*PARTITION_KEY).alias("pid")] if key == ["pid"] else [F.col(k) for k in key]


def state_code(state: Column) -> Column:
    (first, first_code), *rest = STATE_CODES.items()
    expr = F.when(state == first, F.lit(first_code))
    for name, code in rest:
        expr = expr.when(state == name, F.lit(code))
    return expr.otherwise(F.lit(UNRECOGNIZED)).cast("tinyint")


def partition_days(raw: DataFrame, window: DayWindow, max_gap_s: float, key: list[str], tasks: int | None) -> DataFrame:
    """Columns: `key`, then partition_day.DAY's fields (each partition's day summarised), from
    `tasks` tasks (None: spark.sql.shuffle.partitions).

    Only what needs the partition's samples together travels through the shuffle: the key, time
    and state in one long, and the two lags (their buckets are computed after it); the maxima of
    freshness and byte lag are taken with the day's keys (job.py), off the scan."""
    narrow = raw.select(
        *key_columns(key),
        partition_day.time_and_code(F.unix_millis("ts"), state_code(F.col("state"))).alias("time_code"),
        "record_lag", "time_lag_ms",
    )
    narrow = narrow.repartition(tasks, *key) if tasks else narrow.repartition(*key)
    summarise = partial(partition_day.summarise, start_ms=window.start_ms, end_ms=window.end_ms,
                        cap_ms=int(max_gap_s * 1000))
    with warnings.catch_warnings():
        # It would rather infer the type from the hints, which `partial` hides: it is given.
        warnings.filterwarnings("ignore", "It is preferred to specify type hints", UserWarning)
        day = arrow_udf(summarise, partition_day.DAY, ArrowUDFType.GROUPED_AGG)
    per = narrow.groupBy(*key).agg(day(
        "time_code", "record_lag", histograms.bucket(F.col("record_lag")),
        "time_lag_ms", histograms.bucket(F.col("time_lag_ms")),
    ).alias("day"))
    # Spark takes any Python result for nullable; the hour arrays never are null, and the
    # tables' schemas have always said so.
    hours = {c: F.coalesce(F.col(f"day.{c}"), F.array_repeat(F.lit(0).cast("long"), partition_day.HOURS)).alias(c)
             for c in ("hours_ms", "covered_hours_ms")}
    return per.select(*key, *[hours.get(f, F.col(f"day.{f}")) for f in partition_day.DAY.fieldNames()])


def histogram_rows(measure: str) -> Column:
    """A partition_days histogram column as rows: bucket, n, vmin, vmax, vsum."""
    fields = partition_day.HISTOGRAM_FIELDS
    return F.inline(F.arrays_zip(*[F.col(f"{measure}.{f}").alias(f) for f in fields]))
