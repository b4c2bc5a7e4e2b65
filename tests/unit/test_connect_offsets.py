"""The connect-offsets feed's record logic, without a broker, on golden bytes built by hand.

What Connect's JsonConverter (schemas.enable=false) writes for MirrorSourceTask's offsets, from
OffsetStorageWriter: key = JSON array [connector name, source partition map], value = the source
offset map, null value = tombstone. In dedicated MM2 the connector name is the class's simple name
and MirrorUtils.wrapPartition/wrapOffset give {"cluster","partition","topic"} and {"offset"}.
The partition map is a HashMap, so the key order on the wire is not fixed.

At the end, the heartbeat feed's record logic (the Heartbeat Struct, also byte for byte).
"""

from __future__ import annotations

import re
import struct
from pathlib import Path
from types import SimpleNamespace

import pytest
from confluent_kafka import OFFSET_BEGINNING, TIMESTAMP_CREATE_TIME, KafkaError, KafkaException
from hypothesis import given, strategies as st

from mirrorlag.config.loader import load_settings
from mirrorlag.config.policy import ReplicationPolicy
from mirrorlag.config.settings import FlowSettings
from mirrorlag.feeds.connect_offsets import ConnectOffsetsFeed, connect_offsets_feeds, connect_offsets_topic
from mirrorlag.feeds.heartbeats import HeartbeatFeed, heartbeat_feeds, heartbeats_topic
from mirrorlag.formats import ConnectOffsetKey, encode_connect_offset
from mirrorlag.kafka.topic_reader import ClientErrors, FeedConsumer, assign_only_consumer
from mirrorlag.model import FlowId, PartitionKey

FLOW = FlowId("src", "dst")
TOPIC = "mm2-offsets.src.internal"
ORDERS_0 = PartitionKey("src", "dst", "orders", 0)
ORDERS_3 = PartitionKey("src", "dst", "orders", 3)

# ["MirrorSourceConnector",{"cluster":"src","partition":3,"topic":"orders"}] / {"offset":1234}
GOLDEN_KEY = (b'["MirrorSourceConnector",'
              b'{"cluster":"src","partition":3,"topic":"orders"}]')
GOLDEN_VALUE = b'{"offset":1234}'


def feed(flows_by_topic: dict[str, list[FlowId]] | None = None) -> ConnectOffsetsFeed:
    return ConnectOffsetsFeed("dst", None, flows_by_topic or {TOPIC: [FLOW]}, timeout_s=1)


def test_golden_record_gives_the_offset_itself_as_lro():
    f = feed()
    f._apply(GOLDEN_KEY, GOLDEN_VALUE)
    assert f._latest == {ORDERS_3: 1234}  # the last replicated record: LRO = 1234, not 1233
    assert f.bad_records == 0


def test_the_feed_takes_the_pollers_key_objects_when_given_them():
    f = feed()
    theirs = PartitionKey(*ORDERS_3)
    f.use_keys(lambda flow, topic, partition: theirs if (flow, topic, partition) == (FLOW, "orders", 3) else None)
    f._apply(GOLDEN_KEY, GOLDEN_VALUE)
    (mine,) = f._latest
    assert mine is theirs and f._latest == {ORDERS_3: 1234}


def test_the_codec_writes_the_golden_bytes():
    assert encode_connect_offset(ConnectOffsetKey("MirrorSourceConnector", "src", "orders", 3), 1234) == (
        GOLDEN_KEY, GOLDEN_VALUE)
    assert encode_connect_offset(ConnectOffsetKey("MirrorSourceConnector", "src", "orders", 3), None) == (
        GOLDEN_KEY, None)


@pytest.mark.parametrize("key", [
    b'["MirrorSourceConnector",{"cluster":"src","partition":3,"topic":"orders"}]',
    b'["MirrorSourceConnector",{"cluster":"src","topic":"orders","partition":3}]',
    b'["MirrorSourceConnector",{"partition":3,"cluster":"src","topic":"orders"}]',
    b'["MirrorSourceConnector",{"partition":3,"topic":"orders","cluster":"src"}]',
    b'["MirrorSourceConnector",{"topic":"orders","cluster":"src","partition":3}]',
    b'["MirrorSourceConnector",{"topic":"orders","partition":3,"cluster":"src"}]',
])
def test_any_key_order(key):
    f = feed()
    f._apply(key, b'{"offset":7}')
    assert f._latest == {ORDERS_3: 7} and f.bad_records == 0


