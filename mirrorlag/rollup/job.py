"""One day end to end, and a run over several days.

Per day the history is read once, by the pass (samples.partition_days): a map side that
summarises its segments per partition key and a merge per partition, the day's only shuffle (of
partial rows, not samples). Its output is small (a row per partition, with its histograms) and
is what is cached, with each partition's curves for the report's line charts (slots.py), so the
day is read once. Trends take the day's tables as computed and the days before from the tables
written (trends.py), so a backfill, which runs days in order, sees every day it wrote before.
"""

from __future__ import annotations

import dataclasses
import re
import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date
from typing import Callable, Iterator, Sequence

import numpy as np
from pyspark import StorageLevel
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from py4j.protocol import Py4JJavaError

from mirrorlag.rollup import daily, report, report_data, report_model, trends
from mirrorlag.rollup.drawer import Drawer
from mirrorlag.rollup.errors import RollupError, grpc_status
from mirrorlag.rollup.group_daily import GROUP_DAILY, GROUP_KEY, group_daily
from mirrorlag.rollup.options import RollupOptions
from mirrorlag.rollup.buckets import exact_edges
from mirrorlag.history.layout import ROLLUP_RECEIPT
from mirrorlag.rollup.manifest import Action, Manifest, Segment, provisional_why, trend_dependents
from mirrorlag.rollup.paths import (
    REPORTS, TABLES, TRENDS, DayStatus, committed_files, day_dir, delete_files, exists, group_day_dir, join, list_files, local_path,
    read_text, report_path, report_version, table_files, table_path, trends_path, write_text,
)
from mirrorlag.rollup.plan import DayPlan, Plan, manifest_path, plan_days
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
    growing: int = 0  # partitions, topics and flows flagged growing (p95 lag or time out of sync)
    unknown_state_samples: int = 0
    null_record_lag_samples: int = 0
    report: str | None = None
    html: str | None = field(default=None, repr=False)  # the report, until committed (rollup_day)
    tables: dict[str, str] = field(default_factory=dict)
    tables_written: dict[str, tuple[str, ...]] = field(default_factory=dict)  # new files per table dir
    action: Action = Action.ROLL  # or only its trends recomputed (trends_only), or left as it was
    final: bool = True
    trends_only: bool = False
    why: str = ""
    warnings: list[str] = field(default_factory=list)  # lines of their own after the day's (doubled_warnings)


def write_table(df: DataFrame, path: str, sort_keys: Sequence[str], day: date,
                spark: SparkSession) -> tuple[str, ...]:
    """Add the day's new version to its partition of the table, beside the committed one, and
    return the new files' names: the manifest makes them the day's (manifest.py). The day's
    directory holds only the committed files when this starts (Commit.clear).

    One sorted file per day: the tables are small, and a reader gets them in key order. Sorted
    by date first: the writer needs its rows by the partition column, and a frame read from the
    cache no longer shows that `date` is one value, so it would sort them again by date alone
    (Spark's sort is not stable: the key order was lost).
    """
    directory = join(path, f"date={day.isoformat()}")
    before = {f.name for f in list_files(directory, spark)}
    (df.repartition(1).sortWithinPartitions("date", *sort_keys)
       .write.mode("append").partitionBy("date").parquet(path))
    return tuple(sorted(f.name for f in list_files(directory, spark) if f.name not in before))


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


