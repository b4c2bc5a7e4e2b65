"""`mirrorlag demo`: the production topology on one laptop.

Two embedded brokers; a load generator with bursts and idle spells; `mirrorlag mirror` (MM2 on the
wire) and `mirrorlag run` (the sidecar) as separate processes that share nothing but the brokers
and the properties files; and a live table read from the sidecar's /status, as any client would.
The mirror is rate-limited below the bursts and paused now and then, so lag comes and goes. With
`--kafka apache` the brokers are Apache Kafka's and the mirror is the real MirrorMaker 2, frozen
(SIGSTOP) and thawed on the same schedule (topology.py).
Ctrl-C (or a closed terminal, or --duration) stops everything it started; its run directory
keeps the properties files, the processes' logs and the lag history for `mirrorlag check` and
`mirrorlag rollup` afterwards.
"""

from __future__ import annotations

import json
import logging
import shlex
import signal
import socket
import sys
import threading
import time
import urllib.error
import urllib.request
from contextlib import ExitStack
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import javaproperties
from confluent_kafka.admin import AdminClient, NewTopic
from mirrorlag.demo.consumer import GroupConsumer
from mirrorlag.demo.loadgen import LoadGenerator
from mirrorlag.demo.ui import LiveView, PlainView, View, group_summaries
from mirrorlag.groups.rows import REREAD_LABEL
from mirrorlag.apache_kafka.jars import KAFKA_4
from mirrorlag.demo import topology
from mirrorlag.errors import MirrorlagError
from mirrorlag.kafka.source import LIBRDKAFKA_LOGGER

log = logging.getLogger(__name__)

TOPICS = {"orders": 3, "payments": 2, "clickstream": 4}
MIRROR_RATE = 250  # records/s: below the bursts, above the steady load
# The mirror's life: (seconds, copying?). A pause is a stalled MirrorMaker.
MIRROR_SCHEDULE: tuple[tuple[float, bool], ...] = ((25, True), (20, False))

MM2_PROPERTIES = """\
# Written by `mirrorlag demo`: what MirrorMaker 2 would run with. `mirrorlag mirror` reads it as
# MM2 would, and the sidecar reads the very same file.
clusters = source, target
source.bootstrap.servers = {source}
target.bootstrap.servers = {target}
source->target.enabled = true
source->target.topics = orders, payments, clickstream
target.offset.flush.interval.ms = 2000
# Checkpoints of the demo's consumer group every 5 s (MM2's default: 60 s).
emit.checkpoints.interval.seconds = 5
"""

MIRRORLAG_PROPERTIES = """\
# Written by `mirrorlag demo`: the sidecar's own keys, layered over mm2.properties.
mirrorlag.http.listener = 127.0.0.1:{port}
replication.record.lag.metric.refresh.interval = 2000
replication.lag.time.max.ms = 8000
metrics.sample.window.ms = 10000
"""

# Short segments, so `mirrorlag rollup` has data after a minute of demo.
HISTORY_PROPERTIES = """\
mirrorlag.history.dir = {dir}
mirrorlag.history.segment.ms = 30000
"""


def create_topics(bootstrap_servers: str, topics: dict[str, int]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap_servers, "logger": LIBRDKAFKA_LOGGER})
    for future in admin.create_topics([NewTopic(t, n, 1) for t, n in topics.items()]).values():
        future.result(timeout=15)


def fetch_status(port: int) -> dict[str, Any] | None:
    try:
        return json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=2).read())
    except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError):
        return None


