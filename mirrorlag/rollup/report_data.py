"""What the report shows, fetched from Spark as small Python values.

Nothing large reaches the driver: the daily tables are read back for one day and cut to the
worst N rows in Spark; the line charts read only the worst partitions' samples (a filtered scan
of the day's history, N x samples-per-day rows).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from typing import Any, TYPE_CHECKING

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from mirrorlag.rollup import trends
from mirrorlag.rollup.paths import table_path
from mirrorlag.rollup.samples import DayWindow, partition_id
from mirrorlag.rollup.schema import HISTORY_SCHEMA, PARTITION_KEY

if TYPE_CHECKING:
    from mirrorlag.rollup.job import RollupOptions

HEAT_TOPICS = 25  # rows of the heat map: the topics with the most out-of-sync time


@dataclass
class Series:
    """One partition's samples over the day, in time order."""

    label: str
    hours: list[float]  # since the start of the day (UTC)
    record_lag: list[float | None]
    time_lag_s: list[float | None]
    states: list[str | None]


@dataclass
class ReportData:
    day: date
    history: str
    out: str
    max_gap_seconds: float
    worst_n: int
    flows: list[dict[str, Any]]
    worst_partitions: list[dict[str, Any]]
    series: list[Series]
    heat_labels: list[str]
    heat_share: list[list[float | None]]  # per topic and hour: share of the covered time out of sync
    heat_topics_total: int
    trend_rows: list[dict[str, Any]]  # topics and partitions worst by at least one measure
    flow_trends: dict[str, dict[str, Any]]  # flow name -> its trend row
    growing: dict[str, int]  # level -> how many are flagged growing
    generated_at: datetime = field(default_factory=lambda: datetime.now(timezone.utc))


def out_of_sync_share(out_of_sync_s: float, covered_s: float) -> float | None:
    """The share of the watched partition-time that was out of sync (None: nothing watched).
    Of the covered time, not of the day: a sidecar started at noon watched half a day."""
    return min(1.0, out_of_sync_s / covered_s) if covered_s > 0 else None


def partition_label(row: dict[str, Any], with_flow: bool = True) -> str:
    name = f"{row['topic']}[{row['partition']}]" if row.get("partition") is not None else str(row["topic"])
    return f"{row['flow']} {name}" if with_flow else name


def _rows(df: DataFrame) -> list[dict[str, Any]]:
    return [r.asDict(recursive=True) for r in df.collect()]


def _key_filter(rows: list[dict[str, Any]]) -> Column:
    """Rows of these partitions, and in the rare case of a hash collision a few others (_series
    matches each row's key exactly). This filter runs on every sample of the day: the int
    comparison on `partition` rules out most rows first (a day has many partition numbers), and
    the rest are compared on the key's 64-bit hash, one long, not four columns (the hashes of the
    literal keys are folded into constants by the optimizer)."""
    numbers = F.col("partition").isin(sorted({r["partition"] for r in rows if r["partition"] is not None}))
    # A key with a null never matched (null == null is not true); _series skips such rows too.
    ids = [partition_id(*[F.lit(r[k]).cast(HISTORY_SCHEMA[k].dataType) for k in PARTITION_KEY])
           for r in rows if all(r[k] is not None for k in PARTITION_KEY)]
    return numbers & partition_id(*PARTITION_KEY).isin(ids)