def rollup_day(spark: SparkSession, opts: RollupOptions, day: date, plan: DayPlan | None = None,
               run: str | None = None) -> DayResult:
    """Roll up one day and commit it (its manifest written last). `plan`: the day as listed
    (plan.plan_days); listed here when not given."""
    t0 = time.perf_counter()
    now_ms = opts.now_ms if opts.now_ms is not None else int(time.time() * 1000)
    opts = dataclasses.replace(opts, now_ms=now_ms)
    try:
        if plan is None:
            plan = plan_days(dataclasses.replace(opts, days=[day], lookback=False), now_ms, spark).days[0]
        if plan.status is not DayStatus.PRESENT:
            return DayResult(day, plan.status, seconds=time.perf_counter() - t0)
        cores = parallelism(spark)
        with tuned(spark, sum(s.size for s in plan.segments), opts.tune_spark, cores) as tasks:
            result = _rollup(spark, opts, plan, tasks, cores, exact_edges())
        if result.status is DayStatus.PRESENT:
            run = run or _run_id()
            manifest = Manifest(day, run, plan.decision.final, plan.segments, result.tables_written,
                                opts.max_gap_seconds, now_ms, plan.group_segments)
            result.why, result.report = _commit_with_report(spark, opts, manifest, plan.previous, result.html)
            result.html = None
    except (Py4JJavaError, PySparkException) as exc:
        raise RollupError(f"{day}: Spark failed: {_first_line(exc)}") from exc
    result.final = plan.decision.final
    result.seconds = time.perf_counter() - t0
    return result


def _commit_with_report(spark: SparkSession, opts: RollupOptions, manifest: Manifest, previous: Manifest | None,
                        html: str | None) -> tuple[str, str | None]:
    """_commit with the day's report (None: none) as one more file of the commit, then its copy
    where people look; the copy goes first, so it never shows a version the manifest does not
    name. Returns _commit's warning and the copy's path."""
    files = {table: names for table, names in manifest.files.items() if table != REPORTS}
    if html is not None:
        files[REPORTS] = (report_version(manifest.day, manifest.run),)
        write_text(join(opts.out, REPORTS, f"date={manifest.day.isoformat()}", files[REPORTS][0]), html, spark)
    delete_files([report_path(opts.out, manifest.day)], spark)
    warning = _commit(spark, opts, dataclasses.replace(manifest, files=files), previous)
    return warning, None if html is None else _publish_report(spark, opts.out, manifest.day, html)


def _publish_report(spark: SparkSession, out: str, day: date, html: str) -> str:
    """The committed report copied to where people look (paths.report_path), after the commit."""
    path = report_path(out, day)
    write_text(path, html, spark)
    return path


def publish_reports(spark: SparkSession, out: str, committed: dict[date, Manifest], days: set[date]) -> None:
    """A committed report whose copy is missing (a job killed between its commit and the copy)
    copied again, for `days`."""
    for day in sorted(days & set(committed)):
        [version, *_] = committed_files(out, REPORTS, day, committed[day]) or [None]
        if version is not None and not exists(report_path(out, day), spark):
            html = read_text(version, spark)
            if html is not None:
                _publish_report(spark, out, day, html)


def restore_receipts(spark: SparkSession | None, history: str, days: list[DayPlan]) -> dict[date, str]:
    """The receipts of committed days whose history lost them, written again from their manifests
    (what the sidecar's expiry waits for): per day, what happened, for its line."""
    said = {}
    for p in days:
        assert p.previous is not None
        try:
            write_text(join(day_dir(history, p.day), ROLLUP_RECEIPT), p.previous.to_json(), spark)
            if p.previous.group_segments and p.group_segments:
                write_text(join(group_day_dir(history, p.day), ROLLUP_RECEIPT),
                           p.previous.groups_receipt().to_json(), spark)
            said[p.day] = "its receipt in the history was missing: written again"
        except (OSError, Py4JJavaError, RollupError) as exc:
            said[p.day] = f"its receipt in the history is missing and could not be written ({_first_line(exc)})"
    return said


def _run_id() -> str:
    return uuid.uuid4().hex[:12]


