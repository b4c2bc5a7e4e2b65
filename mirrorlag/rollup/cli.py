"""`mirrorlag rollup` and `spark-submit mirrorlag/rollup/__main__.py`: the same arguments.

Light at import (argparse only): `mirrorlag --help` must not load Spark. The top-level CLI
(mirrorlag/cli.py) adds these arguments to its `rollup` subcommand; spark-submit's entry builds
the same parser here, without the top-level CLI (which would pull in the sidecar's commands).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from datetime import date, datetime, timedelta, timezone
from typing import Mapping, Sequence

from mirrorlag.errors import exit_status
from mirrorlag.rollup.errors import RollupError

PROG = "mirrorlag rollup"
HELP = ("nightly Spark rollup of the lag history: daily tables, trends, an HTML report "
        "(exit 3: no history for the day asked for, or for any day of the lookback)")
LOOKBACK_DAYS = 7  # the history's default retention (mirrorlag.history.retention.ms)
CATCH_UP_DAYS = 14  # the sidecar keeps an unreceipted day this long (mirrorlag.history.retention.max.ms)
SETTLE_MINUTES = 60.0


def _day(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date (YYYY-MM-DD): {text!r}") from None


def _conf(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE: {text!r}")
    return key.strip(), value


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--history", required=True, metavar="DIR_OR_URL",
                   help="the sidecar's history: DIR_OR_URL/date=YYYY-MM-DD/*.parquet (local, hdfs://, s3a://, ...)")
    p.add_argument("--out", required=True, metavar="DIR_OR_URL",
                   help="where the tables (partition_daily, topic_daily, flow_daily, trends) and reports/ go")
    p.add_argument("--date", type=_day, metavar="YYYY-MM-DD",
                   help="roll up this UTC day again, changed or not (today: provisional). Default: every day of "
                        "the lookback that is new or whose history changed, then the trends after it")
    p.add_argument("--from", dest="date_from", type=_day, metavar="YYYY-MM-DD",
                   help="backfill from this day (inclusive) ...")
    p.add_argument("--to", dest="date_to", type=_day, metavar="YYYY-MM-DD",
                   help="... to this day (inclusive; default: yesterday)")
    p.add_argument("--lookback-days", type=int, default=LOOKBACK_DAYS, metavar="N",
                   help=f"without --date/--from: the days up to yesterday looked at for late or new history "
                        f"(default {LOOKBACK_DAYS}: the history's default retention)")
    p.add_argument("--catch-up-days", type=int, default=CATCH_UP_DAYS, metavar="N",
                   help=f"without --date/--from: also roll up the days of the last N up to yesterday that hold "
                        f"history and no rollup receipt (nights missed for longer than the lookback; default "
                        f"{CATCH_UP_DAYS}: how long the sidecar keeps such a day, mirrorlag.history.retention.max.ms)")
    p.add_argument("--settle-minutes", type=float, default=SETTLE_MINUTES, metavar="M",
                   help="a day is final once over and its newest segment is this old (the upload lag); "
                        f"provisional before: marked so, left out of other days' trends (default {SETTLE_MINUTES:g})")
    p.add_argument("--force", action="store_true",
                   help="replace a day even when its history now holds less than it was rolled up from")
    p.add_argument("--master", default=None, metavar="URL",
                   help="Spark master (default local[*]; under spark-submit, the one it was given)")
    p.add_argument("--remote", default=None, metavar="sc://HOST:PORT",
                   help="run on a Spark Connect server instead (default: $SPARK_REMOTE); "
                        "mirrorlag is sent to it with the job")
    p.add_argument("--conf", action="append", type=_conf, default=[], metavar="KEY=VALUE",
                   help="a Spark setting, e.g. spark.driver.memory=8g; repeat for more")
    p.add_argument("--max-gap-seconds", type=float, default=60.0, metavar="S",
                   help="longest interval one sample accounts for where its row does not say its poll interval "
                        "(history written before rows had refresh_interval_ms; else 4 poll intervals); "
                        "longer gaps in the history count as no data (default 60)")
    p.add_argument("--worst", type=int, default=10, metavar="N", help="rows per measure in the report (default 10)")
    p.add_argument("--no-report", action="store_true", help="write the tables only")
    p.add_argument("--spark-log-level", default="ERROR", choices=["ERROR", "WARN", "INFO", "DEBUG"],
                   help="Spark's own log level (default ERROR: the job's progress, not Spark's)")


def days_from_args(args: argparse.Namespace, today: date | None = None) -> list[date]:
    """The days asked for by name; without --date/--from, the lookback (see lookback_from_args)."""
    today = today or datetime.now(timezone.utc).date()
    yesterday = today - timedelta(days=1)
    if args.date is not None and (args.date_from or args.date_to):
        raise RollupError("--date and --from/--to exclude each other")
    if args.date_to is not None and args.date_from is None:
        raise RollupError("--to needs --from")
    if args.date_from is None:
        if args.date is None:
            lookback = getattr(args, "lookback_days", 1)
            return [yesterday - timedelta(days=i) for i in reversed(range(lookback))]
        days = [args.date]
    else:
        last = args.date_to or yesterday
        if last < args.date_from:
            raise RollupError(f"--from {args.date_from} is after --to {last}")
        days = [args.date_from + timedelta(days=i) for i in range((last - args.date_from).days + 1)]
    if days[-1] > today:
        raise RollupError(f"{days[-1]} has not begun (today is {today}, UTC)")
    return days


def absolute(url: str) -> str:
    """A plain path made absolute here: executors (and a Spark Connect server) resolve a relative
    one against their own working directories."""
    return os.path.abspath(url) if "://" not in url and not url.startswith("file:") else url


def remote_from_args(args: argparse.Namespace, environ: Mapping[str, str] = os.environ) -> str | None:
    """The Spark Connect URL: --remote, else SPARK_REMOTE (which PySpark itself would follow
    anyway); checked here so that a bad one is one line."""
    remote = args.remote or environ.get("SPARK_REMOTE") or None
    if remote is None:
        return None
    if args.master:
        raise RollupError("--master and --remote (or SPARK_REMOTE) exclude each other")
    from mirrorlag.rollup.remote import parse

    parse(remote)
    return remote


def cmd_rollup(args: argparse.Namespace, session=None) -> int:
    """`session`: an existing SparkSession to run in (runner.run), instead of starting one."""
    try:
        from mirrorlag.rollup.options import RollupOptions
        from mirrorlag.rollup.runner import run
    except ImportError as exc:  # the demo's venv has no Spark
        raise RollupError(f"the rollup needs the spark extra ({exc.name} is not installed): "
                          "pip install 'mirrorlag[spark]', and Java 17") from None

    if args.worst < 1:
        raise RollupError("--worst must be at least 1")
    if args.max_gap_seconds <= 0:
        raise RollupError("--max-gap-seconds must be positive")
    if args.lookback_days < 1:
        raise RollupError("--lookback-days must be at least 1")
    if args.catch_up_days < 0:
        raise RollupError("--catch-up-days must not be negative")
    if args.settle_minutes < 0:
        raise RollupError("--settle-minutes must not be negative")
    confs = dict(args.conf)
    remote = remote_from_args(args)
    now = datetime.now(timezone.utc)  # the run's one reading of the clock
    opts = RollupOptions(
        history=absolute(args.history), out=absolute(args.out), days=days_from_args(args, now.date()),
        max_gap_seconds=args.max_gap_seconds, worst=args.worst, report=not args.no_report,
        tune_spark=not {"spark.sql.shuffle.partitions", "spark.sql.adaptive.enabled"} & confs.keys(),
        lookback=args.date is None and args.date_from is None, catch_up_days=args.catch_up_days,
        settle_seconds=args.settle_minutes * 60.0,
        force=args.force, now_ms=int(now.timestamp() * 1000),
    )
    return run(opts, master=args.master, confs=confs, log_level=args.spark_log_level, remote=remote, session=session)


def build_parser() -> argparse.ArgumentParser:
    """`mirrorlag rollup` on its own: the same usage line, arguments and errors as the subcommand."""
    parser = argparse.ArgumentParser(prog=PROG)
    add_arguments(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The spark-submit entry point: exactly `mirrorlag rollup ARGS` (same errors, exit statuses)."""
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return exit_status(lambda: cmd_rollup(args))
