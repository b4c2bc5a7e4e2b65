"""SourceCluster.discover without a broker: which metadata answers drop a topic (only "does not
exist"), which keep it with the partitions it had (any other topic-level error, counted), and
which topics were deleted and created again (their topic ID changed, KIP-516)."""

from __future__ import annotations

import concurrent.futures
from pathlib import Path
from types import SimpleNamespace

from confluent_kafka import IsolationLevel, KafkaError, KafkaException

from mirrorlag.config import load_settings
from mirrorlag.kafka.source import SourceCluster


def _future(value=None, error: KafkaError | None = None) -> concurrent.futures.Future:
    future: concurrent.futures.Future = concurrent.futures.Future()
    if error is not None:
        future.set_exception(KafkaException(error))
    else:
        future.set_result(value)
    return future


class FakeAdmin:
    """Answers metadata and DescribeTopics from `topics`: name -> (partitions, error, topic ID)."""

    def __init__(self) -> None:
        self.topics: dict[str, tuple[int, KafkaError | None, str]] = {}
        self.described: list[list[str]] = []

    def list_topics(self, timeout=None):
        return SimpleNamespace(topics={
            name: SimpleNamespace(partitions={} if error else dict.fromkeys(range(n)), error=error)
            for name, (n, error, _) in self.topics.items()})

    def describe_topics(self, collection, request_timeout=None):
        names = list(collection.topic_names)
        self.described.append(names)
        out = {}
        for name in names:
            if name not in self.topics:
                out[name] = _future(error=KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))
            else:
                out[name] = _future(SimpleNamespace(topic_id=self.topics[name][2]))
        return out


def _source(tmp_path: Path, admin: FakeAdmin) -> SourceCluster:
    config = tmp_path / "mm2.properties"
    config.write_text("clusters = src, dst\nsrc.bootstrap.servers = 127.0.0.1:9\n"
                      "dst.bootstrap.servers = 127.0.0.1:9\nsrc->dst.enabled = true\nsrc->dst.topics = a.*\n")
    settings = load_settings([config])
    return SourceCluster("src", admin, settings.flows, 1.0, 10, IsolationLevel.READ_UNCOMMITTED)  # type: ignore[arg-type]


def _topics(source: SourceCluster) -> dict[str, int]:
    (topology,) = source.discover().values()
    return {topic: len(numbers) for topic, numbers in topology}


def test_a_topic_level_error_keeps_the_topic_with_its_partitions_and_is_counted(tmp_path):
    admin = FakeAdmin()
    admin.topics = {"a1": (3, None, "id1"), "a2": (2, None, "id2"), "other": (1, None, "id3")}
    source = _source(tmp_path, admin)
    assert _topics(source) == {"a1": 3, "a2": 2}
    assert source.metadata_errors == 0
    admin.topics["a1"] = (0, KafkaError(KafkaError.LEADER_NOT_AVAILABLE), "id1")
    admin.topics["a2"] = (0, KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED), "id2")
    assert _topics(source) == {"a1": 3, "a2": 2}
    assert source.metadata_errors == 2
    assert source.recreated == frozenset()
    # A topic never seen before with an error has no partitions to keep (and is counted).
    admin.topics["a3"] = (0, KafkaError(KafkaError.LEADER_NOT_AVAILABLE), "id4")
    assert _topics(source) == {"a1": 3, "a2": 2}
    assert source.metadata_errors == 5


def test_only_unknown_topic_or_partition_or_absence_drops_a_topic(tmp_path):
    admin = FakeAdmin()
    admin.topics = {"a1": (3, None, "id1"), "a2": (2, None, "id2")}
    source = _source(tmp_path, admin)
    assert _topics(source) == {"a1": 3, "a2": 2}
    admin.topics["a1"] = (0, KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART), "id1")
    del admin.topics["a2"]
    assert _topics(source) == {}
    assert source.metadata_errors == 0
    # Back, after an error in between: nothing of the old partitions was kept.
    admin.topics["a1"] = (0, KafkaError(KafkaError.LEADER_NOT_AVAILABLE), "id1")
    assert _topics(source) == {}


def test_a_changed_topic_id_names_the_topic_recreated_once(tmp_path):
    admin = FakeAdmin()
    admin.topics = {"a1": (3, None, "id1"), "a2": (2, None, "id2"), "other": (1, None, "id3")}
    source = _source(tmp_path, admin)
    _topics(source)
    assert source.recreated == frozenset()
    assert sorted(n for names in admin.described for n in names) == ["a1", "a2"]  # replicated topics only
    admin.topics["a1"] = (3, None, "id1-new")
    admin.topics["other"] = (1, None, "id3-new")
    assert _topics(source) == {"a1": 3, "a2": 2}
    assert source.recreated == frozenset({"a1"})
    _topics(source)
    assert source.recreated == frozenset()


def test_a_topic_id_not_read_is_compared_at_the_next_discovery_that_reads_it(tmp_path):
    admin = FakeAdmin()
    admin.topics = {"a1": (3, None, "id1")}
    source = _source(tmp_path, admin)
    _topics(source)
    real = admin.describe_topics
    admin.describe_topics = lambda collection, request_timeout=None: {  # type: ignore[method-assign]
        name: _future(error=KafkaError(KafkaError._TIMED_OUT)) for name in collection.topic_names}
    admin.topics["a1"] = (3, None, "id1-new")
    assert _topics(source) == {"a1": 3}
    assert source.recreated == frozenset()
    admin.describe_topics = real  # type: ignore[method-assign]
    _topics(source)
    assert source.recreated == frozenset({"a1"})


def test_a_large_estate_reads_its_topic_ids_a_slice_at_a_time(tmp_path, monkeypatch):
    """Past TOPIC_ID_PARTITIONS_PER_DISCOVERY partitions each discovery reads the IDs of the next
    topics in turn (new topics' always), so every topic is read within a few discoveries and a
    recreated one is told when its turn comes."""
    monkeypatch.setattr("mirrorlag.kafka.source.TOPIC_ID_PARTITIONS_PER_DISCOVERY", 4)
    admin = FakeAdmin()
    admin.topics = {"a1": (3, None, "id1"), "a2": (2, None, "id2"), "a3": (3, None, "id3"), "a4": (1, None, "id4")}
    source = _source(tmp_path, admin)
    _topics(source)
    assert admin.described == [["a1", "a2", "a3", "a4"]]  # the first discovery: all new
    admin.described.clear()
    admin.topics["a4"] = (1, None, "id4-new")
    _topics(source)
    assert admin.described == [["a1", "a2"]] and source.recreated == frozenset()  # 5 partitions: the budget reached
    admin.topics["a5"] = (2, None, "id5")
    _topics(source)
    assert admin.described[1:] == [["a3", "a4"], ["a5"]]  # the next in turn, then the new topic
    assert source.recreated == frozenset({"a4"})
    _topics(source)
    assert admin.described[3:] == [["a5", "a1"]]  # from where it stopped, round again
    assert source.recreated == frozenset()