@pytest.mark.parametrize("key,value", [
    (b'[ "MirrorSourceConnector" , { "topic" : "orders" , "partition" : 3 , "cluster" : "src" } ]',
     b'{ "offset" : 7 }'),
    (b'\n["MirrorSourceConnector",\n\t{"cluster": "src",\r\n "partition": 3, "topic": "orders"}]\n',
     b'\t{"offset":\n7}\r\n'),
    # JSON escapes decode to the same names
    (b'["Mirror\\u0053ourceConnector",{"cluster":"\\u0073rc","partition":3,"topic":"ord\\u0065rs"}]',
     b'{"\\u006fffset":7}'),
])
def test_whitespace_and_escapes(key, value):
    f = feed()
    f._apply(key, value)
    assert f._latest == {ORDERS_3: 7} and f.bad_records == 0


def test_non_ascii_topic_and_large_offsets():
    f = feed()
    f._apply('["MirrorSourceConnector",{"cluster":"src","partition":0,"topic":"zé"}]'.encode(),
             b'{"offset":9223372036854775807}')  # Long.MAX_VALUE
    assert f._latest == {PartitionKey("src", "dst", "zé", 0): 2**63 - 1}


def test_extra_fields_are_ignored():
    f = feed()
    f._apply(b'["MirrorSourceConnector",{"cluster":"src","partition":3,"topic":"orders","x":1}]',
             b'{"offset":7,"extra":"y"}')
    assert f._latest == {ORDERS_3: 7} and f.bad_records == 0


@pytest.mark.parametrize("key,value", [
    # MirrorCheckpointTask: Checkpoint.connectPartition() / connectOffset()
    (b'["MirrorCheckpointConnector",{"group":"g1","partition":3,"topic":"orders"}]', b'{"offset":0}'),
    (b'["MirrorCheckpointConnector",{"group":"g1","partition":3,"topic":"orders"}]', None),
    # MirrorHeartbeatTask: Heartbeat.connectPartition() / connectOffset()
    (b'["MirrorHeartbeatConnector",{"sourceClusterAlias":"src","targetClusterAlias":"dst"}]', b'{"offset":0}'),
    (b'["MirrorHeartbeatConnector",{"sourceClusterAlias":"src","targetClusterAlias":"dst"}]', None),
    # another connector whose partition map happens to look like ours
    (b'["MirrorCheckpointConnector",{"cluster":"src","partition":3,"topic":"orders"}]', b'{"offset":99}'),
    # another connector with an offset we could not read: still not ours to judge
    (b'["SomeOtherConnector",{"file":"/tmp/x"}]', b'{"position":"abc"}'),
    (b'["SomeOtherConnector",{"file":"/tmp/x"}]', b'not json'),
])
def test_other_connectors_are_skipped_silently(key, value):
    f = feed()
    f._apply(GOLDEN_KEY, GOLDEN_VALUE)
    f._apply(key, value)
    assert f._latest == {ORDERS_3: 1234}
    assert f.bad_records == 0


def test_tombstone_removes_the_partition_and_a_later_offset_brings_it_back():
    f = feed()
    f._apply(GOLDEN_KEY, GOLDEN_VALUE)
    f._apply(b'["MirrorSourceConnector",{"cluster":"src","partition":0,"topic":"orders"}]', b'{"offset":5}')
    # the tombstone's key in another field order still names the same partition
    f._apply(b'["MirrorSourceConnector",{"topic":"orders","partition":3,"cluster":"src"}]', None)
    assert f._latest == {ORDERS_0: 5}
    f._apply(GOLDEN_KEY, None)  # a tombstone for a partition we no longer hold is a no-op
    assert f._latest == {ORDERS_0: 5}
    f._apply(GOLDEN_KEY, b'{"offset":0}')
    assert f._latest == {ORDERS_0: 5, ORDERS_3: 0}
    assert f.bad_records == 0