def _series(raw: DataFrame, rows: list[dict[str, Any]], window: DayWindow) -> list[Series]:
    if not rows:
        return []
    df = (raw.where(_key_filter(rows))
          .select(*PARTITION_KEY, F.unix_millis("ts").alias("ts_ms"), "record_lag", "time_lag_ms", "state")
          # One task sorts the few selected rows: orderBy would range-partition, and sampling
          # the ranges is one more scan of the whole day (measured: 6.7 -> 3.4 CPU s on 11.5 M rows).
          .repartition(1).sortWithinPartitions(*PARTITION_KEY, "ts_ms"))
    if hasattr(df, "toArrow"):  # Spark 4: columnar, several times faster than rows
        cols = df.toArrow().to_pydict()
    else:
        collected = df.collect()
        cols = {c: [r[c] for r in collected] for c in df.columns}
    by_key: dict[tuple, Series] = {}
    for r in rows:
        key = (r["source"], r["target"], r["topic"], r["partition"])
        by_key[key] = Series(partition_label(r), [], [], [], [])
    for i in range(len(cols["ts_ms"])):
        key = (cols["source"][i], cols["target"][i], cols["topic"][i], cols["partition"][i])
        s = by_key.get(key) if None not in key else None
        if s is None:
            continue
        s.hours.append((cols["ts_ms"][i] - window.start_ms) / 3_600_000)
        s.record_lag.append(cols["record_lag"][i])
        tl = cols["time_lag_ms"][i]
        s.time_lag_s.append(None if tl is None else tl / 1000.0)
        s.states.append(cols["state"][i])
    return [by_key[(r["source"], r["target"], r["topic"], r["partition"])] for r in rows]


def _worst_trends(trend_df: DataFrame, n: int) -> list[dict[str, Any]]:
    """Topic and partition rows that are among the n worst by at least one measure (the largest
    positive values); `worst_by` names those measures."""
    df = trend_df.where(F.col("level").isin("topic", "partition"))
    flags = []
    for m in trends.RANKED:
        rank = F.row_number().over(Window.orderBy(F.desc_nulls_last(m), *PARTITION_KEY))
        df = df.withColumn(f"_rank_{m}", F.when(F.col(m) > 0, rank))
        flags.append(F.when(F.col(f"_rank_{m}") <= n, F.lit(m)))
    df = df.withColumn("worst_by", F.filter(F.array(*flags), lambda x: x.isNotNull()))
    df = df.where(F.size("worst_by") > 0).drop(*[f"_rank_{m}" for m in trends.RANKED])
    return _rows(df.orderBy(F.desc_nulls_last("slope_28d"), F.desc_nulls_last("record_lag_p95_dod"), *PARTITION_KEY))


def gather(spark: SparkSession, raw: DataFrame, flows: list[dict[str, Any]], trend_df: DataFrame,
           growing: dict[str, int], window: DayWindow, opts: "RollupOptions") -> ReportData:
    day = window.day
    n = opts.worst

    def table(level: str) -> DataFrame:
        return spark.read.parquet(table_path(opts.out, level)).where(F.col("date") == F.lit(day))

    # Worst: most time out of sync, then highest p95 record lag.
    worst = _rows(table("partition").orderBy(
        F.desc("out_of_sync_seconds"), F.desc_nulls_last("record_lag_p95"), *PARTITION_KEY).limit(n))
    topics = table("topic")
    heat = _rows(topics.orderBy(F.desc("out_of_sync_seconds"), "source", "target", "topic").limit(HEAT_TOPICS)
                 .select("flow", "topic", "out_of_sync_seconds_by_hour", "covered_seconds_by_hour"))
    several_flows = len(flows) > 1
    return ReportData(
        day=day, history=opts.history, out=opts.out, max_gap_seconds=opts.max_gap_seconds, worst_n=n,
        flows=flows,
        worst_partitions=worst,
        series=_series(raw, worst, window),
        heat_labels=[f"{h['topic']} ({h['flow']})" if several_flows else str(h["topic"]) for h in heat],
        heat_share=[[out_of_sync_share(s, c) for s, c in zip(h["out_of_sync_seconds_by_hour"], h["covered_seconds_by_hour"])]
                    for h in heat],
        heat_topics_total=sum(f["topics"] for f in flows),
        trend_rows=_worst_trends(trend_df, n),
        flow_trends={r["flow"]: r for r in _rows(trend_df.where(F.col("level") == "flow"))},
        growing=growing,
    )
