"""The sidecar's HTTP endpoints: /metrics, /healthz, /readyz, /status, and a landing page at /.

Handlers only copy bytes prepared after the last poll, so a scrape costs the same at 10 or 100k
partitions and can never slow a poll down. /metrics and /status are kept compressed only (gzip is
what Prometheus asks for, and the plain texts of a large estate are tens of times bigger), so a
client that wants them plain gets them inflated piece by piece as they are sent. Only GET and HEAD exist. Each request (and each idle wait between keep-alive
requests) must arrive within one deadline in total, not per read: a client that trickles a byte at
a time is cut off like a silent one, so a slow client holds one thread for a bounded time and never
blocks others.

With a web config file (exporter-toolkit's format, web_config.py) the listener speaks TLS and may
ask for a password. The TLS handshake runs on the connection's own thread, not in the accept
loop, under the same deadline as a request: a client that connects and says nothing holds one
thread for that long and nobody else waits. Every endpoint needs the password when one is set,
as in exporter-toolkit; a request without it gets a bare 401.
"""

from __future__ import annotations

import contextlib
import io
import logging
import socket
import ssl
import struct
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from isal import isal_zlib

from mirrorlag import __version__
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.openmetrics.exposition import CONTENT_TYPE_LATEST as OPENMETRICS_CONTENT_TYPE

if TYPE_CHECKING:
    from mirrorlag.exporters.web_config import LiveWebConfig, WebConfig

log = logging.getLogger(__name__)

CLIENT_TIMEOUT_S = 10.0
_GZIP_WBITS = 31  # window bits (zlib's convention) for a gzip header and trailer
_RAW_WBITS = -15  # raw deflate, no header or trailer
_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"  # deflate, no flags, no mtime, OS unknown
_FINAL_BLOCK = isal_zlib.compressobj(1, isal_zlib.DEFLATED, _RAW_WBITS).flush()  # an empty last block
_INFLATE_STEP = 64 * 1024  # compressed bytes inflated per write: a few MB of text at most alive per write
# A body sent plain past this much text has the heap's free pages handed back after it (its
# inflated pieces would otherwise stay resident until the next poll: ~120 bytes a partition
# after a plain GET /status at 100k).
RELEASE_AFTER_TEXT_BYTES = 4 << 20


@dataclass(frozen=True)
class Deflated:
    """A piece of a gzip body compressed on its own: raw deflate ending on a byte boundary (a sync
    flush, not the final block), with its text's CRC-32 and length. Pieces compressed on different
    threads join into one gzip stream (GzipBody.join), as pigz does, so the sidecar compresses
    /metrics a family at a time on the threads that write the families."""

    data: bytes
    crc: int
    size: int

    @classmethod
    def of(cls, chunks: Iterable[bytes]) -> Deflated:
        """Compresses the text a chunk (any bytes-like object) at a time: the whole of it never
        exists at once. ISA-L's deflate (isal), not zlib's: on exposition text its level 1 is
        several times faster than zlib's level 1 and compresses better (tests/bench/RESULTS.md)."""
        deflate = isal_zlib.compressobj(1, isal_zlib.DEFLATED, _RAW_WBITS)
        parts, crc, size = [], 0, 0
        for chunk in chunks:
            parts.append(deflate.compress(chunk))
            crc = isal_zlib.crc32(chunk, crc)
            size += len(chunk)
        parts.append(deflate.flush(isal_zlib.Z_SYNC_FLUSH))
        return cls(b"".join(parts), crc, size)