def test_newest_record_wins_even_when_smaller():
    f = feed()
    for value in (b'{"offset":10}', b'{"offset":500}', b'{"offset":42}'):
        f._apply(GOLDEN_KEY, value)
    assert f._latest == {ORDERS_3: 42}  # MM2 restarted from an older commit: this feed says 42


@pytest.mark.parametrize("value", [GOLDEN_VALUE, None])
def test_wrong_cluster_is_skipped_silently(value):
    f = feed()
    f._apply(b'["MirrorSourceConnector",{"cluster":"dst","partition":3,"topic":"orders"}]', b'{"offset":1}')
    f._apply(b'["MirrorSourceConnector",{"cluster":"SRC","partition":3,"topic":"orders"}]', value)
    assert f._latest == {} and f.bad_records == 0


def test_record_belongs_to_the_flow_of_its_topic_and_cluster():
    other = FlowId("up", "dst")
    f = feed({TOPIC: [FLOW], "mm2-offsets.up.internal": [other], "shared": [FLOW, other]})
    up_key = b'["MirrorSourceConnector",{"cluster":"up","partition":3,"topic":"orders"}]'
    f._apply(up_key, b'{"offset":1}', TOPIC)  # up's offsets in src's topic: not src's, not up's
    assert f._latest == {}
    f._apply(up_key, b'{"offset":2}', "mm2-offsets.up.internal")
    f._apply(GOLDEN_KEY, b'{"offset":3}', "shared")
    f._apply(up_key, b'{"offset":4}', "shared")
    assert f._latest == {PartitionKey("up", "dst", "orders", 3): 4, ORDERS_3: 3}
    f._apply(up_key, b'{"offset":5}')  # no topic: any of the feed's flows
    assert f._latest[PartitionKey("up", "dst", "orders", 3)] == 5
    assert f.bad_records == 0


DEEP = b"[" * 100_000 + b"]" * 100_000


@pytest.mark.parametrize("key,value", [
    (None, GOLDEN_VALUE),
    (None, None),
    (b"", GOLDEN_VALUE),
    (b"not json", GOLDEN_VALUE),
    (b"\xff\xfe\x00garbage", GOLDEN_VALUE),
    (GOLDEN_KEY[:-1], GOLDEN_VALUE),  # truncated
    (b"[]", GOLDEN_VALUE),
    (b'["MirrorSourceConnector"]', GOLDEN_VALUE),
    (b'["MirrorSourceConnector",{"cluster":"src","partition":3,"topic":"orders"},"x"]', GOLDEN_VALUE),
    (b'{"cluster":"src","partition":3,"topic":"orders"}', GOLDEN_VALUE),  # not wrapped
    (b'["MirrorSourceConnector",{"cluster":"src","topic":"orders"}]', GOLDEN_VALUE),  # no partition
    (b'["MirrorSourceConnector",{"cluster":"src","partition":3}]', GOLDEN_VALUE),  # no topic
    (b'["MirrorSourceConnector",{"partition":3,"topic":"orders"}]', GOLDEN_VALUE),  # no cluster
    (b'["MirrorSourceConnector",{"cluster":"src","partition":"3","topic":"orders"}]', GOLDEN_VALUE),
    (b'["MirrorSourceConnector",{"cluster":"src","partition":-1,"topic":"orders"}]', GOLDEN_VALUE),
    (b'["MirrorSourceConnector",{"cluster":"src","partition":true,"topic":"orders"}]', GOLDEN_VALUE),
    (b'["MirrorSourceConnector",{"cluster":"src","partition":3.0,"topic":"orders"}]', GOLDEN_VALUE),
    (b'["MirrorSourceConnector",{"cluster":"src","partition":3,"topic":7}]', GOLDEN_VALUE),
    (b'["MirrorSourceConnector",{"cluster":null,"partition":3,"topic":"orders"}]', GOLDEN_VALUE),
    (b'[7,{"cluster":"src","partition":3,"topic":"orders"}]', GOLDEN_VALUE),
    (DEEP, GOLDEN_VALUE),  # deeply nested JSON: json raises RecursionError, not ValueError
    (GOLDEN_KEY, b""),
    (GOLDEN_KEY, b"garbage"),
    (GOLDEN_KEY, b"null"),
    (GOLDEN_KEY, b"{}"),
    (GOLDEN_KEY, b"[1234]"),
    (GOLDEN_KEY, b"1234"),
    (GOLDEN_KEY, b'{"offset":-1}'),
    (GOLDEN_KEY, b'{"offset":"1234"}'),
    (GOLDEN_KEY, b'{"offset":1234.5}'),
    (GOLDEN_KEY, b'{"offset":true}'),
    (GOLDEN_KEY, b'{"offset":null}'),
    (GOLDEN_KEY, b'{"offset":NaN}'),
    (GOLDEN_KEY, b'{"offset":' + DEEP + b"}"),
])
def test_garbage_is_counted_and_skipped(key, value):
    f = feed()
    f._apply(b'["MirrorSourceConnector",{"cluster":"src","partition":0,"topic":"orders"}]', b'{"offset":5}')
    f._apply(key, value)
    assert f.bad_records == 1
    assert f._latest == {ORDERS_0: 5}  # nothing else touched


