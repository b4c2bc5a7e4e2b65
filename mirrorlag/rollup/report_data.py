"""The Spark queries that fill the report's model (report_model.py) with small Python values.

Nothing large reaches the driver: the day's tables are cut to the worst N rows in Spark, and
the line charts take the worst partitions' curves from the pass's rows (slots.py: 288 five-minute
slots a partition; no second scan of the day). A history of under SHORT_HOURS is drawn sample by
sample instead: there a slot is a large share of the chart (a few minutes of history would be a
single point, which draws no line, and one STALLED sample would shade its whole slot), and a
second read of so short a history is cheap.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Callable

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from mirrorlag.rollup import partials, slots, trends
from mirrorlag.rollup.report_model import Series, TrendViews, growing_on, partition_label, sample_series
from mirrorlag.rollup.samples import HISTORY_SCHEMA
from mirrorlag.rollup.schema import PARTITION_KEY

HEAT_TOPICS = 25  # rows of the heat map: the topics with the most out-of-sync time
SHORT_HOURS = 2.0  # a day's history spanning less is drawn sample by sample (a slot is 1/24 of the chart or more)


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
        out.append(Series(partition_label(r), curve.hours, curve.record_lag, curve.time_lag_s, curve.states, curve.until))
    return out


def worst_partitions(per: DataFrame, partition_table: DataFrame, n: int) -> tuple[list[dict[str, Any]], list[Series]]:
    """The n partition rows with the most time out of sync (then highest p95 record lag), and their
    curves from `per`, the pass's rows (samples.partition_days)."""
    worst = _rows(partition_table.orderBy(
        F.desc("out_of_sync_seconds"), F.desc_nulls_last("record_lag_p95"), *PARTITION_KEY).limit(n))
    return worst, _series(per, worst)


def drawn_series(read_day: Callable[[], DataFrame], flows: list[dict[str, Any]], rows: list[dict[str, Any]],
                 series: list[Series], start_ms: int, end_ms: int, cap_ms: int) -> list[Series]:
    """The worst partitions' curves as drawn: `series` (their slots), or, when the day's whole
    history (`flows`: the flow table's rows) spans under SHORT_HOURS, their samples read again
    from `read_day()`, the day's rows, counted as the tables count them (partials.counted_samples:
    the writers that count, the time each sample stands for; `cap_ms`: --max-gap-seconds, for
    rows that do not say their poll interval)."""
    first = [f["first_ts"] for f in flows if f["first_ts"] is not None]
    last = [f["last_ts"] for f in flows if f["last_ts"] is not None]
    if not rows or not first or not last or max(last) - min(first) >= timedelta(hours=SHORT_HOURS):
        return series
    # Every row of these partitions, as the day's pass reads them: whose samples count depends on all of them.
    samples = partials.counted_samples(read_day().where(_key_filter(rows)).select(*partials.READ).toArrow(),
                                       end_ms, cap_ms).to_pylist()
    by_key: dict[tuple, list[Any]] = {}
    for x in samples:
        ms = x["ms"]
        if ms is not None and start_ms <= ms < end_ms:  # drawn: the samples within the day
            by_key.setdefault(tuple(x[k] for k in PARTITION_KEY), []).append((ms, x))
    out = []
    for r in rows:
        got = by_key.get(tuple(r[k] for k in PARTITION_KEY), [])
        out.append(sample_series(partition_label(r), [ms for ms, _ in got], [x["state"] for _, x in got],
                                 [x["record_lag"] for _, x in got], [x["time_lag_ms"] for _, x in got],
                                 [x["held_ms"] for _, x in got], start_ms,
                                 [x["accounted_ms"] - x["held_ms"] for _, x in got]))
    return out


def heat_rows(topic_table: DataFrame) -> list[dict[str, Any]]:
    """The topics with the most time out of sync, with their hours."""
    return _rows(topic_table.orderBy(F.desc("out_of_sync_seconds"), "source", "target", "topic").limit(HEAT_TOPICS)
                 .select("flow", "topic", "out_of_sync_seconds_by_hour", "covered_seconds_by_hour"))


def trend_views(trend_rows: list[dict[str, Any]], n: int) -> TrendViews:
    """From the day's trend rows (trends.py; a row per partition, topic and flow: collected in
    one query, as every figure here is a ranking or a count of them)."""
    growing: dict[str, int] = {}
    by: dict[str, dict[str, int]] = {}
    for r in trend_rows:
        labels = growing_on(r)
        if labels:
            growing[r["level"]] = growing.get(r["level"], 0) + 1
        for label in labels:
            by.setdefault(label, {})[r["level"]] = by.get(label, {}).get(r["level"], 0) + 1
    return TrendViews(_worst_trends(trend_rows, n), {r["flow"]: r for r in trend_rows if r["level"] == "flow"},
                      growing, by)


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
