"""Durations exact at any poll interval (issue 41 item 4), through `mirrorlag rollup`: the time
between midnight and the day's first sample counts (at most 4 poll intervals, in the first
sample's state), and a stall counts from when its first STALLED sample's time lag says it began
(at most back to the previous sample), so a day-long stall reads 86,400 s and a 1 h stall 3,600 s
at 15, 120 and 600 s polls, whatever the poll's phase."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mirrorlag.history.group_schema import GROUPS_DIR, SCHEMA as GROUPS_SCHEMA
from tests.rollup.cli_run import rollup
from tests.rollup.history import H, day_ms, every, series, write

DAY = date(2024, 6, 3)
T0 = day_ms(DAY)
# (poll ms, phase ms): the first sample at 00:00:00, 00:00:07, 00:01:59 or 00:09:59.
POLLS = [(15_000, 0), (15_000, 7_000), (120_000, 7_000), (120_000, 119_000), (600_000, 7_000), (600_000, 599_000)]


def _stamped(rows: list[dict[str, Any]], poll: int) -> list[dict[str, Any]]:
    """As a sidecar with this poll interval writes them (one writer per partition here)."""
    return [{**r, "writer": f"w{poll}:{r['topic']}", "refresh_interval_ms": poll} for r in rows]


def _history(root: Path) -> None:
    rows = []
    for i, (poll, phase) in enumerate(POLLS):
        ts = every(T0 + phase, T0 + 24 * H, poll)
        # STALLED all day: stalled since yesterday 21:00 (its time lag says so).
        rows += _stamped(series("A->B", "day", i, ts, ["STALLED"] * len(ts), [5] * len(ts),
                                [t - T0 + 3 * H for t in ts]), poll)
        # Stalled for one hour, from the 10:00 poll (its sample still in sync) to the 11:00 poll
        # (the LRO moves again): the samples between are STALLED, their time lag counting from 10:00.
        start, end = T0 + 10 * H + phase, T0 + 11 * H + phase
        stalled = [start < t < end for t in ts]
        rows += _stamped(series("A->B", "hour", i, ts, ["STALLED" if s else "IN_SYNC" for s in stalled],
                                [5 if s else 0 for s in stalled], [t - start if s else 0 for t, s in zip(ts, stalled)]), poll)
    write(root, DAY, rows)
    # A consumer group read every 120 s from 00:01:59, READY all day: its first run stands for the
    # 119 s since midnight too, as a partition's first sample does.
    groups = [{"ts": ts, "source": "A", "target": "B", "group": "g", "topic": "day", "partition": 0, "committed": 100,
               "resume_source_offset": 100, "reread_records": 0, "skipped_records": 0, "not_yet_mirrored_records": 0,
               "checkpoint_age_ms": 5_000, "state": "READY", "because": None, "active_on_target": False,
               "writer": "g:9464", "refresh_interval_ms": 120_000} for ts in every(T0 + 119_000, T0 + 24 * H, 120_000)]
    (root / GROUPS_DIR / f"date={DAY}").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(groups, schema=GROUPS_SCHEMA), root / GROUPS_DIR / f"date={DAY}" / "part-0.parquet")


@pytest.fixture(scope="module")
def day(spark, tmp_path_factory) -> dict[Any, dict[str, Any]]:
    root = tmp_path_factory.mktemp("durations")
    _history(root / "history")
    proc = rollup(spark, "--history", str(root / "history"), "--out", str(root / "out"), "--date", DAY.isoformat(), "--no-report")
    assert proc.returncode == 0, proc.stderr
    rows = pq.read_table(root / "out" / "partition_daily" / f"date={DAY}").to_pylist()
    groups = pq.read_table(root / "out" / "group_daily" / f"date={DAY}").to_pylist()
    return {**{(r["topic"], r["partition"]): r for r in rows}, **{("group", r["group"]): r for r in groups}}


@pytest.mark.parametrize("i", range(len(POLLS)), ids=[f"{p // 1000}s-phase{f // 1000}s" for p, f in POLLS])
def test_a_day_long_stall_reads_86400_s(day, i):
    r = day[("day", i)]
    assert (r["out_of_sync_seconds"], r["stalled_seconds"], r["longest_stall_seconds"], r["covered_seconds"]) == \
        (86_400, 86_400, 86_400, 86_400)
    assert (r["coverage"], r["stall_episodes"]) == (1.0, 1)


@pytest.mark.parametrize("i", range(len(POLLS)), ids=[f"{p // 1000}s-phase{f // 1000}s" for p, f in POLLS])
def test_a_one_hour_stall_reads_3600_s(day, i):
    r = day[("hour", i)]
    assert (r["stalled_seconds"], r["longest_stall_seconds"], r["out_of_sync_seconds"], r["stall_episodes"]) == \
        (3600, 3600, 3600, 1)
    assert r["coverage"] == 1.0


def test_a_groups_first_run_stands_for_the_time_since_midnight(day):
    g = day[("group", "g")]
    assert (g["samples"], g["covered_seconds"], g["ready_seconds"], g["coverage"]) == (720, 86_400, 86_400, 1.0)