@given(st.one_of(st.none(), st.binary(max_size=80)), st.one_of(st.none(), st.binary(max_size=40)))
def test_apply_never_raises(key, value):
    f = feed()
    f._apply(key, value)
    f._apply(key, value, TOPIC)
    f._apply(key, value, "not-a-topic-of-this-feed")


@given(st.sampled_from(["src", "dst", "x"]), st.text(max_size=20), st.integers(0, 2**31 - 1),
       st.one_of(st.none(), st.integers(0, 2**63 - 1)))
def test_whatever_the_codec_writes_the_feed_reads(cluster, topic, partition, offset):
    f = feed()
    f._apply(*encode_connect_offset(ConnectOffsetKey("MirrorSourceConnector", "src", topic, partition), 1))
    f._apply(*encode_connect_offset(ConnectOffsetKey("MirrorSourceConnector", cluster, topic, partition), offset))
    key = PartitionKey("src", "dst", topic, partition)
    expected = {key: 1} if cluster != "src" else ({} if offset is None else {key: offset})
    assert f._latest == expected and f.bad_records == 0


# --- topics and wiring ---------------------------------------------------------------------

def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "mm2.properties"
    path.write_text(text)
    return path


THREE_CLUSTERS = (
    "clusters = a, b, c\n"
    "a.bootstrap.servers = 127.0.0.1:1\nb.bootstrap.servers = 127.0.0.1:1\nc.bootstrap.servers = 127.0.0.1:1\n"
    "a->b.enabled = true\nc->b.enabled = true\na->c.enabled = true\n"
    "replication.policy.separator = _\n"
)


def test_topic_name_is_dedicated_mm2_default_with_a_dot_whatever_the_separator(tmp_path):
    settings = load_settings([write(tmp_path, THREE_CLUSTERS)])
    assert connect_offsets_topic(settings.flow(FlowId("a", "b"))) == "mm2-offsets.a.internal"
    assert connect_offsets_topic(FlowId("a", "b"), {FlowId("a", "c"): "x"}) == "mm2-offsets.a.internal"
    assert connect_offsets_topic(FlowId("a", "c"), {FlowId("a", "c"): "x"}) == "x"


def test_one_feed_per_target_cluster(tmp_path):
    settings = load_settings([write(tmp_path, THREE_CLUSTERS)])
    feeds = connect_offsets_feeds(settings, {FlowId("c", "b"): "connect-offsets"})
    try:
        by_alias = {f.cluster_alias: f for f in feeds}
        assert set(by_alias) == {"b", "c"}
        assert by_alias["b"].flows_by_topic == {"mm2-offsets.a.internal": [FlowId("a", "b")],
                                                "connect-offsets": [FlowId("c", "b")]}
        assert by_alias["c"].flows_by_topic == {"mm2-offsets.a.internal": [FlowId("a", "c")]}
        assert all(f.name == "connect-offsets" for f in feeds)
    finally:
        for f in feeds:
            f.close()


# --- the heartbeat feed's record logic -------------------------------------------------------

