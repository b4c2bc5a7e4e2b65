"""End-to-end cost of the nightly rollup against a bare Parquet scan. Run by hand, never in the suite:

    .venv/bin/python -m tests.bench.bench_rollup --partitions 10000 --interval 15 [--data /tmp/rollup-bench]

Generates one UTC day of history (10,000 partitions every 15 s = 57.6 M rows, in chunks of 30 min
with pyarrow; reused when already there), then in one local SparkSession (`--master`, default
local[2]) times, side by side:
  - floors: spark.read.parquet(day).agg(count(*), sum(record_lag)), and a scan of the ten columns
    the rollup reads to Spark's noop sink, each twice (cold, then warm);
  - rollup: the whole `mirrorlag rollup` for that day (daily tables, trends, HTML report), --runs times.
Prints wall and Spark CPU seconds (JVM and Python workers), the load average, and the ratios to
the warm floors. Target: rollup <= 3 min and <= 4x the 10-column floor on a 2-core machine.

With `--cluster N`, the same again, in the same run, on a Spark standalone cluster of N workers of
one core each (master and workers from the pyspark wheel, on loopback, as
tests/integration/test_rollup_cluster.py starts them): this process is the driver (client mode),
the executors run in a venv without mirrorlag and get it as the shipped zip (addPyFile, what
spark-submit --py-files does), `--executor-memory` each:

    .venv/bin/python -m tests.bench.bench_rollup --master 'local[2]' --cluster 2
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from mirrorlag.history.schema import SCHEMA  # the sidecar's own: the rollup's input contract

STATES = np.array(["IN_SYNC", "LAGGING", "STALLED", "AT_RISK", "UNKNOWN"])


def generate(root: Path, day: date, partitions: int, interval_s: int, chunk_polls: int = 120, seed: int = 7) -> int:
    """Write one day of history under root/date=DAY/; returns the row count.

    Realistic shape: two flows, topics of 100 partitions, per-partition append rates spread over
    three orders of magnitude, mostly IN_SYNC with a few lagging, stalled and at-risk episodes
    per partition and day during which record and time lag grow, the odd UNKNOWN poll.
    """
    rng = np.random.default_rng(seed)
    day_dir = root / f"date={day.isoformat()}"
    day_dir.mkdir(parents=True, exist_ok=True)
    polls = 86_400 // interval_s
    start_ms = int(datetime(day.year, day.month, day.day, tzinfo=timezone.utc).timestamp() * 1000)

    flows = np.where(np.arange(partitions) < partitions // 2, "eu-west", "ap-south")
    topic_ids = (np.arange(partitions) % (partitions // 2 or 1)) // 100
    topic_names = np.array([f"orders-{t:03d}" for t in range(max(1, topic_ids.max() + 1))])[topic_ids]
    part_no = (np.arange(partitions) % 100).astype(np.int32)
    rate = rng.lognormal(mean=2.0, sigma=1.5, size=partitions)  # records/s
    base_leo = rng.integers(10**6, 10**9, size=partitions)
    sizes = rng.integers(100, 2000, size=partitions)
    # Up to 3 episodes per partition: (start poll, length in polls, state code 1..3).
    n_ep = 3
    ep_start = rng.integers(0, polls, size=(partitions, n_ep))
    ep_len = np.where(rng.random((partitions, n_ep)) < 0.15, rng.integers(4, 240, size=(partitions, n_ep)), 0)
    ep_kind = rng.choice([1, 2, 3], p=[0.6, 0.3, 0.1], size=(partitions, n_ep))

    rows = 0
    for chunk, first in enumerate(range(0, polls, chunk_polls)):
        idx = np.arange(first, min(polls, first + chunk_polls))
        k = len(idx)
        i = idx[:, None, None]
        inside = (i >= ep_start[None]) & (i < ep_start[None] + ep_len[None])  # (k, P, E)
        kind = np.where(inside, ep_kind[None], 0).max(axis=2)  # (k, P)
        since = np.where(inside, i - ep_start[None], 0).max(axis=2) * interval_s  # seconds into episode
        unknown = rng.random((k, partitions)) < 0.0005
        state = np.where(unknown, 4, kind)
        t_s = (idx * interval_s)[:, None]
        leo = base_leo[None] + (rate[None] * t_s).astype(np.int64)
        noise = rng.poisson(np.maximum(rate * 2, 0.1), size=(k, partitions))
        lag = np.where(kind == 0, noise, noise + (rate[None] * (since + 30)).astype(np.int64))
        # In sync, a busy partition reads about one poll interval (it catches up to the previous
        # LEO snapshot, KIP-16), an idle one 0; in an episode the time lag grows with it.
        busy = rate[None] > 1.0
        jitter = rng.integers(-300, 300, size=(k, partitions))
        time_lag = np.where(kind == 0, np.where(busy, interval_s * 1000 + jitter, 0), (since + 30) * 1000)
        fresh = np.where(kind == 0, np.minimum(time_lag, (noise / rate[None] * 1000).astype(np.int64)), time_lag - 500)
        n = k * partitions
        lag_arr = pa.array(lag.ravel(), pa.int64(), mask=unknown.ravel())
        ts = np.repeat(start_ms + idx * interval_s * 1000 + rng.integers(0, 40, size=k), partitions)
        table = pa.Table.from_arrays([
            pa.array(ts, pa.timestamp("ms", tz="UTC")),
            pa.DictionaryArray.from_arrays(np.zeros(n, np.int8), ["us-east"]).cast(pa.string()),
            pa.array(np.tile(flows, k)),
            pa.array(np.tile(topic_names, k)),
            pa.array(np.tile(part_no, k), pa.int32()),
            pa.array(leo.ravel(), pa.int64()),
            pa.array((leo - lag - 1).ravel(), pa.int64(), mask=unknown.ravel()),
            pa.array(np.where(np.tile(part_no, k) % 2 == 0, "offset-syncs", "connect-offsets")),
            lag_arr,
            pa.array(time_lag.ravel(), pa.int64(), mask=unknown.ravel()),
            pa.array(np.maximum(fresh, 0).ravel(), pa.int64(), mask=unknown.ravel()),
            pa.array((lag * sizes[None]).ravel(), pa.int64(), mask=unknown.ravel()),
            pa.array(STATES[state.ravel()]),
            # One sidecar wrote it: the same writer and poll interval on every row.
            pa.DictionaryArray.from_arrays(np.zeros(n, np.int8), ["bench-0:9464"]).cast(pa.string()),
            pa.array(np.full(n, interval_s * 1000, np.int64)),
        ], schema=SCHEMA)
        pq.write_table(table, day_dir / f"part-{int(ts[0]):013d}-{chunk:08x}.parquet")
        rows += n
    return rows


def spark_cpu_seconds() -> float:
    """User + system CPU seconds of this process's children (the Spark JVM, its Python workers)
    so far, with those of their children that exited (a Python worker that ends is counted by
    its parent once reaped): unlike the wall time, it does not grow when other work shares the
    machine's two cores (Linux only)."""
    tick, total, stack = os.sysconf("SC_CLK_TCK"), 0.0, [os.getpid()]
    while stack:
        pid = stack.pop()
        try:
            if pid != os.getpid():
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                total += sum(int(x) for x in fields[11:15]) / tick  # utime, stime, cutime, cstime
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/children") as f:
                    stack += [int(c) for c in f.read().split()]
        except OSError:  # gone meanwhile
            continue
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--interval", type=int, default=15, help="seconds between polls")
    parser.add_argument("--chunk-polls", type=int, default=120,
                        help="polls a generated segment holds (a sidecar's segment holds at most 1 M rows: "
                             "10 polls at 100k partitions)")
    parser.add_argument("--day", default="2026-11-20")
    parser.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) / "mirrorlag-rollup-bench",
                        help="history root; generated when the day is not there yet")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--driver-memory", default="12g")
    parser.add_argument("--conf", action="append", default=[], metavar="K=V")
    parser.add_argument("--runs", type=int, default=1, help="rollups of the day, one after the other")
    parser.add_argument("--cluster", type=int, default=0, metavar="N",
                        help="then the same on a standalone cluster of N 1-core workers (0: not)")
    parser.add_argument("--executor-memory", default="4g", help="each cluster executor's (whole GiB)")
    args = parser.parse_args()

    from mirrorlag.rollup.session import build_session

    day = date.fromisoformat(args.day)
    chunked = "" if args.chunk_polls == 120 else f"-c{args.chunk_polls}"
    history = args.data / f"history-{args.partitions}-{args.interval}{chunked}"
    day_dir = history / f"date={day.isoformat()}"
    if not day_dir.exists() or not any(day_dir.glob("*.parquet")):
        t0 = time.perf_counter()
        shutil.rmtree(day_dir, ignore_errors=True)
        rows = generate(history, day, args.partitions, args.interval, args.chunk_polls)
        print(f"generated {rows:,} rows in {time.perf_counter() - t0:.0f} s under {day_dir}")
    size = sum(f.stat().st_size for f in day_dir.glob("*.parquet"))
    print(f"history: {day_dir} ({size / 1e6:,.0f} MB)")

    confs = dict(kv.split("=", 1) for kv in args.conf)
    confs.setdefault("spark.driver.memory", args.driver_memory)
    t0 = time.perf_counter()
    spark = build_session(args.master, confs)
    print(f"SparkSession up in {time.perf_counter() - t0:.1f} s ({args.master}, "
          f"{spark.sparkContext.defaultParallelism} cores)")
    measure(spark, args, history, day_dir, day)
    spark.stop()
    if args.cluster:
        on_cluster(args, confs, history, day_dir, day)


