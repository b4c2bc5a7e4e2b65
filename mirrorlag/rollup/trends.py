"""Trends per partition, topic and flow, from the daily tables (dates <= the day: the day's own as
the job computed them, the days before as written).

- day-over-day and week-over-week change of p95 record lag and of out-of-sync seconds (null when
  the earlier day has no row);
- least-squares slope of daily p95 record lag (records per day) over the last 7 and 28 days,
  with its t-statistic (slope / standard error, n - 2 degrees of freedom);
  (shown, no longer what `growing` means: on a weekly shape or correlated days it is
  "significant" on far too many steady days, issue 32);
- `growing`: trend_rule.py's rule on the 56 days of daily p95 record lag (trend_rule.judge
  itself, run in the executors' Python workers on each entity's 8 weeks): the last 7 days against
  the same weekdays of the weeks before, on a log scale, past the change's own noise (estimated
  from the series, day-to-day correlation included), a minimum change in records and a relative
  one, on most of the 7 days. Its evidence: `change_7d` (records), `change_7d_ratio`, `noise_7d`
  (records: the change's standard deviation), `score_7d` (change over noise) and `needed_7d` (the
  score growth needs there), `daily_noise_7d` (the series' day-to-day noise, 0.1 = 10 %),
  `weeks_7d` (weeks of history before the last 7 days), `compared_7d` and `up_7d` (days),
  `rising_7d` (each of the last 4 weeks at least 10 % above the week before);
- `out_of_sync_growing`: the same rule on daily out-of-sync seconds, with its own minimum change
  in seconds (trend_rule.MIN_CHANGE_SECONDS), and the same evidence prefixed `out_of_sync_`.

Only entities with a row on the day itself get a trend row. The sums are centred on each
entity's means, so a flat series has a slope of exactly 0, not a rounding error that some t
statistic would blow up.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta
from typing import Iterator, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, DoubleType, IntegerType, StructField, StructType

from mirrorlag.rollup import trend_rule as rule
from mirrorlag.rollup.paths import join, table_days, table_path
from mirrorlag.rollup.schema import LEVEL_KEYS, PARTITION_KEY
from mirrorlag.rollup.session import local_workers_use_this_python

WINDOWS = (7, 28)
# Measures the report ranks, largest (worst) first.
RANKED = ["record_lag_p95_dod", "record_lag_p95_wow", "out_of_sync_seconds_dod", "out_of_sync_seconds_wow",
          "slope_7d", "slope_28d"]

COLUMNS = [
    "date", "level", "flow", *PARTITION_KEY,
    "record_lag_p95", "record_lag_p95_dod", "record_lag_p95_wow",
    "out_of_sync_seconds", "out_of_sync_seconds_dod", "out_of_sync_seconds_wow",
    "slope_7d", "slope_7d_t", "days_7d", "slope_28d", "slope_28d_t", "days_28d", "growing",
    *[f"{prefix}{name}" for prefix in ("", "out_of_sync_") for name in (
        "change_7d", "change_7d_ratio", "noise_7d", "score_7d", "needed_7d", "daily_noise_7d", "weeks_7d",
        "compared_7d", "up_7d", "rising_7d")],
    "out_of_sync_growing",
]


@dataclass(frozen=True)
class Measure:
    """A daily figure trend_rule judges: its column of the day's rows, its output columns' prefix
    and its minimum change (its units)."""
    column: str
    out: str
    min_change: float


# p95 record lag keeps its unprefixed columns (growing, change_7d, ...).
P95 = Measure("y", "", rule.MIN_CHANGE)
OUT_OF_SYNC = Measure("oos", "out_of_sync_", rule.MIN_CHANGE_SECONDS)
MEASURES = (P95, OUT_OF_SYNC)
# trend_rule.Growth's figures as columns: the column's name (after the measure's prefix), the
# Growth field, its Arrow and Spark types.
_GROWTH = (("change_7d", "change", pa.float64(), DoubleType()), ("change_7d_ratio", "ratio", pa.float64(), DoubleType()),
           ("noise_7d", "noise", pa.float64(), DoubleType()), ("score_7d", "score", pa.float64(), DoubleType()),
           ("needed_7d", "needed", pa.float64(), DoubleType()),
           ("daily_noise_7d", "daily_noise", pa.float64(), DoubleType()), ("weeks_7d", "weeks", pa.int32(), IntegerType()),
           ("compared_7d", "days", pa.int32(), IntegerType()), ("up_7d", "up", pa.int32(), IntegerType()),
           ("rising_7d", "rising", pa.bool_(), BooleanType()), ("growing", "growing", pa.bool_(), BooleanType()))


def _on(x: Column, offset: int, value: Column) -> Column:
    return F.max(F.when(x == offset, value))


def level_trends(daily: DataFrame, level: str, day: date) -> DataFrame:
    keys = LEVEL_KEYS[level]
    first = day - timedelta(days=rule.WINDOW - 1)
    d = daily.where(F.col("date").between(F.lit(first), F.lit(day))).select(
        *keys,
        F.datediff(F.col("date"), F.lit(day)).alias("x"),  # -55 .. 0: days before the day
        F.col("record_lag_p95").cast("double").alias("y"),
        F.col("out_of_sync_seconds").alias("oos"),
    )
    entity = Window.partitionBy(*keys)
    means = []
    for n in WINDOWS:
        inside = (F.col("x") > -n) & F.col("y").isNotNull()
        means += [F.avg(F.when(inside, F.col("x"))).over(entity).alias(f"_mx{n}"),
                  F.avg(F.when(inside, F.col("y"))).over(entity).alias(f"_my{n}")]
    d = d.select("*", *means)
    x, y, oos = F.col("x"), F.col("y"), F.col("oos")
    aggs = [
        F.max(F.when(x == 0, F.lit(True))).alias("_today"),
        _on(x, 0, y).alias("record_lag_p95"),
        (_on(x, 0, y) - _on(x, -1, y)).alias("record_lag_p95_dod"),
        (_on(x, 0, y) - _on(x, -7, y)).alias("record_lag_p95_wow"),
        _on(x, 0, oos).alias("out_of_sync_seconds"),
        (_on(x, 0, oos) - _on(x, -1, oos)).alias("out_of_sync_seconds_dod"),
        (_on(x, 0, oos) - _on(x, -7, oos)).alias("out_of_sync_seconds_wow"),
        # The 56 days as they are, for trend_rule.judge in the executors (_judge_batches).
        F.collect_list(F.struct(x, *[F.col(m.column).cast("double") for m in MEASURES])).alias("_days"),
    ]
    for n in WINDOWS:
        inside = (x > -n) & y.isNotNull()
        dx, dy = x - F.col(f"_mx{n}"), y - F.col(f"_my{n}")
        aggs += [
            F.count(F.when(inside, F.lit(1))).alias(f"days_{n}d"),
            F.sum(F.when(inside, dx * dx)).alias(f"_sxx{n}"),
            F.sum(F.when(inside, dx * dy)).alias(f"_sxy{n}"),
            F.sum(F.when(inside, dy * dy)).alias(f"_syy{n}"),
        ]
    g = d.groupBy(*keys).agg(*aggs).where(F.col("_today"))
    g = g.select("*", *[c for n in WINDOWS for c in _slope(n)])
    fields = [f for f in g.schema.fields if f.name != "_days"]
    schema = StructType(fields + [StructField(f"{m.out}{name}", spark_type) for m in MEASURES
                                  for name, _, _, spark_type in _GROWTH])
    g = g.mapInArrow(_judge_batches, schema)
    out = [
        F.lit(day.isoformat()).alias("date"),
        F.lit(level).alias("level"),
        F.concat_ws("->", "source", "target").alias("flow"),
    ]
    for k in PARTITION_KEY:
        out.append(F.col(k) if k in keys else F.lit(None).cast("int" if k == "partition" else "string").alias(k))
    return g.select(*out, *COLUMNS[3 + len(PARTITION_KEY):])


def _slope(n: int) -> list[Column]:
    """slope_{n}d and slope_{n}d_t from the centred sums of the window."""
    days, sxx, sxy, syy = F.col(f"days_{n}d"), F.col(f"_sxx{n}"), F.col(f"_sxy{n}"), F.col(f"_syy{n}")
    slope = F.when((days >= 2) & (sxx > 0), F.try_divide(sxy, sxx))
    sse = F.greatest(syy - slope * sxy, F.lit(0.0))
    se = F.sqrt(F.try_divide(F.try_divide(sse, days - 2), sxx))
    t = (F.when(days < 3, F.lit(None))
         .when(se > 0, F.try_divide(slope, se))
         .when(slope > 0, F.lit(float("inf")))
         .when(slope < 0, F.lit(float("-inf"))))
    return [slope.alias(f"slope_{n}d"), t.cast("double").alias(f"slope_{n}d_t")]


def _judge_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """In the executors: each entity's 56 days laid out as trend_rule's (n, 56) matrix per
    measure (nan: no row, or no value), judged by trend_rule.judge itself, so the flags are the
    reference's by construction. Built as Spark columns instead, the rule's ~200 expressions per
    measure cost more to plan than a small day's whole work (tests/bench/RESULTS.md)."""
    for batch in batches:
        days = batch.column("_days")
        n = batch.num_rows
        rows = np.repeat(np.arange(n), pc.list_value_length(days).fill_null(0).to_numpy(zero_copy_only=False))
        x, *measures = days.flatten().flatten()  # the struct's fields, offsets applied
        column = x.to_numpy(zero_copy_only=False) + (rule.WINDOW - 1)
        names = [f for f in batch.schema.names if f != "_days"]
        arrays = [batch.column(f) for f in names]
        for m, values in zip(MEASURES, measures):
            matrix = np.full((n, rule.WINDOW), np.nan)
            # As max() would: nan (null) where a day has no value, the larger of a duplicate day's.
            np.fmax.at(matrix, (rows, column), values.to_numpy(zero_copy_only=False))
            growth = rule.judge(matrix, m.min_change)
            for name, field, arrow_type, _ in _GROWTH:
                v = getattr(growth, field)
                floating = pa.types.is_floating(arrow_type)
                arrays.append(pa.array(v, type=arrow_type, mask=np.isnan(v) if floating else None))
                names.append(f"{m.out}{name}")
        yield pa.RecordBatch.from_arrays(arrays, names=names)