def heartbeat(source: str, target: str, timestamp_ms: int) -> tuple[bytes, bytes]:
    """Heartbeat.KEY_SCHEMA (STRING sourceClusterAlias, STRING targetClusterAlias) and the value:
    VALUE_HEADER_SCHEMA (INT16 version 0) then VALUE_SCHEMA_V0 (INT64 timestamp), by hand."""
    key = struct.pack(">h", len(source)) + source.encode() + struct.pack(">h", len(target)) + target.encode()
    return key, b"\x00\x00" + timestamp_ms.to_bytes(8, "big")


def test_heartbeat_golden_bytes():
    f = HeartbeatFeed("dst", None, {"src.heartbeats": [FLOW]})
    # Heartbeat("up", "src", 1700000000000): emitted into src by the up->src heartbeat connector
    f._apply("src.heartbeats", b"\x00\x02up\x00\x03src", b"\x00\x00\x00\x00\x01\x8b\xcf\xe5\x68\x00")
    assert f._newest == {FLOW: 1_700_000_000_000} and f.bad_records == 0


def test_heartbeat_newest_timestamp_wins_and_only_those_emitted_into_the_source_count():
    f = HeartbeatFeed("dst", None, {"src.heartbeats": [FLOW]})
    f._apply("src.heartbeats", *heartbeat("src", "dst", 9_000))  # into dst: did not cross src->dst
    assert f._newest == {}
    f._apply("src.heartbeats", *heartbeat("dst", "src", 2_000))
    f._apply("src.heartbeats", *heartbeat("up", "src", 3_000))
    f._apply("src.heartbeats", *heartbeat("dst", "src", 2_500))  # replayed after an MM2 restart
    assert f._newest == {FLOW: 3_000} and f.bad_records == 0


def test_heartbeats_under_the_identity_policy_share_one_topic():
    other = FlowId("up", "dst")
    f = HeartbeatFeed("dst", None, {"heartbeats": [FLOW, other]})
    f._apply("heartbeats", *heartbeat("src", "dst", 9_000))  # dst's own local heartbeat
    f._apply("heartbeats", *heartbeat("dst", "src", 1_000))
    f._apply("heartbeats", *heartbeat("dst", "up", 2_000))
    assert f._newest == {FLOW: 1_000, other: 2_000}


@pytest.mark.parametrize("key,value", [
    (None, b"\x00\x00" + bytes(8)),
    (b"\x00\x02up\x00\x03src", None),
    (b"\x00\x02up", b"\x00\x00" + bytes(8)),  # no target alias
    (b"\x00\x02up\x00\x03src", b"\x00\x00" + bytes(7)),  # short timestamp
    (b"\x00\x02up\x00\x03src", b"\x00\x01" + bytes(8)),  # unknown version
    (b"", b""),
])
def test_bad_heartbeats_are_counted(key, value):
    f = HeartbeatFeed("dst", None, {"src.heartbeats": [FLOW]})
    f._apply("src.heartbeats", key, value)
    assert f.bad_records == 1 and f._newest == {}


def test_heartbeats_topic_follows_the_replication_policy(tmp_path):
    def flow(policy: ReplicationPolicy) -> FlowSettings:
        return FlowSettings("src", "dst", re.compile(".*"), re.compile(""), policy)

    assert heartbeats_topic(flow(ReplicationPolicy())) == "src.heartbeats"
    assert heartbeats_topic(flow(ReplicationPolicy(separator="_"))) == "src_heartbeats"
    # IdentityReplicationPolicy names heartbeats as the default policy does (formatRemoteTopic).
    assert heartbeats_topic(flow(ReplicationPolicy(identity=True))) == "src.heartbeats"

    settings = load_settings([write(tmp_path, THREE_CLUSTERS.replace(
        "replication.policy.separator = _\n",
        "replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy\n"))])
    feeds = heartbeat_feeds(settings)
    try:
        by_alias = {f.cluster_alias: f for f in feeds}
        assert by_alias["b"].flows_by_topic == {"a.heartbeats": [FlowId("a", "b")], "c.heartbeats": [FlowId("c", "b")]}
        assert by_alias["c"].flows_by_topic == {"a.heartbeats": [FlowId("a", "c")]}
    finally:
        for f in feeds:
            f.close()


