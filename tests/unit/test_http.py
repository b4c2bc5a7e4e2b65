"""The HTTP server on a real loopback socket: methods, paths, gzip, and clients that misbehave."""

from __future__ import annotations

import gzip
import http.client
import socket
import struct
import time
import zlib
from typing import Iterator

import pytest

import pyarrow as pa

from mirrorlag import __version__
from mirrorlag.exporters.http import RELEASE_AFTER_TEXT_BYTES, Deflated, Exposition, ExpositionServer, GzipBody

BODY = b"# HELP x y\n# TYPE x gauge\n" + b"x 1\n" * 1000


@pytest.fixture
def server() -> Iterator[ExpositionServer]:
    srv = ExpositionServer("127.0.0.1", 0)
    srv.current = Exposition(metrics=GzipBody.compress([BODY[:100], BODY[100:]]), status=GzipBody.compress([b'{"ready":true}']), ready=True)
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


def test_readyz_says_which_cluster_and_why_it_is_not_ready(server):
    server.current = Exposition(not_ready_because="cluster src (bootstrap.servers b1:9092): Connection refused")
    status, headers, body = request(server, "GET", "/readyz")
    assert (status, body) == (503, b"not ready: cluster src (bootstrap.servers b1:9092): Connection refused\n")
    assert headers["Content-Type"] == "text/plain; charset=utf-8"
    server.current = Exposition(ready=True, not_ready_because=None)
    assert request(server, "GET", "/readyz")[:3:2] == (200, b"ready\n")


def test_the_landing_page_links_every_endpoint(server):
    status, headers, body = request(server, "GET", "/")
    assert (status, headers["Content-Type"]) == (200, "text/html; charset=utf-8")
    page = body.decode()
    assert "<title>mirrorlag</title>" in page and f"Version {__version__}" in page
    assert [path for path in ("metrics", "status", "readyz", "healthz") if f'<a href="{path}">' in page] == [
        "metrics", "status", "readyz", "healthz"]
    head = request(server, "HEAD", "/")
    assert (head[0], head[2], head[1]["Content-Length"]) == (200, b"", str(len(body)))
    assert request(server, "GET", "/index.html")[0] == 404


def test_head_has_headers_but_no_body(server):
    status, headers, body = request(server, "HEAD", "/metrics")
    assert (status, body, headers["Content-Length"]) == (200, b"", str(len(BODY)))


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS"])
def test_only_get_and_head(server, method):
    status, headers, _ = request(server, method, "/metrics")
    assert (status, headers["Allow"]) == (405, "GET, HEAD")


def test_gzip_when_asked_is_the_body_as_compressed_at_publish(server):
    status, headers, body = request(server, "GET", "/metrics", {"Accept-Encoding": "gzip"})
    assert (status, headers["Content-Encoding"]) == (200, "gzip")
    assert gzip.decompress(body) == BODY
    assert body == server.current.metrics.gzipped


def test_a_large_body_is_held_compressed_and_sent_plain_in_pieces(server):
    lines = [f'm{{topic="t{i}",partition="{i % 7}"}} {i * 0.5!r}\n'.encode() for i in range(200_000)]
    text = b"".join(lines)
    body = GzipBody.compress(b"".join(lines[i:i + 5000]) for i in range(0, len(lines), 5000))
    assert (body.size, gzip.decompress(body.gzipped)) == (len(text), text)
    assert len(body.gzipped) * 4 < len(text)
    assert len(list(body.text())) > 1  # inflated a piece at a time, not at once
    server.current = Exposition(metrics=body)
    status, headers, got = request(server, "GET", "/metrics")
    assert (status, headers["Content-Length"], got) == (200, str(len(text)), text)
    assert "Content-Encoding" not in headers


def test_pieces_compressed_apart_join_into_one_gzip_stream():
    # As the sidecar publishes /metrics: each family compressed on its own thread, then joined.
    families = [[b"# HELP a x\n", pa.py_buffer(b"a 1\n" * 5000)], [], [b"b 2\n"], [b"", memoryview(b"c 3\n")]]
    text = b"".join(bytes(chunk) for chunk in sum(families, []))
    body = GzipBody.join(Deflated.of(chunks) for chunks in families)
    assert (body.size, gzip.decompress(body.gzipped), b"".join(body.text())) == (len(text), text, text)
    inflate = zlib.decompressobj(31)  # one gzip member, ended: clients that read only one see it all
    assert (inflate.decompress(body.gzipped), inflate.eof, inflate.unused_data) == (text, True, b"")
    assert gzip.decompress(GzipBody.join([]).gzipped) == b"" and GzipBody.join([]).size == 0


