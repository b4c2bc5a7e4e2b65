"""`mirrorlag run --web.config.file` on real brokers: the listener over mutual TLS with basic auth,
scraped by urllib and by a real Prometheus (Debian's package) with `scheme: https`, `tls_config`
and `basic_auth`; a request without credentials gets a bare 401, a client that never handshakes
holds nobody up, and a bad certificate or hash stops `run` at start with one line and exit 2."""

from __future__ import annotations

import base64
import http.client
import json
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from mirrorlag.embedded import free_port
from tests.conftest import write_properties
from tests.helpers import eventually, mirrorlag
from tests.nagios import parse
from tests.tools import require_tool
from tests.web_pki import PASSWORD, USER, WebPki, make_web_pki, password_hash

pytestmark = pytest.mark.integration


@dataclass
class Secured:
    port: int
    pki: WebPki
    web_config: Path
    proc: subprocess.Popen[bytes]
    log: Path

    def get(self, path: str = "/metrics", cert: tuple[Path, Path] | None = None,
            password: str | None = PASSWORD) -> tuple[int, dict[str, str], bytes]:
        """A request over TLS trusting the test CA, with the CA-signed client certificate unless
        `cert` says otherwise, and basic auth unless `password` is None."""
        context = self.pki.client_context(cert or self.pki.client)
        headers = {}
        if password is not None:
            headers["Authorization"] = "Basic " + base64.b64encode(f"{USER}:{password}".encode()).decode()
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=context, timeout=5)
        try:
            conn.request("GET", path, headers=headers)
            response = conn.getresponse()
            return response.status, dict(response.getheaders()), response.read()
        finally:
            conn.close()


def web_config(pki: WebPki) -> Path:
    path = pki.directory.parent / "web-config.yml"
    path.write_text(
        "tls_server_config:\n"
        "  cert_file: pki/server.pem\n  key_file: pki/server.key\n"  # relative to this file
        "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: pki/ca.pem\n"
        # cost 10, what htpasswd -B writes: the cache, not the cost, keeps scrapes fast
        f"basic_auth_users:\n  {USER}: {password_hash(cost=10)}\n")
    return path


@pytest.fixture(scope="module")
def secured(tmp_path_factory, clusters) -> Iterator[Secured]:
    tmp = tmp_path_factory.mktemp("secured")
    pki = make_web_pki(tmp / "pki")
    port = free_port()
    config = write_properties(tmp / "mm2.properties", clusters,
                              "replication.record.lag.metric.refresh.interval = 1000\n", port=port)
    log = tmp / "sidecar.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "mirrorlag", "run", "--config", str(config),
                                 "--web.config.file", str(web_config(pki))], stdout=out, stderr=out, cwd=tmp_path_factory.getbasetemp())
    sidecar = Secured(port, pki, web_config(pki), proc, log)
    try:
        def ready() -> None:
            assert proc.poll() is None, log.read_text()
            try:
                assert sidecar.get("/readyz")[0] == 200
            except OSError as error:
                raise AssertionError(error) from None
        eventually(ready, timeout=30)
        yield sidecar
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
    assert proc.returncode == 0, log.read_text()
    assert "TLS, client certificates: RequireAndVerifyClientCert, basic auth" in log.read_text()


def test_scraped_over_mutual_tls_with_basic_auth(secured):
    status, headers, body = secured.get("/metrics")
    assert status == 200 and b"mirrorlag_polls_total" in body
    assert json.loads(secured.get("/status")[2])["ready"] is True


def test_without_credentials_a_bare_401_and_without_a_certificate_no_connection(secured):
    for password in (None, "wrong-password"):
        for path in ("/metrics", "/status", "/healthz", "/readyz"):
            status, headers, body = secured.get(path, password=password)
            assert (status, headers["WWW-Authenticate"], body) == (401, "Basic", b"Unauthorized\n")
            assert USER not in str(headers) and "$2" not in str(headers)  # nothing of the config
    with pytest.raises((ssl.SSLError, ConnectionError)):
        secured.get(cert=secured.pki.self_signed)  # a certificate the CA never signed
    no_cert = ssl.create_default_context(cafile=str(secured.pki.ca))
    # TLS 1.3: the refusal (an alert) may come before the request is written or when the answer is read
    with pytest.raises(OSError):  # ssl.SSLError, or urllib's URLError around it
        urllib.request.urlopen(f"https://127.0.0.1:{secured.port}/metrics", context=no_cert, timeout=5)
    assert secured.proc.poll() is None


def test_silent_clients_on_the_tls_port_never_hold_up_a_scrape(secured):
    silent = [socket.create_connection(("127.0.0.1", secured.port), timeout=5) for _ in range(30)]
    try:
        for _ in range(5):
            started = time.monotonic()
            assert secured.get("/metrics")[0] == 200
            assert time.monotonic() - started < 2
    finally:
        for sock in silent:
            sock.close()


def _client_hello(pki: WebPki) -> bytes:
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = pki.client_context(pki.client).wrap_bio(incoming, outgoing, server_hostname="127.0.0.1")
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()


