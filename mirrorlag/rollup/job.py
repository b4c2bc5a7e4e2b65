"""One day end to end, and a run over several days.

Per day the history is read once, by the pass (samples.partition_days): a map side that
summarises its segments per partition key and a merge per partition, the day's only shuffle (of
partial rows, not samples). Its output is small (a row per partition, with its histograms) and
is what is cached, with each partition's curves for the report's line charts (slots.py), so the
day is read once. Trends take the day's tables as computed and the days before from the tables
written (trends.py), so a backfill, which runs days in order, sees every day it wrote before.
"""

from __future__ import annotations

import re
import time
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date
from typing import Callable, Iterator, Sequence

import numpy as np
from pyspark import StorageLevel
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from py4j.protocol import Py4JJavaError

from mirrorlag.rollup import daily, report, report_data, report_model, trends
from mirrorlag.rollup.drawer import Drawer
from mirrorlag.rollup.errors import RollupError, grpc_status
from mirrorlag.rollup.options import RollupOptions
from mirrorlag.rollup.buckets import exact_edges
from mirrorlag.rollup.paths import (
    DayStatus, day_dir, day_input, local_path, local_segments, report_path, table_path, trends_path, write_text,
)
from mirrorlag.rollup.partition_day import PER_PARTITION
from mirrorlag.rollup.samples import DaySource, DayWindow, level_figures, partition_days, read_day, segment_groups
from mirrorlag.rollup.session import local_workers_use_this_python, parallelism
from mirrorlag.rollup.schema import FLOW_KEY, PARTITION_KEY, TOPIC_KEY


@dataclass
class DayResult:
    day: date
    status: DayStatus
    seconds: float = 0.0
    samples: int = 0
    flows: int = 0
    topics: int = 0
    partitions: int = 0
    covered_seconds: float = 0.0  # partition-seconds with samples
    out_of_sync_seconds: float = 0.0  # partition-seconds
    stall_episodes: int = 0
    growing: int = 0  # partitions, topics and flows flagged growing
    unknown_state_samples: int = 0
    null_record_lag_samples: int = 0
    report: str | None = None
    tables: dict[str, str] = field(default_factory=dict)


def write_table(df: DataFrame, path: str, sort_keys: Sequence[str]) -> None:
    """Replace the day's partition of the table and nothing else (dynamic partition overwrite).

    One sorted file per day: the tables are small, and a reader gets them in key order. Sorted
    by date first: the writer needs its rows by the partition column, and a frame read from the
    cache no longer shows that `date` is one value, so it would sort them again by date alone
    (Spark's sort is not stable: the key order was lost).
    """
    (df.repartition(1).sortWithinPartitions("date", *sort_keys)
       .write.mode("overwrite").option("partitionOverwriteMode", "dynamic")
       .partitionBy("date").parquet(path))


SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
ADAPTIVE = "spark.sql.adaptive.enabled"
TUNED = (SHUFFLE_PARTITIONS, ADAPTIVE)
# Compressed history per merge task of the day's pass (each merges the partial rows of about 6 M
# samples). Few large merge tasks rather than many small ones: each pays a Python worker round
# trip and its own sort of a few time-ordered runs.
BYTES_PER_PARTITION = 128 << 20
# Compressed history per map task read with pyarrow (about 3 M rows): enough to amortise a task,
# little enough for a Python worker's memory.
SEGMENT_BYTES = 64 << 20


