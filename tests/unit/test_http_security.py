"""The HTTP server with a web config file, on real loopback sockets and real TLS: client
certificates accepted and refused, basic auth's 401, and clients that stall the handshake."""

from __future__ import annotations

import base64
import http.client
import logging
import socket
import ssl
import threading
import time
from pathlib import Path
from typing import Callable, Iterator

import pytest

from mirrorlag.exporters.http import Exposition, ExpositionServer, GzipBody
from mirrorlag.exporters.web_config import load_web_config
from tests.helpers import eventually
from tests.web_pki import PASSWORD, USER, WebPki, make_web_pki, password_hash

BODY = b"# TYPE x gauge\n" + b"x 1\n" * 1000
DEADLINE_S = 1.0  # the sidecar's is 10 s; the tests cut clients off sooner


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> WebPki:
    return make_web_pki(tmp_path_factory.mktemp("web") / "pki")


Serve = Callable[..., ExpositionServer]


@pytest.fixture
def serve(pki: WebPki) -> Iterator[Serve]:
    """An ExpositionServer configured by a web config text (paths relative to the PKI's parent)."""
    servers: list[ExpositionServer] = []

    def start(text: str, reload_check_s: float | None = None) -> ExpositionServer:
        path = pki.directory.parent / "web.yml"
        path.write_text(text)
        server = ExpositionServer("127.0.0.1", 0, client_timeout_s=DEADLINE_S, web=load_web_config(path),
                                  web_reload_check_s=reload_check_s)
        server.current = Exposition(metrics=GzipBody.compress([BODY]), status=GzipBody.compress([b"{}"]), ready=True)
        server.start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


TLS = "tls_server_config:\n  cert_file: pki/server.pem\n  key_file: pki/server.key\n"
MTLS = TLS + "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: pki/ca.pem\n"
AUTH = f"basic_auth_users:\n  {USER}: {password_hash()}\n  other: {password_hash('other-pw')}\n"


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def get(server: ExpositionServer, context: ssl.SSLContext | None, path: str = "/metrics",
        headers: dict | None = None, method: str = "GET", host: str = "127.0.0.1") -> tuple[int, dict, bytes]:
    conn = (http.client.HTTPSConnection(host, server.port, context=context, timeout=5) if context
            else http.client.HTTPConnection(host, server.port, timeout=5))
    try:
        conn.request(method, path, headers=headers or {})
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def closed_within(sock: socket.socket, seconds: float) -> float | None:
    """How long until the server closes `sock` (reads it to the end), None if not within `seconds`."""
    started = time.monotonic()
    sock.settimeout(seconds)
    try:
        while sock.recv(4096):
            pass
    except TimeoutError:
        return None
    except OSError:
        pass  # reset: closed too
    return time.monotonic() - started


def test_tls_serves_every_endpoint_gzip_or_plain_and_keeps_the_connection_alive(serve, pki):
    server = serve(TLS)
    context = pki.client_context()
    for host in ("127.0.0.1", "localhost"):  # both names are in the certificate, and are checked
        assert get(server, context, host=host)[2] == BODY
    conn = http.client.HTTPSConnection("127.0.0.1", server.port, context=context, timeout=5)
    for path, expected in [("/metrics", BODY), ("/healthz", b"ok\n"), ("/readyz", b"ready\n"), ("/status", b"{}")]:
        conn.request("GET", path)
        response = conn.getresponse()
        assert (response.status, response.read()) == (200, expected)
    conn.request("GET", "/metrics", headers={"Accept-Encoding": "gzip"})
    response = conn.getresponse()
    assert response.getheader("Content-Encoding") == "gzip" and response.read() == server.current.metrics.gzipped
    conn.close()
    with pytest.raises(ssl.SSLCertVerificationError):
        get(server, ssl.create_default_context())  # the system's CAs do not know this server


def test_mutual_tls_accepts_the_cas_clients_only_and_says_why_once_a_minute(serve, pki, capfd, caplog):
    caplog.set_level(logging.DEBUG, logger="mirrorlag.exporters.http")
    server = serve(MTLS)
    assert get(server, pki.client_context(pki.client))[2] == BODY
    for refused in (None, pki.self_signed, None):
        with pytest.raises((ssl.SSLError, ConnectionError)):
            get(server, pki.client_context(refused))
    assert get(server, pki.client_context(pki.client))[0] == 200  # the server lives on
    assert "Traceback" not in capfd.readouterr().err
    refusals = eventually(lambda: _refusals(caplog, 3))
    assert [r.levelname for r in refusals] == ["WARNING", "DEBUG", "DEBUG"]
    assert "peer did not return a certificate" in refusals[0].getMessage()
    assert "certificate verify failed: self-signed certificate" in refusals[1].getMessage()