def test_an_empty_body_is_served_both_ways(server):
    server.current = Exposition()
    assert request(server, "GET", "/metrics")[2] == b""
    assert gzip.decompress(request(server, "GET", "/metrics", {"Accept-Encoding": "gzip"})[2]) == b""


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


def test_a_client_that_resets_mid_request_leaves_no_traceback(server, capfd):
    for _ in range(5):
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close = RST
            sock.sendall(b"NOT HTTP AT ALL\r\n\r\n")
    assert request(server, "GET", "/metrics")[2] == BODY
    assert "Traceback" not in capfd.readouterr().err


def test_status_is_held_compressed_and_served_gzip_or_plain(server):
    doc = b'{"ready":true,"partitions":[' + b",".join(b'{"p":%d}' % i for i in range(20_000)) + b"]}"
    renders = []
    server.current = Exposition(render_status=lambda: iter([doc[:1000], doc[1000:]]),
                                after_status=lambda: renders.append(server.current.status))
    status, headers, body = request(server, "GET", "/status", {"Accept-Encoding": "gzip"})
    assert (status, headers["Content-Encoding"], gzip.decompress(body)) == (200, "gzip", doc)
    assert len(server.current.status.gzipped) * 4 < len(doc)  # rendered once, kept as gzip only
    status, headers, body = request(server, "GET", "/status")
    assert (status, headers["Content-Length"], body) == (200, str(len(doc)), doc)
    assert "Content-Encoding" not in headers
    assert renders == [server.current.status]  # the heap trimmed once, after the one render


def test_a_large_body_sent_plain_hands_the_heap_back_after_it_and_gzip_does_not(server):
    doc = b'{"ready":true,"partitions":[' + b",".join(b'{"p":%d}' % i for i in range(600_000)) + b"]}"
    assert len(doc) >= RELEASE_AFTER_TEXT_BYTES
    releases = []
    server.current = Exposition(render_status=lambda: iter([doc[:1000], doc[1000:]]),
                                after_status=lambda: releases.append("released"))
    status, _, body = request(server, "GET", "/status", {"Accept-Encoding": "gzip"})
    assert (status, gzip.decompress(body)) == (200, doc) and releases == ["released"]  # after the render only
    status, _, body = request(server, "GET", "/status")
    assert (status, body) == (200, doc)
    deadline = time.monotonic() + 5  # the server gives back after the last byte left, as the client reads it
    while len(releases) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert releases == ["released"] * 2  # and after the inflated text
    assert request(server, "HEAD", "/status")[0] == 200
    time.sleep(0.2)
    assert len(releases) == 2  # nothing inflated, nothing to give back


@pytest.mark.parametrize(("accept", "openmetrics"), [
    # What Prometheus sends by default (scrape_protocols: OpenMetrics first).
    ("application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,"
     "text/plain;version=0.0.4;q=0.3,*/*;q=0.2", True),
    ("application/openmetrics-text", True),
    ("text/plain;version=0.0.4", False),
    ("", False),
    ("application/openmetrics-text;version=2.0.0", False),  # a version we do not write
])
def test_metrics_are_negotiated_between_the_text_format_and_openmetrics(server, accept, openmetrics):
    server.current = Exposition(metrics=GzipBody.compress([b"classic\n"]),
                                openmetrics=GzipBody.compress([b"om\n# EOF\n"]))
    status, headers, body = request(server, "GET", "/metrics", {"Accept": accept} if accept else {})
    assert status == 200
    if openmetrics:
        assert (headers["Content-Type"], body) == ("application/openmetrics-text; version=1.0.0; charset=utf-8",
                                                   b"om\n# EOF\n")
    else:
        assert headers["Content-Type"].startswith("text/plain") and body == b"classic\n"
