"""The HTTP server on a real loopback socket: methods, paths, gzip, and clients that misbehave."""

from __future__ import annotations

import gzip
import http.client
import socket
import time
from typing import Iterator

import pytest

from mirrorlag.exporters.http import Exposition, ExpositionServer

BODY = b"# HELP x y\n# TYPE x gauge\n" + b"x 1\n" * 1000


@pytest.fixture
def server() -> Iterator[ExpositionServer]:
    srv = ExpositionServer("127.0.0.1", 0)
    srv.current = Exposition(metrics=BODY, status=b'{"ready":true}', ready=True)
    srv.start()
    yield srv
    srv.stop()


def request(srv: ExpositionServer, method: str, path: str, headers: dict | None = None) -> tuple[int, dict, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=5)
    conn.request(method, path, headers=headers or {})
    response = conn.getresponse()
    body = response.read()
    conn.close()
    return response.status, dict(response.getheaders()), body


def test_endpoints(server):
    assert request(server, "GET", "/metrics")[2] == BODY
    assert request(server, "GET", "/healthz")[2] == b"ok\n"
    assert request(server, "GET", "/readyz")[0] == 200
    assert request(server, "GET", "/status")[2] == b'{"ready":true}'
    assert request(server, "GET", "/nope")[0] == 404
    server.current = Exposition()
    assert request(server, "GET", "/readyz")[0] == 503


def test_head_has_headers_but_no_body(server):
    status, headers, body = request(server, "HEAD", "/metrics")
    assert (status, body, headers["Content-Length"]) == (200, b"", str(len(BODY)))


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS"])
def test_only_get_and_head(server, method):
    status, headers, _ = request(server, method, "/metrics")
    assert (status, headers["Allow"]) == (405, "GET, HEAD")


def test_gzip_when_asked_and_compressed_once_per_exposition(server):
    status, headers, body = request(server, "GET", "/metrics", {"Accept-Encoding": "gzip"})
    assert (status, headers["Content-Encoding"]) == (200, "gzip")
    assert gzip.decompress(body) == BODY
    exposition = server.current
    assert exposition.metrics_gzip() is exposition.metrics_gzip()


def test_malformed_and_oversized_requests_are_rejected_and_the_server_lives_on(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(b"THIS IS NOT HTTP\r\n\r\n")
        assert sock.recv(100).startswith(b"HTTP/1.1 400")
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n")
        assert sock.recv(100).startswith(b"HTTP/1.1 414")
    assert request(server, "GET", "/metrics")[2] == BODY


def test_a_silent_client_does_not_block_a_scrape(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as slow:
        slow.sendall(b"GET /metrics HTTP/1.1\r\n")  # never finishes its headers
        started = time.monotonic()
        assert request(server, "GET", "/metrics")[2] == BODY
        assert time.monotonic() - started < 2
