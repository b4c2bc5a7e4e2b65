"""ListOffsets through the C call behind AdminClient.list_offsets (kafka/source.py), against a real
broker: it must answer exactly as the public wrapper does, so an upgrade of confluent-kafka that
changes the call fails here rather than in a sidecar."""

from __future__ import annotations

import pytest
from confluent_kafka import IsolationLevel, TopicPartition
from confluent_kafka.admin import OffsetSpec

from mirrorlag.config import load_settings
from mirrorlag.kafka.source import SourceCluster, SourceUnavailable, make_admin, partitions_of
from mirrorlag.model import PartitionKey
from tests.conftest import write_properties

pytestmark = pytest.mark.integration


def source_cluster(tmp_path, clusters, topic, chunk_size=2, isolation=IsolationLevel.READ_UNCOMMITTED):
    settings = load_settings([write_properties(tmp_path / "mm2.properties", clusters, f"src->dst.topics = {topic}\n")])
    return SourceCluster(alias="src", admin=make_admin(settings.clusters["src"], 10.0), flows=settings.flows,
                         timeout_s=10.0, chunk_size=chunk_size, isolation=isolation)


def public_offsets(source: SourceCluster, partitions, spec) -> dict[tuple[str, int], int]:
    futures = source.admin.list_offsets({TopicPartition(t, p): spec() for t, p in partitions},
                                        isolation_level=source.isolation, request_timeout=10)
    return {(tp.topic, tp.partition): f.result(10).offset for tp, f in futures.items()}


@pytest.mark.parametrize("isolation", [IsolationLevel.READ_UNCOMMITTED, IsolationLevel.READ_COMMITTED])
def test_end_and_start_offsets_match_the_public_wrapper(tmp_path, clusters, topic_name, isolation):
    clusters.create_topic(topic_name, 5)
    clusters.produce(topic_name, {0: 7, 1: 3, 2: 0, 3: 1, 4: 12})
    source = source_cluster(tmp_path, clusters, topic_name, isolation=isolation)
    topology = source.discover()[source.flows[0].id]
    assert topology == ((topic_name, range(5)),)
    partitions = partitions_of(topology)

    ends = source.end_offsets(partitions)  # three chunks of at most two partitions
    assert ends == {(topic_name, 0): 7, (topic_name, 1): 3, (topic_name, 2): 0, (topic_name, 3): 1, (topic_name, 4): 12}
    assert ends == public_offsets(source, partitions, OffsetSpec.latest)
    starts = source.start_offsets(partitions)
    assert starts == dict.fromkeys(partitions, 0) == public_offsets(source, partitions, OffsetSpec.earliest)
    # The poller asks with its PartitionKeys: the answers are keyed by them.
    keys = [PartitionKey("src", "dst", topic, p) for topic, p in partitions]
    assert source.end_offsets(keys) == dict(zip(keys, ends.values()))


def test_a_partition_the_broker_refuses_maps_to_none_and_the_rest_are_answered(tmp_path, clusters, topic_name):
    clusters.create_topic(topic_name, 2)
    clusters.produce(topic_name, {0: 4, 1: 2})
    source = source_cluster(tmp_path, clusters, topic_name, chunk_size=10)
    missing = (f"{topic_name}-absent", 0)
    offsets = source.end_offsets([(topic_name, 0), missing, (topic_name, 1)])
    assert offsets == {(topic_name, 0): 4, missing: None, (topic_name, 1): 2}


def test_nothing_answered_is_source_unavailable_naming_the_cluster(tmp_path, clusters, topic_name):
    source = source_cluster(tmp_path, clusters, topic_name)
    with pytest.raises(SourceUnavailable, match=r"^end offsets from cluster src: "):
        source.end_offsets([(f"{topic_name}-absent", 0), (f"{topic_name}-absent", 1)])
    assert source.end_offsets([]) == {}


def test_offsets_asked_before_the_metadata_are_used_and_only_partitions_they_lack_are_asked_after(
        tmp_path, clusters, topic_name):
    clusters.create_topic(topic_name, 3)
    clusters.produce(topic_name, {0: 2, 1: 1, 2: 1})
    source = source_cluster(tmp_path, clusters, topic_name)
    pending = source.request_end_offsets([(topic_name, 0), (topic_name, 2)])
    assert pending.collect() == ({(topic_name, 0): 2, (topic_name, 2): 1}, None)  # answered by now
    clusters.produce(topic_name, {0: 5, 1: 5})

    # (topic, 0) comes from the answer in hand (2, not 7); (topic, 1) is asked now; (topic, 2), gone
    # from the partitions wanted, is left out.
    assert source.end_offsets([(topic_name, 0), (topic_name, 1)], pending) == {(topic_name, 0): 2, (topic_name, 1): 6}