@pytest.mark.parametrize("kind", ["plain http", "garbage", "half a hello", "a hello then a reset", "sslv2 hello"])
def test_hostile_bytes_on_the_tls_port_end_that_connection_only(secured, kind):
    hello = _client_hello(secured.pki)
    data = {"plain http": b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
            "garbage": bytes(range(256)) * 4,
            "half a hello": hello[: len(hello) // 2],
            "a hello then a reset": hello,
            "sslv2 hello": bytes.fromhex("802b0103010012000000100700c0030080010080060040040080020080") + b"\x00" * 16}[kind]
    with socket.create_connection(("127.0.0.1", secured.port), timeout=5) as sock:
        sock.sendall(data)
        if kind == "a hello then a reset":
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        elif kind != "half a hello":
            answer = sock.recv(200)
            if kind == "plain http":
                assert answer.startswith(b"HTTP/1.0 400 Bad Request") and b"HTTPS server" in answer
            else:
                assert answer == b"" or answer[:1] == b"\x15", answer  # closed, or a TLS alert record
    assert secured.get("/metrics")[0] == 200 and secured.proc.poll() is None
    assert "Traceback" not in secured.log.read_text()


def test_a_bad_certificate_key_or_hash_is_one_line_and_exit_2(tmp_path, clusters):
    pki = make_web_pki(tmp_path / "pki")
    config = write_properties(tmp_path / "mm2.properties", clusters)
    cases = {
        "tls_server_config:\n  cert_file: pki/missing.pem\n  key_file: pki/server.key\n":
            f"tls_server_config.cert_file: cannot read {tmp_path}/pki/missing.pem: No such file or directory",
        "tls_server_config:\n  cert_file: pki/server.pem\n  key_file: pki/client.key\n":
            f"tls_server_config: {tmp_path}/pki/client.key: the key does not match the certificate {tmp_path}/pki/server.pem",
        f"basic_auth_users:\n  {USER}: not-a-hash-{PASSWORD}\n": f"basic_auth_users.{USER}: not a bcrypt hash",
    }
    for text, expected in cases.items():
        web = tmp_path / "web.yml"
        web.write_text(text)
        result = mirrorlag("run", "--config", str(config), "--web.config.file", str(web), timeout=30)
        assert result.returncode == 2, result.stderr
        assert result.stderr.startswith(f"mirrorlag: error: {web}: {expected}"), result.stderr
        assert len(result.stderr.splitlines()) == 1 and PASSWORD not in result.stderr
    # The same file named by the properties key instead of the flag.
    keyed = write_properties(tmp_path / "keyed.properties", clusters, f"mirrorlag.http.web.config.file = {web}\n")
    result = mirrorlag("run", "--config", str(keyed), timeout=30)
    assert result.returncode == 2 and result.stderr.startswith(f"mirrorlag: error: {web}: {expected}"), result.stderr


def _api(port: int, path: str, **params: str) -> dict:
    query = urllib.parse.urlencode(params)
    body = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/{path}?{query}", timeout=5).read())
    assert body["status"] == "success", body
    return body["data"]


def test_a_real_prometheus_scrapes_it_over_mutual_tls_with_basic_auth(secured, tmp_path):
    """Two jobs on the one target: with the password `up` is 1, without it 0 and the error is a 401."""
    binary = require_tool("prometheus", "prometheus")
    pki = secured.pki
    (tmp_path / "password").write_text(PASSWORD)
    tls_config = {"ca_file": str(pki.ca), "cert_file": str(pki.client[0]), "key_file": str(pki.client[1])}
    target = {"targets": [f"127.0.0.1:{secured.port}"]}
    config = tmp_path / "prometheus.yml"
    config.write_text(json.dumps({
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
        "scrape_configs": [
            {"job_name": "mirrorlag", "scheme": "https", "tls_config": tls_config,
             "basic_auth": {"username": USER, "password_file": str(tmp_path / "password")}, "static_configs": [target]},
            {"job_name": "no-password", "scheme": "https", "tls_config": tls_config, "static_configs": [target]},
        ],
    }))
    port = free_port()
    log = tmp_path / "prometheus.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen([binary, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'data'}",
                                 f"--web.listen-address=127.0.0.1:{port}"], stdout=out, stderr=out)
    try:
        def scraped() -> None:
            assert proc.poll() is None, log.read_text()[-3000:]
            try:
                up = {r["metric"]["job"]: r["value"][1] for r in _api(port, "query", query="up")["result"]}
                polls = _api(port, "query", query='mirrorlag_polls_total{job="mirrorlag"}')["result"]
                targets = _api(port, "targets")["activeTargets"]
            except (urllib.error.URLError, ConnectionError) as error:
                raise AssertionError(error) from None
            assert up == {"mirrorlag": "1", "no-password": "0"} and polls
            errors = {t["labels"]["job"]: t["lastError"] for t in targets}
            assert errors["mirrorlag"] == "" and "401" in errors["no-password"], errors
        eventually(scraped, timeout=20, interval=0.5)
    finally:
        proc.terminate()
        proc.wait(timeout=15)


def test_check_url_reads_the_verdict_over_mutual_tls_with_basic_auth(secured, tmp_path):
    """`check --url https://...` with the CA, a client certificate and basic auth: the sidecar's
    verdict as a Nagios status line; a wrong password is UNKNOWN naming the 401."""
    password_file = tmp_path / "password"
    password_file.write_text(PASSWORD + "\n")
    cert, key = secured.pki.client
    base = ("check", "--url", f"https://127.0.0.1:{secured.port}", "--ca-file", str(secured.pki.ca),
            "--client-cert", str(cert), "--client-key", str(key), "--user", USER)
    result = mirrorlag(*base, "--password-file", str(password_file))
    status, text, _ = parse(result.stdout)
    assert result.returncode in (0, 1, 2) and status != "UNKNOWN" and "sidecar's verdict" in text, result.stdout
    password_file.write_text("wrong-password\n")
    result = mirrorlag(*base, "--password-file", str(password_file))
    assert (result.returncode, parse(result.stdout)[:2]) == (
        3, ("UNKNOWN", f"https://127.0.0.1:{secured.port}/status: HTTP 401 Unauthorized")), result.stdout
    assert PASSWORD not in result.stdout + result.stderr