def _commit(spark: SparkSession, opts: RollupOptions, manifest: Manifest, previous: Manifest | None) -> str:
    """Make the day's new files its committed version: its manifest, written whole, names them;
    then the receipt in the history (what expiry waits for), then the replaced files go. Returns
    a warning for the day's line ("" when none)."""
    write_text(manifest_path(opts.out, manifest.day), manifest.to_json(), spark)
    warning = ""
    try:
        write_text(join(day_dir(opts.history, manifest.day), ROLLUP_RECEIPT), manifest.to_json(), spark)
        if manifest.group_segments:
            write_text(join(group_day_dir(opts.history, manifest.day), ROLLUP_RECEIPT),
                       manifest.groups_receipt().to_json(), spark)
    except (OSError, Py4JJavaError, RollupError) as exc:  # e.g. the history mounted read-only
        warning = (f"receipt not written to the history ({_first_line(exc)}): the sidecar keeps the day's "
                   "segments until mirrorlag.history.retention.max.ms")
    if previous is not None:
        old = [f for table, names in previous.files.items() for f in
               committed_files(opts.out, table, manifest.day, previous) if f.rsplit("/", 1)[-1] not in
               manifest.files.get(table, ())]
        delete_files(old, spark)
    return warning


def recompute_trends(spark: SparkSession, opts: RollupOptions, manifest: Manifest, run: str) -> DayResult:
    """The trends of a committed day again, from its committed tables and the days before as
    they are now (an earlier day was rolled up again); committed as a new version of the day."""
    t0 = time.perf_counter()
    day = manifest.day
    now_ms = opts.now_ms if opts.now_ms is not None else int(time.time() * 1000)
    try:
        frames = {level: spark.read.option("basePath", table_path(opts.out, level))
                  .parquet(*committed_files(opts.out, TABLES[level], day, manifest)) for level in TABLES}
        trend_df = trends.compute_trends(spark, opts.out, day, frames).withColumn("final", F.lit(manifest.final))
        written = write_table(trend_df, trends_path(opts.out), ["level", *PARTITION_KEY], day, spark)
        updated = dataclasses.replace(manifest, run=run, files={**manifest.files, TRENDS: written}, written_ms=now_ms)
        html = _report_with_trends(spark, opts, manifest, frames, trend_df)
        if html is None:  # no report, or one this version cannot update: the committed one stays as it was
            why, path = _commit(spark, opts, updated, manifest), None
        else:
            why, path = _commit_with_report(spark, opts, updated, manifest, html)
    except (Py4JJavaError, PySparkException) as exc:
        raise RollupError(f"{day}: Spark failed recomputing its trends: {_first_line(exc)}") from exc
    return DayResult(day, DayStatus.PRESENT, seconds=time.perf_counter() - t0, final=manifest.final,
                     trends_only=True, why=why, report=path)


def _report_with_trends(spark: SparkSession, opts: RollupOptions, manifest: Manifest, frames: dict[str, DataFrame],
                        trend_df: DataFrame) -> str | None:
    """The day's committed report with its trend figures from `trend_df` (report.with_trends);
    None when there is no report to update. With --no-report too: a committed report never keeps
    trends its day no longer has."""
    [version, *_] = committed_files(opts.out, REPORTS, manifest.day, manifest) or [None]
    html = read_text(version, spark) if version is not None else None
    if html is None:
        return None
    flows = [r.asDict() for r in frames["flow"].orderBy(*FLOW_KEY).collect()]
    return report.with_trends(html, flows, report_data.trend_views(trend_df.toArrow().to_pylist(), opts.worst), opts.worst)


def clear_uncommitted(spark: SparkSession, out: str, committed: dict[date, Manifest], rolling: set[date]) -> None:
    """Files a killed run left in the tables' day directories (not named by the day's manifest),
    deleted before anything reads those directories. A day being rolled up again without a
    manifest (tables from before manifests) is emptied: it is replaced, as it always was."""
    for table in (*TABLES.values(), TRENDS, GROUP_DAILY, REPORTS):
        listed = table_files(join(out, table), spark)
        stale = []
        for day, names in listed.items():
            if day in committed:
                keep = set(committed[day].files.get(table, ()))
            elif day in rolling:
                keep = set()
            else:
                continue  # never committed, not ours to judge: outside every manifest-aware read
            stale += [join(out, table, f"date={day.isoformat()}", n) for n in names if n not in keep]
        delete_files(stale, spark)


