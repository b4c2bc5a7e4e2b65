"""A day of the consumer groups' history (history/group_schema.py, `<history>/_groups/`) as one
row per flow and group (docs/design.md §9): how ready it was to fail over over the day.

A groups run is one sample of a group: its re-read is the sum over its committed partitions (the
records a failover at that moment would deliver again), its state its worst partition's. A sample
stands for the time to the group's next sample, at most 4 of its writer's intervals (the rule the
partitions' tables follow, partition_day.py) and never past the day's end, so a sidecar that
stopped reading groups lowers `coverage`, not `ready_ratio`; the day's first sample also stands
for the time since midnight before it, at most the same cap, in its own state (as a partition's).
"""

from __future__ import annotations

from datetime import date
from typing import Sequence

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from mirrorlag.groups.readiness import GroupState
from mirrorlag.rollup.manifest import Segment
from mirrorlag.rollup.paths import group_day_dir, join
from mirrorlag.rollup.samples import DayWindow

GROUP_DAILY = "group_daily"
GROUP_KEY = ["source", "target", "group"]
STATE_RANK = tuple(state.value for state in GroupState)  # worst first
INTERVALS_PER_SAMPLE = 4


def group_daily(spark: SparkSession, history: str, day: date, segments: Sequence[Segment],
                max_gap_seconds: float) -> DataFrame | None:
    """The day's table (no `final` or `date` yet) from the group segments as listed (the ones the
    day's manifest names), or None when the day has no group history."""
    if not segments:
        return None
    path = group_day_dir(history, day)
    return group_figures(spark.read.parquet(*(join(path, s.name) for s in segments)), DayWindow(day), max_gap_seconds)


def group_figures(rows: DataFrame, window: DayWindow, max_gap_seconds: float) -> DataFrame:
    rank = F.array_position(F.array(*[F.lit(s) for s in STATE_RANK]), F.col("state"))  # 1-based
    samples = (rows.where((F.col("ts") >= F.lit(window.start_ms / 1000).cast("timestamp"))
                          & (F.col("ts") < F.lit(window.end_ms / 1000).cast("timestamp")))
               .groupBy(*GROUP_KEY, "ts")
               .agg(F.sum("reread_records").alias("reread"),
                    F.count(F.when(F.col("reread_records").isNull(), 1)).alias("reread_unknown"),
                    F.min(rank).alias("rank"),
                    F.max("checkpoint_age_ms").alias("age_ms"),
                    F.count(F.lit(1)).alias("partitions"),
                    F.max("refresh_interval_ms").alias("interval_ms")))
    ts_ms = (F.col("ts").cast("double") * 1000).cast("long")
    following = Window.partitionBy(*GROUP_KEY).orderBy("ts")
    cap_ms = F.coalesce(F.col("interval_ms") * INTERVALS_PER_SAMPLE, F.lit(int(max_gap_seconds * 1000)))
    to_next = F.coalesce(F.lead(ts_ms).over(following), F.lit(window.end_ms)) - ts_ms
    # The day's first run also stands for the time since midnight, at most the cap (the
    # previous day's last run is not in the day's rows: the first one's state is the evidence).
    head = F.when(F.lag(ts_ms).over(following).isNull(), F.least(ts_ms - F.lit(window.start_ms), cap_ms)).otherwise(0)
    spans = samples.withColumn("span_ms", F.least(to_next, cap_ms, F.lit(window.end_ms) - ts_ms) + head)
    ready = F.lit(len(STATE_RANK))
    return (spans.groupBy(*GROUP_KEY)
            .agg(F.count(F.lit(1)).alias("samples"),
                 (F.sum("span_ms") / 1000).alias("covered_seconds"),
                 (F.sum(F.when(F.col("rank") == ready, F.col("span_ms")).otherwise(0)) / 1000).alias("ready_seconds"),
                 F.expr("percentile(reread, 0.5)").alias("reread_p50"),
                 F.expr("percentile(reread, 0.99)").alias("reread_p99"),
                 F.max("reread").alias("reread_max"),
                 F.sum(F.when(F.col("reread_unknown") > 0, 1).otherwise(0)).alias("samples_reread_unknown"),
                 F.min("rank").cast("int").alias("worst_rank"),
                 (F.max("age_ms") / 1000).alias("checkpoint_age_max_seconds"),
                 F.max("partitions").alias("partitions"))
            .withColumn("coverage", F.col("covered_seconds") / F.lit((window.end_ms - window.start_ms) / 1000))
            .withColumn("ready_ratio", F.when(F.col("covered_seconds") > 0,
                                              F.col("ready_seconds") / F.col("covered_seconds")))
            .withColumn("worst_state", F.element_at(F.array(*[F.lit(s) for s in STATE_RANK]), F.col("worst_rank")))
            .drop("worst_rank"))
