"""The real CLI in its own process: `check --json` and a scrape of `run`, fed by hand-written
offset syncs (the bytes MM2 writes), so the sidecar shares nothing with the writer but the brokers."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
from mirrorlag.embedded import free_port
from mirrorlag.formats import OffsetSync
from tests.conftest import write_properties
from tests.helpers import mirrorlag, scrape, wait_ready

pytestmark = pytest.mark.integration

SYNC_TOPIC = "mm2-offset-syncs.dst.internal"  # on the source cluster: offset-syncs.topic.location=source


@pytest.fixture
def scenario(tmp_path, clusters, topic_name):
    """Topic with 10/4/7 records; syncs say 0..5 of p0 and all of p1 are copied, p2 never copied."""
    clusters.create_topic(topic_name, 3)
    clusters.produce(topic_name, {0: 10, 1: 4, 2: 7})
    sync_topic = f"{SYNC_TOPIC}"
    # Each test gets its own sync topic via a custom separator-free name: isolate by alias instead.
    config = write_properties(tmp_path / "mm2.properties", clusters, f"src->dst.topics = {topic_name}\n")
    try:
        clusters.create_topic(sync_topic, 1)
    except Exception:
        pass  # shared across tests; newest sync per partition wins, and topics differ per test
    clusters.write_offset_syncs(sync_topic, [
        OffsetSync(topic_name, 0, 2, 2),
        OffsetSync(topic_name, 0, 5, 5),
        OffsetSync(topic_name, 1, 3, 3),
    ])
    return config, topic_name


def test_check_json_gives_exact_lag_and_exit_2(scenario):
    config, topic = scenario
    result = mirrorlag("check", "--config", str(config), "--json", "--timeout", "3")
    assert result.returncode == 2, result.stderr  # CRITICAL: partitions STALLED
    rows = {r["partition"]: r for r in json.loads(result.stdout)}
    assert [rows[p]["flow"] for p in range(3)] == ["src->dst"] * 3
    assert all(rows[p]["topic"] == topic for p in range(3))
    assert (rows[0]["leo"], rows[0]["lro"], rows[0]["record_lag"], rows[0]["state"]) == (10, 5, 4, "STALLED")
    assert (rows[1]["leo"], rows[1]["lro"], rows[1]["record_lag"], rows[1]["state"]) == (4, 3, 0, "IN_SYNC")
    # No sync for p2 once the sync topic is read through: MM2 owes it every record from its log
    # start, and did not copy one within the check's window.
    assert (rows[2]["leo"], rows[2]["lro"], rows[2]["record_lag"], rows[2]["state"]) == (7, -1, 7, "STALLED")
    assert (rows[0]["lro_feed"], rows[2]["lro_feed"]) == ("offset-syncs", "log-start")


def test_check_exits_0_when_caught_up_and_prints_a_table(scenario, clusters):
    config, topic = scenario
    clusters.write_offset_syncs(SYNC_TOPIC, [OffsetSync(topic, 0, 9, 9), OffsetSync(topic, 2, 6, 6)])
    result = mirrorlag("check", "--config", str(config), "--timeout", "3", "--verbose")
    assert result.returncode == 0, result.stdout + result.stderr
    first, *table = result.stdout.splitlines()
    assert first.startswith("MIRRORLAG OK - 3 partitions IN_SYNC | "), first
    header = next(line for line in table if "record_lag" in line).split()
    assert header == ["flow", "topic", "partition", "leo", "lro", "record_lag", "time_lag_s", "state", "lro_feed"]
    assert "IN_SYNC" in result.stdout and topic in result.stdout
    assert "LAGGING" not in result.stdout and "UNKNOWN" not in result.stdout
    # without --verbose (stdout is no terminal here) the status line alone; --quiet: nothing when OK
    plain = mirrorlag("check", "--config", str(config), "--timeout", "3")
    assert plain.returncode == 0 and plain.stdout.count("\n") == 1 and plain.stdout.startswith("MIRRORLAG OK - ")
    quiet = mirrorlag("check", "--config", str(config), "--timeout", "3", "--quiet")
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "", "")


def test_check_sees_a_mirror_that_catches_up_during_the_check(scenario, clusters):
    config, topic = scenario
    clusters.write_offset_syncs(SYNC_TOPIC, [OffsetSync(topic, 2, 6, 6)])
    proc = subprocess.Popen([sys.executable, "-m", "mirrorlag", "check", "--config", str(config), "--json",
                             "--timeout", "8"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(2.5)
    clusters.write_offset_syncs(SYNC_TOPIC, [OffsetSync(topic, 0, 9, 9)])  # the mirror catches up
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, out + err
    assert {r["state"] for r in json.loads(out)} == {"IN_SYNC"}


def test_run_serves_exact_lag_over_http_and_stops_on_sigterm(tmp_path, scenario):
    config, topic = scenario
    port = free_port()
    extra = tmp_path / "mirrorlag.properties"
    extra.write_text(f"mirrorlag.http.listener = 127.0.0.1:{port}\nreplication.record.lag.metric.refresh.interval = 500\n")
    proc = subprocess.Popen([sys.executable, "-m", "mirrorlag", "run", "--config", str(config), "--config", str(extra)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_ready(port, proc)
        assert urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5).read() == b"ok\n"
        time.sleep(1.2)  # a poll after the feed has read the syncs
        samples = scrape(port)
        def labels(partition: int, **extra: str) -> tuple:
            base = {"partition": str(partition), "source": "src", "target": "dst", "topic": topic}
            return tuple(sorted({**base, **extra}.items()))

        assert samples[("mirrorlag_replication_record_lag", labels(0))] == 4
        assert samples[("mirrorlag_replication_record_lag", labels(1))] == 0
        assert samples[("mirrorlag_replication_record_lag", labels(2))] == 7  # never copied: owes all 7
        assert samples[("mirrorlag_replication_record_lag_max", labels(0))] == 4
        assert samples.get(("mirrorlag_partition_state", labels(2, state="UNKNOWN")), 0) == 0
        assert samples[("mirrorlag_polls_total", ())] >= 1

        status = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=5).read())
        assert status["ready"] is True
        by_partition = {r["partition"]: r for r in status["partitions"]}
        assert (by_partition[0]["lro"], by_partition[0]["record_lag"]) == (5, 4)
        assert (by_partition[2]["leo"], by_partition[2]["lro"], by_partition[2]["lro_feed"]) == (7, -1, "log-start")
        assert status["evidence_unread"] == {}

        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/nope", timeout=5)
        assert missing.value.code == 404
    finally:
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
    assert proc.returncode == 0
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("content,expected", [
    ("clusters = a, b\na.bootstrap.servers = x:1\nb.bootstrap.servers = y:1\na->c.enabled = true\n", ":4: a->c.enabled"),
    ("clusters = a, b\na.bootstrap.servers = x:1\nb.bootstrap.servers = y:1\na->b.enabled = true\n"
     "replication.record.lag.metric.refresh.interval = soon\n", ":5: replication.record.lag.metric.refresh.interval"),
    ("clusters = a, b\na.bootstrap.servers = x:1\nb.bootstrap.servers = y:1\na->b.enabled = true\n"
     "mirrorlag.http.listner = 0.0.0.0:1\n", "did you mean mirrorlag.http.listener"),
])
def test_bad_config_is_one_line_and_exit_2_or_unknown_for_check(tmp_path, content, expected):
    """`run` exits 2; `check` 3, UNKNOWN to Nagios (which reads 2 as CRITICAL), the message on its status line."""
    config = tmp_path / "bad.properties"
    config.write_text(content)
    for command, status in (("run", 2), ("check", 3)):
        result = mirrorlag(command, "--config", str(config))
        assert result.returncode == status
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
        assert str(config) in lines[0] and expected in lines[0]
    assert result.stdout == f"MIRRORLAG UNKNOWN - {lines[0].removeprefix('mirrorlag: error: ')}\n"


def test_missing_file_is_one_line_and_unknown(tmp_path):
    result = mirrorlag("check", "--config", str(tmp_path / "nope.properties"))
    assert result.returncode == 3
    assert len(result.stderr.strip().splitlines()) == 1 and "nope.properties" in result.stderr
    assert result.stdout.startswith("MIRRORLAG UNKNOWN - ") and "nope.properties" in result.stdout


@pytest.mark.parametrize("args", [("--timeout", "soon"), ("--warning", "20:10"), ("--no-such-option",), ()])
def test_a_usage_error_of_check_is_unknown(tmp_path, args):
    config = tmp_path / "mm2.properties"
    config.write_text("clusters = a, b\na.bootstrap.servers = x:1\nb.bootstrap.servers = y:1\na->b.enabled = true\n")
    result = mirrorlag("check", *(("--config", str(config)) if args else ()), *args)
    assert result.returncode == 3, result.stdout + result.stderr
    assert result.stdout.startswith("MIRRORLAG UNKNOWN - usage: ") and result.stdout.count("\n") == 1, result.stdout


def test_secrets_never_printed(tmp_path):
    config = tmp_path / "secret.properties"
    config.write_text(
        "clusters = a, b\na.bootstrap.servers = x:1\nb.bootstrap.servers = y:1\na->b.enabled = true\n"
        "a.ssl.key.password = hunter2-secret\n"
        "a.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\";\n"
    )
    result = mirrorlag("check", "--config", str(config))
    assert result.returncode == 3, result.stderr  # UNKNOWN: cluster a does not resolve
    assert "hunter2" not in result.stderr + result.stdout
