"""A real S3-protocol endpoint on loopback for the history upload tests, and a faulty way to it.

- `MotoServer`: moto's standalone server (`moto_server`) as a subprocess on a free port: a
  separate process speaking S3 over HTTP, keeping what it stores in memory.
- `FaultProxy`: a TCP proxy in front of it, real sockets both ways, that can pass traffic (and
  time what it forwards), answer every request with an S3 500 InternalError, reset every
  connection (a server that dies mid-upload), or stop listening (a server that is gone).
"""

from __future__ import annotations

import re
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from mirrorlag.embedded import free_port

ERROR_500 = (b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/xml\r\nContent-Length: %d\r\n"
             b"Connection: close\r\n\r\n%s")
ERROR_BODY = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>InternalError</Code>'
              b"<Message>We encountered an internal error. Please try again.</Message></Error>")
CREDENTIAL = re.compile(rb"Credential=([A-Za-z0-9]+)/")
TOKEN = re.compile(rb"x-amz-security-token: ?([^\r\n]+)", re.IGNORECASE)


class MotoServer:
    def __init__(self, log: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        with open(log, "ab") as out:
            # moto's `moto_server` entry point, from this interpreter (the venv need not be on PATH).
            self.proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                                         stdout=out, stderr=out)
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{self.url}/moto-api/", timeout=1)
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.close()
                    raise RuntimeError(f"moto_server did not start (see {log})") from None
                time.sleep(0.1)

    def client(self):  # boto3, straight to moto (not through any proxy): what is really stored
        import boto3

        return boto3.client("s3", endpoint_url=self.url, region_name="us-east-1",
                            aws_access_key_id="inspector", aws_secret_access_key="inspector")

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _reset(sock: socket.socket) -> None:
    """Drop a connection as a crashed server's kernel does (SO_LINGER 0: a RST). shutdown() first:
    close() alone neither wakes a relay thread blocked on the socket nor reaches the peer."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()


@dataclass
class FaultProxy:
    upstream_port: int
    port: int = field(default_factory=free_port)
    mode: str = "pass"  # pass | error (S3 500s) | reset (RST every connection)
    sent: list[tuple[float, int]] = field(default_factory=list)  # (monotonic, bytes) passed upstream
    access_keys: set[bytes] = field(default_factory=set)  # access key ids seen in Authorization
    tokens: set[bytes] = field(default_factory=set)  # session tokens seen on the wire

    def __post_init__(self) -> None:
        self.url = f"http://127.0.0.1:{self.port}"
        self._lock = threading.Lock()
        self._conns: set[socket.socket] = set()
        self._listener: socket.socket | None = None
        self.up()

    # --- control ----------------------------------------------------------------------------------

    def set(self, mode: str) -> None:
        """Switch mode; open connections are reset so that the next request sees the new one."""
        assert mode in ("pass", "error", "reset")
        self.mode = mode
        if mode != "pass":
            self._drop_all()

    def up(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def down(self) -> None:
        """Gone: connections refused, open ones reset."""
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
        self._drop_all()

    def close(self) -> None:
        self.down()

    def bytes_sent(self) -> int:
        with self._lock:
            return sum(n for _, n in self.sent)

    # --- plumbing ---------------------------------------------------------------------------------

    def _drop_all(self) -> None:
        with self._lock:
            conns, self._conns = self._conns, set()
        for sock in conns:
            _reset(sock)

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # closed by down()
            if self.mode == "reset":
                _reset(client)
            elif self.mode == "error":
                threading.Thread(target=self._answer_500, args=(client,), daemon=True).start()
            else:
                threading.Thread(target=self._relay, args=(client,), daemon=True).start()

    def _answer_500(self, client: socket.socket) -> None:
        """Read one request whole, answer it with S3's 500 InternalError, close."""
        with self._lock:
            self._conns.add(client)
        try:
            client.settimeout(5)
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = client.recv(65536)
                if not chunk:
                    return
                data += chunk
            head, body = data.split(b"\r\n\r\n", 1)
            length = re.search(rb"(?i)content-length: *([0-9]+)", head)
            while len(body) < (int(length.group(1)) if length else 0):
                chunk = client.recv(65536)
                if not chunk:
                    return
                body += chunk
            response = ERROR_500 % (len(ERROR_BODY), ERROR_BODY)
            if head.startswith(b"HEAD "):  # a response to HEAD has headers only
                response = response.split(b"\r\n\r\n")[0] + b"\r\n\r\n"
            client.sendall(response)
        except OSError:
            pass
        finally:
            with self._lock:
                self._conns.discard(client)
            client.close()

    def _relay(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
        except OSError:
            _reset(client)
            return
        with self._lock:
            self._conns.update((client, upstream))
        threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()
        self._pump(client, upstream, True)

    def _pump(self, src: socket.socket, dst: socket.socket, upstream: bool) -> None:
        try:
            while chunk := src.recv(65536):
                if upstream:
                    with self._lock:
                        self.sent.append((time.monotonic(), len(chunk)))
                        self.access_keys.update(CREDENTIAL.findall(chunk))
                        self.tokens.update(TOKEN.findall(chunk))
                dst.sendall(chunk)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