def on_cluster(args: argparse.Namespace, confs: dict[str, str], history: Path, day_dir: Path, day: date) -> None:
    """The same measurements with the executors on a standalone cluster (this process the driver)."""
    from mirrorlag.rollup.session import build_session
    from mirrorlag.rollup.ship import package_zip
    from tests.integration.rollup_spark import Cluster, executor_python

    root = Path(tempfile.mkdtemp(prefix="mirrorlag-bench-cluster-"))
    memory_mb = int(args.executor_memory.rstrip("g")) * 1024 + 512
    cluster = Cluster(root, executor_python(root), workers_n=args.cluster, worker_memory=f"{memory_mb}m")
    try:
        t0 = time.perf_counter()
        cluster.start()
        cluster.ready()
        print(f"standalone cluster up in {time.perf_counter() - t0:.1f} s: {cluster.url}, "
              f"{args.cluster} workers x 1 core, executors of {args.executor_memory}")
        t0 = time.perf_counter()
        # A SparkContext made in Python takes its workers' Python from the environment only
        # (spark-submit turns spark.pyspark.python into this variable).
        os.environ["PYSPARK_PYTHON"] = str(cluster.python)
        spark = build_session(cluster.url, {
            **confs, "spark.executor.memory": args.executor_memory, "spark.executor.cores": "1",
            "spark.cores.max": str(args.cluster), "spark.ui.enabled": "false",
        })
        spark.sparkContext.addPyFile(str(package_zip(root / "mirrorlag.zip")))
        deadline = time.monotonic() + 60
        while spark.sparkContext.defaultParallelism < args.cluster and time.monotonic() < deadline:
            time.sleep(0.2)  # the executors register; their cores make the parallelism
        print(f"SparkSession up in {time.perf_counter() - t0:.1f} s ({cluster.url}, "
              f"{spark.sparkContext.defaultParallelism} cores)")
        measure(spark, args, history, day_dir, day, label="cluster")
        spark.stop()
    finally:
        cluster.stop()