# --- the feeds' consumer handling, with a scripted consumer ----------------------------------

class FakeMessage:
    def __init__(self, topic: str, partition: int, key: bytes | None = None, value: bytes | None = None,
                 error: int | None = None, ms: int = 1_700_000_000_000) -> None:
        self._topic, self._partition, self._key, self._value = topic, partition, key, value
        self._error = None if error is None else KafkaError(error)
        self._ms = ms

    def error(self):
        return self._error

    def timestamp(self) -> tuple[int, int]:
        return (TIMESTAMP_CREATE_TIME, self._ms)

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def key(self):
        return self._key

    def value(self):
        return self._value


class FakeConsumer:
    """Metadata and watermarks from `topics` ({topic: {partition: (low, high)}}); each consume()
    returns the next scripted batch."""

    def __init__(self, topics: dict[str, dict[int, tuple[int, int]]]) -> None:
        self.topics = topics
        self.batches: list[list[FakeMessage]] = []
        self.assigned: dict[tuple[str, int], int] = {}
        self.positions: dict[tuple[str, int], int] = {}  # next offset to read; none: nothing read yet
        self.seeks: list[tuple[str, int, int]] = []
        self.unreachable: KafkaError | None = None  # what every metadata request fails with

    def list_topics(self, topic: str | None = None, timeout: float = -1):
        if self.unreachable is not None:
            raise KafkaException(self.unreachable)
        return SimpleNamespace(topics={t: SimpleNamespace(partitions=dict.fromkeys(parts), error=None)
                                       for t, parts in self.topics.items()})

    def get_watermark_offsets(self, tp, timeout: float = -1, cached: bool = False):
        return self.topics[tp.topic][tp.partition]

    def incremental_assign(self, partitions) -> None:
        self.assigned.update({(tp.topic, tp.partition): tp.offset for tp in partitions})

    def incremental_unassign(self, partitions) -> None:
        for tp in partitions:
            del self.assigned[(tp.topic, tp.partition)]

    def assignment(self):
        return [SimpleNamespace(topic=t, partition=p) for t, p in self.assigned]

    def consume(self, num_messages: int, timeout: float):
        return self.batches.pop(0) if self.batches else []

    def position(self, partitions):
        return [SimpleNamespace(topic=tp.topic, partition=tp.partition,
                                offset=self.positions.get((tp.topic, tp.partition), -1001)) for tp in partitions]

    def seek(self, tp) -> None:
        self.seeks.append((tp.topic, tp.partition, tp.offset))


def eof(topic: str, partition: int) -> FakeMessage:
    return FakeMessage(topic, partition, error=KafkaError._PARTITION_EOF)


def test_heartbeats_start_the_last_50_records_before_the_end_of_each_partition():
    consumer = FakeConsumer({"src.heartbeats": {0: (0, 120), 1: (100, 130), 2: (0, 0)}})
    f = HeartbeatFeed("dst", consumer, {"src.heartbeats": [FLOW]}, timeout_s=1)  # type: ignore[arg-type]
    consumer.batches = [[FakeMessage("src.heartbeats", 0, *heartbeat("dst", "src", 5)),
                         eof("src.heartbeats", 0), eof("src.heartbeats", 1), eof("src.heartbeats", 2)]]
    assert f.newest() == {FLOW: 5}
    assert consumer.assigned == {("src.heartbeats", 0): 70, ("src.heartbeats", 1): 100, ("src.heartbeats", 2): 0}


