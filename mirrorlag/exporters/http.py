"""The sidecar's HTTP endpoints: /metrics, /healthz, /readyz, /status.

Handlers only copy bytes prepared after the last poll, so a scrape costs the same at 10 or 100k
partitions and can never slow a poll down. Only GET and HEAD exist. Each request (and each idle
wait between keep-alive requests) must arrive within one deadline in total, not per read: a client
that trickles a byte at a time is cut off like a silent one, so a slow client holds one thread for
a bounded time and never blocks others.
"""

from __future__ import annotations

import gzip
import io
import logging
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client.exposition import CONTENT_TYPE_LATEST

log = logging.getLogger(__name__)

CLIENT_TIMEOUT_S = 10.0
GZIP_MIN_BYTES = 1024


@dataclass(eq=False)
class Exposition:
    """Everything the endpoints serve, replaced as a whole after each poll."""

    metrics: bytes = b""
    status: bytes = b"{}"
    ready: bool = False
    # Renders `status` on the first GET /status after a poll: the document of 100k partitions
    # takes ~1.2 s and most polls nobody asks (Prometheus reads /metrics).
    render_status: Callable[[], bytes] | None = field(default=None, repr=False)
    _gzipped: bytes | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _status_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def status_json(self) -> bytes:
        with self._status_lock:
            if self.render_status is not None:
                self.status, self.render_status = self.render_status(), None
            return self.status

    def metrics_gzip(self) -> bytes:
        """The metrics compressed once per poll (the sidecar does it before publishing)."""
        with self._lock:
            if self._gzipped is None:
                self._gzipped = gzip.compress(self.metrics, compresslevel=1)
            return self._gzipped


class _DeadlineReader(io.RawIOBase):
    """Reads a socket with one deadline over many reads (a socket timeout restarts per read)."""

    def __init__(self, sock: socket.socket, seconds: float) -> None:
        self.sock, self.seconds = sock, seconds
        self.restart()

    def restart(self) -> None:
        self.deadline = time.monotonic() + self.seconds

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("request not complete within the deadline")
        self.sock.settimeout(left)
        return self.sock.recv_into(buffer)


class ExpositionServer:
    def __init__(self, host: str, port: int, client_timeout_s: float = CLIENT_TIMEOUT_S) -> None:
        self.current = Exposition()
        server = self

        class Handler(BaseHTTPRequestHandler):
            server_version = "mirrorlag"
            protocol_version = "HTTP/1.1"
            default_request_version = "HTTP/1.0"  # errors on garbage still get a status line
            timeout = client_timeout_s  # socket timeout for writes; reads have the deadline below
            # TCP_NODELAY: a keep-alive scrape's last segment otherwise waits on Nagle and the
            # client's delayed ACK, ~40 ms a scrape (tests/bench/RESULTS.md).
            disable_nagle_algorithm = True

            def setup(self) -> None:
                super().setup()
                self._reader = _DeadlineReader(self.connection, client_timeout_s)
                self.rfile = io.BufferedReader(self._reader)

            def handle_one_request(self) -> None:
                self._reader.restart()  # the deadline covers one request, or one keep-alive wait
                super().handle_one_request()

            def do_GET(self) -> None:
                self._respond(send_body=True)

            def do_HEAD(self) -> None:
                self._respond(send_body=False)

            def _not_allowed(self) -> None:
                self.send_response(405)
                self.send_header("Allow", "GET, HEAD")
                self.send_header("Content-Length", "0")
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True

            do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_TRACE = do_CONNECT = _not_allowed

            def _respond(self, send_body: bool) -> None:
                exp = server.current  # one read: all parts come from the same poll
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    accepts_gzip = "gzip" in self.headers.get("Accept-Encoding", "")
                    if accepts_gzip and len(exp.metrics) >= GZIP_MIN_BYTES:
                        self._send(200, CONTENT_TYPE_LATEST, exp.metrics_gzip(), send_body, encoding="gzip")
                    else:
                        self._send(200, CONTENT_TYPE_LATEST, exp.metrics, send_body)
                elif path == "/healthz":
                    self._send(200, "text/plain", b"ok\n", send_body)
                elif path == "/readyz":
                    ok = exp.ready
                    self._send(200 if ok else 503, "text/plain", b"ready\n" if ok else b"not ready\n", send_body)
                elif path == "/status":
                    self._send(200, "application/json", exp.status_json(), send_body)
                else:
                    self._send(404, "text/plain", b"not found\n", send_body)

            def _send(self, code: int, ctype: str, body: bytes, send_body: bool, encoding: str = "") -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                if encoding:
                    self.send_header("Content-Encoding", encoding)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if send_body:
                    self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                log.debug("%s " + format, self.address_string(), *args)

        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.1},
                                        name="mirrorlag-http", daemon=True)

    @property
    def port(self) -> int:
        return self.httpd.server_address[1]

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        if self._thread.is_alive():  # shutdown() waits for serve_forever, which may never have run
            self.httpd.shutdown()
        self.httpd.server_close()
