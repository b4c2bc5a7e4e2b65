"""mirrorlag beside a mirror it shares no process with: only the brokers and the properties file.

The mirror is `mirrorlag mirror`, which writes MM2's topics byte for byte; the sidecar reads a
plain mm2.properties (no mirrorlag keys) exactly as it would beside a stock MirrorMaker 2.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from mirrorlag.embedded import free_port
from mirrorlag.formats import OffsetSync
from tests.conftest import Clusters
from tests.helpers import eventually, labels, mirrorlag, running_sidecar, scrape

pytestmark = pytest.mark.integration


def plain_mm2_properties(path: Path, clusters: Clusters, src: str, dst: str, topic: str) -> Path:
    path.write_text(
        f"clusters = {src}, {dst}\n"
        f"{src}.bootstrap.servers = {clusters.source}\n"
        f"{dst}.bootstrap.servers = {clusters.target}\n"
        f"{src}->{dst}.enabled = true\n"
        f"{src}->{dst}.topics = {topic}\n"
        f"{dst}.offset.flush.interval.ms = 500\n"  # a worker key: MM2 reads it from the target's keys
    )
    return path


def sidecar_properties(path: Path, port: int, extra: str = "") -> Path:
    path.write_text(f"mirrorlag.http.listener = 127.0.0.1:{port}\n"
                    f"replication.record.lag.metric.refresh.interval = 300\n{extra}")
    return path


def check_rows(config: Path, topic: str, *args: str) -> tuple[int, dict[int, dict]]:
    result = mirrorlag("check", "--config", str(config), "--json", *args)
    assert result.returncode in (0, 1, 2), result.stderr
    return result.returncode, {r["partition"]: r for r in json.loads(result.stdout) if r["topic"] == topic}


def test_run_and_check_on_plain_mm2_properties_beside_a_mirror(tmp_path, own_clusters):
    tag = uuid.uuid4().hex[:8]
    src, dst, topic = f"s{tag}", f"d{tag}", f"orders-{tag}"
    own_clusters.create_topic(topic, 2)
    own_clusters.produce(topic, {0: 20, 1: 20})
    config = plain_mm2_properties(tmp_path / "mm2.properties", own_clusters, src, dst, topic)

    with open(tmp_path / "mirror.log", "ab") as log:
        mirror = subprocess.Popen([sys.executable, "-m", "mirrorlag", "mirror", "--config", str(config)],
                                  stdout=log, stderr=log)
    try:
        def all_copied() -> None:
            code, rows = check_rows(config, topic, "--timeout", "2")
            assert code == 0 and [(rows[p]["leo"], rows[p]["record_lag"]) for p in (0, 1)] == [(20, 0), (20, 0)]
            # The first heartbeat is emitted a second after start and copied after it: on a loaded
            # machine the records can all be across before it, and a stall then leaves the flow
            # with no heartbeat at all (its age absent, not growing).
            assert own_clusters.end_offset(f"{src}.heartbeats", 0, "target") >= 1
        eventually(all_copied, timeout=30)

        mirror.send_signal(signal.SIGUSR1)  # the mirror stalls
        own_clusters.produce(topic, {0: 7, 1: 3})
        code, rows = check_rows(config, topic, "--timeout", "2")
        assert code == 2  # CRITICAL: STALLED
        assert [(rows[p]["leo"], rows[p]["lro"], rows[p]["record_lag"], rows[p]["state"]) for p in (0, 1)] == [
            (27, 19, 7, "STALLED"), (23, 19, 3, "STALLED")]

        port = free_port()
        extra = sidecar_properties(tmp_path / "sidecar.properties", port)
        with running_sidecar(config, extra, port=port, log=tmp_path / "sidecar.log"):
            def lagging() -> dict:
                samples = scrape(port)
                lag = {p: samples[("mirrorlag_replication_record_lag",
                                   labels(source=src, target=dst, topic=topic, partition=p))] for p in (0, 1)}
                assert lag == {0: 7, 1: 3}
                age = samples.get(("mirrorlag_flow_heartbeat_age_seconds", labels(source=src, target=dst)))
                assert age is not None and age > 2  # heartbeats are still emitted into the source, but no longer copied
                return samples
            eventually(lagging)

            mirror.send_signal(signal.SIGUSR2)  # and recovers
            def caught_up() -> None:
                samples = scrape(port)
                for p in (0, 1):
                    key = labels(source=src, target=dst, topic=topic, partition=p)
                    assert samples[("mirrorlag_replication_record_lag", key)] == 0
                age = samples.get(("mirrorlag_flow_heartbeat_age_seconds", labels(source=src, target=dst)))
                assert age is not None and age < 3
                for feed in ("offset-syncs", "connect-offsets", "heartbeats"):
                    present = [v for (name, lab), v in samples.items()
                               if name == "mirrorlag_feed_topic_present" and ("feed", feed) in lab]
                    assert present and all(v == 1 for v in present), feed
            eventually(caught_up)
    finally:
        mirror.send_signal(signal.SIGTERM)
        mirror.wait(timeout=10)


def hand_written_flow(tmp_path: Path, clusters: Clusters, records: int) -> tuple[Path, str, str, str, str]:
    """A flow with fresh aliases on the shared brokers, and the name of its offset-syncs topic."""
    tag = uuid.uuid4().hex[:8]
    src, dst, topic = f"s{tag}", f"d{tag}", f"t-{tag}"
    clusters.create_topic(topic, 1)
    clusters.produce(topic, {0: records})
    config = plain_mm2_properties(tmp_path / "mm2.properties", clusters, src, dst, topic)
    return config, src, dst, topic, f"mm2-offset-syncs.{dst}.internal"


def test_an_older_sync_after_a_newer_one_is_a_rewind_and_the_lag_grows(tmp_path, clusters):
    config, src, dst, topic, sync_topic = hand_written_flow(tmp_path, clusters, records=50)
    clusters.create_topic(sync_topic, 1)
    clusters.write_offset_syncs(sync_topic, [OffsetSync(topic, 0, 49, 49)])
    port = free_port()
    extra = sidecar_properties(tmp_path / "sidecar.properties", port, "mirrorlag.lro.feeds = offset-syncs\n")
    key = labels(source=src, target=dst, topic=topic, partition=0)
    with running_sidecar(config, extra, port=port, log=tmp_path / "sidecar.log"):
        eventually(lambda: _assert_sample(port, "mirrorlag_partition_state", key + (("state", "IN_SYNC"),), 1))
        clusters.write_offset_syncs(sync_topic, [OffsetSync(topic, 0, 20, 20)])  # MM2 restarted at 21

        def rewound() -> None:
            samples = scrape(port)
            assert samples[("mirrorlag_replication_record_lag", key)] == 29
            assert samples[("mirrorlag_partition_state", tuple(sorted(key + (("state", "REWIND"),))))] == 1
            assert samples[("mirrorlag_lro_rewinds_total", labels(source=src, target=dst))] == 1
        eventually(rewound)


def test_a_feed_topic_that_appears_late_and_garbage_in_it(tmp_path, clusters):
    config, src, dst, topic, sync_topic = hand_written_flow(tmp_path, clusters, records=10)
    port = free_port()
    extra = sidecar_properties(tmp_path / "sidecar.properties", port, "mirrorlag.lro.feeds = offset-syncs\n")
    key = labels(source=src, target=dst, topic=topic, partition=0)
    present = ("mirrorlag_feed_topic_present", labels(feed="offset-syncs", cluster=src, topic=sync_topic))
    with running_sidecar(config, extra, port=port, log=tmp_path / "sidecar.log"):
        samples = scrape(port)
        assert samples[present] == 0
        assert samples[("mirrorlag_partition_state", tuple(sorted(key + (("state", "UNKNOWN"),))))] == 1
        assert ("mirrorlag_replication_record_lag", key) not in samples  # unknown, not 0

        clusters.create_topic(sync_topic, 1)
        from confluent_kafka import Producer
        producer = Producer({"bootstrap.servers": clusters.source, "batch.num.messages": 1, "linger.ms": 0})
        for key_bytes, value in ((b"\x00", b"junk"), (None, b"x" * 16), (b"\x00\x01t\x00", b"short")):
            producer.produce(sync_topic, key=key_bytes, value=value, partition=0)
        assert producer.flush(10) == 0
        clusters.write_offset_syncs(sync_topic, [OffsetSync(topic, 0, 6, 6)])

        def picked_up() -> None:
            samples = scrape(port)
            assert samples[present] == 1
            assert samples[("mirrorlag_feed_bad_records_total", labels(feed="offset-syncs", cluster=src))] == 3
            assert samples[("mirrorlag_replication_record_lag", key)] == 3
        eventually(picked_up)


def _assert_sample(port: int, name: str, label_items: tuple, value: float) -> None:
    assert scrape(port).get((name, tuple(sorted(label_items)))) == value
