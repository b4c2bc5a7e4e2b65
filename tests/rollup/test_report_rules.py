"""The report follows the tables' rules (issue 32): its charts account samples as the tables do
(4 poll intervals of the writer, one writer per partition-day), a provisional day says so, and
the report is part of the day's commit."""

from __future__ import annotations

import re
from datetime import date
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from mirrorlag.model import State
from mirrorlag.rollup import job, report_data
from mirrorlag.rollup.charts import STATE_COLORS, _spans
from mirrorlag.rollup.job import run_days
from mirrorlag.rollup.manifest import Manifest, Segment, provisional_why
from mirrorlag.rollup.paths import REPORTS
from mirrorlag.rollup.options import RollupOptions
from mirrorlag.rollup.samples import DayWindow, read_day
from tests.rollup.history import H, day_ms, every, series, write
from tests.rollup.test_writers import _row, sidecar

DAY = date(2024, 6, 3)
T0 = day_ms(DAY)
KEY = {"flow": "A->B", "source": "A", "target": "B", "topic": "t", "partition": 0}


def two_slow_sidecars(root: Path) -> None:
    """10:00-11:30, two sidecars polling every 120 s, pod-b 7 s after pod-a: pod-a sees t/0
    STALLED throughout, pod-b LAGGING (two views of one partition)."""
    polls = every(T0 + 10 * H, T0 + 10 * H + 90 * 60_000, 120_000)
    sidecar(root, "pod-a:9464", 120_000, [(ts, [_row("t", 0, State.STALLED, 40)]) for ts in polls])
    sidecar(root, "pod-b:9464", 120_000, [(ts + 7_000, [_row("t", 0, State.LAGGING, 41)]) for ts in polls])