@dataclass(frozen=True)
class GzipBody:
    """A response body held only as gzip: what Prometheus asks for, a small fraction of the text."""

    gzipped: bytes
    size: int  # bytes of the text, for an uncompressed response's Content-Length

    @classmethod
    def compress(cls, chunks: Iterable[bytes]) -> GzipBody:
        """The text of `chunks` (bytes-like objects), compressed a chunk at a time."""
        return cls.join([Deflated.of(chunks)])

    @classmethod
    def join(cls, pieces: Iterable[Deflated]) -> GzipBody:
        """One gzip stream (RFC 1952) of the pieces' texts in order: a header, the pieces, the
        final deflate block, and the CRC-32 and length of the whole text."""
        parts, crc, size = [_GZIP_HEADER], 0, 0
        for piece in pieces:
            parts.append(piece.data)
            crc = isal_zlib.crc32_combine(crc, piece.crc, piece.size)
            size += piece.size
        parts += [_FINAL_BLOCK, struct.pack("<II", crc, size & 0xFFFFFFFF)]
        return cls(b"".join(parts), size)

    def text(self) -> Iterator[bytes]:
        """The text again, inflated a piece at a time."""
        inflate = isal_zlib.decompressobj(_GZIP_WBITS)
        view = memoryview(self.gzipped)
        for start in range(0, len(view), _INFLATE_STEP):
            piece = inflate.decompress(view[start:start + _INFLATE_STEP])
            if piece:
                yield piece
        tail = inflate.flush()
        if tail:
            yield tail


EMPTY_BODY = GzipBody.compress([])
EMPTY_STATUS = GzipBody.compress([b"{}"])


@dataclass(eq=False)
class Exposition:
    """Everything the endpoints serve, replaced as a whole after each poll."""

    metrics: GzipBody = EMPTY_BODY
    openmetrics: GzipBody | None = None  # the same in OpenMetrics text, for clients that ask for it
    status: GzipBody = EMPTY_STATUS
    ready: bool = False
    not_ready_because: str | None = None  # which cluster and why, for /readyz's 503
    # Renders `status` on the first GET /status after a poll, a piece at a time: the document of
    # a large estate is costly to make and most polls nobody asks (Prometheus reads /metrics).
    render_status: Callable[[], Iterable[bytes]] | None = field(default=None, repr=False)
    # Called after that render, and after a large body sent plain (inflated): its transient text
    # (tens of MB at 100k partitions) would otherwise stay resident until the next poll hands the
    # heap's free pages back.
    after_status: Callable[[], object] | None = field(default=None, repr=False)
    _status_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def status_body(self) -> GzipBody:
        with self._status_lock:
            if self.render_status is not None:
                self.status, self.render_status = GzipBody.compress(self.render_status()), None
                if self.after_status is not None:
                    self.after_status()
            return self.status


# The links of the landing page: relative, so that they hold behind a reverse proxy's path prefix.
_ENDPOINTS = (("metrics", "Prometheus metrics"), ("status", "Lag per partition and the sidecar's health (JSON)"),
              ("readyz", "Readiness: 200, or 503 naming the cluster and why"), ("healthz", "Liveness"))
LANDING_PAGE = (
    "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>mirrorlag</title></head>\n"
    "<body><h1>mirrorlag</h1>\n<p>Replication lag of Kafka MirrorMaker 2 flows. Version "
    f"{__version__}.</p>\n<ul>\n"
    + "".join(f'<li><a href="{path}">/{path}</a>: {what}</li>\n' for path, what in _ENDPOINTS)
    + "</ul>\n</body></html>\n").encode()


def readyz_body(exp: Exposition) -> bytes:
    if exp.ready:
        return b"ready\n"
    return f"not ready: {exp.not_ready_because}\n".encode() if exp.not_ready_because else b"not ready\n"


