"""Two writers on one history (issue 41 item 5), through `mirrorlag rollup`: within a handoff's
overlap one writer's samples count per time span (two views never interleave into a shattered
stall), and two sidecars with one writer id are named in a warning line, the day still rolled up."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.rollup.cli_run import rollup
from tests.rollup.history import H, M, day_ms, every, series, write

DAY = date(2024, 6, 4)
T0 = day_ms(DAY)
S = 15_000


def _stamped(rows: list[dict[str, Any]], writer: str) -> list[dict[str, Any]]:
    return [{**r, "writer": writer, "refresh_interval_ms": S} for r in rows]


def _states(ts: list[int], flapping: tuple[int, int] | None = None) -> list[str]:
    """t stalls 10:00-11:00; within `flapping` every third sample reads LAGGING (this writer's view)."""
    out = []
    for i, t in enumerate(ts):
        stalled = T0 + 10 * H <= t < T0 + 11 * H
        flap = flapping is not None and flapping[0] <= t < flapping[1] and i % 3 == 0
        out.append("LAGGING" if stalled and flap else "STALLED" if stalled else "IN_SYNC")
    return out


def _history(root: Path) -> None:
    # t/0: pod-a until 10:34:45, pod-b (4 s later) from 10:25:04: a rolling update with under
    # 10 minutes of both; pod-a flaps within the overlap, where pod-b (more samples) counts alone.
    a = every(T0, T0 + 10 * H + 35 * M, S)
    b = every(T0 + 10 * H + 25 * M + 4_000, T0 + 24 * H, S)
    rows = _stamped(series("A->B", "t", 0, a, _states(a, (T0 + 10 * H + 26 * M, T0 + 10 * H + 34 * M)), [0] * len(a),
                           [0] * len(a)), "pod-a:9464")
    rows += _stamped(series("A->B", "t", 0, b, _states(b), [0] * len(b), [0] * len(b)), "pod-b:9464")
    # t/1: two sidecars with one writer id (pod-x:9464) all day, 7 s apart.
    for phase in (0, 7_000):
        ts = every(T0 + phase, T0 + 24 * H, S)
        rows += _stamped(series("A->B", "t", 1, ts, ["IN_SYNC"] * len(ts), [0] * len(ts), [0] * len(ts)), "pod-x:9464")
    # t/2: one sidecar, one id: no warning.
    ts = every(T0, T0 + 24 * H, S)
    rows += _stamped(series("A->B", "t", 2, ts, ["IN_SYNC"] * len(ts), [0] * len(ts), [0] * len(ts)), "pod-y:9464")
    write(root, DAY, rows)


@pytest.fixture(scope="module")
def rolled(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("two-writers")
    _history(root / "history")
    proc = rollup(spark, "--history", str(root / "history"), "--out", str(root / "out"), "--date", DAY.isoformat(), "--no-report")
    rows = pq.read_table(root / "out" / "partition_daily" / f"date={DAY}").to_pylist()
    return proc, {(r["topic"], r["partition"]): r for r in rows}


def test_a_handoffs_overlap_counts_one_writer_per_time_span(rolled):
    proc, day = rolled
    assert proc.returncode == 0, proc.stderr
    p = day[("t", 0)]
    # Before: pod-a's flaps within the overlap interleaved with pod-b's samples, 13 episodes.
    assert (p["stall_episodes"], p["longest_stall_seconds"], p["stalled_seconds"]) == (1, 3604, 3604)
    assert p["coverage"] == 1.0


def test_two_sidecars_with_one_writer_id_are_named_and_the_day_still_rolled_up(rolled):
    proc, day = rolled
    assert proc.returncode == 0, proc.stderr
    out = " ".join(proc.stdout.split())  # the console may wrap a long line
    assert f"warning: {DAY}: writer 'pod-x:9464' wrote samples of 1 partition less than half its poll interval apart (A->B t/1)" in out
    assert "pod-y:9464" not in out and "pod-a:9464" not in out and "pod-b:9464" not in out
    assert day[("t", 1)]["samples"] == 2 * 5760 and day[("t", 2)]["samples"] == 5760
