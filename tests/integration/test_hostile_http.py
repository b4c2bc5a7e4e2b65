"""Hostile HTTP clients against a real running sidecar (`mirrorlag run` on real brokers): bad
requests get a 4xx/5xx and nothing else, slow clients never hold up a scrape, and the listener
binds where the config says. The trickling-client deadline is shown on the server class itself
with a short deadline, since the sidecar's is 10 s."""

from __future__ import annotations

import http.client
import select
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from mirrorlag.embedded import free_port
from mirrorlag.exporters.http import Exposition, ExpositionServer, GzipBody
from tests.conftest import write_properties
from tests.helpers import eventually, mirrorlag, running_sidecar, scrape

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def sidecar(tmp_path_factory, clusters):
    tmp = tmp_path_factory.mktemp("hostile")
    port = free_port()
    config = write_properties(tmp / "mm2.properties", clusters,
                              "replication.record.lag.metric.refresh.interval = 1000\n", port=port)
    with running_sidecar(config, port=port, log=tmp / "sidecar.log") as proc:
        yield port, proc


def raw(port: int, data: bytes, read: int = 200) -> bytes:
    """Send `data` on a fresh connection and return the start of the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(data)
        return sock.recv(read)


def threads(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise AssertionError("no Threads line")


def healthy(port: int) -> None:
    assert urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5).read() == b"ok\n"
    assert ("mirrorlag_polls_total", ()) in scrape(port)


@pytest.mark.parametrize("request_bytes,status", [
    (b"THIS IS NOT HTTP\r\n\r\n", b"400"),
    (b"\x00\xff\xfe garbage \x80\x81\r\n\r\n", b"400"),
    (b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n", b"414"),
    (b"GET /metrics HTTP/1.1\r\nX-Big: " + b"b" * 70_000 + b"\r\n\r\n", b"431"),
    (b"GET /metrics HTTP/1.1\r\n" + b"".join(b"X-%d: y\r\n" % i for i in range(150)) + b"\r\n", b"431"),
    (b"GET /metrics HTTP/9.9\r\n\r\n", b"505"),
    (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", b"505"),
    (b"BREW /metrics HTTP/1.1\r\n\r\n", b"501"),
    (b"POST /metrics HTTP/1.1\r\nContent-Length: 1000000000\r\n\r\npartial", b"405"),
    (b"GET /../../etc/passwd HTTP/1.1\r\n\r\n", b"404"),
    (b"GET /metrics/../status HTTP/1.1\r\n\r\n", b"404"),
    (b"GET /status%00 HTTP/1.1\r\n\r\n", b"404"),
    (b"GET http://evil.example/ HTTP/1.1\r\n\r\n", b"404"),
])
def test_bad_requests_are_rejected_and_the_sidecar_lives_on(sidecar, request_bytes, status):
    port, proc = sidecar
    answer = raw(port, request_bytes)
    assert answer.startswith(b"HTTP/1.") and answer[9:12] == status, answer
    assert proc.poll() is None
    healthy(port)


def test_many_slow_clients_never_hold_up_a_scrape(sidecar):
    """50 clients trickle a request byte by byte; meanwhile every scrape is answered in full."""
    port, proc = sidecar
    baseline = threads(proc.pid)
    stop = threading.Event()
    socks = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(50)]

    def trickle() -> None:
        request = b"GET /metrics HTTP/1.1\r\nX-Slow: " + b"z" * 1000
        for i in range(len(request)):
            if stop.wait(0.2):
                return
            for sock in socks:
                try:
                    sock.send(request[i:i + 1])
                except OSError:
                    pass

    trickler = threading.Thread(target=trickle, daemon=True)
    trickler.start()
    try:
        for _ in range(10):
            healthy(port)
            body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()
            assert body.endswith(b"\n") and b"mirrorlag_polls_total" in body
            time.sleep(0.1)
    finally:
        stop.set()
        trickler.join()
        for sock in socks:
            sock.close()
    # Closed clients give their threads back.
    eventually(lambda: _at_most(threads(proc.pid), baseline + 2), timeout=15)


def _at_most(value: int, bound: int) -> None:
    assert value <= bound, (value, bound)


def test_a_trickling_client_is_cut_off_after_the_deadline_not_kept_alive_by_each_byte():
    """The per-request deadline is a total, not per read: one byte every 0.2 s (well inside the
    read timeout) still gets the connection closed once the 1 s deadline has passed."""
    server = ExpositionServer("127.0.0.1", 0, client_timeout_s=1.0)
    server.current = Exposition(metrics=GzipBody.compress([b"x 1\n"]), ready=True)
    server.start()
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
            started, cut_after = time.monotonic(), None
            for byte in b"GET /metrics HTTP/1.1\r\nX-Slow: " + b"z" * 100:
                try:
                    sock.send(bytes([byte]))
                    readable, _, _ = select.select([sock], [], [], 0.2)
                    if readable and sock.recv(100) == b"":
                        cut_after = time.monotonic() - started
                        break
                except OSError:  # reset by the server
                    cut_after = time.monotonic() - started
                    break
        assert cut_after is not None, "a trickling client kept its connection for ever"
        assert cut_after < 5
        assert urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=5).read() == b"x 1\n"
    finally:
        server.stop()


def test_bind_address_is_the_configured_one(tmp_path, clusters):
    """127.0.0.2 is loopback too: a listener on it is not reachable on 127.0.0.1."""
    port = free_port()
    config = write_properties(tmp_path / "mm2.properties", clusters)
    text = config.read_text().replace("mirrorlag.http.listener = 127.0.0.1:", "mirrorlag.http.listener = 127.0.0.2:")
    config.write_text(text.rsplit(":", 1)[0] + f":{port}\n")
    proc_log = tmp_path / "sidecar.log"
    with open(proc_log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "mirrorlag", "run", "--config", str(config)],
                                stdout=out, stderr=out)
    try:
        eventually(lambda: _answers("127.0.0.2", port), timeout=20)
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=2)
        # The same listener again: the port is taken, one line and exit 2.
        result = mirrorlag("run", "--config", str(config), timeout=30)
        assert result.returncode == 2
        assert result.stderr.splitlines() == [f"mirrorlag: error: mirrorlag.http.listener 127.0.0.2:{port}: "
                                              "Address already in use"], result.stderr
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert proc.returncode == 0, proc_log.read_text()


def _answers(host: str, port: int) -> None:
    try:
        conn = http.client.HTTPConnection(host, port, timeout=2)
        conn.request("GET", "/healthz")
        assert conn.getresponse().status == 200
        conn.close()
    except OSError as err:
        raise AssertionError(err) from None
