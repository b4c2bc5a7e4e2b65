"""The source probe at LRO + 1 against a real broker: plain records, a committed transaction
(whose commit marker takes the last offset), many partitions in one call, and brokers that fail."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from mirrorlag.embedded import free_port
from mirrorlag.kafka.probe import SourceProbe
from mirrorlag.model import PartitionKey
from tests.helpers import produce_records

pytestmark = pytest.mark.integration

BASE_MS = 1_700_000_000_000
ISOLATIONS = ["read_uncommitted", "read_committed"]


def key(topic: str, partition: int = 0) -> PartitionKey:
    return PartitionKey("src", "dst", topic, partition)


def end_offset(bootstrap: str, topic: str, partition: int, isolation: str) -> int:
    """ListOffsets latest as the poller reads it, at `isolation`."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "mirrorlag-tests", "isolation.level": isolation})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=5, cached=False)[1]
    finally:
        consumer.close()


@pytest.fixture
def probes(clusters):
    made: list[SourceProbe] = []

    def make(isolation: str = "read_uncommitted", **kwargs) -> SourceProbe:
        made.append(SourceProbe({"bootstrap.servers": clusters.source}, isolation, **kwargs))
        return made[-1]

    yield make
    for probe in made:
        probe.close()


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_plain_records_answer_the_timestamp_of_the_record_at_the_offset(clusters, topic_name, probes, isolation):
    clusters.create_topic(topic_name, 1)
    produce_records(clusters.source, topic_name, 0, [BASE_MS + i * 1000 for i in range(5)])
    leo = end_offset(clusters.source, topic_name, 0, isolation)
    assert leo == 5
    probe = probes(isolation)
    k = key(topic_name)
    assert probe.probe([(k, 2, leo)]) == {k: (BASE_MS + 2000) / 1000}
    assert probe.probe([(k, 0, leo)]) == {k: BASE_MS / 1000}  # the consumer is reused
    assert probe.probe([(k, 4, leo)]) == {k: (BASE_MS + 4000) / 1000}
    assert probe.probe([(k, 5, leo)]) == {k: None}  # nothing past the end: not fetched
    assert probe.stats.probes_total == 3 and probe.stats.errors_total == 0
    assert probe.probe([(k, 2, leo)]) == {k: (BASE_MS + 2000) / 1000}
    assert probe.stats.probes_total == 3 and probe.stats.cache_hits_total == 1


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_a_committed_transactions_marker_is_no_record_to_copy(clusters, topic_name, probes, isolation):
    clusters.create_topic(topic_name, 1)
    produce_records(clusters.source, topic_name, 0, [BASE_MS, BASE_MS + 1000])
    produce_records(clusters.source, topic_name, 0, [BASE_MS + 10_000 + i * 1000 for i in range(3)], transactional=True)
    # As in Kafka: the two plain records at 0 and 1, the transaction's at 2, 3 and 4, its commit
    # marker at 5; latest (high watermark, and LSO once committed) is 6.
    leo = end_offset(clusters.source, topic_name, 0, isolation)
    assert leo == 6
    probe = probes(isolation)
    k = key(topic_name)
    # MM2 copied up to 4 (the last data record): LRO + 1 = 5 = LEO - 1, only the marker is left.
    assert probe.probe([(k, 5, leo)]) == {k: None}
    assert probe.probe([(k, 4, leo)]) == {k: (BASE_MS + 12_000) / 1000}
    assert probe.probe([(k, 2, leo)]) == {k: (BASE_MS + 10_000) / 1000}
    assert probe.stats.errors_total == 0

    # Records appended after the marker: from 5 the first data record is the new one at 6.
    produce_records(clusters.source, topic_name, 0, [BASE_MS + 20_000])
    assert end_offset(clusters.source, topic_name, 0, isolation) == 7
    assert probe.probe([(k, 5, leo)]) == {k: None}  # cached: [5, 6) held the marker only
    assert probe.probe([(k, 5, 7)]) == {k: (BASE_MS + 20_000) / 1000}


