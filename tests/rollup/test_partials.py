"""The pass's map side and merge with real Spark: segments read in any grouping and order, by
pyarrow or by Spark's scan, give the same tables; buckets in numpy are Spark's."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import functions as F

from mirrorlag.rollup import buckets, histograms, job
from mirrorlag.rollup.job import run_days
from mirrorlag.rollup.options import RollupOptions
from mirrorlag.rollup.samples import DaySource
from tests.rollup.history import H, day_ms, every, series, write

DAY = date(2024, 7, 1)
T0 = day_ms(DAY)
TABLES = ("partition_daily", "topic_daily", "flow_daily", "trends")


def _rows() -> list[dict]:
    rng = np.random.default_rng(11)
    out = []
    for topic, partition in (("orders", 0), ("orders", 1), ("events", 0)):
        ts = sorted(rng.choice(every(T0, T0 + 24 * H, 1000), 3000, replace=False).tolist())
        states = rng.choice(["IN_SYNC", "STALLED", "LAGGING", "GONE", "AT_RISK"], len(ts), p=[0.6, 0.2, 0.1, 0.05, 0.05]).tolist()
        lags = [None if rng.random() < 0.02 else int(v) for v in rng.integers(0, 10**7, len(ts))]
        out += series("A->B", topic, partition, ts, states, lags)
    return out


def _tables(spark, out: Path) -> dict:
    return {t: (spark.read.parquet(str(out / t)).schema, sorted(map(repr, spark.read.parquet(str(out / t)).collect())))
            for t in TABLES}


@pytest.fixture(scope="module")
def whole(spark, tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("partials-whole")
    write(root / "history", DAY, _rows())
    run_days(spark, RollupOptions(str(root / "history"), str(root / "out"), [DAY], report=False))
    return _tables(spark, root / "out")


def _spread_history(root: Path) -> Path:
    """The same rows dealt at random over five segments whose names are not in time order, and
    with a partition (events/0) entirely in one of them."""
    rows = _rows()
    rng = np.random.default_rng(5)
    deal = rng.integers(0, 4, len(rows))
    for i, r in enumerate(rows):
        if r["topic"] == "events":
            deal[i] = 4
    for segment in range(5):
        picked = [rows[i] for i in rng.permutation(len(rows)) if deal[i] == segment]
        write(root, DAY, picked, name=f"part-{(segment * 7) % 5}-{segment}.parquet")
    return root


def test_segments_in_any_grouping_and_order_give_the_same_tables(spark, whole, tmp_path, monkeypatch):
    history = _spread_history(tmp_path / "history")
    monkeypatch.setattr(job, "SEGMENT_BYTES", 1)  # one map task per segment
    seen = []
    real = job.day_source
    monkeypatch.setattr(job, "day_source", lambda *a: seen.append(real(*a)) or seen[-1])
    run_days(spark, RollupOptions(str(history), str(tmp_path / "out"), [DAY], report=False))
    assert len(seen[0].files) == 5
    assert _tables(spark, tmp_path / "out") == whole


def test_spark_scan_gives_the_same_tables_as_pyarrow(spark, whole, tmp_path, monkeypatch):
    # A remote history is read by Spark's scan and handed to the map side in Arrow batches.
    history = _spread_history(tmp_path / "history")
    monkeypatch.setattr(job, "day_source", lambda history, day, segments, cores: DaySource(job.day_dir(history, day)))
    run_days(spark, RollupOptions(str(history), str(tmp_path / "out"), [DAY], report=False))
    assert _tables(spark, tmp_path / "out") == whole


def test_numpy_buckets_are_sparks(spark):
    table = buckets.exact_edges()
    rng = np.random.default_rng(2)
    values = np.unique(np.r_[np.arange(-5, 1000), table - 1, table, table + 1,
                             rng.integers(0, np.iinfo(np.int64).max, 20_000, dtype=np.int64),
                             np.iinfo(np.int64).max])
    expected = spark.createDataFrame(pa.table({"v": values})).select(
        "v", histograms.bucket(F.col("v")).alias("b")).toArrow().sort_by("v").column("b").to_numpy()
    assert (buckets.bucket(values, table) == expected).all()
    assert (buckets.strict_buckets(values[values >= 100]) == expected[values >= 100]).all()


def test_strict_log_is_sparks_log_bit_for_bit(spark):
    # Spark's `log` is StrictMath.log (fdlibm); every branch of e_log.c: |f| < 2**-20 with k = 0
    # and not, f == 0 (powers of two), the two polynomial forms either side of sqrt(2), and the
    # doubles where numpy's log and fdlibm's part (large quotients).
    rng = np.random.default_rng(5)
    ulps = rng.integers(-2_000, 2_000, 5_000)
    x = np.unique(np.r_[
        np.exp(rng.uniform(-700, 700, 100_000)),
        (np.float64(1.0).view(np.int64) + ulps).view(np.float64),
        (np.float64(8.0).view(np.int64) + ulps).view(np.float64),
        2.0 ** np.arange(-1000, 1000, 7), np.sqrt(2) * 2.0 ** np.arange(-20, 20),
        (np.sqrt(np.float64(2)).view(np.int64) + ulps).view(np.float64),
        rng.integers(10**14, np.iinfo(np.int64).max, 50_000).astype(np.float64) / 100,
    ])
    got = spark.createDataFrame(pa.table({"x": x})).select("x", F.log("x").alias("l")).toArrow().sort_by("x")
    assert (got.column("x").to_numpy() == x).all()
    assert (buckets.strict_log(x).view(np.int64) == got.column("l").to_numpy().view(np.int64)).all()
    assert (buckets.strict_log(x) != np.log(x)).any()  # the test can tell the two apart
