"""The daily tables: partition, topic and flow level, from the day's one pass (samples.partition_days).

- per partition (partition_day.PER_PARTITION, and the maxima of freshness and byte lag): time in
  each state, stall episodes, hours, the partition's own lag figures;
- record-lag and time-lag histograms (histograms.py): counts, min/avg/max, percentiles
  (samples.level_figures adds up each topic's and flow's partitions' histograms).

Topic and flow figures are built from their partitions' passes, never from the partition
table's figures: percentiles come from the merged histograms (a percentile of percentiles is
not a percentile), seconds are partition-seconds summed.
"""

from __future__ import annotations

from datetime import date

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from mirrorlag.rollup.partition_day import HOURS
from mirrorlag.rollup.schema import FLOW_KEY, PARTITION_KEY, TOPIC_KEY

DAY_SECONDS = 86_400.0

# Column order of the tables after date, flow and the level's key (documented in __init__.py).
MEASURES = [
    "samples", "coverage",
    "record_lag_min", "record_lag_avg", "record_lag_max", "record_lag_p50", "record_lag_p95", "record_lag_p99",
    "time_lag_min_s", "time_lag_avg_s", "time_lag_max_s", "time_lag_p50_s", "time_lag_p95_s", "time_lag_p99_s",
    "freshness_lag_max_s", "byte_lag_max",
    "covered_seconds", "out_of_sync_seconds", "at_risk_seconds", "stalled_seconds",
    "stall_episodes", "longest_stall_seconds",
    "unknown_state_samples", "null_record_lag_samples", "null_time_lag_samples",
    "first_ts", "last_ts", "out_of_sync_seconds_by_hour", "covered_seconds_by_hour",
]
_SUMS = ["samples", "covered_ms", "out_of_sync_ms", "at_risk_ms", "stalled_ms", "unknown_state_samples"]


def named(df: DataFrame, names: DataFrame, key: list[str]) -> DataFrame:
    """Give rows keyed by the partition hash their partition key back, with what else `names`
    holds per partition (`names`: the day's distinct keys with their `pid`, a few thousand rows,
    so the join is a broadcast)."""
    if key == PARTITION_KEY:
        extra = [c for c in names.columns if c not in (*key, "pid")]
        return _null_safe_join(df, names.select(*key, *extra), key) if extra else df
    return df.join(F.broadcast(names), "pid", "inner").drop("pid")


def _null_safe_join(left: DataFrame, right: DataFrame, keys: list[str]) -> DataFrame:
    """Left join on keys that may be null (a row without a topic still finds its partner)."""
    r = right.select(*[F.col(k).alias(f"_r_{k}") for k in keys], *[c for c in right.columns if c not in keys])
    cond: Column | None = None
    for k in keys:
        c = left[k].eqNullSafe(r[f"_r_{k}"])
        cond = c if cond is None else cond & c
    return left.join(r, cond, "left").drop(*[f"_r_{k}" for k in keys])


def level_table(parts: DataFrame, figures: DataFrame, keys: list[str], day: date) -> DataFrame:
    """One daily table. `parts`: named per-partition rows (partition_day.PER_PARTITION), which
    carry the partition level's lag figures; the other levels' are `figures`
    (samples.level_figures: from their partitions' histograms added up)."""
    extra: list[str] = []
    if keys == PARTITION_KEY:
        df = parts
    else:
        counts = [F.count(F.lit(1)).alias("partitions")]
        if keys == FLOW_KEY:
            counts.insert(0, F.countDistinct("topic").alias("topics"))
        extra = [c for c in ("topics", "partitions") if keys == FLOW_KEY or c == "partitions"]
        w = parts.groupBy(*keys).agg(
            *counts,
            *[F.sum(c).alias(c) for c in _SUMS],
            F.min("first_ms").alias("first_ms"),
            F.max("last_ms").alias("last_ms"),
            F.sum("stall_episodes").alias("stall_episodes"),
            F.max("longest_stall_ms").alias("longest_stall_ms"),
            F.max("freshness_max").alias("freshness_max"),
            F.max("byte_max").alias("byte_max"),
            *[F.array(*[F.sum(F.col(c)[h]) for h in range(HOURS)]).alias(c) for c in ("hours_ms", "covered_hours_ms")],
        )
        level = figures.where(F.col("level") == ("flow" if keys == FLOW_KEY else "topic"))
        df = _null_safe_join(w, level.drop("level", *[k for k in TOPIC_KEY if k not in keys]), keys)
    members = F.col("partitions") if keys != PARTITION_KEY else F.lit(1)
    seconds = {
        "covered_seconds": "covered_ms", "out_of_sync_seconds": "out_of_sync_ms", "at_risk_seconds": "at_risk_ms",
        "stalled_seconds": "stalled_ms", "longest_stall_seconds": "longest_stall_ms",
    }
    df = df.select(
        "*",
        *[(F.col(ms) / 1000.0).alias(s) for s, ms in seconds.items()],
        (F.col("covered_ms") / 1000.0 / (members * DAY_SECONDS)).alias("coverage"),
        (F.col("freshness_max") / 1000.0).alias("freshness_lag_max_s"),
        F.col("byte_max").alias("byte_lag_max"),
        F.timestamp_millis("first_ms").alias("first_ts"),
        F.timestamp_millis("last_ms").alias("last_ts"),
        F.transform("hours_ms", lambda ms: ms / 1000.0).alias("out_of_sync_seconds_by_hour"),
        F.transform("covered_hours_ms", lambda ms: ms / 1000.0).alias("covered_seconds_by_hour"),
    )
    return df.select(
        F.lit(day.isoformat()).alias("date"),
        F.concat_ws("->", "source", "target").alias("flow"),
        *keys, *extra, *MEASURES,
    )


def tables(parts: DataFrame, figures: DataFrame, day: date) -> dict[str, DataFrame]:
    return {
        level: level_table(parts, figures, keys, day)
        for level, keys in (("partition", PARTITION_KEY), ("topic", TOPIC_KEY), ("flow", FLOW_KEY))
    }
