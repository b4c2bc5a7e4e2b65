"""Durations at any poll interval and several writers on one history (issue 32, docs/design.md §7 "A day's
accounting"), end to end: histories written by the sidecar's own SegmentWriter (the new columns
as it writes them), rolled up by Spark in local mode and, for one day, by the real CLI."""

from __future__ import annotations

import subprocess
import sys
from datetime import date
from pathlib import Path
from typing import Any, Sequence

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mirrorlag.history.schema import SCHEMA
from mirrorlag.history.writer import SegmentWriter
from mirrorlag.model import PartitionKey, PartitionRow, Snapshot, State
from mirrorlag.rollup import partials
from mirrorlag.rollup.job import run_days
from mirrorlag.rollup.options import RollupOptions
from tests.rollup.history import H, day_ms, every, series, write
from tests.rollup.test_cli import REPO

SLOW_DAY = date(2024, 5, 1)  # polled every 120 s
TWO_DAY = date(2024, 5, 2)  # two sidecars at 15 s
OLD_SCHEMA = pa.schema(list(SCHEMA)[:13])  # the history row before writer and refresh_interval_ms


def _row(topic: str, partition: int, state: State, lag: int) -> PartitionRow:
    return PartitionRow(PartitionKey("A", "B", topic, partition), state, 1000 + lag, 999, "offset-syncs", 1.0, lag,
                        None, None, None, lag * 0.01, 0.0, byte_lag_estimate=lag * 100)


def sidecar(root: Path, writer_id: str, interval_ms: int, polls: Sequence[tuple[int, Sequence[PartitionRow]]]) -> None:
    """What a sidecar with this id and refresh interval writes for these polls (ts ms, rows)."""
    w = SegmentWriter(root, writer_id=writer_id, refresh_interval_ms=interval_ms, segment_s=3600,
                      clock=lambda: polls[0][0] / 1000)
    for ts_ms, rows in polls:
        w.append(Snapshot(ts_ms / 1000, tuple(rows)))
    assert w.close(timeout_s=60)


def two_sidecars(root: Path) -> None:
    """TWO_DAY: pod-a and pod-b poll every 15 s, pod-b 7 s later; t/0 stalls 10:00-11:00, and
    pod-b calls every third stalled sample LAGGING (two views of a flapping partition)."""
    t0 = day_ms(TWO_DAY)
    a, b = [], []
    for i, ts in enumerate(every(t0, t0 + 24 * H, 15_000)):
        stalled = t0 + 10 * H <= ts < t0 + 11 * H
        a.append((ts, [_row("t", 0, State.STALLED if stalled else State.IN_SYNC, i % 50)]))
        b_state = State.LAGGING if stalled and i % 3 == 0 else State.STALLED if stalled else State.IN_SYNC
        b.append((ts + 7_000, [_row("t", 0, b_state, i % 50 + 1)]))
    sidecar(root, "pod-a:9464", 15_000, a)
    sidecar(root, "pod-b:9464", 15_000, b)


def slow_day(root: Path) -> None:
    """SLOW_DAY: a sidecar polling every 120 s sees t/0 STALLED and t/1 IN_SYNC all day; segments
    written before rows had a writer and an interval hold old/0 LAGGING at 120 s and old/1 at 15 s."""
    t0 = day_ms(SLOW_DAY)
    sidecar(root, "slow:9464", 120_000, [(ts, [_row("t", 0, State.STALLED, 7), _row("t", 1, State.IN_SYNC, 0)])
                                         for ts in every(t0, t0 + 24 * H, 120_000)])
    slow, fast = every(t0, t0 + 24 * H, 120_000), every(t0, t0 + 24 * H, 15_000)
    rows = series("A->B", "old", 0, slow, ["LAGGING"] * len(slow), [3] * len(slow)) + \
        series("A->B", "old", 1, fast, ["LAGGING"] * len(fast), [3] * len(fast))
    path = write(root, SLOW_DAY, rows, name="part-0000000000000-00000000.parquet")
    pq.write_table(pq.read_table(path).select(OLD_SCHEMA.names).cast(OLD_SCHEMA), path)
    assert pq.read_schema(path).names == OLD_SCHEMA.names


def _rows(out: Path, day: date, table: str = "partition_daily") -> dict[Any, dict[str, Any]]:
    rows = pq.read_table(out / table / f"date={day}").to_pylist()
    return {(r["topic"], r["partition"]) if "partition" in r else r["flow"]: r for r in rows}