def _refusals(caplog: pytest.LogCaptureFixture, count: int) -> list[logging.LogRecord]:
    found = [r for r in caplog.records if "TLS handshake from" in r.getMessage()]
    assert len(found) == count, [r.getMessage() for r in found]
    return found


def test_verify_if_given_lets_a_client_without_a_certificate_in_but_not_a_stranger(serve, pki):
    server = serve(TLS + "  client_auth_type: VerifyClientCertIfGiven\n  client_ca_file: pki/ca.pem\n")
    assert get(server, pki.client_context())[0] == 200
    assert get(server, pki.client_context(pki.client))[0] == 200
    with pytest.raises((ssl.SSLError, ConnectionError)):
        get(server, pki.client_context(pki.self_signed))


def test_client_allowed_sans_refuses_a_certificate_the_ca_signed_for_another_name(serve, pki):
    server = serve(MTLS + "  client_allowed_sans: [prometheus, 127.0.0.1]\n")
    assert get(server, pki.client_context(pki.client))[0] == 200
    with pytest.raises((ssl.SSLError, ConnectionError, http.client.RemoteDisconnected)):
        get(server, pki.client_context(pki.other_client))


def test_basic_auth_401_says_nothing_and_the_right_password_opens_every_endpoint(serve, pki):
    server = serve(TLS + AUTH + "http_server_config:\n  headers:\n    X-Content-Type-Options: nosniff\n")
    context = pki.client_context()
    wrong = [None, basic(USER, "wrong"), basic("nobody", PASSWORD), basic(USER, PASSWORD + "x"),
             basic("other", PASSWORD), "Bearer abc", "Basic !!!not-base64", "Basic " + base64.b64encode(b"no-colon").decode(),
             basic(USER, "p" * 100), basic(USER.upper(), PASSWORD), f"basic {base64.b64encode(USER.encode()).decode()}"]
    for authorization in wrong:
        headers = {"Authorization": authorization} if authorization else {}
        for path in ("/metrics", "/healthz", "/status", "/", "/nope"):
            status, response_headers, body = get(server, context, path, headers)
            assert (status, response_headers["WWW-Authenticate"], body) == (401, "Basic", b"Unauthorized\n"), authorization
            assert response_headers["X-Content-Type-Options"] == "nosniff" and response_headers["Server"] == "mirrorlag"
            assert set(response_headers) == {"Server", "Date", "X-Content-Type-Options", "WWW-Authenticate",
                                             "Content-Type", "Content-Length"}
    assert get(server, context, method="HEAD")[::2] == (401, b"")
    assert get(server, context, method="POST")[0] == 401
    right = {"Authorization": basic(USER, PASSWORD)}
    for path, expected in [("/metrics", BODY), ("/healthz", b"ok\n"), ("/readyz", b"ready\n"), ("/status", b"{}")]:
        status, headers, body = get(server, context, path, right)
        assert (status, body, headers["X-Content-Type-Options"]) == (200, expected, "nosniff")
    assert get(server, context, "/nope", right)[0] == 404
    assert get(server, context, "/", right)[1]["Content-Type"] == "text/html; charset=utf-8"
    assert get(server, context, method="POST", headers=right)[0] == 405
    assert get(server, context, headers={"Authorization": basic("other", "other-pw")})[0] == 200


def test_basic_auth_without_tls(serve):
    server = serve(AUTH)
    assert get(server, None)[0] == 401
    assert get(server, None, headers={"Authorization": basic(USER, PASSWORD)})[2] == BODY


def test_a_verified_password_is_remembered_a_wrong_one_never(serve):
    server = serve(AUTH)
    checks = lambda: server.web.current().auth.bcrypt_checks  # noqa: E731
    for _ in range(5):
        assert get(server, None, headers={"Authorization": basic(USER, PASSWORD)})[0] == 200
    assert checks() == 1
    for _ in range(3):
        assert get(server, None, headers={"Authorization": basic(USER, "wrong")})[0] == 401
    assert checks() == 4
    assert get(server, None, headers={"Authorization": basic(USER, PASSWORD)})[0] == 200
    assert checks() == 4


def test_a_silent_client_on_the_tls_port_blocks_nobody_and_is_cut_off_at_the_deadline(serve, pki):
    server = serve(TLS)
    silent = [socket.create_connection(("127.0.0.1", server.port), timeout=5) for _ in range(20)]
    try:
        started = time.monotonic()
        assert get(server, pki.client_context())[2] == BODY  # the accept loop never waits on a handshake
        assert time.monotonic() - started < DEADLINE_S / 2
        assert all((closed := closed_within(sock, DEADLINE_S + 2)) is not None and closed < DEADLINE_S + 1.5
                   for sock in silent)
    finally:
        for sock in silent:
            sock.close()


