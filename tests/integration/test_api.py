"""The Python API against real brokers: known records, a tracker fed by hand, exact lag."""

from __future__ import annotations

import pytest

from mirrorlag import ReplicationTracker
from mirrorlag.config import load_settings
from mirrorlag.model import PartitionKey, State
from mirrorlag.sidecar.service import Sidecar
from tests.conftest import write_properties

pytestmark = pytest.mark.integration


def make_sidecar(tmp_path, clusters, topic, tracker, extra=""):
    config = write_properties(tmp_path / "mm2.properties", clusters, f"src->dst.topics = {topic}.*\n{extra}")
    return Sidecar(load_settings([config]), trackers=[tracker], serve_http=False)


def test_exact_record_lag_from_the_callback_feed(tmp_path, clusters, topic_name):
    clusters.create_topic(topic_name, 3)
    clusters.produce(topic_name, {0: 10, 1: 4, 2: 0})
    tracker = ReplicationTracker("src", "dst")
    sidecar = make_sidecar(tmp_path, clusters, topic_name, tracker)

    tracker.replicated(topic_name, 0, 6, 100)  # offsets 0..6 copied, 7..9 waiting
    tracker.replicated(topic_name, 1, 3, 100)  # all 4 copied
    rows = sidecar.poll().by_key()

    p0, p1, p2 = (rows[PartitionKey("src", "dst", topic_name, p)] for p in range(3))
    assert (p0.leo, p0.lro, p0.record_lag, p0.state) == (10, 6, 3, State.IN_SYNC)
    assert (p1.leo, p1.lro, p1.record_lag, p1.state) == (4, 3, 0, State.IN_SYNC)
    assert (p2.leo, p2.lro, p2.record_lag, p2.state) == (0, None, 0, State.IN_SYNC)  # nothing to copy
    assert p0.lro_feed == "callback"
    assert (p0.record_lag_min, p0.record_lag_max, p0.record_lag_avg) == (3, 3, 3)

    tracker.replicated(topic_name, 0, 9, 100)
    clusters.produce(topic_name, {1: 2})
    rows = sidecar.poll().by_key()
    p0, p1 = rows[PartitionKey("src", "dst", topic_name, 0)], rows[PartitionKey("src", "dst", topic_name, 1)]
    assert (p0.record_lag, p1.leo, p1.record_lag) == (0, 6, 2)
    assert (p0.record_lag_min, p0.record_lag_max, p0.record_lag_avg) == (0, 3, 1.5)


def test_new_topics_appear_and_deleted_ones_go(tmp_path, clusters, topic_name):
    tracker = ReplicationTracker("src", "dst")
    # Metadata at every poll: a topic created is otherwise seen within the max age (test_metadata_cadence).
    sidecar = make_sidecar(tmp_path, clusters, topic_name, tracker, "mirrorlag.metadata.max.age.ms = 0\n")
    assert sidecar.poll().rows == ()

    clusters.create_topic(topic_name, 2)
    tracker.replicated(topic_name, 0, 0)
    keys = [row.key for row in sidecar.poll().rows]
    assert keys == [PartitionKey("src", "dst", topic_name, p) for p in (0, 1)]

    clusters.delete_topic(topic_name)
    gone = sidecar.poll().rows
    assert {row.state for row in gone} == {State.GONE}
    assert sidecar.poll().rows == ()
    assert tracker.offsets() == {}  # forgotten with its partition
    assert len(sidecar.poller.cache) == 0


def test_an_unreachable_source_is_unknown_not_caught_up(tmp_path, clusters, topic_name):
    from mirrorlag.embedded import EmbeddedBroker

    with EmbeddedBroker("doomed") as broker:
        config = tmp_path / "mm2.properties"
        config.write_text(
            f"clusters = src, dst\nsrc.bootstrap.servers = {broker.bootstrap_servers}\n"
            f"dst.bootstrap.servers = {clusters.target}\nsrc->dst.enabled = true\n"
            "mirrorlag.request.timeout.ms = 1500\n"
        )
        admin_clusters = type(clusters)(broker.bootstrap_servers, clusters.target)
        admin_clusters.create_topic(topic_name, 1)
        admin_clusters.produce(topic_name, {0: 5})
        tracker = ReplicationTracker("src", "dst")
        sidecar = Sidecar(load_settings([config]), trackers=[tracker], serve_http=False)
        tracker.replicated(topic_name, 0, 4)
        (row,) = sidecar.poll().rows
        assert (row.record_lag, row.state) == (0, State.IN_SYNC)
        broker.stop()
        (row,) = sidecar.poll().rows  # topology kept, LEO unknown: never "caught up" on stale data
        assert (row.leo, row.record_lag, row.state) == (None, None, State.UNKNOWN)
        assert sidecar.poller.stats.poll_errors_total == {"src": 1}
