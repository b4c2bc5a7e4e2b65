"""The day's keys: every partition named, one first seen late included, and partitions grouped on
the key's own columns."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from mirrorlag.rollup import job, samples
from mirrorlag.rollup.job import run_days
from mirrorlag.rollup.options import RollupOptions
from tests.rollup.history import H, M, day_ms, every, series, write

DAY = date(2024, 5, 6)
T0 = day_ms(DAY)
TABLES = ("partition_daily", "topic_daily", "flow_daily", "trends")


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("rollup-keys") / "history"
    early = every(T0, T0 + 24 * H, M)
    late = every(T0 + 20 * H, T0 + 24 * H, M)  # first seen long after the others
    rows = (series("A->B", "orders", 0, early, ["IN_SYNC"] * len(early), [i % 5 for i in range(len(early))])
            + series("A->B", "orders", 1, late, ["LAGGING"] * len(late), [100 + i for i in range(len(late))])
            + series("A->C", "events", 0, early[::2], ["STALLED"] * len(early[::2]), [7] * len(early[::2])))
    write(root, DAY, rows[: len(rows) // 2], name="part-1.parquet")
    write(root, DAY, rows[len(rows) // 2:], name="part-2.parquet")
    return root


def _rollup(spark, history: Path, out: Path) -> dict:
    [result] = run_days(spark, RollupOptions(str(history), str(out), [DAY], report=False))
    tables = {}
    for table in TABLES:
        df = spark.read.parquet(str(out / table))
        tables[table] = (df.schema, sorted(map(repr, df.collect())))
    partitions = [r.asDict() for r in spark.read.parquet(str(out / "partition_daily")).orderBy("flow", "topic", "partition").collect()]
    return {"result": result, "tables": tables, "partitions": partitions}


@pytest.fixture(scope="module")
def plain(spark, history, tmp_path_factory):
    return _rollup(spark, history, tmp_path_factory.mktemp("out-plain"))


def _spy_keys(monkeypatch) -> list:
    """The columns each day's partial rows are shuffled on."""
    seen = []
    real = samples.partition_days

    def spy(spark, source, window, max_gap_s, edges, tasks):
        per = real(spark, source, window, max_gap_s, edges, tasks)
        seen.append([c for c in per.columns if c in samples.PARTITION_KEY])
        return per

    monkeypatch.setattr(job, "partition_days", spy)
    return seen


def test_every_partition_named_including_one_first_seen_late(plain):
    rows = [(r["flow"], r["topic"], r["partition"], r["samples"], r["byte_lag_max"], r["freshness_lag_max_s"])
            for r in plain["partitions"]]
    assert rows == [("A->B", "orders", 0, 1440, 400, 0.02), ("A->B", "orders", 1, 240, 33900, 1.695),
                    ("A->C", "events", 0, 720, 700, 0.035)]
    assert plain["result"].partitions == 3


def test_the_pass_groups_on_the_keys_own_columns(spark, history, plain, tmp_path, monkeypatch):
    # No hash of the key stands in for it (two keys sharing a hash would be merged).
    seen = _spy_keys(monkeypatch)
    got = _rollup(spark, history, tmp_path / "out")
    assert got["tables"] == plain["tables"]
    assert seen == [samples.PARTITION_KEY]