def test_heartbeats_topic_deleted_makes_the_flow_absent_until_it_is_back():
    consumer = FakeConsumer({"src.heartbeats": {0: (0, 1)}})
    f = HeartbeatFeed("dst", consumer, {"src.heartbeats": [FLOW]}, timeout_s=1)  # type: ignore[arg-type]
    consumer.batches = [[FakeMessage("src.heartbeats", 0, *heartbeat("dst", "src", 5)), eof("src.heartbeats", 0)]]
    assert f.newest() == {FLOW: 5}
    del consumer.topics["src.heartbeats"]
    consumer.batches = [[FakeMessage("src.heartbeats", 0, error=KafkaError.UNKNOWN_TOPIC_OR_PART)]]
    assert f.newest() == {}
    assert consumer.assigned == {}
    assert f.newest() == {}  # still missing: looked up again, not assigned
    consumer.topics["src.heartbeats"] = {0: (0, 0)}
    consumer.batches = [[eof("src.heartbeats", 0)]]
    assert f.newest() == {}  # back, but empty: still absent
    consumer.batches = [[FakeMessage("src.heartbeats", 0, *heartbeat("dst", "src", 7)), eof("src.heartbeats", 0)]]
    assert f.newest() == {FLOW: 7}


def test_connect_offsets_read_every_partition_from_the_beginning():
    consumer = FakeConsumer({TOPIC: {0: (0, 3), 1: (5, 9)}, "unrelated": {0: (0, 1)}})
    f = ConnectOffsetsFeed("dst", consumer, {TOPIC: [FLOW]}, timeout_s=1)  # type: ignore[arg-type]
    consumer.batches = [[FakeMessage(TOPIC, 1, GOLDEN_KEY, GOLDEN_VALUE), eof(TOPIC, 0), eof(TOPIC, 1)]]
    assert f.offsets() == {ORDERS_3: 1234}
    assert consumer.assigned == {(TOPIC, 0): OFFSET_BEGINNING, (TOPIC, 1): OFFSET_BEGINNING}


def test_a_commit_is_never_dated_before_it_was_written():
    """A batch spans the offsets topic's partitions: a commit read in it is dated by its own
    record, never by the batch's last one (an older commit of another partition). Dated earlier,
    a commit of offset 93 read just after an end offset of 93 looked older than that end offset,
    which one log cannot hold: a false RESET of a healthy partition, seen on the real MM2; dated
    by the batch's newest, an hour-old commit read beside a new one looked fresh."""
    consumer = FakeConsumer({TOPIC: {0: (0, 1), 1: (0, 1)}})
    f = ConnectOffsetsFeed("dst", consumer, {TOPIC: [FLOW]}, timeout_s=1)  # type: ignore[arg-type]
    consumer.batches = [[FakeMessage(TOPIC, 1, GOLDEN_KEY, GOLDEN_VALUE, ms=1_700_000_016_000),
                         FakeMessage(TOPIC, 0, b'["MirrorSourceConnector",{"cluster":"src","partition":0,"topic":"x"}]',
                                     b'{"offset":5}', ms=1_700_000_000_000),
                         eof(TOPIC, 0), eof(TOPIC, 1)]]
    assert f.offsets()[ORDERS_3] == 1234
    assert f.evidence_times() == {ORDERS_3: 1_700_000_016.0, PartitionKey("src", "dst", "x", 0): 1_700_000_000.0}


def test_strimzi_names_the_source_connector_after_its_flow():
    """MM2 as connectors on a Connect cluster (Strimzi's KafkaMirrorMaker2) commits under
    `<source>-><target>.MirrorSourceConnector`; its checkpoint connector's name stays skipped."""
    f = feed()
    f._apply(b'["src->dst.MirrorSourceConnector",{"cluster":"src","partition":3,"topic":"orders"}]', b'{"offset":77}')
    f._apply(b'["src->dst.MirrorCheckpointConnector",{"cluster":"src","partition":3,"topic":"orders"}]', b'{"offset":99}')
    assert f._latest == {ORDERS_3: 77} and f.bad_records == 0


def test_a_partition_that_now_ends_before_the_position_is_read_again_from_the_start():
    """A broker restored empty or a topic recreated: the log ends before where the reader is.
    tansu answers such a fetch with nothing, never out-of-range, so the reader compares."""
    consumer = FakeConsumer({"mm2-offsets.src.internal": {0: (0, 3), 1: (0, 9)}})
    f = ConnectOffsetsFeed("dst", consumer, {"mm2-offsets.src.internal": [FLOW]}, timeout_s=1)  # type: ignore[arg-type]
    consumer.batches = [[eof("mm2-offsets.src.internal", 0), eof("mm2-offsets.src.internal", 1)]]
    consumer.positions = {("mm2-offsets.src.internal", 0): 7, ("mm2-offsets.src.internal", 1): 9}
    f.offsets()
    assert consumer.seeks == [("mm2-offsets.src.internal", 0, OFFSET_BEGINNING)]  # 1 is at its end: left alone



