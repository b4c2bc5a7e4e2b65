"""End-to-end TLS: the real `mirrorlag run` reads lag through TLS and mutual TLS, configured by
the Java keys of an MM2 file (PEM truststores and keystores, as files and inline, an encrypted
key with ssl.key.password), and stays up, not ready, when a handshake fails, with librdkafka's
own cause (certificate verify failed) in its log line; PEM material librdkafka cannot load is a
one-line config error, exit 2.

tansu 0.6.0 does not serve TLS (`--cert` and `--key` are mutually exclusive in its argument
parser; `--cert` alone leaves the listener plain TCP), so each broker sits behind a TLS proxy in
this process (tests/tls_proxy.py): tansu listens in plaintext on one port and advertises the
proxy's. The proxy counts the handshakes it completes and the client certificates it sees, and
the sidecar's own sockets show it only ever connects to the proxies.

SASL is not tested end to end: tansu 0.6.0's `--authentication` demands SASL (SCRAM-SHA-256/512;
PLAIN is not offered) on every connection, and its SCRAM users live in the broker's storage. In
the memory storage a user can only be made through the running broker (`tansu user create`, an
AlterUserScramCredentials request), which it refuses before authentication; the postgres and
sqlite storages are not built into this tansu, and s3 needs an S3 service. The SASL translation is
covered in tests/unit/test_config.py, a SCRAM handshake with the credentials loaded in
test_security.py.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from mirrorlag.embedded import free_port
from mirrorlag.formats import OffsetSync
from tests.conftest import Clusters
from tests.helpers import eventually, labels, mirrorlag, running_sidecar, scrape, status
from tests.tls_proxy import Pki, TlsBroker, connected_ports, make_pki, server_context, tls_broker

pytestmark = pytest.mark.integration

KEY_PASSWORD = "Key-Pw-3e9d71"
SYNC_TOPIC = "mm2-offset-syncs.dst.internal"  # on each source cluster: offset-syncs.topic.location=source


@dataclass
class Brokers:
    pki: Pki
    src: TlsBroker  # mutual TLS, certificate for 127.0.0.1
    dst: TlsBroker  # mutual TLS, certificate for 127.0.0.1
    odd: TlsBroker  # TLS, certificate for wrong.example only: fails hostname verification
    topic: str

    @property
    def all(self) -> tuple[TlsBroker, ...]:
        return self.src, self.dst, self.odd

    def tls_only(self) -> None:
        """From now on every connection must complete a TLS handshake; counters start at 0."""
        for broker in self.all:
            broker.proxy.tls = True
            broker.proxy.reset()


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Brokers]:
    pki = make_pki(tmp_path_factory.mktemp("pki"), KEY_PASSWORD)
    mutual = server_context(pki.server, client_ca=pki.ca)
    with ExitStack() as stack:
        src, dst, odd = (stack.enter_context(tls_broker(name, context)) for name, context in
                         (("src", mutual), ("dst", mutual), ("odd", server_context(pki.odd_server))))
        topic = f"t-{uuid.uuid4().hex[:8]}"
        # Seeded in plaintext through the proxies (TLS is switched on by each test): the helpers
        # of tests/conftest.py, and the sidecar is the only TLS client under test.
        for source in (src, odd):
            seed = Clusters(source.bootstrap_servers, dst.bootstrap_servers)
            seed.create_topic(topic, 2)
            seed.produce(topic, {0: 10, 1: 4})
            seed.create_topic(SYNC_TOPIC, 1)
            seed.write_offset_syncs(SYNC_TOPIC, [OffsetSync(topic, 0, 5, 5), OffsetSync(topic, 1, 3, 3)])
        yield Brokers(pki, src, dst, odd, topic)


def one_line(pem: Path) -> str:
    """A PEM file as operators often write it inline: one line (Java ignores the line breaks)."""
    return " ".join(pem.read_text().split())


def on_escapes(pem: Path) -> str:
    """A PEM file as one property line whose line breaks are `\\n` escapes."""
    return pem.read_text().strip().replace("\n", "\\n")


def properties(path: Path, b: Brokers, port: int, flows: dict[str, TlsBroker], extra: str) -> Path:
    """An MM2 file: every alias in `flows` replicates the test topic to dst; all speak SSL."""
    path.write_text(
        f"clusters = {', '.join(flows)}, dst\n"
        f"dst.bootstrap.servers = {b.dst.bootstrap_servers}\n"
        + "".join(f"{alias}.bootstrap.servers = {broker.bootstrap_servers}\n"
                  f"{alias}->dst.enabled = true\n{alias}->dst.topics = {b.topic}\n"
                  for alias, broker in flows.items())
        # Top-level client keys every cluster inherits, as MM2 gives them to its clients.
        + "security.protocol = SSL\nssl.truststore.type = PEM\nssl.keystore.type = PEM\n"
        f"ssl.key.password = {KEY_PASSWORD}\n"
        # dst: a truststore and a keystore written inline, the encrypted key on `\n` escapes.
        f"dst.ssl.truststore.certificates = {one_line(b.pki.ca)}\n"
        f"dst.ssl.keystore.certificate.chain = {one_line(b.pki.client_cert)}\n"
        f"dst.ssl.keystore.key = {on_escapes(b.pki.client_key)}\n"
        f"mirrorlag.http.listener = 127.0.0.1:{port}\n"
        "replication.record.lag.metric.refresh.interval = 500\n"
        f"{extra}"
    )
    return path


def lag(samples: dict, source: str, topic: str, partition: int) -> float | None:
    return samples.get(("mirrorlag_replication_record_lag",
                        labels(partition=partition, source=source, target="dst", topic=topic)))


def test_lag_figures_come_through_mutual_tls(tmp_path: Path, brokers: Brokers) -> None:
    b, port, log = brokers, free_port(), tmp_path / "sidecar.log"
    config = properties(tmp_path / "mm2.properties", b, port, {"src": b.src, "odd": b.odd}, (
        # src: mutual TLS from a Java PEM keystore file (certificate + encrypted key).
        f"src.ssl.truststore.location = {b.pki.ca}\nsrc.ssl.keystore.location = {b.pki.keystore}\n"
        # odd: its certificate names wrong.example; an empty algorithm skips the hostname check.
        f"odd.ssl.truststore.location = {b.pki.ca}\nodd.ssl.endpoint.identification.algorithm =\n"
        "mirrorlag.request.timeout.ms = 2000\nmirrorlag.metrics.detail = full\n"  # every series, IN_SYNC or not
    ))
    b.tls_only()
    with running_sidecar(config, port=port, log=log) as proc:  # ready: every source was read
        def exact_lag() -> dict:
            samples = scrape(port)
            for source in ("src", "odd"):
                assert (lag(samples, source, b.topic, 0), lag(samples, source, b.topic, 1)) == (4, 0)
            return samples

        samples = eventually(exact_lag)
        assert samples[("mirrorlag_source_log_end_offset",
                        labels(partition=0, source="src", target="dst", topic=b.topic))] == 10
        doc = status(port)
        assert doc["ready"] is True
        # The sidecar's Kafka connections go to the TLS ports, never to tansu's own.
        ports = connected_ports(proc.pid)
        assert b.src.proxy.port in ports
        assert not ports & {broker.plaintext_port for broker in b.all}
        # Every broker was reached over TLS only (counted before the sidecar stops).
        for proxy in (broker.proxy for broker in b.all):
            assert proxy.handshakes > 0 and proxy.bytes_to_broker > 0
            assert proxy.plaintext_connections == 0 and proxy.failures == []
        # Mutual TLS: the sidecar showed its client certificate, from a file (src) and inline (dst).
        assert set(b.src.proxy.client_names) == set(b.dst.proxy.client_names) == {"mirrorlag-client"}
        assert b.odd.proxy.client_names == []  # odd asks for none
    assert KEY_PASSWORD not in log.read_text() + str(doc) + str(samples)


@contextmanager
def sidecar_up(config: Path, port: int, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """`mirrorlag run`, serving but not necessarily ready (running_sidecar waits for ready)."""
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "mirrorlag", "run", "--config", str(config)],
                                stdout=out, stderr=out)

    def serving() -> None:
        assert proc.poll() is None, "the sidecar exited"
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2)
        except (urllib.error.URLError, ConnectionError) as exc:
            raise AssertionError("not serving yet") from exc

    try:
        eventually(serving)
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
    assert proc.returncode == 0, log.read_text()


BAD = ("badca", "strict", "default")  # the aliases whose TLS handshakes fail


@dataclass
class FailedRun:
    """What one sidecar run showed with good and bad TLS settings side by side."""

    samples: dict
    status: dict
    readyz: int
    log: str
    src_alerts: set[str]  # the TLS alerts that ended handshakes at src's proxy (badca's)
    odd_alerts: set[str]  # and at odd's (strict's and default's)
    odd_handshakes: int


def alerts(failures: list[str]) -> set[str]:
    """The TLS alerts among failed handshakes (not resets, which say nothing about why)."""
    return {word for failure in failures for word in failure.split() if "_ALERT_" in word}


@pytest.fixture(scope="module")
def failed_run(tmp_path_factory: pytest.TempPathFactory, brokers: Brokers) -> FailedRun:
    b, port, tmp_path = brokers, free_port(), tmp_path_factory.mktemp("failed")
    log = tmp_path / "sidecar.log"
    config = properties(tmp_path / "mm2.properties", b, port,
                        {"src": b.src, "badca": b.src, "strict": b.odd, "default": b.odd}, (
        f"src.ssl.truststore.location = {b.pki.ca}\nsrc.ssl.keystore.location = {b.pki.keystore}\n"
        # badca trusts a CA that signed nothing here; its keystore is right.
        f"badca.ssl.truststore.location = {b.pki.other_ca}\nbadca.ssl.keystore.location = {b.pki.keystore}\n"
        # odd's certificate names wrong.example, not 127.0.0.1: https, set or by default (as in
        # Java), checks the name.
        f"strict.ssl.truststore.location = {b.pki.ca}\nstrict.ssl.endpoint.identification.algorithm = https\n"
        f"default.ssl.truststore.location = {b.pki.ca}\n"
        "mirrorlag.request.timeout.ms = 1000\n"  # each failed cluster's poll waits this long, in turn
    ))
    b.tls_only()
    with sidecar_up(config, port, log) as proc:
        def failed_polls() -> dict:
            samples = scrape(port)
            for alias in BAD:
                assert samples.get(("mirrorlag_poll_errors_total", labels(cluster=alias)), 0) >= 1
            assert lag(samples, "src", b.topic, 0) == 4  # the good cluster beside them is read
            return samples

        samples = eventually(failed_polls)
        assert proc.poll() is None  # up: a cluster's TLS failure is no reason to exit
        try:
            readyz = urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5).status
        except urllib.error.HTTPError as err:
            readyz = err.code
        return FailedRun(samples, status(port), readyz, log.read_text(), alerts(b.src.proxy.failures),
                         alerts(b.odd.proxy.failures), b.odd.proxy.handshakes)


def test_a_wrong_ca_or_hostname_fails_the_handshake_and_the_sidecar_stays_up_not_ready(
        failed_run: FailedRun) -> None:
    run = failed_run
    assert run.readyz == 503 and run.status["ready"] is False
    for alias in BAD:
        assert outage_lines(run.log, alias), run.log
    # The handshakes failed in TLS, on the client's side: it refused the broker's certificate
    # (unknown CA; a name that does not match), so nothing reached odd's broker at all.
    assert run.src_alerts == {"TLSV1_ALERT_UNKNOWN_CA]"}
    assert run.odd_alerts == {"SSLV3_ALERT_BAD_CERTIFICATE]"}
    assert run.odd_handshakes == 0
    assert KEY_PASSWORD not in run.log + str(run.status) + str(run.samples)


def outage_lines(log: str, alias: str) -> list[str]:
    """The lines that say a cluster's outage began (one per outage, whichever client met it)."""
    return [line for line in log.splitlines() if f"cluster {alias} (bootstrap.servers " in line
            and ") unreachable: " in line]