def _wants_openmetrics(accept: str) -> bool:
    """Content negotiation as prometheus_client's choose_encoder: OpenMetrics 1.0.0 (or an
    unversioned request) where the client names it; Prometheus does, first, by default."""
    for item in accept.split(","):
        media, *params = (part.strip() for part in item.split(";"))
        if media == "application/openmetrics-text":
            version = next((p.split("=", 1)[1] for p in params if p.startswith("version=")), "1.0.0")
            if version in ("1.0.0", "0.0.1"):
                return True
    return False


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


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # socketserver's backlog is 5: a burst of connections (slow clients, a scan) overflows it and
    # the kernel drops their ACKs, which clients resend only after 1 s, then 3 s: a scrape waits.
    request_queue_size = 128
    web: LiveWebConfig | None = None
    client_timeout_s = CLIENT_TIMEOUT_S
    _tls_logged_at = -float("inf")

    def _tls_log_due(self) -> bool:
        now = time.monotonic()
        if now - self._tls_logged_at < 60:
            return False
        self._tls_logged_at = now
        return True

    def finish_request(self, request: socket.socket, client_address: tuple) -> None:  # type: ignore[override]
        """On the connection's own thread: the TLS handshake first, when there is TLS."""
        tls = self.web.current().tls if self.web is not None else None
        if tls is None:
            return super().finish_request(request, client_address)
        conn = tls.context.wrap_socket(request, server_side=True, do_handshake_on_connect=False)
        try:
            _handshake(conn, self.client_timeout_s)
            if not tls.peer_allowed(conn):
                raise _NotAllowed("the client certificate names none of client_allowed_sans")
            super().finish_request(conn, client_address)
        finally:
            _close(conn)

    def handle_error(self, request: object, client_address: tuple) -> None:
        """One log line, not socketserver's traceback on stderr: a scraper that hangs up or
        times out mid-response is the client's business, never the sidecar's failure."""
        exc = sys.exc_info()[1]
        if self.web is not None and _refused(exc):
            # An operator's question ("why is Prometheus refused?"), so said once a minute, not
            # once per scrape or port scan.
            if self._tls_log_due():
                log.warning("TLS handshake from %s:%s refused: %s (more in the next minute at DEBUG)",
                            *client_address[:2], exc)
            else:
                log.debug("TLS handshake from %s:%s refused: %s", *client_address[:2], exc)
        elif isinstance(exc, OSError):
            log.debug("client %s:%s went away: %s", *client_address[:2], exc)
        else:
            log.warning("request from %s:%s failed: %r", *client_address[:2], exc)


class _NotAllowed(ssl.SSLError):
    def __str__(self) -> str:
        return str(self.args[0])


def _refused(exc: BaseException | None) -> bool:
    """A TLS refusal worth a word: a certificate or protocol the listener turned down, not a
    client that hung up (EOF) or never spoke (timeout)."""
    return isinstance(exc, ssl.SSLError) and not isinstance(exc, ssl.SSLEOFError)


_PLAIN_TO_TLS = (b"HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n"
                 b"Client sent an HTTP request to an HTTPS server.\n")  # Go's answer, word for word


def _handshake(conn: ssl.SSLSocket, seconds: float) -> None:
    """The server side of the handshake, all of it within `seconds` (CPython's handshake counts
    one deadline over its reads, so a client trickling its hello gains nothing). A plain HTTP
    request gets a 400 that says what went wrong, as Go's servers answer it."""
    conn.settimeout(seconds)
    try:
        conn.do_handshake()
    except ssl.SSLError as exc:
        if exc.reason == "HTTP_REQUEST":
            with contextlib.suppress(OSError):
                socket.socket.sendall(conn, _PLAIN_TO_TLS)  # the TCP socket under the failed TLS
        raise


def _close(conn: ssl.SSLSocket) -> None:
    """socketserver's shutdown_request, for the TLS socket that took over the accepted one."""
    with contextlib.suppress(OSError):
        conn.shutdown(socket.SHUT_WR)
    conn.close()


_UNAUTHORIZED = b"Unauthorized\n"  # the same few bytes whatever was sent: nothing to learn from them


class _Server6(_Server):
    """An IPv6 listener (`[::1]:9464`); on `[::]` Linux also takes IPv4 clients, as Go's servers do."""

    address_family = socket.AF_INET6


