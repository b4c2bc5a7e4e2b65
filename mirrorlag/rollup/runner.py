"""Run the rollup for the command line: a SparkSession, progress day by day, a summary."""

from __future__ import annotations

import dataclasses
import logging
import time
from datetime import date
from typing import Mapping

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from mirrorlag.rollup.errors import MissingHistoryError
from mirrorlag.rollup.job import TUNED, DayResult, listed_plan, run_days
from mirrorlag.rollup.manifest import Action
from mirrorlag.rollup.options import RollupOptions
from mirrorlag.rollup.plan import Plan, needs_spark, plan_days
from mirrorlag.rollup.report_model import out_of_sync_share
from mirrorlag.rollup.paths import DayStatus, day_dir, table_path, trends_path
from mirrorlag.rollup.remote import is_connect, masked
from mirrorlag.rollup.remote import stop as connect_stop
from mirrorlag.rollup.session import build_session

_WHY = {DayStatus.MISSING: "no directory", DayStatus.EMPTY: "no rows"}


def _missing_message(history: str, missing: list[tuple[date, DayStatus]], total: int) -> str:
    if total == 1:
        day, status = missing[0]
        return f"no history for {day} under {history} ({_WHY[status]}: {day_dir(history, day)})"
    listed = ", ".join(f"{d} ({_WHY[s]})" for d, s in missing[:10]) + (", ..." if len(missing) > 10 else "")
    return f"{len(missing)} of {total} days have no history under {history}: {listed}"


def _share(r: DayResult) -> str:
    share = out_of_sync_share(r.out_of_sync_seconds, r.covered_seconds)
    return "–" if share is None else f"{100.0 * share:.2f} %"


def _status(r: DayResult) -> str:
    """What the run did with the day, in a word or two."""
    if r.trends_only:
        return "[cyan]trends recomputed[/]"
    if r.action is Action.ROLL and r.status is DayStatus.PRESENT:
        return "[green]written[/]" if r.final else "[yellow]written, provisional[/]"
    if r.action is Action.UNCHANGED:
        return "[dim]unchanged[/]"
    if r.action is Action.KEEP:
        return "[yellow]kept[/]"
    return f"[red]{_WHY[r.status]}[/]"


def _line(r: DayResult) -> str:
    note = f"  [yellow]{r.why}[/]" if r.why and (r.action is Action.KEEP or r.status is DayStatus.PRESENT) else ""
    if r.trends_only:
        return f"[cyan]↻[/] {r.day}  trends recomputed: an earlier day was rolled up again  [dim]({r.seconds:.0f} s)[/]{note}"
    if r.action is Action.UNCHANGED:
        return f"[dim]·[/] {r.day}  unchanged since its rollup{'' if r.final else ' (provisional)'}{note}"
    if r.action is Action.KEEP:
        return f"[yellow]![/] {r.day}  kept as rolled up:{note}"
    if r.status is not DayStatus.PRESENT:
        return f"[red]✗[/] {r.day}  no history ({_WHY[r.status]})"
    return (f"[green]✓[/] {r.day}  {r.flows} flows · {r.topics:,} topics · {r.partitions:,} partitions · "
            f"{r.samples:,} samples · out of sync {_share(r)} · {r.stall_episodes:,} stalls · "
            f"{r.growing:,} growing{'' if r.final else ' · provisional'}  [dim]({r.seconds:.0f} s)[/]{note}")


def _print_day(console: Console, r: DayResult) -> None:
    """The day's line, then its warnings, each a line of its own."""
    console.print(_line(r))
    for warning in r.warnings:
        console.print(f"  [yellow]{escape(warning)}[/]")


def _summary(opts: RollupOptions, results: list[DayResult], seconds: float) -> Table:
    table = Table(title=f"mirrorlag rollup: {len(results)} day{'s' if len(results) != 1 else ''} in {seconds:.0f} s",
                  title_justify="left")
    for name, justify in (("day", "left"), ("status", "left"), ("partitions", "right"), ("samples", "right"),
                          ("out of sync", "right"), ("stalls", "right"), ("growing", "right"),
                          ("unknown states", "right"), ("time", "right")):
        table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for r in results:
        if r.status is DayStatus.PRESENT and r.action is Action.ROLL and not r.trends_only:
            table.add_row(str(r.day), _status(r), f"{r.partitions:,}", f"{r.samples:,}", _share(r),
                          f"{r.stall_episodes:,}", f"{r.growing:,}", f"{r.unknown_state_samples:,}", f"{r.seconds:.0f} s")
        else:
            table.add_row(str(r.day), _status(r), *[""] * 6, f"{r.seconds:.0f} s")
    written = [r for r in results if r.status is DayStatus.PRESENT and r.action is Action.ROLL and not r.trends_only]
    if written:
        table.caption = (f"tables: {table_path(opts.out, 'partition')}, {table_path(opts.out, 'topic')}, "
                         f"{table_path(opts.out, 'flow')}, {trends_path(opts.out)} (partitioned by date)"
                         + (f"\nreports: {written[0].report}" + (" ..." if len(written) > 1 else "") if written[0].report else ""))
        table.caption_justify = "left"
    return table