def shuffle_partitions(cores: int, input_bytes: int) -> int:
    """Enough merge tasks for the day's one shuffle (samples.partition_days), and no more."""
    return max(cores, -(-input_bytes // BYTES_PER_PARTITION))


@contextmanager
def tuned(spark: SparkSession, input_bytes: int, enabled: bool, cores: int) -> Iterator[int | None]:
    """The day's Spark settings, restored afterwards; yields the task count for the day's pass
    (None: the user's spark.sql.shuffle.partitions). Every other stage works on small frames
    (per partition and bucket, at most a few million rows) and runs one task per core: Spark's
    default of 200, or the pass's count, costs more in task overhead than in work. With the
    shuffles sized, adaptive execution has nothing left to fix, and its re-planning between the
    many small stages of a day costs a small day more than the work itself."""
    saved = {key: spark.conf.get(key) for key in TUNED}
    if enabled:
        spark.conf.set(SHUFFLE_PARTITIONS, str(cores))
        spark.conf.set(ADAPTIVE, "false")
    try:
        yield shuffle_partitions(cores, input_bytes) if enabled else None
    finally:
        for key, value in saved.items():
            spark.conf.set(key, value)


def rollup_day(spark: SparkSession, opts: RollupOptions, day: date) -> DayResult:
    t0 = time.perf_counter()
    try:
        found = day_input(opts.history, day, spark)
        assert found is not None
        if found.status is not DayStatus.PRESENT:
            return DayResult(day, found.status, seconds=time.perf_counter() - t0)
        cores = parallelism(spark)
        with tuned(spark, found.bytes, opts.tune_spark, cores) as tasks:
            result = _rollup(spark, opts, day, tasks, cores, exact_edges())
    except (Py4JJavaError, PySparkException) as exc:
        raise RollupError(f"{day}: Spark failed: {_first_line(exc)}") from exc
    result.seconds = time.perf_counter() - t0
    return result


def _rollup(spark: SparkSession, opts: RollupOptions, day: date, tasks: int | None, cores: int,
            edges: np.ndarray) -> DayResult:
    window = DayWindow(day)
    drawer: Drawer | None = None
    held: list[DataFrame] = []  # frames read more than once, released at the end

    def hold(df: DataFrame) -> DataFrame:
        held.append(df.persist(StorageLevel.MEMORY_AND_DISK))
        return df

    try:
        source = day_source(spark, opts.history, day, cores)
        local_workers_use_this_python(spark)
        drawer = Drawer() if opts.report else None  # imports matplotlib while the pass runs
        per = hold(partition_days(spark, source, window, opts.max_gap_seconds, edges, tasks))
        sort_keys = {"partition": PARTITION_KEY, "topic": TOPIC_KEY, "flow": FLOW_KEY}
        # Every query after the pass is small: run one after the other, they wait on Spark's
        # planning and scheduling more than on the cores. So they run side by side, each held
        # frame filled first: jobs started together on a frame not yet cached would each run its
        # shuffles again (the topic figures once per job reading them). The trends are made
        # before the writes start, which lists the days before this one now (trends.py).
        # More threads than the 16 tasks a day submits: an `after` task holds its thread while it
        # waits, so each must find one free.
        with ThreadPoolExecutor(max_workers=24, thread_name_prefix="mirrorlag-rollup") as pool:

            def after(first: list[Future], work: Callable, *args: object) -> Future:
                """`work` once `first` are done. They were submitted before it and the pool has a
                thread for every query of the day, so they are running, not queued behind it."""
                def run() -> object:
                    for f in first:
                        f.result()
                    return work(*args)
                return pool.submit(run)

            empty = pool.submit(per.isEmpty)  # the pass
            # Planned while the pass runs: the driver's planning of the tables and trends overlaps it.
            parts = per.select(*PARTITION_KEY, *PER_PARTITION, "freshness_max", "byte_max")
            figures = hold(level_figures(per.select(*PARTITION_KEY, "record_lag", "time_lag")))
            frames = {level: hold(df) for level, df in daily.tables(parts, figures, day).items()}
            trend_df = hold(trends.compute_trends(spark, opts.out, day, frames))
            if empty.result():
                return DayResult(day, DayStatus.EMPTY)
            # Each query starts once what it reads is filled.
            figures_f = pool.submit(figures.count)  # the topic and flow tables both read it
            filled = {level: after([figures_f] if level != "partition" else [], df.count) for level, df in frames.items()}
            writes = [after([filled[level]], write_table, df, table_path(opts.out, level), sort_keys[level])
                      for level, df in frames.items()]
            flows_f = after([filled["flow"]], lambda: [r.asDict() for r in frames["flow"].orderBy(*FLOW_KEY).collect()])
            # One query for every figure of the trends (rankings and counts of their rows); it
            # also fills the held trends for their write.
            trend_f = after(list(filled.values()), lambda: report_data.trend_views(trend_df.toArrow().to_pylist(), opts.worst))
            if opts.report:
                assert drawer is not None
                worst_f = after([filled["partition"]], report_data.worst_partitions, per, frames["partition"], opts.worst)
                heat_f = after([filled["topic"]], report_data.heat_rows, frames["topic"])
                # Drawn while Spark writes the tables and works out the trends (the charts need
                # neither), each chart as soon as its data is there: the curves first.
                curves_f = after([worst_f, flows_f], lambda: report_data.drawn_series(
                    lambda: read_day(spark, source.path), flows_f.result(), *worst_f.result(),
                    window.start_ms, window.end_ms, int(opts.max_gap_seconds * 1000)))
                series_sent = after([curves_f], lambda: drawer.send_series(curves_f.result()))
                views = report_model.DayViews(worst_f.result()[0], curves_f.result(), heat_f.result())
                day_only = report_model.gather(views, report_model.NO_TRENDS, flows_f.result(), day, opts)
                series_sent.result()  # the flows go to the same process, after the curves
                drawer.send_rest(day_only)
                charts_f = pool.submit(drawer.charts)
            trend = trend_f.result()
            writes.append(pool.submit(write_table, trend_df, trends_path(opts.out), ["level", *PARTITION_KEY]))
            flows = flows_f.result()
            result = _result(day, flows, trend.growing)
            if opts.report:
                data = report_model.gather(views, trend, flows, day, opts)
                result.report = report_path(opts.out, day)
                write_text(result.report, report.render(data, charts_f.result()), spark)
            for w in writes:
                w.result()
    finally:
        for df in held:
            df.unpersist()
        if drawer is not None:
            drawer.close()
    result.tables = {level: table_path(opts.out, level) for level in ("partition", "topic", "flow")}
    return result


def day_source(spark: SparkSession, history: str, day: date, cores: int) -> DaySource:
    """A local day is read by the Python workers with pyarrow, its segments dealt into map tasks
    of about SEGMENT_BYTES; any other URL through Spark's scan (its Hadoop connectors)."""
    path = day_dir(history, day)
    local = local_path(path)
    if local is None:
        return DaySource(path)
    files = local_segments(local)
    return DaySource(path, segment_groups(files, SEGMENT_BYTES, cores))


def _first_line(exc: BaseException) -> str:
    """The cause in one line: a Py4JJavaError's own first line only says which call failed."""
    java = getattr(exc, "java_exception", None)
    text = grpc_status(exc) or (str(java) if java is not None else str(exc)).strip()
    first = next((line.strip()[:300] for line in text.splitlines() if line.strip()), type(exc).__name__)
    if first.startswith("An exception was thrown from the Python worker"):
        first = f"in a Python worker: {_python_error(text) or first}"
    if "FileSystem" in first and "not found" in first:
        # e.g. s3a:// without hadoop-aws: say what to do, not only what is missing.
        first += (" (Spark has no Hadoop connector for this URL scheme: add it, e.g. "
                  "--conf spark.jars.packages=org.apache.hadoop:hadoop-aws:<Spark's Hadoop version>)")
    return first


_PY_ERROR = re.compile(r"(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?::\s.*|(?<=Error)|(?<=Exception))")  # `pkg.SomeError: what`


def _python_error(text: str) -> str | None:
    """The last `SomeError: message` line of a Python worker's traceback (before any JVM stack)."""
    python = text.split("JVM stacktrace:", 1)[0]
    found = [line.strip() for line in python.splitlines() if _PY_ERROR.fullmatch(line.strip())]
    return found[-1][:300] if found else None


def _result(day: date, flows: list[dict], growing: dict[str, int]) -> DayResult:
    return DayResult(
        day, DayStatus.PRESENT,
        samples=sum(f["samples"] for f in flows),
        flows=len(flows),
        topics=sum(f["topics"] for f in flows),
        partitions=sum(f["partitions"] for f in flows),
        covered_seconds=sum(f["covered_seconds"] for f in flows),
        out_of_sync_seconds=sum(f["out_of_sync_seconds"] for f in flows),
        stall_episodes=sum(f["stall_episodes"] for f in flows),
        growing=sum(growing.values()),
        unknown_state_samples=sum(f["unknown_state_samples"] for f in flows),
        null_record_lag_samples=sum(f["null_record_lag_samples"] for f in flows),
    )


def run_days(
    spark: SparkSession,
    opts: RollupOptions,
    on_start: Callable[[date], None] | None = None,
    on_done: Callable[[DayResult], None] | None = None,
) -> list[DayResult]:
    """Roll up each day in order; a day without history is reported, not fatal, so a backfill
    writes every day it can (the caller turns missing days into exit status 3)."""
    results = []
    for day in sorted(set(opts.days)):
        if on_start:
            on_start(day)
        result = rollup_day(spark, opts, day)
        results.append(result)
        if on_done:
            on_done(result)
    return results