@pytest.fixture(scope="module")
def rolled(spark, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("rollup-writers")
    slow_day(root / "history")
    two_sidecars(root / "history")
    results = run_days(spark, RollupOptions(str(root / "history"), str(root / "out"), [SLOW_DAY, TWO_DAY], report=False))
    assert [r.status.name for r in results] == ["PRESENT", "PRESENT"]
    return root / "out"


def test_the_history_rows_say_who_wrote_them_and_how_often(rolled):
    history = rolled.parent / "history" / f"date={TWO_DAY}"
    table = pa.concat_tables([pq.read_table(p) for p in sorted(history.glob("part-*.parquet"))])
    assert sorted(set(table.column("writer").to_pylist())) == ["pod-a:9464", "pod-b:9464"]
    assert set(table.column("refresh_interval_ms").to_pylist()) == {15_000}
    assert not list(history.glob(".*.tmp"))


def test_a_120_s_poll_reads_a_day_long_stall_as_86400_s(rolled):
    day = _rows(rolled, SLOW_DAY)
    stall = day[("t", 0)]
    assert stall["samples"] == 720 and stall["coverage"] == 1.0
    assert stall["out_of_sync_seconds"] == stall["stalled_seconds"] == stall["longest_stall_seconds"] == 86_400
    assert stall["stall_episodes"] == 1
    assert (day[("t", 1)]["coverage"], day[("t", 1)]["out_of_sync_seconds"]) == (1.0, 0)


def test_segments_written_before_the_columns_still_roll_up_as_before(rolled):
    day = _rows(rolled, SLOW_DAY)
    # Without their interval, samples stand for --max-gap-seconds (60 s) at most, as before.
    assert (day[("old", 0)]["samples"], day[("old", 0)]["out_of_sync_seconds"], day[("old", 0)]["coverage"]) == (720, 43_200, 0.5)
    assert (day[("old", 1)]["samples"], day[("old", 1)]["out_of_sync_seconds"], day[("old", 1)]["coverage"]) == (5760, 86_400, 1.0)


def test_two_sidecars_give_the_figures_of_one_and_the_stall_stays_one_episode(rolled):
    [(key, part)] = _rows(rolled, TWO_DAY).items()
    assert key == ("t", 0)
    assert part["samples"] == 5760 and part["coverage"] == 1.0  # not 11,520
    assert (part["stall_episodes"], part["longest_stall_seconds"], part["stalled_seconds"]) == (1, 3600, 3600)
    assert part["out_of_sync_seconds"] == 3600
    assert (part["record_lag_min"], part["record_lag_max"]) == (0, 49)  # pod-a's lags (pod-b's are 1..50)
    flow = _rows(rolled, TWO_DAY, "flow_daily")["A->B"]
    assert (flow["samples"], flow["stall_episodes"], flow["out_of_sync_seconds"]) == (5760, 1, 3600)


def test_the_cli_rolls_up_a_120_s_poll(tmp_path):
    slow_day(tmp_path / "history")
    # As tests/rollup/test_cli.py runs it, with room for a JVM's start on a loaded machine.
    proc = subprocess.run([sys.executable, "-m", "mirrorlag", "rollup", "--history", str(tmp_path / "history"),
                           "--out", str(tmp_path / "out"), "--date", SLOW_DAY.isoformat(), "--no-report"],
                          cwd=REPO, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr
    day = _rows(tmp_path / "out", SLOW_DAY)
    assert (day[("t", 0)]["out_of_sync_seconds"], day[("t", 0)]["coverage"], day[("t", 0)]["stall_episodes"]) == (86_400, 1.0, 1)
    assert day[("old", 0)]["out_of_sync_seconds"] == 43_200


def test_segments_before_and_after_the_writer_column_are_read_together(tmp_path):
    """One task may read both (which segments share one depends on their sizes): the old one's
    missing `writer` is a null of the new one's dictionary type, not a string beside it."""
    slow_day(tmp_path)
    paths = sorted(str(p) for p in (tmp_path / f"date={SLOW_DAY}").glob("part-*.parquet"))
    table = partials.read_segments(paths)
    writers = table.column("writer").to_pylist()
    assert writers.count(None) == 720 + 5760 and set(writers) == {None, "slow:9464"}
