"""Wire the demo together and show it live; Ctrl-C (or --duration) stops everything it started."""

from __future__ import annotations

import logging
import signal
import tempfile
import threading
import time
from contextlib import ExitStack
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic
from rich.console import Console
from rich.live import Live
from rich.logging import RichHandler

from mirrorlag.config import load_settings
from mirrorlag.demo.loadgen import LoadGenerator
from mirrorlag.demo.replicator import DemoReplicator
from mirrorlag.demo.ui import render_table
from mirrorlag.embedded import EmbeddedBroker
from mirrorlag.errors import MirrorlagError
from mirrorlag.feeds.callback import ReplicationTracker
from mirrorlag.kafka.source import LIBRDKAFKA_LOGGER
from mirrorlag.model import Snapshot
from mirrorlag.sidecar import Sidecar

log = logging.getLogger(__name__)

TOPICS = {"orders": 3, "payments": 2, "clickstream": 4}

PROPERTIES = """\
# Written by `mirrorlag demo`: an MM2-style config for the two embedded brokers.
clusters = source, target
source.bootstrap.servers = {source}
target.bootstrap.servers = {target}
source->target.enabled = true
source->target.topics = orders, payments, clickstream
replication.record.lag.metric.refresh.interval = 2000
replication.record.lag.metric.last.replicated.offset.ttl = 4000
replication.lag.time.max.ms = 8000
metrics.sample.window.ms = 10000
mirrorlag.http.listener = 127.0.0.1:{port}
"""


def create_topics(bootstrap_servers: str, topics: dict[str, int]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap_servers, "logger": LIBRDKAFKA_LOGGER})
    for topic, future in admin.create_topics([NewTopic(t, n, 1) for t, n in topics.items()]).items():
        future.result(timeout=15)


def run_demo(port: int, duration_s: float | None, ui: bool) -> int:
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGHUP):  # a closed terminal must not orphan the brokers
        signal.signal(signum, lambda *_: stop.set())
    with ExitStack() as stack, tempfile.TemporaryDirectory(prefix="mirrorlag-demo-") as tmp:
        source = stack.enter_context(EmbeddedBroker("source"))
        target = stack.enter_context(EmbeddedBroker("target"))
        create_topics(source.bootstrap_servers, TOPICS)
        create_topics(target.bootstrap_servers, {f"source.{t}": n for t, n in TOPICS.items()})
        config = Path(tmp) / "mm2.properties"
        config.write_text(PROPERTIES.format(source=source.bootstrap_servers, target=target.bootstrap_servers, port=port))
        settings = load_settings([config])

        tracker = ReplicationTracker("source", "target")
        try:
            sidecar = Sidecar(settings, trackers=[tracker])
        except OSError as exc:
            raise MirrorlagError(f"demo HTTP port {port}: {exc.strerror} (choose another with --port)") from None
        loadgen = LoadGenerator(source.bootstrap_servers, TOPICS, stop_event=stop)
        replicator = DemoReplicator("source", source.bootstrap_servers, target.bootstrap_servers, TOPICS,
                                    tracker, policy=settings.flows[0].policy, stop_event=stop)
        threads = [threading.Thread(target=w.run, name=name, daemon=True)
                   for name, w in (("loadgen", loadgen), ("replicator", replicator))]
        for thread in threads:
            thread.start()
        sidecar.start()
        stack.callback(sidecar.stop)
        stack.callback(lambda: [t.join(timeout=5) for t in threads])
        stack.callback(stop.set)

        url = f"http://127.0.0.1:{sidecar.server.port}/metrics"
        deadline = None if duration_s is None else time.monotonic() + duration_s

        def caption() -> str:
            return (f"source -> target | replicator: {replicator.phase} | produced {loadgen.produced} "
                    f"copied {replicator.copied} | {url} | Ctrl-C stops")

        try:
            if ui:
                console = Console()
                _log_through(console)  # log lines above the live table instead of through it
                with Live(render_table(None, caption()), console=console, refresh_per_second=4) as live:
                    sidecar.listeners.append(lambda snap: live.update(render_table(snap, caption())))
                    _wait(stop, deadline)
            else:
                sidecar.listeners.append(lambda snap: log.info("%s | %s", caption(), _summary(snap)))
                log.info("demo running: %s", url)
                _wait(stop, deadline)
        except KeyboardInterrupt:
            pass
        stop.set()
    return 0


def _log_through(console: Console) -> None:
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    root.addHandler(RichHandler(console=console, show_path=False))


def _wait(stop: threading.Event, deadline: float | None) -> None:
    while not stop.is_set():
        if deadline is not None and time.monotonic() >= deadline:
            return
        stop.wait(0.2)


def _summary(snapshot: Snapshot) -> str:
    known = [r.record_lag for r in snapshot.rows if r.record_lag is not None]
    states: dict[str, int] = {}
    for row in snapshot.rows:
        states[row.state.value] = states.get(row.state.value, 0) + 1
    return f"total lag {sum(known)} records | " + ", ".join(f"{k} {v}" for k, v in sorted(states.items()))