def measure(spark, args: argparse.Namespace, history: Path, day_dir: Path, day: date, label: str = "") -> None:
    from pyspark.sql import functions as F

    from mirrorlag.rollup.job import run_days
    from mirrorlag.rollup.options import RollupOptions

    tag = f"[{label}] " if label else ""

    def timed(run: Callable[[], object]) -> tuple[float, float]:
        t0, cpu0 = time.perf_counter(), spark_cpu_seconds()
        run()
        return time.perf_counter() - t0, spark_cpu_seconds() - cpu0

    def load() -> str:
        return "/".join(f"{x:.1f}" for x in os.getloadavg())

    # Floors: each scan twice, the first also warming the page cache and the JIT; the ratios
    # are to the second (warm) one, the stricter.
    read = ["ts", "source", "target", "topic", "partition", "record_lag", "time_lag_ms", "freshness_lag_ms",
            "byte_lag_estimate", "state"]
    floors = {
        "1 column (count, sum(record_lag))": lambda: spark.read.parquet(str(day_dir)).agg(F.count(F.lit(1)), F.sum("record_lag")).collect(),
        # Every column the rollup reads (it cannot read fewer), to Spark's noop sink.
        f"{len(read)} columns (noop sink)": lambda: spark.read.parquet(str(day_dir)).select(*read).write.format("noop").mode("overwrite").save(),
    }
    warm = {}
    for name, run in floors.items():
        (cold_s, cold_cpu), (warm_s, warm_cpu) = timed(run), timed(run)
        warm[name] = warm_s
        print(f"{tag}floor, {name:34s}: {warm_s:6.1f} s, CPU {warm_cpu:5.1f} s  (first: {cold_s:.1f} s, CPU {cold_cpu:.1f} s)")
    floor, wide = warm.values()

    out = args.data / f"out-{args.partitions}-{args.interval}{'-' + label if label else ''}"
    for run in range(args.runs):
        shutil.rmtree(out, ignore_errors=True)
        opts = RollupOptions(history=str(history), out=str(out), days=[day])
        before = load()
        rollup, cpu = timed(lambda: run_days(spark, opts))
        print(f"{tag}rollup {run + 1} (daily tables, trends, report): {rollup:6.1f} s, Spark CPU {cpu:5.1f} s  (load {before} -> {load()})")
        print(f"{tag}  ratio to the 1-column floor : {rollup / floor:6.2f}")
        print(f"{tag}  ratio to the {len(read)}-column floor: {rollup / wide:6.2f}  (target <= 4; <= 180 s)")

if __name__ == "__main__":
    main()