@pytest.fixture(scope="module")
def slow(spark, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("report-rules")
    two_slow_sidecars(root / "history")
    [result] = run_days(spark, RollupOptions(str(root / "history"), str(root / "out"), [DAY]))
    assert result.status.name == "PRESENT" and result.report
    return root


def _table(out: Path, table: str) -> list[dict]:
    return pq.read_table(out / table / f"date={DAY}").to_pylist()


def test_a_short_historys_chart_counts_the_samples_the_tables_count(spark, slow):
    [part] = _table(slow / "out", "partition_daily")
    # pod-a's, each 120 s (the last 4 polls), and the stall from where its first sample's time lag
    # (0.4 s) says it began
    assert part["samples"] == 45 and part["stalled_seconds"] == pytest.approx(44 * 120 + 480 + 0.4)
    window = DayWindow(DAY)
    [series] = report_data.drawn_series(lambda: read_day(spark, str(slow / "history" / f"date={DAY}")),
                                        _table(slow / "out", "flow_daily"), [KEY], [], window.start_ms,
                                        window.end_ms, 60_000)
    assert series.every_sample and set(series.states) == {"STALLED"}  # pod-a's view only, not pod-b's LAGGING
    shaded = sum(end - start for start, end, color in _spans(series) if color == STATE_COLORS["STALLED"])
    # not 7 s of every 120 (mixed, capped at 60 s); the chart does not shade the stall's 0.4 s look-back
    assert shaded * 3600 == pytest.approx(part["stalled_seconds"] - 0.4)


def test_the_captions_say_the_rule(slow):
    html = next((slow / "out" / "reports").glob("*.html")).read_text(encoding="utf-8")
    assert "drawn sample by sample" in html
    assert html.count("at most 4 poll intervals of the sidecar that wrote it") == 2  # the chart's and the coverage's
    assert "at most 60 s" not in html


def test_a_final_days_report_has_no_provisional_banner(slow):
    html = next((slow / "out" / "reports").glob("*.html")).read_text(encoding="utf-8")
    assert all(r["final"] for r in _table(slow / "out", "partition_daily"))
    assert 'class="provisional"' not in html and "(provisional)" not in html


def test_a_provisional_days_report_says_so_and_why(spark, slow, tmp_path):
    """Rolled up at noon of the day: its rows say final = false, and the report carries a banner
    saying the day is provisional, why, and that it stays out of other days' trends."""
    opts = RollupOptions(str(slow / "history"), str(tmp_path / "out"), [DAY], now_ms=T0 + 12 * H)
    [result] = run_days(spark, opts)
    assert not result.final
    assert not any(r["final"] for r in _table(tmp_path / "out", "partition_daily"))
    html = Path(result.report).read_text(encoding="utf-8")
    assert "(provisional)</h1>" in html
    [banner] = re.findall(r'<div class="provisional"[^>]*>(.*?)</div>', html)
    assert "Provisional day" in banner
    assert f"not over when it was rolled up ({DAY} 12:00 UTC)" in banner
    assert "out of other days' trends" in banner


def test_provisional_why_names_the_settle_time():
    segments = [Segment("part-0.parquet", 100, T0 + 24 * H + 10 * 60_000)]  # written 00:10 the next day
    assert provisional_why(DAY, segments, T0 + 24 * H + 70 * 60_000, 3_600_000) is None
    why = provisional_why(DAY, segments, T0 + 24 * H + 30 * 60_000, 3_600_000)
    assert why is not None and "written 20 min before" in why and "settle time (60 min, --settle-minutes)" in why


class Killed(Exception):
    """A job stopped at this point."""


def _committed_report(out: Path) -> tuple[Manifest, str]:
    manifest = Manifest.from_json((out / "_manifests" / f"date={DAY}.json").read_text(), "test")
    [name] = manifest.files[REPORTS]
    return manifest, (out / REPORTS / f"date={DAY}" / name).read_text(encoding="utf-8")


def test_the_report_is_part_of_the_days_commit(spark, tmp_path, monkeypatch):
    """The report a reader finds is always the one the day's manifest names, the tables' version:
    a job killed before its commit leaves the previous report, one killed after it leaves none,
    and the next run publishes the committed one."""
    history, out = tmp_path / "history", tmp_path / "out"
    two_slow_sidecars(history)
    run_days(spark, RollupOptions(str(history), str(out), [DAY]))
    published = out / "reports" / f"mirrorlag-{DAY}.html"
    first, html = _committed_report(out)
    assert published.read_text(encoding="utf-8") == html and ">1</div><div class=\"k\">partitions" in html

    # Late data: a second partition. Killed once its tables and report are written, before the commit.
    sidecar(history, "pod-c:9464", 120_000, [(T0 + 10 * H + i * 120_000, [_row("u", 1, State.IN_SYNC, 0)]) for i in range(5)])

    def kill(*args, **kwargs):
        raise Killed()

    with monkeypatch.context() as m:
        m.setattr(job, "_commit", kill)
        with pytest.raises(Killed):
            run_days(spark, RollupOptions(str(history), str(out), [DAY]))
    assert _committed_report(out) == (first, html)
    assert not published.exists() or published.read_text(encoding="utf-8") == html  # never the uncommitted figures

    # Killed after the commit, before the copy people read: none, rather than the replaced one.
    with monkeypatch.context() as m:
        m.setattr(job, "_publish_report", kill)
        with pytest.raises(Killed):
            run_days(spark, RollupOptions(str(history), str(out), [DAY]))
    second, html = _committed_report(out)
    assert second.run != first.run and ">2</div><div class=\"k\">partitions" in html
    assert not published.exists()
    assert [p.name for p in (out / REPORTS / f"date={DAY}").iterdir()] == list(second.files[REPORTS])  # the replaced one went

    # The next run finds the day unchanged and publishes its committed report.
    [result] = run_days(spark, RollupOptions(str(history), str(out), [DAY], lookback=True))
    assert result.action.name == "UNCHANGED"
    assert published.read_text(encoding="utf-8") == html


def test_a_later_days_report_follows_its_recomputed_trends(spark, tmp_path):
    """D1 rolled up from its first half (lag 10), D2 (lag 50): D2's report says p95 +40 day over
    day. The rest of D1 arrives (lag 1,000): the next run rolls D1 up again and recomputes D2's
    trends, and D2's report says what its trends table now says, -950."""
    d1, d2 = date(2024, 6, 10), date(2024, 6, 11)
    history, out = tmp_path / "history", tmp_path / "out"

    def hours(day: date, first: int, last: int, lag: int, name: str) -> None:
        ts = every(day_ms(day) + first * H, day_ms(day) + last * H, 300_000)
        write(history, day, series("A->B", "orders", 0, ts, ["IN_SYNC"] * len(ts), [lag] * len(ts)), name=name)

    hours(d1, 0, 12, 10, "part-0.parquet")
    hours(d2, 0, 24, 50, "part-0.parquet")
    opts = RollupOptions(str(history), str(out), [d1, d2], max_gap_seconds=300, lookback=True)
    run_days(spark, opts)
    report = out / "reports" / f"mirrorlag-{d2}.html"
    assert _flow_dod(report.read_text(encoding="utf-8")) == "+40"

    hours(d1, 12, 24, 1000, "part-1.parquet")
    results = run_days(spark, opts)
    assert [(r.day, r.trends_only) for r in results] == [(d1, False), (d2, True)]
    manifest, html = _committed_report_of(out, d2)
    [trend] = [r for r in pq.read_table([out / "trends" / f"date={d2}" / f for f in manifest.files["trends"]][0]).to_pylist()
               if r["level"] == "flow"]
    assert trend["record_lag_p95_dod"] == -950
    assert _flow_dod(html) == "−950" and report.read_text(encoding="utf-8") == html
    assert html.count("data:image/png;base64,") == 3  # the charts kept


def _flow_dod(html: str) -> str:
    """The flows table's "p95 Δ day" cell of its one flow."""
    [row] = re.findall(r'<section id="flows">.*?<tbody><tr>(.*?)</tr>', html, re.S)
    return re.findall(r"<td[^>]*>(.*?)</td>", row)[15]


def _committed_report_of(out: Path, day: date) -> tuple[Manifest, str]:
    manifest = Manifest.from_json((out / "_manifests" / f"date={day}.json").read_text(), "test")
    [name] = manifest.files[REPORTS]
    return manifest, (out / REPORTS / f"date={day}" / name).read_text(encoding="utf-8")