class ExpositionServer:
    def __init__(self, host: str, port: int, client_timeout_s: float = CLIENT_TIMEOUT_S,
                 web: WebConfig | None = None, web_reload_check_s: float | None = None) -> None:
        self.current = Exposition()
        live: LiveWebConfig | None = None
        if web is not None:  # imported only then: without a web config nothing of it is loaded
            from mirrorlag.exporters.web_config import RELOAD_CHECK_S, LiveWebConfig

            live = LiveWebConfig(web, RELOAD_CHECK_S if web_reload_check_s is None else web_reload_check_s)
        self.web = live
        server = self

        class Handler(BaseHTTPRequestHandler):
            server_version = "mirrorlag"
            protocol_version = "HTTP/1.1"
            default_request_version = "HTTP/1.0"  # errors on garbage still get a status line
            timeout = client_timeout_s  # socket timeout for writes; reads have the deadline below
            # TCP_NODELAY: a keep-alive scrape's last segment otherwise waits on Nagle and the
            # client's delayed ACK.
            disable_nagle_algorithm = True

            def setup(self) -> None:
                super().setup()
                self._reader = _DeadlineReader(self.connection, client_timeout_s)
                self.rfile = io.BufferedReader(self._reader)
                self._web: WebConfig | None = None

            def handle_one_request(self) -> None:
                self._reader.restart()  # the deadline covers one request, or one keep-alive wait
                self._web = live.current() if live is not None else None  # one config per request
                super().handle_one_request()

            def do_GET(self) -> None:
                self._respond(send_body=True)

            def do_HEAD(self) -> None:
                self._respond(send_body=False)

            def version_string(self) -> str:
                return self.server_version  # not http.server's "Python/3.x.y": nothing for a scanner

            def send_response(self, code: int, message: str | None = None) -> None:
                super().send_response(code, message)
                for name, value in self._web.headers if self._web is not None else ():
                    self.send_header(name, value)  # http_server_config.headers, on every answer

            def _authorized(self, send_body: bool) -> bool:
                """True when no password is set or the request carries a right one; else a 401."""
                auth = self._web.auth if self._web is not None else None
                if auth is None or auth.check(self.headers.get("Authorization")):
                    return True
                self.send_response(401)
                self.send_header("WWW-Authenticate", "Basic")
                self.send_header("Content-Type", "text/plain; charset=utf-8")
                self.send_header("Content-Length", str(len(_UNAUTHORIZED)))
                self.end_headers()
                if send_body:
                    self.wfile.write(_UNAUTHORIZED)
                return False

            def _not_allowed(self) -> None:
                if not self._authorized(send_body=True):
                    self.close_connection = True  # its body, if any, is never read
                    return
                self.send_response(405)
                self.send_header("Allow", "GET, HEAD")
                self.send_header("Content-Length", "0")
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True

            do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_TRACE = do_CONNECT = _not_allowed

            def _respond(self, send_body: bool) -> None:
                if not self._authorized(send_body):
                    return
                exp = server.current  # one read: all parts come from the same poll
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    if exp.openmetrics is not None and _wants_openmetrics(self.headers.get("Accept", "")):
                        self._send_gzip_body(OPENMETRICS_CONTENT_TYPE, exp.openmetrics, send_body, exp.after_status)
                    else:
                        self._send_gzip_body(CONTENT_TYPE_LATEST, exp.metrics, send_body, exp.after_status)
                elif path == "/healthz":
                    self._send(200, "text/plain", b"ok\n", send_body)
                elif path == "/readyz":
                    self._send(200 if exp.ready else 503, "text/plain; charset=utf-8", readyz_body(exp), send_body)
                elif path == "/status":
                    self._send_gzip_body("application/json", exp.status_body(), send_body, exp.after_status)
                elif path == "/":
                    self._send(200, "text/html; charset=utf-8", LANDING_PAGE, send_body)
                else:
                    self._send(404, "text/plain", b"not found\n", send_body)

            def _send_gzip_body(self, ctype: str, body: GzipBody, send_body: bool,
                                release: Callable[[], object] | None = None) -> None:
                if "gzip" in self.headers.get("Accept-Encoding", ""):
                    self._send(200, ctype, body.gzipped, send_body, encoding="gzip")
                    return
                try:
                    self._send_pieces(200, ctype, body.size, body.text(), send_body)
                finally:
                    if release is not None and send_body and body.size >= RELEASE_AFTER_TEXT_BYTES:
                        release()  # the inflated pieces' pages, not kept until the next poll

            def _send(self, code: int, ctype: str, body: bytes, send_body: bool, encoding: str = "") -> None:
                self._send_pieces(code, ctype, len(body), (body,), send_body, encoding)

            def _send_pieces(self, code: int, ctype: str, length: int, pieces: Iterable[bytes],
                             send_body: bool, encoding: str = "") -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                if encoding:
                    self.send_header("Content-Encoding", encoding)
                self.send_header("Content-Length", str(length))
                self.end_headers()
                if send_body:
                    for piece in pieces:
                        self.wfile.write(piece)

            def log_message(self, format: str, *args: object) -> None:
                log.debug("%s " + format, self.address_string(), *args)

        self.httpd = (_Server6 if ":" in host else _Server)((host, port), Handler)
        self.httpd.web = live
        self.httpd.client_timeout_s = client_timeout_s
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
