"""What the report shows, as plain Python values: the model report.py renders and charts.py
draws. Free of Spark, so the drawing processes (drawer.py) never import PySpark; the queries that
fill it are in report_data.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from typing import Any

from mirrorlag.rollup.options import RollupOptions


@dataclass
class Series:
    """One partition's day in time order: per 5-minute slot (slots.py) its largest lags and worst
    state, or, for a short history, each sample (`sample_series`)."""

    label: str
    hours: list[float]  # since the start of the day (UTC)
    record_lag: list[float | None]
    time_lag_s: list[float | None]
    states: list[str | None]
    # Per point, the hour its state holds until (the time the rollup counts for it; a slot's:
    # slots.Slots.held); empty: each point holds to its 5-minute slot's end.
    ends: list[float] = field(default_factory=list)
    # Per point, the hour the time it counts for begins (a stall's first sample reaches back
    # before it: partials.accounted_ms); empty: its own hour.
    starts: list[float] = field(default_factory=list)
    every_sample: bool = False  # a point per sample (sample_series), else per 5-minute slot


def sample_series(label: str, ms: list[int], states: list[str], record_lag: list[float | None],
                  time_lag_ms: list[float | None], accounted_ms: list[int], start_ms: int,
                  back_ms: list[int] | None = None) -> Series:
    """A partition's samples (in time order, within the day starting at start_ms) as a Series
    whose states hold for the time the tables count for each after it (`accounted_ms`: the
    samples of the writers that count, their `held_ms` by partials.counted_samples, the rule
    partition_day.py states; the part of a span before its sample, the midnight gap or a stall's
    look-back, is not shaded). `back_ms`: that part (their `accounted_ms` less `held_ms`), where
    each sample's counted time begins: the line breaks only where none is counted."""
    hour = 3_600_000.0
    return Series(label, [(t - start_ms) / hour for t in ms], list(record_lag),
                  [None if v is None else v / 1000.0 for v in time_lag_ms], list(states),
                  [(t + a - start_ms) / hour for t, a in zip(ms, accounted_ms)],
                  [(t - b - start_ms) / hour for t, b in zip(ms, back_ms)] if back_ms else [], every_sample=True)


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
    growing: dict[str, int]  # level -> how many are flagged growing (on either measure)
    growing_by: dict[str, dict[str, int]] = field(default_factory=dict)  # GROWING_FLAGS label -> level -> how many
    # Why the day is provisional (manifest.provisional_why; its rows say final = false); None: final.
    provisional: str | None = None
    groups: list[dict[str, Any]] = field(default_factory=list)  # group_daily's rows (failover readiness)
    generated_at: datetime = field(default_factory=lambda: datetime.now(timezone.utc))


def out_of_sync_share(out_of_sync_s: float, covered_s: float) -> float | None:
    """The share of the watched partition-time that was out of sync (None: nothing watched).
    Of the covered time, not of the day: a sidecar started at noon watched half a day."""
    return min(1.0, out_of_sync_s / covered_s) if covered_s > 0 else None


def partition_label(row: dict[str, Any], with_flow: bool = True) -> str:
    name = f"{row['topic']}[{row['partition']}]" if row.get("partition") is not None else str(row["topic"])
    return f"{row['flow']} {name}" if with_flow else name


@dataclass
class DayViews:
    """What the report shows of the day's own rows."""

    worst: list[dict[str, Any]]  # partition rows: most time out of sync, then highest p95 record lag
    series: list[Series]  # their curves
    heat: list[dict[str, Any]]  # topic rows: most time out of sync


# A trend row's growth flags (trends.MEASURES: the rule on each measure), as the report names them.
GROWING_FLAGS = {"growing": "p95 lag", "out_of_sync_growing": "time out of sync"}


@dataclass
class TrendViews:
    rows: list[dict[str, Any]]  # topics and partitions worst by at least one measure
    flows: dict[str, dict[str, Any]]  # flow name -> its trend row
    growing: dict[str, int]  # level -> how many are flagged growing (on either measure)
    growing_by: dict[str, dict[str, int]] = field(default_factory=dict)  # GROWING_FLAGS label -> level -> how many


def growing_on(row: dict[str, Any]) -> list[str]:
    """The measures a trend row is growing on, by their GROWING_FLAGS labels."""
    return [label for flag, label in GROWING_FLAGS.items() if row.get(flag)]


NO_TRENDS = TrendViews([], {}, {})  # what the charts are drawn from: they need the day's own rows only


def gather(views: DayViews, trend: TrendViews, flows: list[dict[str, Any]], day: date,
           opts: RollupOptions, provisional: str | None = None) -> ReportData:
    several_flows = len(flows) > 1
    return ReportData(
        day=day, history=opts.history, out=opts.out, max_gap_seconds=opts.max_gap_seconds, worst_n=opts.worst,
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
        growing_by=trend.growing_by,
        provisional=provisional,
    )
