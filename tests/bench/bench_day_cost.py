"""A rolled-up day's fixed cost on the test suite's JVM. Run by hand, never in the suite:

    PYTHONPATH=TREE .venv/bin/python -m tests.bench.bench_day_cost [--runs 5] [--profile]

One UTC day of one partition polled every 300 s (288 rows, bench_rollup's generator), rolled up
--runs times in one SparkSession built as tests/conftest.py's `spark` fixture builds it (local[2],
C1 only, the serial GC, report on): what each of the suite's rolled-up days costs beyond its data.
Prints each run's wall time, the driver's CPU and Spark's (the JVM and its Python workers): the
CPU figures barely move when other work shares the machine, the wall does. With --profile, a
cProfile of the last run, mirrorlag's functions by cumulative time.

To compare two commits, run it from each tree (a `git worktree`), alternating, and compare the
warm runs (2 onwards).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import shutil
import tempfile
import time
from datetime import date
from pathlib import Path

from tests.bench.bench_rollup import generate, spark_cpu_seconds
from tests.integration.rollup_spark import suite_session


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--profile", action="store_true", help="cProfile the last run")
    parser.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) / "mirrorlag-day-cost")
    args = parser.parse_args()

    from mirrorlag.rollup.job import run_days
    from mirrorlag.rollup.options import RollupOptions

    day, history = date(2026, 11, 20), args.data / "history"
    if not (history / f"date={day.isoformat()}").exists():
        generate(history, day, partitions=1, interval_s=300)
    spark = suite_session("bench-day-cost")
    profile = cProfile.Profile()
    for run in range(1, args.runs + 1):
        out = args.data / "out"
        shutil.rmtree(out, ignore_errors=True)
        options = RollupOptions(history=str(history), out=str(out), days=[day])
        profiled = args.profile and run == args.runs
        load = os.getloadavg()[0]
        wall, driver, jvm = time.perf_counter(), time.process_time(), spark_cpu_seconds()
        if profiled:
            profile.enable()
        run_days(spark, options)
        if profiled:
            profile.disable()
        print(f"run {run}: {time.perf_counter() - wall:5.2f} s wall, driver CPU {time.process_time() - driver:4.2f} s, "
              f"Spark CPU {spark_cpu_seconds() - jvm:5.2f} s (load {load:.1f})", flush=True)
    spark.stop()
    if args.profile:
        text = io.StringIO()
        pstats.Stats(profile, stream=text).sort_stats("cumulative").print_stats("mirrorlag", 40)
        print(text.getvalue())


if __name__ == "__main__":
    main()
