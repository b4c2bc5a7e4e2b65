"""What late data costs the nightly rollup (issue 32). Run by hand, never in the suite:

    .venv/bin/python -m tests.bench.bench_late_data --partitions 200 --days 28 [--data /tmp/late-bench]

Writes `--days` days of history (bench_rollup.generate: `--partitions` partitions every
`--interval` s, small on purpose: the cost that matters here is per day and per Spark job), then
in one local SparkSession (`--master`, default local[2]) times with the job's own run_days:
  1. the backfill of all the days (every day rolled up, trends included);
  2. one late segment added to the first day, then the nightly form (lookback over the days):
     that day rolled up again and the trends of the days after it recomputed (55 since issue 41, 27 before);
  3. the same again with nothing changed: the listing only (no Spark job).
Prints each wall time, the ratios to (1) and the load average.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path

import pyarrow.parquet as pq

from mirrorlag.rollup.job import run_days
from mirrorlag.rollup.options import RollupOptions
from tests.bench.bench_rollup import generate


def _late_segment(history: Path, day: date) -> None:
    """A copy of the day's first segment under a new name: late rows (the figures change little,
    the manifest sees a new input)."""
    directory = history / f"date={day.isoformat()}"
    first = sorted(p for p in directory.iterdir() if p.suffix == ".parquet")[0]
    pq.write_table(pq.read_table(first), directory / "part-late.parquet")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=200)
    ap.add_argument("--interval", type=int, default=60)
    ap.add_argument("--days", type=int, default=28)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--data", default=None, help="where the history goes (default: a temporary directory)")
    args = ap.parse_args()

    from pyspark.sql import SparkSession

    root = Path(args.data or tempfile.mkdtemp(prefix="mirrorlag-late-"))
    history, out = root / "history", root / "out"
    shutil.rmtree(root, ignore_errors=True)
    first = date(2024, 1, 1)
    days = [first + timedelta(days=i) for i in range(args.days)]
    rows = sum(generate(history, d, args.partitions, args.interval, seed=i) for i, d in enumerate(days))
    print(f"{args.days} days x {args.partitions} partitions every {args.interval} s: {rows:,} rows")

    spark = (SparkSession.builder.master(args.master).appName("bench-late")
             .config("spark.ui.enabled", "false").config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    base = RollupOptions(str(history), str(out), days, report=False, max_gap_seconds=float(args.interval))
    try:
        timings = {}
        t0 = time.perf_counter()
        full = run_days(spark, base)
        timings["backfill, every day"] = time.perf_counter() - t0
        assert sum(not r.trends_only for r in full) == args.days
        _late_segment(history, first)
        nightly = RollupOptions(**{**base.__dict__, "lookback": True})
        t0 = time.perf_counter()
        late = run_days(spark, nightly)
        timings["late day + later trends"] = time.perf_counter() - t0
        rolled = [r.day for r in late if r.action.value == "roll" and not r.trends_only]
        recomputed = [r.day for r in late if r.trends_only]
        assert rolled == [first] and len(recomputed) == min(27, args.days - 1), (rolled, recomputed)
        t0 = time.perf_counter()
        run_days(spark, nightly)
        timings["nothing changed"] = time.perf_counter() - t0
    finally:
        spark.stop()
    whole = timings["backfill, every day"]
    for name, seconds in timings.items():
        print(f"{name:28s} {seconds:8.1f} s   {seconds / whole:6.3f} x the backfill")
    print(f"load average {os.getloadavg()}")
    if not args.data:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