def test_the_log_says_the_failure_is_tls_once(failed_run: FailedRun) -> None:
    for alias in BAD:
        (line,) = outage_lines(failed_run.log, alias)
        assert "WARNING" in line and ("SSL" in line or "TLS" in line or "certificate" in line), line
        assert f"source cluster {alias}: " not in failed_run.log  # the poller's own line is no second one


@pytest.mark.parametrize("keys", [
    "ssl.truststore.location = {missing}\n",
    "ssl.keystore.location = {keystore}\nssl.key.password = Not-The-Password\n",
], ids=["missing-truststore", "wrong-key-password"])
def test_pem_material_librdkafka_cannot_load_is_a_one_line_error(tmp_path: Path, brokers: Brokers,
                                                                 keys: str) -> None:
    config = tmp_path / "mm2.properties"
    config.write_text(
        "clusters = src, dst\nsrc.bootstrap.servers = 127.0.0.1:1\ndst.bootstrap.servers = 127.0.0.1:1\n"
        "src->dst.enabled = true\nsecurity.protocol = SSL\nssl.truststore.type = PEM\nssl.keystore.type = PEM\n"
        + keys.format(missing=tmp_path / "no-such-ca.pem", keystore=brokers.pki.keystore)
    )
    # 10 s: the error comes when the first client is built, long before; with 1 s a loaded machine
    # spent it importing, and answered UNKNOWN at the deadline (CI, at load 6).
    result = mirrorlag("check", "--config", str(config), "--timeout", "10", timeout=30)
    # librdkafka checks TLS material when a client is built: one line naming the cluster, exit 3
    # (UNKNOWN to Nagios; not a traceback and exit 1, which `check` uses for lag).
    assert (result.returncode, len(result.stderr.splitlines())) == (3, 1), result.stderr
    assert "cluster src: librdkafka cannot build a client" in result.stderr
    assert "Not-The-Password" not in result.stderr
