"""A topic deleted and created again (issue 23 case 5), on real brokers: its topic ID changes
(KIP-516), which SourceCluster.discover reports, and `mirrorlag run` drops the old log's LRO: the
partition reads RESET at the poll that sees the new log, then UNKNOWN, never IN_SYNC on the old
LRO and with no record lag exported, until evidence about the new log arrives. Offset syncs are
written by hand (the mirror is down: no new sync after the topic is recreated)."""

from __future__ import annotations

import os
import signal
import time

import pytest
from confluent_kafka import IsolationLevel

from mirrorlag.config import load_settings
from mirrorlag.embedded import free_port
from mirrorlag.formats import OffsetSync
from mirrorlag.kafka.source import SourceCluster, make_admin
from tests.conftest import write_properties
from tests.helpers import eventually, running_sidecar, scrape, status

pytestmark = pytest.mark.integration

SYNC_TOPIC = "mm2-offset-syncs.dst.internal"  # on the source cluster: offset-syncs.topic.location=source


def test_discovery_names_a_topic_whose_id_changed(tmp_path, clusters, topic_name):
    clusters.create_topic(topic_name, 2)
    settings = load_settings([write_properties(tmp_path / "mm2.properties", clusters, f"src->dst.topics = {topic_name}\n")])
    source = SourceCluster("src", make_admin(settings.clusters["src"], 10.0), settings.flows, 10.0, 100,
                           IsolationLevel.READ_UNCOMMITTED)
    assert source.discover()[settings.flows[0].id] == ((topic_name, range(2)),)
    assert source.recreated == frozenset()
    assert source.discover()[settings.flows[0].id] == ((topic_name, range(2)),)
    assert source.recreated == frozenset()  # same topic, same ID
    clusters.delete_topic(topic_name)
    clusters.create_topic(topic_name, 2)
    assert source.discover()[settings.flows[0].id] == ((topic_name, range(2)),)
    assert source.recreated == frozenset({topic_name})
    source.discover()
    assert source.recreated == frozenset()
    assert source.metadata_errors == 0


def _partition(port: int, topic: str) -> dict:
    (row,) = [r for r in status(port)["partitions"] if r["topic"] == topic]
    return row


# The new log's LEO went back: the poll that sees it reads the topic's ID at once, with the default
# metadata max age (a minute). It went up: its topic ID tells it at the next metadata read, within
# the max age (shortened here) and one poll; until then the old log's evidence stands.
@pytest.mark.parametrize("new_records, max_age_ms", [(150, 3000), (30, None)], ids=["leo-went-up", "leo-went-back"])
def test_a_recreated_topic_reads_reset_then_unknown_without_the_old_lro(tmp_path, clusters, topic_name, new_records,
                                                                        max_age_ms):
    clusters.create_topic(topic_name, 1)
    clusters.produce(topic_name, {0: 100})
    try:
        clusters.create_topic(SYNC_TOPIC, 1)
    except Exception:
        pass  # shared across tests; topics differ per test
    clusters.write_offset_syncs(SYNC_TOPIC, [OffsetSync(topic_name, 0, 99, 99)])  # fully copied
    port = free_port()
    config = write_properties(tmp_path / "mm2.properties", clusters, f"src->dst.topics = {topic_name}\n"
                              "replication.record.lag.metric.refresh.interval = 1000\n"
                              + (f"mirrorlag.metadata.max.age.ms = {max_age_ms}\n" if max_age_ms else ""), port=port)
    log = tmp_path / "sidecar.log"
    with running_sidecar(config, port=port, log=log) as proc:
        def in_sync() -> None:
            row = _partition(port, topic_name)
            assert (row["state"], row["lro"], row["record_lag"]) == ("IN_SYNC", 99, 0), row
        eventually(in_sync)

        # Deleted and created again with new records while the sidecar is between two polls
        # (stopped), and with the mirror down: no offset sync about the new log.
        os.kill(proc.pid, signal.SIGSTOP)
        try:
            clusters.delete_topic(topic_name)
            clusters.create_topic(topic_name, 1)
            clusters.produce(topic_name, {0: new_records})
        finally:
            os.kill(proc.pid, signal.SIGCONT)

        seen: list[tuple] = []
        first_seen = reset_at = None
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            row = _partition(port, topic_name)
            if row["leo"] == new_records:  # a poll after the topic was recreated
                now = time.monotonic()
                first_seen = first_seen or now
                if row["state"] == "RESET":
                    reset_at = reset_at or now
                samples = scrape(port)
                lag = [v for (name, labels), v in samples.items()
                       if name == "mirrorlag_replication_record_lag" and ("topic", topic_name) in labels]
                if reset_at is not None:
                    seen.append((row["state"], row["lro"], row["record_lag"], lag))
                if row["state"] == "UNKNOWN":
                    break
            time.sleep(0.1)
        states = [s[0] for s in seen]
        assert states and states[0] == "RESET" and states[-1] == "UNKNOWN", (seen, log.read_text()[-3000:])
        assert "IN_SYNC" not in states, seen
        assert first_seen is not None and reset_at is not None
        # At the first poll that sees the new log, or within the max age and a poll (and slack).
        assert reset_at - first_seen <= (0 if max_age_ms is None else max_age_ms / 1000 + 1.5), reset_at - first_seen
        # No record lag while the old LRO is the only evidence, exported or in /status; after the
        # RESET poll the old LRO is gone.
        assert all(record_lag is None and lag == [] for _, _, record_lag, lag in seen), seen
        assert all(lro is None for state, lro, _, _ in seen if state == "UNKNOWN"), seen

        # It stays UNKNOWN (the old LRO does not come back), until the mirror says something new.
        time.sleep(2.2)
        row = _partition(port, topic_name)
        assert (row["state"], row["lro"], row["record_lag"]) == ("UNKNOWN", None, None), row
        clusters.write_offset_syncs(SYNC_TOPIC, [OffsetSync(topic_name, 0, new_records - 1, 7)])

        def caught_up() -> None:
            row = _partition(port, topic_name)
            assert (row["state"], row["lro"], row["record_lag"]) == ("IN_SYNC", new_records - 1, 0), row
        eventually(caught_up)
