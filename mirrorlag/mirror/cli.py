"""`mirrorlag mirror --config mm2.properties`: run the MM2 stand-in until SIGTERM/SIGINT.

SIGUSR1 pauses copying (heartbeats continue), SIGUSR2 resumes; SIGTERM/SIGINT commit offsets and
delayed offset syncs and exit 0 (1 if a record could not be written to a target).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import threading

from mirrorlag.config import load_settings
from mirrorlag.mirror.replicator import Mirror, describe, mirror_options

log = logging.getLogger("mirrorlag.mirror")

EXIT_DEADLINE_S = 4.8  # a SIGTERM must end the process within 5 s, even if a broker hangs


def cmd_mirror(args: argparse.Namespace) -> int:
    settings = load_settings(args.config)
    options = mirror_options(
        settings,
        max_records_per_second=getattr(args, "max_records_per_second", None),
        offset_flush_interval_ms=getattr(args, "offset_flush_interval_ms", None),
    )
    for line in describe(options):
        log.debug("%s", line)
    mirror = Mirror(settings, options)
    stop = threading.Event()

    def on_stop(*_: object) -> None:
        if not stop.is_set():
            stop.set()
            # The loop's own shutdown is bounded; this only catches a client stuck in C code.
            watchdog = threading.Timer(EXIT_DEADLINE_S, _give_up)
            watchdog.daemon = True
            watchdog.start()

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, on_stop)
    signal.signal(signal.SIGUSR1, lambda *_: mirror.pause())
    signal.signal(signal.SIGUSR2, lambda *_: mirror.resume())
    mirror.run(stop)  # MirrorFailed (exit status 1) is reported by mirrorlag.cli.main
    return 0


def _give_up() -> None:
    log.warning("shutdown did not finish in %.1f s; exiting without it", EXIT_DEADLINE_S)
    logging.shutdown()
    os._exit(1)