@pytest.mark.parametrize("chunk", [5000, 7])  # one assignment, or six in turn
def test_many_partitions_in_one_call_each_answered_as_its_log_says(clusters, topic_name, probes, chunk):
    n = 40
    clusters.create_topic(topic_name, n)
    for p in range(n):
        produce_records(clusters.source, topic_name, p, [BASE_MS + p * 1000 + i for i in range(p % 3)])
    produce_records(clusters.source, f"{topic_name}", 0, [BASE_MS - 5000], value=b"x" * 20_000)  # a big record
    probe = probes(max_fetches=n)
    probe.fetcher.CHUNK_PARTITIONS = chunk
    requests = [(key(topic_name, p), 0, p % 3) for p in range(1, n)] + [(key(topic_name, 0), 0, 1)]
    clusters.create_topic(f"{topic_name}-empty", 1)
    past_end = (key(f"{topic_name}-empty"), 5, 9)  # past an empty log's end: holds the call ~0.5 s
    answer = probe.probe(requests + [past_end])
    expected = {key(topic_name, p): (BASE_MS + p * 1000) / 1000 if p % 3 else None for p in range(1, n)}
    assert answer == {**expected, key(topic_name, 0): (BASE_MS - 5000) / 1000}
    # Fetched only where the range is not empty (p % 3 == 0 asks [0, 0)).
    fetched = sum(1 for p in range(n) if p % 3 or p == 0) + 1
    assert probe.stats.probes_total == fetched
    assert probe.stats.errors_total == 1
    # Partitions answered while another held the call were paused: the next call reads them again.
    again = [(key(topic_name, p), 1, 2) for p in range(n) if p % 3 == 2]
    assert probe.probe(again) == {k: (BASE_MS + k.partition * 1000 + 1) / 1000 for k, _, _ in again}
    assert probe.stats.probes_total == fetched + len(again)
    assert probe.stats.errors_total == 1


def test_partitions_the_broker_refuses_are_left_out_and_the_rest_answered(clusters, topic_name, probes):
    clusters.create_topic(topic_name, 2)
    produce_records(clusters.source, topic_name, 0, [BASE_MS, BASE_MS + 1])
    produce_records(clusters.source, topic_name, 1, [BASE_MS + 5])
    probe = probes(timeout_s=3.0)
    good, past_end, missing = key(topic_name, 1), key(topic_name, 0), key(f"{topic_name}-absent", 0)
    # From 7 on a log of 2 records (a topic that came back shorter than the LEO asked with): out
    # of range, never a read from somewhere else, and given up on without waiting the timeout.
    started = time.monotonic()
    assert probe.probe([(good, 0, 1), (past_end, 7, 9)]) == {good: (BASE_MS + 5) / 1000}
    assert time.monotonic() - started < 1.5
    assert probe.stats.errors_total == 1
    assert probe.stats.outcomes == {"answered": 1, "out_of_range": 1}
    # A topic that does not exist: no answer within the timeout.
    started = time.monotonic()
    assert probe.probe([(good, 0, 1), (missing, 0, 3)]) == {good: (BASE_MS + 5) / 1000}  # good: cached
    assert time.monotonic() - started < 3.0 + 1.0
    assert probe.stats.errors_total == 2
    unanswered = {r: n for r, n in probe.stats.outcomes.items() if r not in ("answered", "out_of_range", "cached")}
    assert sum(unanswered.values()) == 1 and set(unanswered) <= {"timeout", "error"}, probe.stats.outcomes
    # Not cached: asked again, fetched again, and the consumer still works.
    assert probe.probe([(past_end, 1, 2)]) == {past_end: (BASE_MS + 1) / 1000}
    assert probe.stats.probes_total == 4


def test_a_broker_that_is_not_there_answers_nothing_within_the_timeout():
    probe = SourceProbe({"bootstrap.servers": f"127.0.0.1:{free_port()}"}, timeout_s=1.0)
    try:
        started = time.monotonic()
        assert probe.probe([(key("t"), 0, 5), (key("t", 1), 2, 3)]) == {}
        assert time.monotonic() - started < 2.0
        assert probe.stats.errors_total == 2
        assert probe.stats.outcomes == {"timeout": 2}
        assert probe.probe([(key("t"), 0, 5)]) == {}
    finally:
        probe.close()