def run_demo(port: int, duration_s: float | None, ui: bool, run_dir: Path, history: Path | None = None,
             kafka: str = "embedded", kafka_version: str | None = None) -> int:
    """`ui`: the live table, where stdout is a terminal (else plain lines: a pipe gets them too).
    `run_dir` keeps the configs, the logs (appended to, run after run) and, unless `history`
    names another directory, the lag history. `kafka`: "embedded" (tansu and `mirrorlag mirror`)
    or "apache" (Apache Kafka's brokers and MirrorMaker 2 at `kafka_version`)."""
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGHUP):  # a closed terminal must not orphan the brokers
        signal.signal(signum, lambda *_: stop.set())
    _check_port_free(port)
    run_dir = run_dir.resolve()
    history = (history or run_dir / "history").resolve()
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise MirrorlagError(f"demo run directory {run_dir}: {exc.strerror}") from None
    mm2, own = run_dir / "mm2.properties", run_dir / "mirrorlag.properties"
    logs = [run_dir / f"{name}.log" for name in ("mirror" if kafka == "embedded" else "mm2", "sidecar")]
    check = f"{_program()} check --config {shlex.quote(str(mm2))} --config {shlex.quote(str(own))}"
    view: View = LiveView() if ui and sys.stdout.isatty() else PlainView()
    url = f"http://127.0.0.1:{port}"
    view.say(f"demo: {url}/metrics | run directory {run_dir}\n"
             f"  configs: {mm2.name} (MM2's own) + {own.name} (the sidecar's keys, max 8 s)\n"
             f"  logs: {', '.join(p.name for p in logs)} | history: {history}\n"
             f"  the table's verdict, one-shot: {check}")
    with ExitStack() as stack:
        if kafka == "apache":
            view.say(f"demo: starting Apache Kafka {kafka_version or KAFKA_4} (two KRaft brokers) and MirrorMaker 2")
            clusters = topology.apache(stack, run_dir, kafka_version or KAFKA_4)
        else:
            clusters = topology.embedded(stack, MIRROR_RATE)
        create_topics(clusters.source, TOPICS)
        mm2.write_text(MM2_PROPERTIES.format(source=clusters.source, target=clusters.target) + clusters.mm2_keys)
        own.write_text(MIRRORLAG_PROPERTIES.format(port=port)
                       + HISTORY_PROPERTIES.format(dir=javaproperties.escape(str(history))))

        loadgen = LoadGenerator(clusters.source, TOPICS, stop_event=stop)
        threading.Thread(target=loadgen.run, name="loadgen", daemon=True).start()
        group = GroupConsumer(clusters.source, "orders", TOPICS["orders"], stop_event=stop)
        threading.Thread(target=group.run, name="group-consumer", daemon=True).start()
        stack.callback(stop.set)  # runs before the processes and brokers stop (ExitStack is LIFO)
        mirror = clusters.start_mirror(stack, mm2, run_dir)
        sidecar = topology.spawn(stack, "sidecar", ["run", "--config", str(mm2), "--config", str(own)], run_dir)

        deadline = None if duration_s is None else time.monotonic() + duration_s
        controller = MirrorController(mirror)

        def caption(status: dict[str, Any] | None) -> str:
            ages = (status or {}).get("heartbeat_age_s") or {}
            heartbeat = ", ".join(f"{f} {a:.1f}s" for f, a in ages.items()) or "-"
            return (f"mirror: {controller.phase} | produced {loadgen.produced} | heartbeat age {heartbeat}\n"
                    f"{url}/metrics | {run_dir}: {mm2.name} + {own.name} (max 8 s) | Ctrl-C stops\n"
                    f"the same verdict, one-shot: {check}")

        try:
            stack.enter_context(view.showing(caption(None)))
            while not stop.is_set() and (deadline is None or time.monotonic() < deadline):
                for name, code in ((mirror.name, mirror.exit_code()), ("sidecar", sidecar.poll())):
                    if code is not None:
                        raise MirrorlagError(f"the {name} exited with {code}; see {run_dir / name}.log")
                status = fetch_status(port)
                controller.step(status)
                view.update(status, caption(status), _summary(status) if status else None)
                stop.wait(1.0)
        except KeyboardInterrupt:
            pass
        stop.set()
    # The sidecar has stopped: its last segment is written.
    today = datetime.now(timezone.utc).date()
    rollup = (f"{_program()} rollup --history {shlex.quote(str(history))} "
              f"--out {shlex.quote(str(run_dir / 'rollup'))} --date {today}")
    view.say(f"demo: stopped. Kept in {run_dir}: {mm2.name}, {own.name}, {', '.join(p.name for p in logs)}\n"
             f"  lag history in {history}; roll it up into tables and an HTML report (the `spark` extra and "
             f"Java 17) with:\n  {rollup}")
    return 0


def _program() -> str:
    """How the user ran mirrorlag, so the commands printed run as shown (`python -m mirrorlag`
    runs __main__.py; an installed script runs as itself)."""
    argv0 = sys.argv[0]
    if not argv0 or argv0.endswith("__main__.py"):
        return f"{shlex.quote(sys.executable)} -m mirrorlag"
    return shlex.quote(argv0)


def _check_port_free(port: int) -> None:
    """Bind as the sidecar's HTTP server does (SO_REUSEADDR): the last run's port in TIME-WAIT is
    free for it, and so for us."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError as exc:
            raise MirrorlagError(f"demo HTTP port {port}: {exc.strerror} (choose another with --port)") from None


class MirrorController:
    """Pauses and resumes the mirror on MIRROR_SCHEDULE, from when the sidecar first reads every
    partition caught up (a real MirrorMaker 2 takes seconds to start its connectors, and a pause
    before then would show nothing the start did not)."""

    def __init__(self, mirror: topology.Mirror) -> None:
        self.mirror = mirror
        self.index = 0
        self.phase_end: float | None = None

    @property
    def phase(self) -> str:
        if self.phase_end is None:
            return "starting"
        return "copying" if MIRROR_SCHEDULE[self.index][1] else "paused (stalled)"

    def step(self, status: dict[str, Any] | None) -> None:
        if self.phase_end is None:
            rows = (status or {}).get("partitions") or []
            if rows and all(r["state"] == "IN_SYNC" for r in rows):
                self.phase_end = time.monotonic() + MIRROR_SCHEDULE[0][0]
            return
        if time.monotonic() < self.phase_end:
            return
        self.index = (self.index + 1) % len(MIRROR_SCHEDULE)
        seconds, copying = MIRROR_SCHEDULE[self.index]
        self.phase_end = time.monotonic() + seconds
        (self.mirror.resume if copying else self.mirror.pause)()


def _summary(status: dict[str, Any]) -> str:
    """`total lag N records | group G: STATE, re-read (sum) R | STATE n, ...`: the partitions' states last."""
    rows = status.get("partitions", [])
    lag = sum(r["record_lag"] for r in rows if r["record_lag"] is not None)
    states: dict[str, int] = {}
    for row in rows:
        states[row["state"]] = states.get(row["state"], 0) + 1
    groups = [f"group {g['group']}: {g['state']}, {REREAD_LABEL} {g['reread'] if g['reread'] is not None else '-'}"
              for g in group_summaries(status)]
    return " | ".join([f"total lag {lag} records", *groups, ", ".join(f"{k} {v}" for k, v in sorted(states.items()))])
