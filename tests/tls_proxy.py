"""A Kafka broker that speaks TLS, for end-to-end tests: tansu behind a TLS-terminating proxy.

tansu 0.6.0 cannot serve TLS itself (`--cert` and `--key` are mutually exclusive in its argument
parser). So tansu listens in plaintext on one loopback port and advertises another, where a
proxy in this process terminates TLS (optionally requiring a client certificate) and forwards
the bytes. Every connection a client makes after bootstrap goes to the advertised port, so all
of its Kafka traffic crosses the proxy, which counts what it sees.

The throwaway PKI comes from the `openssl` CLI (the `cryptography` package is not a dependency).
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import ssl
import subprocess
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from mirrorlag.embedded import EmbeddedBroker, tansu_binary

# --- PKI ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pki:
    ca: Path  # the CA the clients trust
    other_ca: Path  # a CA that signed nothing here: a wrong truststore
    server: tuple[Path, Path]  # cert, key: CN/SAN 127.0.0.1 and localhost, signed by `ca`
    odd_server: tuple[Path, Path]  # cert, key for wrong.example only, signed by `ca`
    client_cert: Path  # CN=mirrorlag-client, signed by `ca`
    client_key: Path  # encrypted with key_password (PKCS#8)
    keystore: Path  # a Java PEM keystore: client_cert then client_key in one file
    key_password: str


def _openssl(*args: str | Path) -> None:
    subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True, timeout=30)


def _ca(directory: Path, name: str) -> tuple[Path, Path]:
    cert, key = directory / f"{name}.pem", directory / f"{name}.key"
    # EC keys: generating them takes milliseconds, RSA keys up to a second each.
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", key, "-out", cert, "-days", "2", "-subj", f"/CN={name}")
    return cert, key


def _leaf(directory: Path, name: str, ca: tuple[Path, Path], san: str, usage: str) -> tuple[Path, Path]:
    cert, key, csr, ext = (directory / f"{name}.{suffix}" for suffix in ("pem", "key", "csr", "ext"))
    _openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", key, "-out", csr, "-subj", f"/CN={name}")
    # `x509 -req` adds only the extensions of this file (`req -x509` would add the CA ones).
    ext.write_text(f"basicConstraints=critical,CA:FALSE\nextendedKeyUsage={usage}\nsubjectAltName={san}\n")
    _openssl("x509", "-req", "-in", csr, "-CA", ca[0], "-CAkey", ca[1], "-CAcreateserial",
             "-days", "2", "-extfile", ext, "-out", cert)
    return cert, key


def make_pki(directory: Path, key_password: str) -> Pki:
    if shutil.which("openssl") is None:
        raise RuntimeError("the TLS tests need the openssl CLI (apt-get install -y openssl)")
    directory.mkdir(parents=True, exist_ok=True)
    ca = _ca(directory, "test-ca")
    other_ca, _ = _ca(directory, "other-ca")
    server = _leaf(directory, "127.0.0.1", ca, "IP:127.0.0.1,DNS:localhost", "serverAuth")
    odd_server = _leaf(directory, "wrong.example", ca, "DNS:wrong.example", "serverAuth")
    client_cert, plain_key = _leaf(directory, "mirrorlag-client", ca, "DNS:mirrorlag-client", "clientAuth")
    client_key = directory / "mirrorlag-client.enc.key"
    _openssl("pkey", "-in", plain_key, "-out", client_key, "-aes256", "-passout", f"pass:{key_password}")
    plain_key.unlink()  # only the encrypted key is left: the client must use the password
    keystore = directory / "keystore.pem"
    keystore.write_text(client_cert.read_text() + client_key.read_text())
    return Pki(ca[0], other_ca, server, odd_server, client_cert, client_key, keystore, key_password)


# --- the proxy ------------------------------------------------------------------------------------


@dataclass
class TlsProxy:
    """TLS on 127.0.0.1:`port` (0: any free port), forwarded in plaintext to `upstream`.

    With `tls` False it forwards without TLS: the tests seed their brokers with the plaintext
    helpers of tests/conftest.py first, then switch it on. The counters are only written by the
    proxy's event-loop thread.
    """

    upstream: int
    context: ssl.SSLContext
    port: int = 0
    tls: bool = False
    handshakes: int = 0  # TLS handshakes completed
    failures: list[str] = field(default_factory=list)  # TLS handshakes failed, why
    client_names: list[str] = field(default_factory=list)  # the CN of each client certificate
    plaintext_connections: int = 0  # connections forwarded without TLS
    bytes_to_broker: int = 0  # bytes forwarded after a completed TLS handshake
    _server: asyncio.Server | None = None
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None

    def reset(self) -> None:
        self.handshakes = self.plaintext_connections = self.bytes_to_broker = 0
        self.failures, self.client_names = [], []

    def start(self) -> "TlsProxy":
        loop = asyncio.new_event_loop()
        server = loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", self.port))
        self.port = server.sockets[0].getsockname()[1]
        self._server, self._loop = server, loop
        self._thread = threading.Thread(target=loop.run_forever, name=f"tls-proxy-{self.port}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        server, loop, thread = self._server, self._loop, self._thread
        if server is None or loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)
        server.close()
        tasks = asyncio.all_tasks(loop)
        for task in tasks:
            task.cancel()
        if tasks:
            loop.run_until_complete(asyncio.wait(tasks))
        loop.close()
        self._server = self._loop = self._thread = None

    async def _serve(self, client_in: asyncio.StreamReader, client_out: asyncio.StreamWriter) -> None:
        broker_out: asyncio.StreamWriter | None = None
        try:
            if self.tls:
                try:
                    # TLS on the accepted socket, not on the listener: a failed handshake then
                    # surfaces here, where it can be counted (asyncio would only debug-log it).
                    await client_out.start_tls(self.context, ssl_handshake_timeout=5)
                except OSError as exc:  # ssl.SSLError, resets and timeouts are all OSErrors
                    self.failures.append(f"{type(exc).__name__}: {exc}")
                    return
                self.handshakes += 1
                if cert := client_out.get_extra_info("peercert"):
                    self.client_names += [v for rdn in cert["subject"] for k, v in rdn if k == "commonName"]
            else:
                self.plaintext_connections += 1
            broker_in, broker_out = await asyncio.open_connection("127.0.0.1", self.upstream)
            await asyncio.gather(self._pump(client_in, broker_out, count=self.tls),
                                 self._pump(broker_in, client_out, count=False))
        except asyncio.CancelledError:
            pass  # stop(): a cancelled connection task would make asyncio log a traceback
        finally:
            for writer in (client_out, broker_out):
                if writer is not None:
                    writer.close()

    async def _pump(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter, count: bool) -> None:
        try:
            while data := await source.read(65536):
                if count:
                    self.bytes_to_broker += len(data)
                sink.write(data)
                await sink.drain()
        except OSError:
            pass  # a peer went away: the other direction ends when its sink is closed below
        finally:
            sink.close()  # TLS has no half-close: one side ending ends the connection


def server_context(cert: tuple[Path, Path], client_ca: Path | None = None) -> ssl.SSLContext:
    """The proxy's TLS: `cert`, and with `client_ca` a client certificate signed by it is required."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(*cert)
    if client_ca is not None:
        context.load_verify_locations(client_ca)
        context.verify_mode = ssl.CERT_REQUIRED
    return context