def _quiet_python_loggers(log_level: str) -> None:
    # py4j logs each connection at INFO (`mirrorlag --log-level INFO` would show them); PySpark 4
    # logs every failed query as a JSON blob with a JVM stack trace, which our one-line error
    # already says.
    logging.getLogger("py4j").setLevel(logging.WARNING)
    if log_level in ("ERROR", "WARN"):
        try:
            from pyspark.logger import PySparkLogger
        except ImportError:  # PySpark 3.5 has no such loggers
            return
        for name in ("DataFrameQueryContextLogger", "SQLQueryContextLogger"):
            PySparkLogger.getLogger(name).setLevel(logging.CRITICAL)


def run(opts: RollupOptions, master: str | None, confs: Mapping[str, str], log_level: str = "ERROR",
        console: Console | None = None, remote: str | None = None, session=None) -> int:
    """`session`: a SparkSession already running (a PySpark application that rolls up among its own
    jobs; the test suite's one session), used as it is and left running; else one is started here
    from `master`/`remote` and `confs`, and stopped at the end."""
    _quiet_python_loggers(log_level)
    if console is None:
        console = Console(highlight=False)
        if not console.is_terminal:
            console = Console(highlight=False, width=160)  # a log file has room: no wrapped table
    days = sorted(set(opts.days))
    opts = dataclasses.replace(opts, days=days, now_ms=opts.now_ms if opts.now_ms is not None else int(time.time() * 1000))
    plan: Plan | None = None
    if not needs_spark(opts):
        # Local history and output: what to do is known before Spark starts (a typo fails at
        # once, and a night with nothing new or changed starts no Spark at all).
        plan = plan_days(opts, opts.now_ms, None)
        _no_history_at_all(opts, plan)
        if not plan.work:
            results = run_days(None, opts, plan=plan)  # type: ignore[arg-type]  # nothing for Spark to do
            for r in results:
                _print_day(console, r)
            console.print(_summary(opts, results, 0.0))
            return _exit(opts, results)

    t0 = time.perf_counter()
    if session is None:
        where = f"Spark Connect at {masked(remote)}" if remote else f"Spark ({master or 'local[*]'})"
        with console.status(f"starting {where} ..."):
            spark = build_session(master, confs, log_level, remote=remote)
    else:
        spark = session
    if not is_connect(spark) and any(spark.sparkContext.getConf().contains(k) for k in TUNED):
        opts = dataclasses.replace(opts, tune_spark=False)  # the user's, through spark-submit
    try:
        with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TimeElapsedColumn(), console=console, transient=True) as progress:
            task = progress.add_task("rolling up", total=None)  # the later days whose trends follow are known as it goes

            def started(day: date) -> None:
                progress.update(task, description=f"rolling up {day}")

            def done(result: DayResult) -> None:
                _print_day(progress.console, result)
                progress.advance(task)

            if plan is None:
                plan = listed_plan(spark, opts)
                _no_history_at_all(opts, plan)
            results = run_days(spark, opts, on_start=started, on_done=done, plan=plan)
    finally:
        if session is None and is_connect(spark):  # started here: stopped here
            connect_stop(spark)
        elif session is None:
            spark.stop()
    console.print(_summary(opts, results, time.perf_counter() - t0))
    return _exit(opts, results)


def _no_history_at_all(opts: RollupOptions, plan: Plan) -> None:
    """Exit 3 before any work when none of the days has history nor an earlier rollup: the sidecar
    wrote nothing (or history is off). A day asked for by name and missing is exit 3 after the
    others are written (_exit); in the lookback, a day without history yet is not an error: a
    later run rolls it up when it comes."""
    unavailable = [(p.day, p.status) for p in plan.days
                   if p.status is not DayStatus.PRESENT and p.previous is None]
    if unavailable and len(unavailable) == len(plan.days):
        raise MissingHistoryError(_missing_message(opts.history, unavailable, len(plan.days)))


def _exit(opts: RollupOptions, results: list[DayResult]) -> int:
    missing = [(r.day, r.status) for r in results
               if r.status is not DayStatus.PRESENT and r.action in (Action.ROLL, Action.NONE)]
    if missing and not opts.lookback:
        raise MissingHistoryError(_missing_message(opts.history, missing, len(opts.days)))
    return 0
