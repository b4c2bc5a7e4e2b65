"""`mirrorlag run | check | mirror | demo`. Errors the user can fix end in one line and exit status 2;
`check` exits as a Nagios plugin does (CHECK_EPILOG): an error there is UNKNOWN, 3."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from mirrorlag import __version__
from mirrorlag.errors import MirrorlagError, exit_status

if TYPE_CHECKING:
    from mirrorlag.config.strimzi import StrimziSource
    from mirrorlag.process.gc_pacing import GcPacing

log = logging.getLogger("mirrorlag")


CHECK_EPILOG = """\
output: a Monitoring Plugins status line, then detail lines:
  MIRRORLAG OK - 120 partitions IN_SYNC | records_behind=0;;;0 time_lag=0s;;;0 in_sync=120;;;0;120 ...
  MIRRORLAG WARNING - 2 of 120 partitions not IN_SYNC: A->B orders/3 LAGGING 1,234 records 45 s, ... | ...
perfdata: records_behind (largest record lag), time_lag (largest, s), and the
partitions per state (in_sync, lagging, stalled, at_risk, reset, rewind, unknown);
--groups: reread_records, skipped_records (the largest group's, each summed
over its partitions), checkpoint_age (oldest, s)
and the groups per state (ready, reread_high, ...).

exit status (Nagios'):
  0  OK: every partition IN_SYNC (--groups: every consumer group READY)
  1  WARNING: any partition LAGGING, REWIND or UNKNOWN (--groups: any group not READY)
  2  CRITICAL: any partition STALLED, RESET or AT_RISK
  3  UNKNOWN: a cluster could not be read, no answer within --timeout, or a
     configuration or usage error; the status line says why, and the next lines
     name each cluster that did not answer (--groups: each flow whose groups
     could not be listed)
  With a threshold, LAGGING alone no longer warns: the largest time lag (--warning,
  --critical, seconds) and record lag (--warning-records, --critical-records)
  judge it, each outside its range alerting; the other states judge as above.
  Ranges (of the values that are OK) as in the Monitoring Plugins guidelines:
  10 (0..10), 10: (at least 10), ~:10 (at most 10), 10:20, @10:20 (alert inside).
--url asks a running sidecar's /status instead: the same line, with its age.

--timeout (default 9 s, inside NRPE's 10 s) bounds the whole run: creating the
clients, metadata, ListOffsets, the first read of MM2's topics, the source
probe, the check's own window (a partition behind must be copied up to where it
stood within it) and closing the clients. At the deadline the check answers
UNKNOWN with what it knows. The window is the timeout, capped at
replication.lag.time.max.ms (mirrorlag's own key, after the broker's
replica.lag.time.max.ms; 30 s by default): when it was cut short
the status line says so, as a partition behind may still catch up in time."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mirrorlag",
        description="Replication lag of a Kafka MirrorMaker 2 mirror, from MM2's own properties file.",
    )
    parser.add_argument("--version", action="version", version=f"mirrorlag {__version__}")
    parser.add_argument("--log-level", default=None, choices=["DEBUG", "INFO", "WARNING", "ERROR"],
                        help="default INFO; WARNING for check, which is quiet when all is well (cron mails any output)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add_config(p: argparse.ArgumentParser, required: bool = True, strimzi: bool = False) -> None:
        p.add_argument("--config", "-c", action="append", required=required, metavar="FILE",
                       help="Java .properties file (mm2.properties); repeat to layer, later files win"
                            + (" (over --strimzi's keys)" if strimzi else ""))
        if strimzi:
            p.add_argument("--strimzi", default=None, metavar="FILE[#NAME]",
                           help="a Strimzi KafkaMirrorMaker2 resource (kafka.strimzi.io/v1 or v1beta2) in place of "
                                "mm2.properties; #NAME picks one of several by metadata.name")
            p.add_argument("--strimzi-secrets", type=Path, default=None, metavar="DIR",
                           help="with --strimzi: where its Secrets are mounted, key K of Secret S at DIR/S/K "
                                "(default /etc/mirrorlag/strimzi-secrets)")

    run = sub.add_parser("run", help="run the sidecar: poll lag and serve /metrics, /status, /healthz, /readyz")
    add_config(run, required=False, strimzi=True)  # required unless --strimzi
    run.add_argument("--web.config.file", dest="web_config_file", type=Path, default=None, metavar="FILE",
                     help="TLS and basic auth for the listener, in the Prometheus exporter-toolkit's web "
                          "config format (as node_exporter's flag); default: mirrorlag.http.web.config.file, "
                          "else plain HTTP, no auth")

    check = sub.add_parser(
        "check", help="one-shot Nagios plugin: exit 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN",
        description="One verdict on every partition of the configured flows, within --timeout.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=CHECK_EPILOG)
    check.error = lambda message: _check_usage_error(check, message)  # type: ignore[method-assign]
    add_config(check, required=False, strimzi=True)  # required unless --url or --strimzi
    check.add_argument("--json", action="store_true", help="print a JSON array of partitions "
                       "(exit 3: an object with the reason and the clusters)")
    check.add_argument("--groups", action="store_true",
                       help="failover readiness of the consumer groups MM2 checkpoints instead: exit 0 when "
                            "every group is READY, 1 otherwise (--json: one object per group partition)")
    check.add_argument("--timeout", type=float, default=9.0, metavar="S",
                       help="seconds the whole check may take, answer included (default 9: NRPE kills a "
                            "check at 10); also its window, capped at replication.lag.time.max.ms")
    check.add_argument("--verbose", "-v", action="store_true",
                       help="the per-partition table after the status line (the default on a terminal)")
    check.add_argument("--quiet", "-q", action="store_true",
                       help="print nothing when OK (cron mails only problems), not even a warning on stderr "
                            "(--log-level WARNING shows them); the status line otherwise")
    check.add_argument("--url", default=None, metavar="URL",
                       help="ask a running sidecar instead (http[s]://host:9464): its /status' verdict, "
                            "in well under a second, with its age; no Kafka client")
    check.add_argument("--user", default=None, help="with --url: basic auth user (the listener's web config)")
    check.add_argument("--password-file", type=Path, default=None, metavar="FILE",
                       help="with --url: the basic auth password, the file's first line")
    check.add_argument("--ca-file", type=Path, default=None, metavar="FILE",
                       help="with an https --url: the CA of the listener's certificate (default: the system's)")
    check.add_argument("--client-cert", type=Path, default=None, metavar="FILE",
                       help="with an https --url: a client certificate (PEM), for a listener that requires one")
    check.add_argument("--client-key", type=Path, default=None, metavar="FILE",
                       help="with --client-cert: its key (PEM; default: in the certificate's file)")
    check.add_argument("--max-age", type=float, default=60.0, metavar="S",
                       help="with --url: a sidecar verdict older than S seconds is UNKNOWN (default 60)")
    for option, what in (("--warning", "WARNING"), ("--critical", "CRITICAL")):
        check.add_argument(option, type=_range, default=None, metavar="RANGE",
                           help=f"{what} when the largest time lag (s) is outside RANGE (Nagios range syntax)")
        check.add_argument(f"{option}-records", type=_range, default=None, metavar="RANGE",
                           help=f"{what} when the largest record lag is outside RANGE")

    demo = sub.add_parser("demo", help="embedded source and target brokers, a lagging replicator and the sidecar, live")
    demo.add_argument("--port", type=int, default=9464, help="HTTP port of the embedded sidecar (default 9464)")
    demo.add_argument("--duration", type=float, default=None, metavar="S", help="stop after S seconds")
    demo.add_argument("--no-ui", action="store_true",
                      help="plain status lines instead of the live table (the default when stdout is not a terminal)")
    demo.add_argument("--dir", type=Path, default=Path("mirrorlag-demo"), metavar="DIR",
                      help="keep the configs, logs and lag history here (default ./mirrorlag-demo)")
    demo.add_argument("--kafka", choices=("embedded", "apache"), default="embedded",
                      help="embedded: tansu brokers and `mirrorlag mirror` (the default); apache: Apache Kafka's "
                           "KRaft brokers and the real MirrorMaker 2 (needs Java 17+ and Maven; jars fetched on first use)")
    demo.add_argument("--kafka-version", default=None, metavar="V",
                      help="with --kafka apache: the pinned Apache Kafka version (4.3.1, the default, or 3.9.2)")
    demo.add_argument("--history", type=Path, default=None, metavar="DIR",
                      help="the sidecar's lag history (30 s segments, for `mirrorlag rollup`; default: DIR/history of --dir)")

    mirror = sub.add_parser("mirror", help="a MirrorMaker 2 stand-in: copy the flows and write MM2's offsets, syncs and heartbeats")
    add_config(mirror)
    mirror.add_argument("--max-records-per-second", type=float, default=None, metavar="N",
                        help="copy at most N records per second over all flows (default: unthrottled)")
    mirror.add_argument("--offset-flush-interval-ms", type=int, default=None, metavar="MS",
                        help="commit offsets every MS ms (default: <target>.offset.flush.interval.ms, as MM2's worker reads it, else 60000)")

    from mirrorlag.rollup import cli as rollup_cli

    rollup_cli.add_arguments(sub.add_parser("rollup", help=rollup_cli.HELP))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    started = time.monotonic()  # `check --timeout` counts from here: the check's imports take a while
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)  # parse_args, but an unknown option of check is UNKNOWN
    if unknown:
        (_check_usage_error if args.command == "check" else type(parser).error)(
            parser, f"unrecognized arguments: {' '.join(unknown)}")
    args.started = started
    if args.log_level is None:  # check --quiet: cron mails only problems, and a warning alone is none
        args.log_level = ("ERROR" if args.quiet else "WARNING") if args.command == "check" else "INFO"
    logging.basicConfig(level=args.log_level, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # librdkafka reconnect chatter is summarised by the poller once per state change.
    logging.getLogger("mirrorlag.librdkafka").setLevel(logging.CRITICAL if args.log_level != "DEBUG" else logging.DEBUG)
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
    return exit_status(lambda: _command(args))


def _command(args: argparse.Namespace) -> int:
    if args.command == "run":
        return cmd_run(args)
    if args.command == "check":
        return cmd_check(args)
    if args.command == "demo":
        from mirrorlag.demo.runner import run_demo

        return run_demo(port=args.port, duration_s=args.duration, ui=not args.no_ui, run_dir=args.dir,
                        history=args.history, kafka=args.kafka, kafka_version=args.kafka_version)
    if args.command == "mirror":
        from mirrorlag.mirror.cli import cmd_mirror

        return cmd_mirror(args)
    if args.command == "rollup":
        from mirrorlag.rollup.cli import cmd_rollup

        return cmd_rollup(args)
    return 2


def _strimzi(args: argparse.Namespace) -> StrimziSource | None:
    """`--strimzi FILE[#NAME]` and `--strimzi-secrets DIR`, as the loader takes them."""
    if args.strimzi is None:
        if args.strimzi_secrets is not None:
            raise MirrorlagError("--strimzi-secrets needs --strimzi")
        return None
    from mirrorlag.config.strimzi import StrimziSource

    return StrimziSource.parse(args.strimzi, args.strimzi_secrets)


def _range(text: str) -> object:
    from mirrorlag.check.output import Range

    try:
        return Range.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _check_usage_error(parser: argparse.ArgumentParser, message: str) -> None:
    """A usage error of `check` is UNKNOWN (3) to Nagios, which reserves 2 for CRITICAL."""
    from mirrorlag.check.output import unknown_line

    print(unknown_line(f"usage: {message}"))
    parser.print_usage(sys.stderr)
    print(f"{parser.prog}: error: {message}", file=sys.stderr)
    sys.exit(3)


def cmd_check(args: argparse.Namespace) -> int:
    from mirrorlag.check.output import Status, Thresholds, unknown_line

    thresholds = Thresholds(args.warning, args.critical, args.warning_records, args.critical_records)
    if args.url is None and not args.config and args.strimzi is None:
        print(unknown_line("usage: the following arguments are required: --config/-c (or --strimzi, or --url)"))
        print("mirrorlag check: error: the following arguments are required: --config/-c (or --strimzi, or --url)",
              file=sys.stderr)
        return Status.UNKNOWN
    if args.url is not None:  # before importing mirrorlag.check: its Kafka client and poller take a second
        from mirrorlag.check.url import UrlCheck, run_url_check

        url_check = UrlCheck(args.url, args.timeout, args.max_age, args.user, args.password_file, args.ca_file,
                             args.client_cert, args.client_key)
        return run_url_check(url_check, args.json, thresholds, args.quiet)
    from mirrorlag.check.run import Output, run_check

    output = Output(verbose=args.verbose, quiet=args.quiet, thresholds=thresholds)
    try:
        return run_check(args.config or [], as_json=args.json, timeout_s=args.timeout, started=args.started,
                         groups=args.groups, output=output, strimzi=_strimzi(args))
    except MirrorlagError as exc:
        # Nagios shows stdout's first line; cron and a human read stderr's one line as from `run`.
        if not args.json:
            print(unknown_line(str(exc)))
        print(f"mirrorlag: error: {exc}", file=sys.stderr)
        return Status.UNKNOWN


# The GIL switch interval of `mirrorlag run` (CPython's default is 5 ms). A scrape thread takes the
# GIL several times per request (read, parse, write), each time waiting up to one interval for the
# poll thread to let go; large estates poll for seconds, so 5 ms a wait shows in the scrape's
# tail latency (tests/bench/RESULTS.md). Switches happen only while a thread waits, so a poll
# alone runs at full speed.
SWITCH_INTERVAL_S = 0.001


def tune_process() -> None:
    """Process-wide settings of `mirrorlag run` (the benchmarks measure with the same)."""
    import pyarrow

    sys.setswitchinterval(SWITCH_INTERVAL_S)
    # Arrow (the /metrics render, history's Parquet) allocates from glibc, as Python does: with
    # Arrow's default, mimalloc, neither could reuse the other's freed pages: more memory resident
    # for a render barely faster (tests/bench/RESULTS.md).
    pyarrow.set_memory_pool(pyarrow.system_memory_pool())


def run_pacing() -> GcPacing:
    """What `mirrorlag run` does to its process around each poll (the benchmarks do the same)."""
    from mirrorlag.process.gc_pacing import GcPacing
    from mirrorlag.process.malloc import heap_trimmer

    return GcPacing(release_memory=heap_trimmer())


def cmd_run(args: argparse.Namespace) -> int:
    from mirrorlag.config import load_settings
    from mirrorlag.config.effective import log_effective
    from mirrorlag.feeds.external import build_feeds, heartbeat_feeds
    from mirrorlag.sidecar.service import Sidecar

    if not args.config and args.strimzi is None:
        raise MirrorlagError("the following arguments are required: --config/-c (or --strimzi)")
    settings = load_settings(args.config or [], strimzi=_strimzi(args))
    web = None
    web_config_file = args.web_config_file or settings.http_web_config_file  # the flag wins
    if web_config_file is not None:
        from mirrorlag.exporters.web_config import load_web_config

        web = load_web_config(web_config_file)
    tune_process()
    try:
        sidecar = Sidecar(settings, feeds=build_feeds(settings), heartbeats=heartbeat_feeds(settings),
                          gc_pacing=run_pacing(), web=web)
    except OSError as exc:  # e.g. the HTTP port is taken
        host = f"[{settings.http_host}]" if ":" in settings.http_host else settings.http_host
        raise MirrorlagError(f"mirrorlag.http.listener {host}:{settings.http_port}: {exc.strerror}") from None
    log_effective(settings)  # once the listener is bound: a run that cannot start says one line
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda *_: stop.set())
    sidecar.start()
    log.info("mirrorlag %s watching %s", __version__, ", ".join(
        f"{f.id} (LEOs at {f.isolation_level}, offset flush {f.offset_flush_interval_s:g} s"
        f"{'' if f.emit_offset_syncs else ', no offset syncs'})" for f in settings.flows))
    # Never an untimed wait: the kernel may hand SIGTERM to any thread, and Python runs the
    # handler only once the main thread wakes.
    while not stop.wait(timeout=1.0):
        pass
    log.info("stopping")
    if not sidecar.stop(timeout_s=4.5):
        log.warning("a poll or a client's close was still waiting on a broker; exiting without it")
        logging.shutdown()
        os._exit(0)  # the in-flight request thread would otherwise hold the interpreter open
    return 0