def test_a_deleted_feed_topic_is_seen_by_the_metadata_check_alone():
    """librdkafka never reports a deleted topic's fetch errors: the reader's metadata check must."""
    consumer = FakeConsumer({TOPIC: {0: (0, 1)}})
    f = ConnectOffsetsFeed("dst", consumer, {TOPIC: [FLOW]}, timeout_s=1)  # type: ignore[arg-type]
    consumer.batches = [[FakeMessage(TOPIC, 0, GOLDEN_KEY, GOLDEN_VALUE), eof(TOPIC, 0)]]
    assert f.offsets() == {ORDERS_3: 1234}
    del consumer.topics[TOPIC]
    f.offsets()  # no error message at all
    assert f.reader is not None and f.reader.missing == [TOPIC] and consumer.assigned == {}
    consumer.topics[TOPIC] = {0: (0, 0)}
    consumer.batches = [[eof(TOPIC, 0)]]
    f.offsets()
    assert f.reader.missing == [] and consumer.assigned == {(TOPIC, 0): OFFSET_BEGINNING}


def test_a_feed_counts_its_consumer_errors_and_is_up_again_once_the_cluster_answers():
    consumer = FakeConsumer({TOPIC: {0: (0, 1)}})
    f = ConnectOffsetsFeed("dst", consumer, {TOPIC: [FLOW]}, timeout_s=1)  # type: ignore[arg-type]
    assert f.reader is not None
    errors = f.reader.errors
    consumer.batches = [[eof(TOPIC, 0)]]
    f.offsets()
    assert (errors.up, errors.total, errors.last) == (True, 0, None)

    consumer.unreachable = KafkaError(KafkaError._TRANSPORT, "Failed to get metadata: Local: Broker transport failure")
    consumer.batches = [[FakeMessage(TOPIC, 0, error=KafkaError.TOPIC_AUTHORIZATION_FAILED)]]
    f.offsets()
    assert not errors.up and errors.total == 2 and errors.last is not None
    assert errors.last.startswith("TOPIC_AUTHORIZATION_FAILED")  # the newest one
    assert consumer.assigned == {(TOPIC, 0): OFFSET_BEGINNING}  # no answer is no deletion

    consumer.unreachable = KafkaError(KafkaError._TIMED_OUT)  # the short check of a slow cluster
    f.offsets()
    assert errors.total == 2 and not errors.up  # says nothing either way

    consumer.unreachable = None
    f.offsets()
    assert errors.up and errors.total == 2 and errors.last.startswith("TOPIC_AUTHORIZATION_FAILED")


def test_consumer_errors_never_show_a_secret_and_stay_short():
    errors = ClientErrors(secrets=("S3cr3t-pw",))
    errors.record(KafkaError(KafkaError._AUTHENTICATION, "SASL failed for password S3cr3t-pw " + "x" * 300))
    assert errors.last is not None and "S3cr3t-pw" not in errors.last and "***" in errors.last
    assert errors.last.startswith("_AUTHENTICATION: ") and len(errors.last) == 200


def test_the_feed_consumer_masks_the_clusters_secret_values(tmp_path):
    path = tmp_path / "mm2.properties"
    path.write_text("clusters = src, dst\nsrc.bootstrap.servers = 127.0.0.1:1\ndst.bootstrap.servers = 127.0.0.1:1\n"
                    "src->dst.enabled = true\ndst.security.protocol = SASL_PLAINTEXT\ndst.sasl.mechanism = PLAIN\n"
                    'dst.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required '
                    'username="u" password="Pw-4e1d";\n')
    consumer = assign_only_consumer(load_settings([path]).clusters["dst"])
    try:
        assert isinstance(consumer, FeedConsumer) and "Pw-4e1d" in consumer.errors.secrets
        assert "u" not in consumer.errors.secrets  # a user name is no secret (and would mask every "u")
    finally:
        consumer.close()