def _rollup(spark: SparkSession, opts: RollupOptions, plan: DayPlan, tasks: int | None, cores: int,
            edges: np.ndarray) -> DayResult:
    day = plan.day
    final = plan.decision.final
    assert opts.now_ms is not None
    provisional = None if final else provisional_why(day, plan.segments, opts.now_ms, int(opts.settle_seconds * 1000))
    window = DayWindow(day)
    drawer: Drawer | None = None
    held: list[DataFrame] = []  # frames read more than once, released at the end

    def hold(df: DataFrame) -> DataFrame:
        held.append(df.persist(StorageLevel.MEMORY_AND_DISK))
        return df

    try:
        source = day_source(opts.history, day, plan.segments, cores)
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

            # The pass, in one job that also brings back the partitions whose samples of one writer
            # came too close together (partials.doubled_writers; no job of their own).
            pass_f = pool.submit(lambda: per.select(
                F.count(F.lit(1)).alias("n"),
                F.collect_list(F.when(F.col("doubled_writer").isNotNull(), F.struct(*PARTITION_KEY, "doubled_writer")))
                .alias("doubled")).first())
            # Planned while the pass runs: the driver's planning of the tables and trends overlaps it.
            parts = per.select(*PARTITION_KEY, *PER_PARTITION, "freshness_max", "byte_max")
            figures = hold(level_figures(per.select(*PARTITION_KEY, "record_lag", "time_lag")))
            # `final`: a provisional day's rows say so (and trends.py's listing leaves it out).
            frames = {level: hold(df.withColumn("final", F.lit(final)))
                      for level, df in daily.tables(parts, figures, day).items()}
            trend_df = hold(trends.compute_trends(spark, opts.out, day, frames).withColumn("final", F.lit(final)))
            if pass_f.result()["n"] == 0:
                return DayResult(day, DayStatus.EMPTY)
            # Each query starts once what it reads is filled.
            figures_f = pool.submit(figures.count)  # the topic and flow tables both read it
            filled = {level: after([figures_f] if level != "partition" else [], df.count) for level, df in frames.items()}
            writes = {TABLES[level]: after([filled[level]], write_table, df, table_path(opts.out, level),
                                           sort_keys[level], day, spark)
                      for level, df in frames.items()}
            # The consumer groups' day, where the sidecar wrote group rows (a small table).
            groups_df = group_daily(spark, opts.history, day, plan.group_segments, opts.max_gap_seconds)
            if groups_df is not None:
                writes[GROUP_DAILY] = pool.submit(
                    write_table, groups_df.withColumn("final", F.lit(final)).withColumn("date", F.lit(day)),
                    join(opts.out, GROUP_DAILY), GROUP_KEY, day, spark)
            groups_f = (pool.submit(lambda: [r.asDict() for r in groups_df.orderBy(*GROUP_KEY).collect()])
                        if groups_df is not None and opts.report else None)
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
            writes[TRENDS] = pool.submit(write_table, trend_df, trends_path(opts.out), ["level", *PARTITION_KEY], day, spark)
            flows = flows_f.result()
            result = _result(day, flows, trend.growing)
            result.warnings = doubled_warnings(day, [r.asDict() for r in pass_f.result()["doubled"]])
            if opts.report:
                data = report_model.gather(views, trend, flows, day, opts, provisional)
                if groups_f is not None:
                    data = dataclasses.replace(data, groups=groups_f.result())
                result.html = report.render(data, charts_f.result())  # written with the day's commit (rollup_day)
            result.tables_written = {table: w.result() for table, w in writes.items()}
    finally:
        for df in held:
            df.unpersist()
        if drawer is not None:
            drawer.close()
    result.tables = {level: table_path(opts.out, level) for level in ("partition", "topic", "flow")}
    return result


