"""A backfill across a month boundary, and re-running a day: it replaces that day and the later days' trends."""

from __future__ import annotations

import hashlib
from datetime import date
from pathlib import Path

import pytest

from mirrorlag.rollup.errors import RollupError
from mirrorlag.rollup.job import run_days
from mirrorlag.rollup.options import RollupOptions
from mirrorlag.rollup.paths import DayStatus
from mirrorlag.rollup.trends import compute_trends
from tests.rollup.history import H, day_ms, every, series, write

DAYS = [date(2024, 1, 31), date(2024, 2, 1)]
TABLES = ["partition_daily", "topic_daily", "flow_daily", "trends"]


def _write_day(history: Path, day: date, k: int, partitions: int = 2) -> None:
    ts = every(day_ms(day), day_ms(day) + 24 * H, 300_000)  # every 5 minutes
    rows = []
    for p in range(partitions):
        rows += series("A->B", "orders", p, ts, ["IN_SYNC"] * len(ts), [100 * (k + 1) + p] * len(ts))
    write(history, day, rows)


def _snapshot(out: Path, skip: str, tables: list[str]) -> dict[str, tuple[int, int, str]]:
    """Every file of `tables` outside `skip` partitions: size, mtime and content hash."""
    return {
        str(f.relative_to(out)): (f.stat().st_size, f.stat().st_mtime_ns, hashlib.sha256(f.read_bytes()).hexdigest())
        for t in tables for f in sorted((out / t).glob("date=*/*")) if f.is_file() and f"date={skip}" not in str(f)
    }


def _rows(spark, out: Path, table: str, day: date) -> list[dict]:
    df = spark.read.parquet(str(out / table)).where(f"date = '{day}'")
    return sorted((r.asDict() for r in df.collect()), key=repr)


@pytest.fixture(scope="module")
def backfill(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("rollup-backfill")
    history, out = root / "history", root / "out"
    for k, day in enumerate(DAYS):
        _write_day(history, day, k)
    seen: list[date] = []
    results = run_days(spark, RollupOptions(str(history), str(out), [*DAYS, date(2024, 2, 2)], report=False),
                       on_start=seen.append)
    return history, out, results, seen


def test_backfill_writes_every_day_in_order(spark, backfill):
    _, out, results, seen = backfill
    assert seen == [*DAYS, date(2024, 2, 2)]
    assert [r.status for r in results] == [DayStatus.PRESENT] * len(DAYS) + [DayStatus.MISSING]
    for table in TABLES:
        assert sorted(p.name for p in (out / table).glob("date=*")) == [f"date={d}" for d in DAYS]
    # Trends see the days written before them, across the month boundary.
    [row] = [r for r in _rows(spark, out, "trends", DAYS[1]) if r["level"] == "flow"]
    assert row["record_lag_p95"] == 201 and row["record_lag_p95_dod"] == 100
    assert row["days_7d"] == 2 and row["slope_7d"] == pytest.approx(100.0)
    assert row["slope_7d_t"] is None and row["growing"] is False  # two days: a slope, no t
    # The job's trends (the day's tables as computed, the days before listed before its writes)
    # are those of the tables as written, read back.
    for day in DAYS:
        assert _undated(_rows(spark, out, "trends", day)) == _undated(r.asDict() for r in compute_trends(spark, str(out), day).collect())


def _undated(rows) -> list[dict]:
    """Rows without their date, nor `final` (the job's, not compute_trends')."""
    return sorted(({k: v for k, v in r.items() if k not in ("date", "final")} for r in rows), key=repr)


def test_rerun_replaces_that_day_and_the_later_trends(spark, backfill):
    """Re-running a day replaces it, leaves the other days' daily tables alone, and recomputes the
    trends of the days after it (docs/design.md §7: a day-over-day change against the day as it is now)."""
    history, out, _, _ = backfill
    day, later = DAYS
    before = {t: _rows(spark, out, t, day) for t in TABLES}
    later_trends = _rows(spark, out, "trends", later)
    others = _snapshot(out, skip=str(day), tables=TABLES[:3])
    results = run_days(spark, RollupOptions(str(history), str(out), [day], report=False))
    assert [(r.day, r.trends_only) for r in results] == [(day, False), (later, True)]
    assert {t: _rows(spark, out, t, day) for t in TABLES} == before  # same answers
    assert _rows(spark, out, "trends", later) == later_trends  # recomputed: the same, nothing changed
    assert _snapshot(out, skip=str(day), tables=TABLES[:3]) == others  # other days untouched, byte for byte
    for table in TABLES:
        for d in DAYS:
            assert len(list((out / table / f"date={d}").glob("*.parquet"))) == 1  # replaced, not appended

    # New history for the day (a third partition): a re-run shows it, still one file, and the
    # next day's trend row is against the day as it is now.
    _write_day(history, day, 0, partitions=3)
    run_days(spark, RollupOptions(str(history), str(out), [day], report=False))
    [flow] = _rows(spark, out, "flow_daily", day)
    assert flow["partitions"] == 3 and flow["record_lag_p95"] == 102
    assert _snapshot(out, skip=str(day), tables=TABLES[:3]) == others
    for d in DAYS:
        assert _undated(_rows(spark, out, "trends", d)) == _undated(r.asDict() for r in compute_trends(spark, str(out), d).collect())
    [row] = [r for r in _rows(spark, out, "trends", later) if r["level"] == "flow"]
    assert row["record_lag_p95_dod"] == 201 - 102 and row["final"] is True


def test_unreadable_segment_is_one_clear_error(spark, tmp_path):
    day = date(2024, 1, 5)
    directory = tmp_path / "history" / f"date={day}"
    directory.mkdir(parents=True)
    (directory / "part-1.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(RollupError) as info:
        run_days(spark, RollupOptions(str(tmp_path / "history"), str(tmp_path / "out"), [day], report=False))
    message = str(info.value)
    assert message.startswith(f"{day}: Spark failed: ") and "\n" not in message
    assert info.value.exit_status == 2


def test_url_without_a_hadoop_connector_is_one_clear_error(spark, tmp_path):
    """s3a:// on a Spark without hadoop-aws: the listing fails before any job; one line that says
    what to add, never a py4j traceback."""
    day = date(2024, 1, 5)
    with pytest.raises(RollupError) as info:
        run_days(spark, RollupOptions("s3a://no-such-bucket/history", str(tmp_path / "out"), [day], report=False))
    message = str(info.value)
    assert message.startswith(f"{day}: Spark failed: ") and "\n" not in message
    assert "S3AFileSystem" in message and "spark.jars.packages" in message