_READ = ["record_lag_p95", "out_of_sync_seconds"]  # of each day's row, besides its key


def compute_trends(spark: SparkSession, out: str, day: date, today: Mapping[str, DataFrame] | None = None) -> DataFrame:
    """Trend rows of the day from the daily tables under `out`. `today`: the day's own tables by
    level as computed, not yet written; the days before are then read from `out`, listed now,
    so the job can write the day's tables while its trends are worked out."""
    local_workers_use_this_python(spark)  # the rule runs in Python workers (_judge_batches)
    frames = []
    for level, keys in LEVEL_KEYS.items():
        path = table_path(out, level)
        if today is None:
            daily = spark.read.parquet(path)
        else:
            daily = today[level].select(*keys, F.lit(day).alias("date"), *_READ)
            earlier = _earlier_days(spark, path, day)
            if earlier is not None:
                daily = earlier.select(*keys, "date", *_READ).unionByName(daily)
        frames.append(level_trends(daily, level, day))
    result = frames[0]
    for f in frames[1:]:
        result = result.unionByName(f)
    return result



def _earlier_days(spark: SparkSession, path: str, day: date) -> DataFrame | None:
    """The table's rows of the days a trend of `day` reads before it (None: none written yet).
    Listed now, and read by their own directories: the day's partition, rewritten meanwhile,
    is never listed again when the rows are read (a Spark Connect server plans a frame again at
    each query, a classic session lists once)."""
    first = day - timedelta(days=max(rule.WINDOW, *WINDOWS) - 1)
    days = [d for d in table_days(path, spark) if first <= d < day]
    if not days:
        return None
    return spark.read.option("basePath", path).parquet(*[join(path, f"date={d.isoformat()}") for d in days])


def worst(trend_df: DataFrame, n: int, levels: tuple[str, ...] = ("topic", "partition")) -> DataFrame:
    """The n largest positive values of each ranked measure (topics and partitions ranked
    together): one row per (measure, rank)."""
    long = (trend_df.where(F.col("level").isin(*levels))
            .unpivot(["level", "flow", *PARTITION_KEY], RANKED, "measure", "value")
            .where(F.col("value") > 0))
    rank = F.row_number().over(Window.partitionBy("measure").orderBy(F.desc("value"), *PARTITION_KEY))
    return long.withColumn("rank", rank).where(F.col("rank") <= n)