def doubled_warnings(day: date, rows: list[dict]) -> list[str]:
    """One line per writer id whose samples of some partitions came too close together for one
    sidecar (partials.doubled_writers): two sidecars with that mirrorlag.history.writer.id. The
    day is still rolled up (its samples all count, as one writer's)."""
    by: dict[str, list[str]] = {}
    for r in sorted(rows, key=lambda r: (r["doubled_writer"], *[(r[k] is None, r[k]) for k in PARTITION_KEY])):
        by.setdefault(r["doubled_writer"], []).append(f"{r['source']}->{r['target']} {r['topic']}/{r['partition']}")
    lines = []
    for writer, partitions in by.items():
        shown = ", ".join(partitions[:5]) + (f" and {len(partitions) - 5} more" if len(partitions) > 5 else "")
        lines.append(f"warning: {day}: writer {writer!r} wrote samples of {len(partitions)} partition"
                     f"{'s' if len(partitions) != 1 else ''} less than half its poll interval apart ({shown}): "
                     f"two sidecars with this mirrorlag.history.writer.id? Their samples count as one writer's; "
                     f"give each sidecar an id of its own")
    return lines


def day_source(history: str, day: date, segments: Sequence[Segment], cores: int) -> DaySource:
    """A local day is read by the Python workers with pyarrow, the segments listed (exactly what
    its manifest records), dealt into map tasks of about SEGMENT_BYTES; any other URL through
    Spark's scan (its Hadoop connectors)."""
    path = day_dir(history, day)
    if local_path(path) is None:
        return DaySource(path)
    files = [(join(path, s.name), s.size) for s in segments]
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


def listed_plan(spark: SparkSession, opts: RollupOptions) -> Plan:
    """plan.plan_days through Spark (a remote history or output), its failures one line."""
    now_ms = opts.now_ms if opts.now_ms is not None else int(time.time() * 1000)
    try:
        return plan_days(opts, now_ms, spark)
    except (Py4JJavaError, PySparkException) as exc:
        raise RollupError(f"{min(opts.days)}: Spark failed: {_first_line(exc)}") from exc


def run_days(
    spark: SparkSession,
    opts: RollupOptions,
    on_start: Callable[[date], None] | None = None,
    on_done: Callable[[DayResult], None] | None = None,
    plan: Plan | None = None,
) -> list[DayResult]:
    """Roll up each day of the plan that needs it, in order, then (in the same date order) the
    trends of every committed day whose 56 days (trend_rule.WINDOW) hold one rolled up again. A
    day without history is reported, not fatal, so a backfill writes every day it can (the caller
    decides what missing days mean for the exit status)."""
    now_ms = opts.now_ms if opts.now_ms is not None else int(time.time() * 1000)
    opts = dataclasses.replace(opts, now_ms=now_ms)
    if plan is None:
        plan = listed_plan(spark, opts)
    run = _run_id()
    planned = {p.day: p for p in plan.days}
    rolling = {d for d, p in planned.items() if p.decision.action is Action.ROLL}
    if rolling or local_path(opts.out) is not None:  # a local listing costs nothing: tidy every run
        clear_uncommitted(spark, opts.out, plan.committed, rolling)
        publish_reports(spark, opts.out, plan.committed, set(planned) - rolling)
    receipts = restore_receipts(spark, opts.history, [p for p in plan.days if p.receipt_missing])
    results: list[DayResult] = []
    rolled: list[date] = []
    for day in sorted(set(planned) | set(trend_dependents(sorted(rolling), list(plan.committed)))):
        p = planned.get(day)
        again = p is not None and p.decision.action is Action.ROLL
        trends_again = not again and day in plan.committed and bool(trend_dependents(rolled, [day]))
        if p is None and not trends_again:
            continue
        if on_start:
            on_start(day)
        if again:
            assert p is not None
            result = rollup_day(spark, opts, day, p, run)
            if result.status is DayStatus.PRESENT:
                rolled.append(day)
        elif trends_again:
            result = recompute_trends(spark, opts, plan.committed[day], run)
        else:
            assert p is not None
            why = receipts.get(day, "" if p.decision.action is Action.UNCHANGED else p.decision.why)
            result = DayResult(day, p.status, action=p.decision.action, final=p.decision.final, why=why)
        results.append(result)
        if on_done:
            on_done(result)
    return results
