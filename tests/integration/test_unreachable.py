"""A real `mirrorlag run` whose source cluster cannot be reached: it says which cluster and why at
once (in its log, /readyz and /status), in its own words rather than APScheduler's, and says so
once more when the cluster comes up."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from datetime import datetime
from pathlib import Path
from typing import Iterator

import pytest

from mirrorlag.embedded import EmbeddedBroker, free_port
from tests.helpers import eventually, http_server

pytestmark = pytest.mark.integration

SKIPS = "maximum number of running instances"


def start(tmp_path: Path, source: str, target: str, port: int, extra: str = "") -> tuple[subprocess.Popen[bytes], Path]:
    config = tmp_path / "mm2.properties"
    config.write_text(
        f"clusters = src, dst\nsrc.bootstrap.servers = {source}\ndst.bootstrap.servers = {target}\n"
        f"src->dst.enabled = true\nmirrorlag.http.listener = 127.0.0.1:{port}\n"
        # Polls due every second, each waiting up to 3 s on the source: they overrun their interval.
        "replication.record.lag.metric.refresh.interval = 1000\nmirrorlag.request.timeout.ms = 3000\n" + extra)
    log = tmp_path / "sidecar.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "mirrorlag", "run", "--config", str(config)],
                                stdout=out, stderr=out)
    return proc, log


@pytest.fixture
def stop() -> Iterator[list[subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in procs:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)


def get(port: int, path: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status, response.headers["Content-Type"], response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.headers["Content-Type"], error.read().decode()


def _fail(message: str) -> bool:
    raise AssertionError(message)


def at(line: str) -> float:
    return datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()


def logged(log: Path, pattern: str) -> list[str]:
    return [line for line in log.read_text().splitlines() if re.search(pattern, line)]


def said(log: Path, pattern: str, timeout: float = 20) -> list[str]:
    def found() -> list[str]:
        lines = logged(log, pattern)
        assert lines, f"never said: {pattern}"
        return lines
    return eventually(found, timeout=timeout)


def said_within(log: Path, pattern: str, seconds: float) -> str:
    """The first line matching `pattern`, which must come within `seconds` of the listener's start
    (the interpreter's own start-up is not counted: it is slow on a busy machine)."""
    def found() -> str:
        serving, lines = logged(log, r"INFO mirrorlag\.sidecar: serving "), logged(log, pattern)
        assert serving and lines, log.read_text()
        return lines[0]
    line = eventually(found, timeout=30, interval=0.1)
    assert at(line) - at(logged(log, r"INFO mirrorlag\.sidecar: serving ")[0]) < seconds, log.read_text()
    return line


def test_a_refused_source_is_named_at_once_and_its_recovery_once(tmp_path, clusters, stop):
    port, source_port = free_port(), free_port()  # nothing listens on source_port yet
    bootstrap = f"127.0.0.1:{source_port}"
    proc, log = start(tmp_path, bootstrap, clusters.target, port)
    stop.append(proc)

    line = said_within(log, r"WARNING .*cluster src ", 3.0)
    assert f"cluster src (bootstrap.servers {bootstrap}) unreachable: " in line and "Connection refused" in line

    status, ctype, body = get(port, "/readyz")
    assert (status, ctype) == (503, "text/plain; charset=utf-8")
    assert body.startswith(f"not ready: cluster src (bootstrap.servers {bootstrap}): ") and "Connection refused" in body
    doc = json.loads(get(port, "/status")[2])
    assert doc["ready"] is False and doc["not_ready_because"] == body[len("not ready: "):].rstrip("\n")
    src = doc["clusters"]["src"]
    assert (src["bootstrap_servers"], src["reachable"]) == (bootstrap, False)
    assert "Connection refused" in src["error"] and abs(src["since"] - time.time()) < 60

    status, ctype, page = get(port, "/")
    assert (status, ctype) == (200, "text/html; charset=utf-8")
    assert all(f'<a href="{path}">' in page for path in ("metrics", "status", "readyz", "healthz"))

    # Polls overrun their interval: said once, in mirrorlag's words, however many do.
    said(log, r"WARNING mirrorlag\.sidecar: poll took .* longer than the 1 s interval")
    eventually(lambda: json.loads(get(port, "/status")[2])["polls_total"] >= 2 or _fail("one poll so far"))
    assert len(logged(log, r"poll took .* longer than")) == 1
    assert len(logged(log, r"cluster src .*unreachable")) == 1

    with EmbeddedBroker("unreachable-source", port=source_port):
        def ready() -> None:
            assert get(port, "/readyz")[:3:2] == (200, "ready\n")
        eventually(ready, timeout=30)
        doc = json.loads(get(port, "/status")[2])
        assert doc["not_ready_because"] is None and doc["clusters"]["src"]["reachable"] is True
        assert doc["clusters"]["src"]["error"] is None
        said(log, r"INFO mirrorlag\.sidecar: polls fit the 1 s interval again")
        time.sleep(2)  # polls go on: nothing more is said
        assert len(logged(log, r"INFO .*cluster src \(bootstrap\.servers .*\) reachable again after")) == 1
        assert len(logged(log, r"WARNING .*cluster src \(bootstrap\.servers .*\) unreachable")) == 1
        assert not logged(log, SKIPS), log.read_text()
        stop.remove(proc)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0


def test_an_unresolvable_source_is_named_at_once_and_a_target_when_its_feeds_meet_it(tmp_path, stop):
    port = free_port()
    proc, log = start(tmp_path, "no-such-broker.invalid:9092", "no-such-target.invalid:9092", port)
    stop.append(proc)
    line = said_within(log, r"WARNING .*cluster src ", 3.0)
    assert "cluster src (bootstrap.servers no-such-broker.invalid:9092) unreachable: " in line
    assert "Failed to resolve 'no-such-broker.invalid:9092'" in line
    status, _, body = get(port, "/readyz")
    assert status == 503 and "cluster src" in body and "Failed to resolve" in body
    assert json.loads(get(port, "/status")[2])["clusters"]["src"]["reachable"] is False
    # The target, through its feeds' clients: their error reports' cause, not their requests' timeout.
    line = said_within(log, r"WARNING .*cluster dst ", 5.0)
    assert "cluster dst (bootstrap.servers no-such-target.invalid:9092) unreachable: " in line
    assert "Failed to resolve 'no-such-target.invalid:9092'" in line
    dst = json.loads(get(port, "/status")[2])["clusters"]["dst"]
    assert dst["reachable"] is False and "Failed to resolve" in dst["error"]
    assert "cluster src" in get(port, "/readyz")[2]  # a target does not decide readiness
    time.sleep(3)  # more polls time out: nothing more is said, and never APScheduler's warning
    assert not logged(log, SKIPS), log.read_text()
    assert len(logged(log, r"cluster src .*unreachable")) == len(logged(log, r"cluster dst .*unreachable")) == 1


def test_an_address_that_answers_http_is_named_so(tmp_path, stop):
    """Issue 42: librdkafka's "Invalid response size 1213486160" ("HTTP" read as a size) is said
    plainly in the log line, /readyz and /status."""
    port = free_port()
    with http_server() as address:
        proc, log = start(tmp_path, address, address, port)
        stop.append(proc)
        plain = f"{address} answers HTTP, not the Kafka protocol: is bootstrap.servers pointing at a web/REST port?"
        line = said(log, r"WARNING .*cluster src ")[0]
        assert line.endswith(f"cluster src (bootstrap.servers {address}) unreachable: {plain}; retrying"), line
        assert plain in get(port, "/readyz")[2]
        eventually(lambda: json.loads(get(port, "/status")[2])["clusters"]["src"]["error"] == plain)
        assert "1213486160" not in log.read_text()


PASSWORD = "hunter2-never-shown"


def test_a_refused_login_is_named_at_once_without_its_password(tmp_path, clusters, stop):
    port = free_port()
    with EmbeddedBroker("unreachable-sasl") as broker:  # speaks no SASL: the handshake fails
        proc, log = start(tmp_path, broker.bootstrap_servers, clusters.target, port, extra=(
            "src.security.protocol = SASL_PLAINTEXT\nsrc.sasl.mechanism = PLAIN\n"
            "src.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="mirrorlag" password="{PASSWORD}";\n'))
        stop.append(proc)
        line = said_within(log, r"WARNING .*cluster src ", 3.0)
        assert f"cluster src (bootstrap.servers {broker.bootstrap_servers}) unreachable: " in line and "SASL" in line
        status, _, body = get(port, "/readyz")
        assert status == 503 and "cluster src" in body and "SASL" in body
        time.sleep(3)  # the same failure at every retry, from each client: said once
        assert len(logged(log, r"cluster src .*unreachable")) == 1, log.read_text()
        texts = [log.read_text(), get(port, "/status")[2], get(port, "/readyz")[2], get(port, "/metrics")[2]]
        assert not [text for text in texts if PASSWORD in text]


def test_a_source_that_never_answers_is_named_at_its_request_timeout(tmp_path, clusters, stop):
    port = free_port()
    with EmbeddedBroker("unreachable-silent") as broker:
        broker.pause()  # accepts connections (the kernel does), answers nothing: a blackhole
        try:
            proc, log = start(tmp_path, broker.bootstrap_servers, clusters.target, port)
            stop.append(proc)
            # Nothing to say before the request times out (3 s); said then, not after the poll's feeds.
            line = said_within(log, r"WARNING mirrorlag\.cluster_watch: cluster src ", 5.0)
            assert f"cluster src (bootstrap.servers {broker.bootstrap_servers}) unreachable: metadata from cluster src" in line
            status, _, body = get(port, "/readyz")
            assert status == 503 and body.startswith("not ready: cluster src ")
            stop.remove(proc)
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=10)
        finally:
            broker.resume()
