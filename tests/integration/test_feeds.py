"""The connect-offsets and heartbeat feeds against real brokers, fed by hand-written records (the
bytes MM2 and Connect write), built from a properties file like the sidecar's.

The brokers are shared by the whole session, so each test uses fresh cluster aliases: the fixed
topic names derived from them (`mm2-offsets.<source>.internal`, `<source>.heartbeats`) are then
unique to the test. The shared `heartbeats` topic of the identity policy is told apart by the
heartbeats' aliases, which is exactly the feed's own filter.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Callable, TypeVar

import pytest
from confluent_kafka import KafkaException, Producer

from mirrorlag.config.loader import load_settings
from mirrorlag.config.settings import Settings
from mirrorlag.feeds.connect_offsets import ConnectOffsetsFeed, connect_offsets_feeds
from mirrorlag.feeds.heartbeats import HeartbeatFeed, heartbeat_feeds
from mirrorlag.formats import ConnectOffsetKey, Heartbeat, encode_connect_offset, encode_heartbeat
from mirrorlag.model import FlowId, PartitionKey
from tests.conftest import Clusters, write_properties

pytestmark = pytest.mark.integration

T = TypeVar("T")
Record = tuple[bytes | None, bytes | None]


def eventually(read: Callable[[], T], ok: Callable[[T], bool], timeout: float = 15) -> T:
    """Call `read` (one feed poll) until `ok` holds; a poll only drains what has already arrived."""
    deadline = time.monotonic() + timeout
    while True:
        value = read()
        if ok(value) or time.monotonic() > deadline:
            return value
        time.sleep(0.2)


def produce(clusters: Clusters, topic: str, records: list[Record], which: str = "target") -> None:
    """One record per batch (tansu's offset quirk, docs/design.md §8); keys partitioned like Connect's:
    the same key bytes always land in the same partition, so their order is kept."""
    producer = Producer({"bootstrap.servers": getattr(clusters, which), "batch.num.messages": 1, "linger.ms": 0})
    for key, value in records:
        producer.produce(topic, key=key, value=value)
    assert producer.flush(15) == 0


def create_topic(clusters: Clusters, topic: str, partitions: int = 1, which: str = "target") -> None:
    try:
        clusters.create_topic(topic, partitions, which=which)
    except KafkaException as exc:
        if "TOPIC_ALREADY_EXISTS" not in str(exc) and "already exists" not in str(exc).lower():
            raise


def fresh_flow(tmp_path: Path, clusters: Clusters, topic: str, extra: str = "") -> tuple[Settings, FlowId]:
    """Settings for one flow s<uuid> -> d<uuid> between the test brokers, mirroring `topic`."""
    tag = uuid.uuid4().hex[:8]
    source, target = f"s{tag}", f"d{tag}"
    path = tmp_path / "mm2.properties"
    path.write_text(
        f"clusters = {source}, {target}\n"
        f"{source}.bootstrap.servers = {clusters.source}\n"
        f"{target}.bootstrap.servers = {clusters.target}\n"
        f"{source}->{target}.enabled = true\n"
        f"{source}->{target}.topics = {topic}\n"
        f"mirrorlag.request.timeout.ms = 5000\n"
        f"{extra}"
    )
    return load_settings([path]), FlowId(source, target)


def offset_record(cluster: str, topic: str, partition: int, offset: int | None,
                  connector: str = "MirrorSourceConnector") -> Record:
    return encode_connect_offset(ConnectOffsetKey(connector, cluster, topic, partition), offset)


def only_feed(feeds: list[T]) -> T:
    assert len(feeds) == 1
    return feeds[0]


@pytest.fixture
def closing():
    """Close every feed a test opens, even when it fails."""
    opened: list[ConnectOffsetsFeed | HeartbeatFeed] = []
    yield opened.append
    for feed in opened:
        feed.close()


# --- connect-offsets -----------------------------------------------------------------------

def test_connect_offsets_exact_newest_wins_tombstone_and_garbage(tmp_path, clusters, topic_name, closing):
    settings, flow = fresh_flow(tmp_path, clusters, topic_name)
    offsets_topic = f"mm2-offsets.{flow.source}.internal"
    create_topic(clusters, offsets_topic, partitions=5)  # Connect's default is 25; several, anyway
    p = {i: PartitionKey(flow.source, flow.target, topic_name, i) for i in range(4)}
    produce(clusters, offsets_topic, [
        offset_record(flow.source, topic_name, 0, 4),
        offset_record(flow.source, topic_name, 1, 9),
        offset_record(flow.source, topic_name, 0, 6),
        # the LRO is the offset itself; 0 is "record 0 was copied", not "nothing"
        offset_record(flow.source, topic_name, 2, 0),
        # the other connectors of the same herder commit into the same topic
        (b'["MirrorCheckpointConnector",{"group":"g","partition":0,"topic":"%s"}]' % topic_name.encode(),
         b'{"offset":77}'),
        (b'["MirrorHeartbeatConnector",{"sourceClusterAlias":"%s","targetClusterAlias":"%s"}]'
         % (flow.source.encode(), flow.target.encode()), b'{"offset":0}'),
        # Jackson's order is a HashMap's, not ours: same partition, other field order, other bytes
        (b'["MirrorSourceConnector",{"topic":"%s","partition":3,"cluster":"%s"}]'
         % (topic_name.encode(), flow.source.encode()), b'{"offset":12}'),
        offset_record("elsewhere", topic_name, 0, 1000),  # another source cluster's partition
    ])
    feed = only_feed(connect_offsets_feeds(settings))
    closing(feed)
    assert feed.name == "connect-offsets" and feed.cluster_alias == flow.target
    expected = {p[0]: 6, p[1]: 9, p[2]: 0, p[3]: 12}
    assert eventually(feed.offsets, lambda o: o == expected) == expected
    assert feed.bad_records == 0

    # keeps up: a smaller offset later is the truth for this feed; a tombstone removes the entry
    produce(clusters, offsets_topic, [
        offset_record(flow.source, topic_name, 0, 3),
        offset_record(flow.source, topic_name, 1, None),
    ])
    expected = {p[0]: 3, p[2]: 0, p[3]: 12}
    assert eventually(feed.offsets, lambda o: o == expected) == expected

    # garbage is counted and skipped, never raised, and touches nothing
    produce(clusters, offsets_topic, [
        (b"garbage", b'{"offset":1}'),
        (None, b'{"offset":1}'),
        (offset_record(flow.source, topic_name, 2, 0)[0], b'{"offset":"five"}'),
        (b'["MirrorSourceConnector",{"cluster":"%s","topic":"%s"}]' % (flow.source.encode(), topic_name.encode()),
         b'{"offset":1}'),
    ])
    eventually(feed.offsets, lambda _: feed.bad_records >= 4)
    assert feed.bad_records == 4
    assert feed.offsets() == expected


def test_connect_offsets_topic_created_later_is_picked_up(tmp_path, clusters, topic_name, closing):
    settings, flow = fresh_flow(tmp_path, clusters, topic_name)
    offsets_topic = f"mm2-offsets.{flow.source}.internal"
    feed = only_feed(connect_offsets_feeds(settings))
    closing(feed)
    started = time.monotonic()
    assert feed.offsets() == {}  # no topic yet: nothing known, nothing raised
    assert feed.offsets() == {}  # retried each call
    assert time.monotonic() - started < 5  # a missing topic costs a metadata request, not a timeout

    create_topic(clusters, offsets_topic, partitions=3)
    produce(clusters, offsets_topic, [offset_record(flow.source, topic_name, 1, 41)])
    expected = {PartitionKey(flow.source, flow.target, topic_name, 1): 41}
    assert eventually(feed.offsets, lambda o: o == expected) == expected


def test_connect_offsets_topic_override(tmp_path, clusters, topic_name, closing):
    settings, flow = fresh_flow(tmp_path, clusters, topic_name)
    custom = f"connect-offsets-{uuid.uuid4().hex[:8]}"
    create_topic(clusters, custom)
    create_topic(clusters, f"mm2-offsets.{flow.source}.internal")
    produce(clusters, f"mm2-offsets.{flow.source}.internal", [offset_record(flow.source, topic_name, 0, 1)])
    produce(clusters, custom, [offset_record(flow.source, topic_name, 0, 2)])
    feed = only_feed(connect_offsets_feeds(settings, {flow: custom}))
    closing(feed)
    expected = {PartitionKey(flow.source, flow.target, topic_name, 0): 2}
    assert eventually(feed.offsets, lambda o: o == expected) == expected


def test_connect_offsets_with_the_usual_src_dst_aliases(tmp_path, clusters, topic_name, closing):
    """The literal `mm2-offsets.src.internal` is shared by the session: look at our topic only."""
    settings = load_settings([write_properties(tmp_path / "mm2.properties", clusters,
                                               f"src->dst.topics = {topic_name}\n")])
    create_topic(clusters, "mm2-offsets.src.internal", partitions=3)
    produce(clusters, "mm2-offsets.src.internal", [
        offset_record("src", topic_name, 0, 5),
        offset_record("src", topic_name, 1, 8),
        offset_record("src", topic_name, 1, None),
        offset_record("src", topic_name, 2, 7),
    ])
    feed = only_feed(connect_offsets_feeds(settings))
    closing(feed)
    expected = {PartitionKey("src", "dst", topic_name, 0): 5, PartitionKey("src", "dst", topic_name, 2): 7}

    def ours() -> dict[PartitionKey, int]:
        return {k: v for k, v in feed.offsets().items() if k.topic == topic_name}

    assert eventually(ours, lambda o: o == expected) == expected


# --- heartbeats ----------------------------------------------------------------------------

def beat(source: str, target: str, timestamp_ms: int) -> Record:
    return encode_heartbeat(Heartbeat(source, target, timestamp_ms))


def test_heartbeats_newest_per_flow_only_those_that_crossed(tmp_path, clusters, topic_name, closing):
    settings, flow = fresh_flow(tmp_path, clusters, topic_name)
    hb_topic = f"{flow.source}.heartbeats"
    create_topic(clusters, hb_topic)
    now = int(time.time() * 1000)
    produce(clusters, hb_topic, [
        beat(flow.target, flow.source, now - 3000),  # the disabled reverse pair's emitter, into the source
        beat("upstream", flow.source, now - 2000),  # another emitter into the source
        beat(flow.target, flow.source, now - 2500),
        beat(flow.source, flow.target, now + 60_000),  # emitted into the target: never crossed s->d
        (b"\x00\x05bad", b"\x00"),  # garbage
    ])
    feed = only_feed(heartbeat_feeds(settings))
    closing(feed)
    assert feed.name == "heartbeats" and feed.cluster_alias == flow.target
    expected = {flow: now - 2000}
    assert eventually(feed.newest, lambda n: n == expected) == expected
    assert feed.bad_records == 1

    produce(clusters, hb_topic, [beat(flow.target, flow.source, now)])  # the next second's heartbeat
    expected = {flow: now}
    assert eventually(feed.newest, lambda n: n == expected) == expected


def test_heartbeats_absent_topic_means_absent_flow_until_created(tmp_path, clusters, topic_name, closing):
    settings, flow = fresh_flow(tmp_path, clusters, topic_name)
    feed = only_feed(heartbeat_feeds(settings))
    closing(feed)
    started = time.monotonic()
    assert feed.newest() == {}  # absent, not 0: the exporter omits the metric
    assert feed.newest() == {}
    assert time.monotonic() - started < 5

    hb_topic = f"{flow.source}.heartbeats"
    create_topic(clusters, hb_topic)
    assert eventually(feed.newest, lambda n: n == {}, timeout=0) == {}  # exists but empty: still absent
    produce(clusters, hb_topic, [beat(flow.target, flow.source, 1234)])
    assert eventually(feed.newest, lambda n: n == {flow: 1234}) == {flow: 1234}


def test_heartbeats_start_near_the_end_not_at_the_beginning(tmp_path, clusters, topic_name, closing):
    settings, flow = fresh_flow(tmp_path, clusters, topic_name)
    hb_topic = f"{flow.source}.heartbeats"
    create_topic(clusters, hb_topic)
    # 10 old records with a future timestamp, then 60 ordinary ones: only the last 50 are read
    produce(clusters, hb_topic, [beat(flow.target, flow.source, 10**13 + i) for i in range(10)]
            + [beat(flow.target, flow.source, 1000 + i) for i in range(60)])
    feed = only_feed(heartbeat_feeds(settings))
    closing(feed)
    expected = {flow: 1059}
    assert eventually(feed.newest, lambda n: n == expected) == expected


def test_heartbeats_with_the_identity_policy_land_in_the_source_prefixed_topic(tmp_path, clusters, topic_name,
                                                                              closing):
    """IdentityReplicationPolicy names heartbeats topics as the default policy does (its
    formatRemoteTopic): A's `heartbeats` lands in B's `A.heartbeats`, not in the `heartbeats`
    MM2's heartbeat connector writes on B itself."""
    settings, flow = fresh_flow(tmp_path, clusters, topic_name,
                                "replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy\n")
    hb_topic = f"{flow.source}.heartbeats"
    create_topic(clusters, hb_topic)
    feed = only_feed(heartbeat_feeds(settings))
    closing(feed)
    assert feed.flows_by_topic == {hb_topic: [flow]}
    assert eventually(feed.newest, lambda n: n == {}, timeout=0) == {}  # assigned near the end now
    now = int(time.time() * 1000)
    produce(clusters, hb_topic, [
        beat(flow.target, flow.source, now),  # emitted into the source, replicated
        beat("upstream", "elsewhere", now + 60_000),  # another cluster's: not this flow's
    ])
    assert eventually(feed.newest, lambda n: n == {flow: now}) == {flow: now}