# --- a broker behind the proxy --------------------------------------------------------------------


@dataclass
class TlsBroker:
    proxy: TlsProxy
    plaintext_port: int  # tansu's own listener: clients only reach it through the proxy

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.proxy.port}"


@contextmanager
def tls_broker(name: str, context: ssl.SSLContext) -> Iterator[TlsBroker]:
    """tansu on a plaintext port, advertising the port of a TLS proxy in front of it."""
    proxy = TlsProxy(upstream=0, context=context).start()  # bound first: tansu must advertise it
    broker = EmbeddedBroker(name)  # for its free port and its stop(); started here, not by start()
    try:
        proxy.upstream = broker.port
        command = [str(tansu_binary()), "broker", "--listener-url", f"tcp://127.0.0.1:{broker.port}",
                   "--advertised-listener-url", f"tcp://127.0.0.1:{proxy.port}", "--cluster-id", name, "--silent"]
        if setpriv := shutil.which("setpriv"):
            command = [setpriv, "--pdeathsig", "TERM", "--", *command]  # no orphan if pytest is killed
        broker.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL, start_new_session=True)
        _wait_for_port(broker)
        yield TlsBroker(proxy, broker.port)
    finally:
        broker.stop()
        proxy.stop()


def _wait_for_port(broker: EmbeddedBroker, timeout_s: float = 15) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert broker.process is not None and broker.process.poll() is None, f"tansu {broker.name} exited"
        try:
            socket.create_connection(("127.0.0.1", broker.port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"tansu {broker.name} did not listen on port {broker.port}")


# --- what a process is connected to ---------------------------------------------------------------


def connected_ports(pid: int) -> set[int]:
    """The remote ports of the established IPv4 TCP connections of process `pid`."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = fd.readlink().name
        except OSError:
            continue  # closed meanwhile
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    ports = set()
    for line in Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        remote, state, inode = fields[2], fields[3], fields[9]
        if state == "01" and inode in inodes:  # 01: ESTABLISHED
            ports.add(int(remote.split(":")[1], 16))
    return ports

