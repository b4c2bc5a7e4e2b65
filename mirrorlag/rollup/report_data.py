"""What the report shows, fetched from Spark as small Python values.

Nothing large reaches the driver: the day's tables are cut to the worst N rows in Spark, and
the line charts take the worst partitions' curves from the pass's rows (slots.py: 288 five-minute
slots a partition; no second scan of the day).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from typing import Any, TYPE_CHECKING

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from mirrorlag.rollup import slots, trends
from mirrorlag.rollup.samples import DayWindow
from mirrorlag.rollup.schema import HISTORY_SCHEMA, PARTITION_KEY

if TYPE_CHECKING:
    from mirrorlag.rollup.job import RollupOptions

HEAT_TOPICS = 25  # rows of the heat map: the topics with the most out-of-sync time


@dataclass
class Series:
    """One partition's day in time order: per 5-minute slot (slots.py) its largest lags and worst state."""

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
    """Exactly these partitions' rows (a key with a null matches a null)."""
    cond = F.lit(False)
    for r in rows:
        same = F.lit(True)
        for k in PARTITION_KEY:
            same = same & F.col(k).eqNullSafe(F.lit(r[k]).cast(HISTORY_SCHEMA[k].dataType))
        cond = cond | same
    return cond


def _series(per: DataFrame, rows: list[dict[str, Any]]) -> list[Series]:
    """The worst partitions' curves, from the pass's rows (slots.py): no second scan of the day."""
    if not rows:
        return []
    found = {tuple(r[k] for k in PARTITION_KEY): r["series"]
             for r in per.where(_key_filter(rows)).select(*PARTITION_KEY, "series").collect()}
    out = []
    for r in rows:
        curve = slots.decode(found.get(tuple(r[k] for k in PARTITION_KEY)) or b"")
        out.append(Series(partition_label(r), curve.hours, curve.record_lag, curve.time_lag_s, curve.states))
    return out


@dataclass
class DayViews:
    """What the report shows of the day's own rows."""

    worst: list[dict[str, Any]]  # partition rows: most time out of sync, then highest p95 record lag
    series: list[Series]  # their curves
    heat: list[dict[str, Any]]  # topic rows: most time out of sync


def worst_partitions(per: DataFrame, partition_table: DataFrame, n: int) -> tuple[list[dict[str, Any]], list[Series]]:
    """The n partition rows with the most time out of sync (then highest p95 record lag), and their
    curves from `per`, the pass's rows (samples.partition_days)."""
    worst = _rows(partition_table.orderBy(
        F.desc("out_of_sync_seconds"), F.desc_nulls_last("record_lag_p95"), *PARTITION_KEY).limit(n))
    return worst, _series(per, worst)


def heat_rows(topic_table: DataFrame) -> list[dict[str, Any]]:
    """The topics with the most time out of sync, with their hours."""
    return _rows(topic_table.orderBy(F.desc("out_of_sync_seconds"), "source", "target", "topic").limit(HEAT_TOPICS)
                 .select("flow", "topic", "out_of_sync_seconds_by_hour", "covered_seconds_by_hour"))


@dataclass
class TrendViews:
    rows: list[dict[str, Any]]  # topics and partitions worst by at least one measure
    flows: dict[str, dict[str, Any]]  # flow name -> its trend row
    growing: dict[str, int]  # level -> how many are flagged growing


def trend_views(trend_rows: list[dict[str, Any]], n: int) -> TrendViews:
    """From the day's trend rows (trends.py; a row per partition, topic and flow: collected in
    one query, as every figure here is a ranking or a count of them)."""
    growing: dict[str, int] = {}
    for r in trend_rows:
        if r["growing"]:
            growing[r["level"]] = growing.get(r["level"], 0) + 1
    return TrendViews(_worst_trends(trend_rows, n), {r["flow"]: r for r in trend_rows if r["level"] == "flow"}, growing)


def _key(r: dict[str, Any]) -> tuple:
    """The partition key ascending, nulls first (Spark's order)."""
    return tuple((r[k] is not None, r[k]) for k in PARTITION_KEY)


def _desc(value: Any) -> tuple:
    """Largest first, nulls last, as a part of an ascending sort key."""
    return (value is None, 0 if value is None else -value)


def _worst_trends(trend_rows: list[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    """Topic and partition rows that are among the n worst by at least one measure (the largest
    positive values); `worst_by` names those measures, in trends.RANKED's order."""
    rows = [dict(r, worst_by=[]) for r in trend_rows if r["level"] in ("topic", "partition")]
    for m in trends.RANKED:
        ranked = sorted((r for r in rows if r[m] is not None and r[m] > 0), key=lambda r: (-r[m], _key(r)))
        for r in ranked[:n]:
            r["worst_by"].append(m)
    worst = [r for r in rows if r["worst_by"]]
    return sorted(worst, key=lambda r: (_desc(r["slope_28d"]), _desc(r["record_lag_p95_dod"]), _key(r)))


def gather(views: DayViews, trend: TrendViews, flows: list[dict[str, Any]], window: DayWindow,
           opts: "RollupOptions") -> ReportData:
    several_flows = len(flows) > 1
    return ReportData(
        day=window.day, history=opts.history, out=opts.out, max_gap_seconds=opts.max_gap_seconds, worst_n=opts.worst,
        flows=flows,
        worst_partitions=views.worst,
        series=views.series,
        heat_labels=[f"{h['topic']} ({h['flow']})" if several_flows else str(h["topic"]) for h in views.heat],
        heat_share=[[out_of_sync_share(s, c) for s, c in zip(h["out_of_sync_seconds_by_hour"], h["covered_seconds_by_hour"])]
                    for h in views.heat],
        heat_topics_total=sum(f["topics"] for f in flows),
        trend_rows=trend.rows,
        flow_trends=trend.flows,
        growing=trend.growing,
    )