def client_hello(pki: WebPki) -> bytes:
    """The first flight of a real TLS client, as bytes to send by hand."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = pki.client_context().wrap_bio(incoming, outgoing, server_hostname="127.0.0.1")
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()


def test_a_client_trickling_its_hello_is_cut_off_at_the_deadline_in_total(serve, pki):
    """One byte every 0.1 s is well inside any per-read timeout; the handshake's deadline is a total."""
    server = serve(TLS)
    hello = client_hello(pki)
    assert len(hello) > 100
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        started, cut_after = time.monotonic(), None
        for byte in hello:
            try:
                sock.send(bytes([byte]))
            except OSError:
                cut_after = time.monotonic() - started
                break
            sock.settimeout(0.1)
            try:
                if sock.recv(100) == b"":
                    cut_after = time.monotonic() - started
                    break
            except TimeoutError:
                pass
        assert cut_after is not None and cut_after < DEADLINE_S + 1
    assert get(server, pki.client_context())[0] == 200


def test_plain_http_on_the_tls_port_gets_a_400_that_says_so(serve, pki):
    server = serve(TLS)
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = sock.recv(300)
    assert answer.startswith(b"HTTP/1.0 400 Bad Request\r\n")
    assert answer.endswith(b"Client sent an HTTP request to an HTTPS server.\n")
    assert get(server, pki.client_context())[0] == 200


def test_a_large_body_over_tls_while_another_client_stalls_mid_handshake(serve, pki):
    server = serve(TLS)
    lines = [f'm{{topic="t{i}",partition="{i % 7}"}} {i * 0.37!r}\n'.encode() for i in range(200_000)]
    text = b"".join(lines)
    server.current = Exposition(metrics=GzipBody.compress([text]))
    stalled = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    stalled.sendall(client_hello(pki)[:20])
    results: list[bytes] = []
    readers = [threading.Thread(target=lambda: results.append(get(server, pki.client_context())[2])) for _ in range(3)]
    for reader in readers:
        reader.start()
    for reader in readers:
        reader.join(timeout=10)
    stalled.close()
    assert results == [text] * 3


def served_certificate(server: ExpositionServer, context: ssl.SSLContext) -> bytes:
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        with context.wrap_socket(sock, server_hostname="127.0.0.1") as tls:
            return tls.getpeercert(binary_form=True)


def replace(path: Path, data: bytes) -> None:
    """As Kubernetes updates a Secret's files: a new file moved into place (a new inode)."""
    fresh = path.with_suffix(".new")
    fresh.write_bytes(data)
    fresh.replace(path)


def test_a_renewed_certificate_is_served_without_a_restart_and_a_broken_one_never(serve, pki, tmp_path, caplog):
    renewed = make_web_pki(tmp_path / "renewed")
    both = pki.client_context()
    both.load_verify_locations(cafile=str(renewed.ca))
    old_cert, old_key = (p.read_bytes() for p in pki.server)
    server = serve(TLS, reload_check_s=0)
    try:
        assert served_certificate(server, both) == ssl.PEM_cert_to_DER_cert(old_cert.decode())
        replace(pki.server[1], b"-----BEGIN PRIVATE KEY-----\ntruncated")  # mid-rotation: a key that does not load
        with caplog.at_level(logging.ERROR, logger="mirrorlag.exporters.web_config"):
            for _ in range(3):
                assert served_certificate(server, both) == ssl.PEM_cert_to_DER_cert(old_cert.decode())
        errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
        assert len(errors) == 1 and "server.key: no PEM private key in it" in errors[0], errors
        replace(pki.server[0], renewed.server[0].read_bytes())
        replace(pki.server[1], renewed.server[1].read_bytes())
        assert served_certificate(server, both) == ssl.PEM_cert_to_DER_cert(renewed.server[0].read_text())
        assert get(server, both)[2] == BODY
    finally:
        replace(pki.server[0], old_cert)
        replace(pki.server[1], old_key)


def test_a_user_added_to_the_file_can_scrape_at_once(serve, pki):
    server = serve(AUTH, reload_check_s=0)
    newcomer = {"Authorization": basic("newcomer", "new-pw")}
    assert get(server, None, headers=newcomer)[0] == 401
    (pki.directory.parent / "web.yml").write_text(AUTH + f"  newcomer: {password_hash('new-pw')}\n")
    assert get(server, None, headers=newcomer)[0] == 200
    assert get(server, None, headers={"Authorization": basic(USER, PASSWORD)})[0] == 200
