"""Running mirrorlag's CLI as a user would, and reading its HTTP endpoints."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, tuple], float]


def mirrorlag(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mirrorlag", *args], capture_output=True, text=True, timeout=timeout)


def scrape(port: int) -> Samples:
    """Every sample on /metrics, keyed by (name, sorted label items)."""
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(body) for s in family.samples
    }


def labels(**items: str | int) -> tuple:
    return tuple(sorted((k, str(v)) for k, v in items.items()))


def status(port: int) -> dict[str, Any]:
    return json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=5).read())


def wait_ready(port: int, proc: subprocess.Popen, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the sidecar exited"
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2).status == 200:
                return
        except (urllib.error.URLError, ConnectionError):
            pass
        time.sleep(0.2)
    raise AssertionError("sidecar never became ready")


def eventually(check: Callable[[], Any], timeout: float = 20, interval: float = 0.3) -> Any:
    """Retry `check` until it returns without an AssertionError; re-raise the last one. A check
    that returns False has failed too (a `lambda: a == b` would otherwise pass at once)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = check()
            assert result is not False, f"{getattr(check, '__name__', 'check')} returned False"
            return result
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(interval)


@contextmanager
def running_sidecar(*configs: Path, port: int, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """`mirrorlag run` in its own process; SIGTERM on exit, which must end it cleanly."""
    args = [a for c in configs for a in ("--config", str(c))]
    with open(log, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "mirrorlag", "run", *args], stdout=out, stderr=out)
    try:
        wait_ready(port, proc)
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
    assert proc.returncode == 0, log.read_text()


def produce_records(bootstrap: str, topic: str, partition: int, timestamps_ms: list[int],
                    value: bytes = b"v", transactional: bool = False) -> None:
    """Records with the given CreateTime timestamps into one partition, one record per batch
    (tansu's LEO quirk, docs/design.md §8); with `transactional`, all in one committed transaction (a
    commit marker follows them)."""
    from confluent_kafka import Producer

    config: dict[str, object] = {"bootstrap.servers": bootstrap, "batch.num.messages": 1, "linger.ms": 0}
    if transactional:
        config["transactional.id"] = f"mirrorlag-tests-{topic}-{partition}-{time.monotonic_ns()}"
    producer = Producer(config)
    if transactional:
        producer.init_transactions(15)
        producer.begin_transaction()
    for ts in timestamps_ms:
        producer.produce(topic, value=value, partition=partition, timestamp=ts)
        if transactional:
            assert producer.flush(15) == 0  # one batch per record here too
    if transactional:
        producer.commit_transaction(15)
    assert producer.flush(15) == 0


@contextmanager
def running_mirror(config: Path, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """`mirrorlag mirror` (the stand-in MM2) in its own process; SIGUSR1 pauses it, SIGTERM ends it."""
    with open(log, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "mirrorlag", "mirror", "--config", str(config)],
                                stdout=out, stderr=out)
    try:
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)


@contextmanager
def every(period_s: float, action: Callable[[], Any]) -> Iterator[None]:
    """`action()` every `period_s` from a thread of its own, until the block ends."""
    import threading

    stop = threading.Event()

    def run() -> None:
        while not stop.wait(period_s):
            action()

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    try:
        yield
    finally:
        stop.set()
        worker.join(timeout=15)


@contextmanager
def steady_producer(bootstrap: str, topic: str, every_s: float) -> Iterator[None]:
    """One record every `every_s` into partition 0 of `topic`, one record per batch (tansu's LEO
    quirk, docs/design.md §8), from a thread, until the block ends."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "batch.num.messages": 1, "linger.ms": 0})

    def produce() -> None:
        producer.produce(topic, value=b"v", partition=0)
        producer.poll(0)

    with every(every_s, produce):
        yield
    producer.flush(10)


def mirrored_topic(tmp_path: Path, clusters: Any, name: str, flush_ms: int = 6000,
                   partitions: int = 1) -> tuple[Path, str]:
    """A topic of its own and an MM2 properties file whose flow (aliases unique to the test, so
    a mirror's `heartbeats` topics do not mix) mirrors it with offset flushes every `flush_ms`:
    (the file, the topic)."""
    import uuid

    tag = uuid.uuid4().hex[:8]
    src, dst, topic = f"s{tag}", f"d{tag}", f"{name}-{tag}"
    clusters.create_topic(topic, partitions)
    config = tmp_path / "mm2.properties"
    config.write_text(
        f"clusters = {src}, {dst}\n{src}.bootstrap.servers = {clusters.source}\n"
        f"{dst}.bootstrap.servers = {clusters.target}\n{src}->{dst}.enabled = true\n"
        f"{src}->{dst}.topics = {topic}\n{dst}.offset.flush.interval.ms = {flush_ms}\n")
    return config, topic


@contextmanager
def http_server() -> Iterator[str]:
    """A plain HTTP server on loopback, in a thread: its `host:port`. It answers whatever arrives
    at once with a 400, as Jetty (Kafka's REST proxy, Connect, Schema Registry) does a Kafka
    request; http.server's own handler would wait for a request line that never comes."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    import threading

    class Rejecting(BaseHTTPRequestHandler):
        def handle(self) -> None:
            self.rfile.read(4)
            self.command, self.request_version, self.requestline = "", "HTTP/1.1", ""
            try:
                self.send_error(400, "Illegal character")
            except OSError:  # the client hung up first
                pass

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Rejecting)
    thread = threading.Thread(target=server.serve_forever, name="http-server", daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
