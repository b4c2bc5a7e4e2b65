"""`mirrorlag demo`: the production topology on one laptop.

Two embedded brokers; a load generator with bursts and idle spells; `mirrorlag mirror` (MM2 on the
wire) and `mirrorlag run` (the sidecar) as separate processes that share nothing but the brokers
and the properties files; and a live table read from the sidecar's /status, as any client would.
The mirror is rate-limited below the bursts and paused now and then, so lag comes and goes.
Ctrl-C (or a closed terminal, or --duration) stops everything it started.
"""

from __future__ import annotations

import json
import logging
import signal
import socket
import subprocess
import sys
import tempfile
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
from rich.console import Console
from rich.live import Live
from rich.logging import RichHandler

from mirrorlag.demo.loadgen import LoadGenerator
from mirrorlag.demo.ui import render_table
from mirrorlag.embedded import EmbeddedBroker
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
"""

MIRRORLAG_PROPERTIES = """\
# Written by `mirrorlag demo`: the sidecar's own keys, layered over mm2.properties.
mirrorlag.http.listener = 127.0.0.1:{port}
replication.record.lag.metric.refresh.interval = 2000
replication.lag.time.max.ms = 8000
metrics.sample.window.ms = 10000
"""

# With --history: short segments, so `mirrorlag rollup` has data after a minute of demo.
HISTORY_PROPERTIES = """\
mirrorlag.history.dir = {dir}
mirrorlag.history.segment.ms = 30000
"""


def create_topics(bootstrap_servers: str, topics: dict[str, int]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap_servers, "logger": LIBRDKAFKA_LOGGER})
    for future in admin.create_topics([NewTopic(t, n, 1) for t, n in topics.items()]).values():
        future.result(timeout=15)


def spawn(stack: ExitStack, name: str, args: list[str], log_dir: Path) -> subprocess.Popen[bytes]:
    """A mirrorlag process in its own session (we stop it, in order), logging to a file."""
    log_file = open(log_dir / f"{name}.log", "ab")
    stack.callback(log_file.close)
    proc = subprocess.Popen([sys.executable, "-m", "mirrorlag", *args], stdin=subprocess.DEVNULL,
                            stdout=log_file, stderr=log_file, start_new_session=True)

    def stop() -> None:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    stack.callback(stop)
    return proc


def fetch_status(port: int) -> dict[str, Any] | None:
    try:
        return json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=2).read())
    except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError):
        return None


def run_demo(port: int, duration_s: float | None, ui: bool, history: Path | None = None) -> int:
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGHUP):  # a closed terminal must not orphan the brokers
        signal.signal(signum, lambda *_: stop.set())
    _check_port_free(port)
    with ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="mirrorlag-demo-")))
        source = stack.enter_context(EmbeddedBroker("source"))
        target = stack.enter_context(EmbeddedBroker("target"))
        create_topics(source.bootstrap_servers, TOPICS)
        mm2 = workdir / "mm2.properties"
        mm2.write_text(MM2_PROPERTIES.format(source=source.bootstrap_servers, target=target.bootstrap_servers))
        own = workdir / "mirrorlag.properties"
        own_keys = MIRRORLAG_PROPERTIES.format(port=port)
        if history is not None:
            history = history.resolve()
            own_keys += HISTORY_PROPERTIES.format(dir=javaproperties.escape(str(history)))
        own.write_text(own_keys)

        loadgen = LoadGenerator(source.bootstrap_servers, TOPICS, stop_event=stop)
        threading.Thread(target=loadgen.run, name="loadgen", daemon=True).start()
        stack.callback(stop.set)  # runs before the processes and brokers stop (ExitStack is LIFO)
        mirror = spawn(stack, "mirror", ["mirror", "--config", str(mm2),
                                         "--max-records-per-second", str(MIRROR_RATE)], workdir)
        sidecar = spawn(stack, "sidecar", ["run", "--config", str(mm2), "--config", str(own)], workdir)

        url = f"http://127.0.0.1:{port}"
        deadline = None if duration_s is None else time.monotonic() + duration_s
        controller = MirrorController(mirror)
        log.info("demo: %s/metrics | configs and logs in %s", url, workdir)

        def caption(status: dict[str, Any] | None) -> str:
            ages = (status or {}).get("heartbeat_age_s") or {}
            heartbeat = ", ".join(f"{f} {a:.1f}s" for f, a in ages.items()) or "-"
            return (f"mirror: {controller.phase} | produced {loadgen.produced} | heartbeat age {heartbeat}\n"
                    f"{url}/metrics | {mm2} | Ctrl-C stops")

        try:
            live = stack.enter_context(Live(render_table(None, caption(None)), console=Console(),
                                            refresh_per_second=4)) if ui else None
            if live is not None:
                _log_through(live.console)
            last_summary = 0.0
            while not stop.is_set() and (deadline is None or time.monotonic() < deadline):
                for name, proc in (("mirror", mirror), ("sidecar", sidecar)):
                    if proc.poll() is not None:
                        raise MirrorlagError(f"the {name} exited with {proc.returncode}; see {workdir / name}.log")
                controller.step()
                status = fetch_status(port)
                if live is not None:
                    live.update(render_table(status, caption(status)))
                elif status and time.monotonic() - last_summary >= 2:
                    last_summary = time.monotonic()
                    log.info("%s | %s", caption(status).splitlines()[0], _summary(status))
                stop.wait(1.0)
        except KeyboardInterrupt:
            pass
        stop.set()
    if history is not None:  # the sidecar has stopped: its last segment is written
        today = datetime.now(timezone.utc).date()
        log.info("demo: lag history in %s; roll it up with: mirrorlag rollup --history %s --out %s --date %s",
                 history, history, history.parent / "rollup", today)
    return 0


def _check_port_free(port: int) -> None:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError as exc:
            raise MirrorlagError(f"demo HTTP port {port}: {exc.strerror} (choose another with --port)") from None


class MirrorController:
    """Pauses and resumes the mirror process on MIRROR_SCHEDULE (SIGUSR1 / SIGUSR2)."""

    def __init__(self, mirror: subprocess.Popen[bytes]) -> None:
        self.mirror = mirror
        self.index = 0
        self.phase_end = time.monotonic() + MIRROR_SCHEDULE[0][0]

    @property
    def phase(self) -> str:
        return "copying" if MIRROR_SCHEDULE[self.index][1] else "paused (stalled)"

    def step(self) -> None:
        if time.monotonic() < self.phase_end:
            return
        self.index = (self.index + 1) % len(MIRROR_SCHEDULE)
        seconds, copying = MIRROR_SCHEDULE[self.index]
        self.phase_end = time.monotonic() + seconds
        self.mirror.send_signal(signal.SIGUSR2 if copying else signal.SIGUSR1)


def _log_through(console: Console) -> None:
    """Log lines above the live table instead of through it."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    root.addHandler(RichHandler(console=console, show_path=False))


def _summary(status: dict[str, Any]) -> str:
    rows = status.get("partitions", [])
    lag = sum(r["record_lag"] for r in rows if r["record_lag"] is not None)
    states: dict[str, int] = {}
    for row in rows:
        states[row["state"]] = states.get(row["state"], 0) + 1
    return f"total lag {lag} records | " + ", ".join(f"{k} {v}" for k, v in sorted(states.items()))
