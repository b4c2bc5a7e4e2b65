"""Golden bytes built by hand from OffsetSync.KEY_SCHEMA/VALUE_SCHEMA (Kafka Struct, big-endian):
key = int16 topic length, UTF-8 topic, int32 partition; value = int64 upstreamOffset, int64 offset."""

import re
import struct

import pytest
from hypothesis import given, strategies as st

from mirrorlag.config.policy import ReplicationPolicy
from mirrorlag.config.settings import FlowSettings
from mirrorlag.feeds.offset_syncs import OffsetSyncsFeed
from mirrorlag.formats import BadRecord, OffsetSync, decode_offset_sync, encode_offset_sync
from mirrorlag.interfaces import DuplicateCount
from mirrorlag.model import PartitionKey

# topic "orders", partition 3, upstreamOffset 1234, downstream offset 567
GOLDEN_KEY = bytes([0x00, 0x06]) + b"orders" + bytes([0x00, 0x00, 0x00, 0x03])
GOLDEN_VALUE = bytes([0, 0, 0, 0, 0, 0, 0x04, 0xD2]) + bytes([0, 0, 0, 0, 0, 0, 0x02, 0x37])


def test_decodes_hand_built_bytes():
    assert decode_offset_sync(GOLDEN_KEY, GOLDEN_VALUE) == OffsetSync("orders", 3, 1234, 567)


def test_encodes_the_same_bytes_mm2_writes():
    assert encode_offset_sync(OffsetSync("orders", 3, 1234, 567)) == (GOLDEN_KEY, GOLDEN_VALUE)


def test_utf8_topic_length_is_in_bytes():
    key = bytes([0x00, 0x03]) + "zé".encode() + bytes([0, 0, 0, 1])  # "zé" is 2 chars, 3 bytes
    assert decode_offset_sync(key, GOLDEN_VALUE).topic == "zé"
    with pytest.raises(BadRecord):
        decode_offset_sync(bytes([0x00, 0x04]) + key[2:], GOLDEN_VALUE)  # one byte short


def test_trailing_bytes_are_ignored_like_schema_read():
    assert decode_offset_sync(GOLDEN_KEY + b"\x00", GOLDEN_VALUE + b"\x00").upstream_offset == 1234


@pytest.mark.parametrize("key,value", [
    (None, GOLDEN_VALUE),
    (GOLDEN_KEY, None),
    (b"", GOLDEN_VALUE),
    (b"\x00", GOLDEN_VALUE),
    (GOLDEN_KEY[:-1], GOLDEN_VALUE),  # truncated partition
    (bytes([0xFF, 0xFF]) + GOLDEN_KEY[2:], GOLDEN_VALUE),  # negative length
    (GOLDEN_KEY, GOLDEN_VALUE[:15]),
    (bytes([0x00, 0x02, 0xC3, 0x28, 0, 0, 0, 0]), GOLDEN_VALUE),  # invalid UTF-8
])
def test_bad_records_raise_bad_record(key, value):
    with pytest.raises(BadRecord):
        decode_offset_sync(key, value)


@given(st.binary(max_size=64), st.binary(max_size=32))
def test_never_raises_anything_but_bad_record(key, value):
    try:
        decode_offset_sync(key, value)
    except BadRecord:
        pass


@given(st.text(max_size=40), st.integers(0, 2**31 - 1), st.integers(0, 2**63 - 1), st.integers(-1, 2**63 - 1))
def test_round_trip(topic, partition, upstream, downstream):
    sync = OffsetSync(topic, partition, upstream, downstream)
    assert decode_offset_sync(*encode_offset_sync(sync)) == sync


def test_the_feed_checks_every_value_of_a_key_it_has_seen():
    """The feed decodes a key once (then looks its raw bytes up): each value is still checked."""
    flow = FlowSettings("src", "dst", re.compile(".*"), re.compile(""), ReplicationPolicy())
    feed = OffsetSyncsFeed("src", None, {"syncs": flow})
    orders_3 = PartitionKey("src", "dst", "orders", 3)
    for value, latest, bad in ((GOLDEN_VALUE, 1234, 0), (GOLDEN_VALUE[:15], 1234, 1), (None, 1234, 2),
                               (struct.pack(">qq", -1, 0), 1234, 3), (struct.pack(">qq", 99, -5) + b"x", 99, 3)):
        feed._apply("syncs", GOLDEN_KEY, value)
        assert (feed.latest(), feed.bad_records) == ({orders_3: latest}, bad)
    feed._apply("syncs", GOLDEN_KEY + b"\x00", GOLDEN_VALUE)  # trailing bytes: another raw key, same partition
    assert (feed.latest(), feed.bad_records) == ({orders_3: 1234}, 3)


def test_a_forgotten_partition_reads_as_new_when_its_topic_comes_back():
    flow = FlowSettings("src", "dst", re.compile(".*"), re.compile(""), ReplicationPolicy())
    feed = OffsetSyncsFeed("src", None, {"syncs": flow})
    feed._apply("syncs", GOLDEN_KEY, GOLDEN_VALUE)
    feed._apply("syncs", *encode_offset_sync(OffsetSync("orders", 0, 5, 5)))
    feed.forget([PartitionKey("src", "dst", "orders", 3), PartitionKey("src", "dst", "orders", 99)])
    assert feed.latest() == {PartitionKey("src", "dst", "orders", 0): 5}
    feed._apply("syncs", GOLDEN_KEY, GOLDEN_VALUE)  # the topic came back: read as new
    assert feed.latest() == {PartitionKey("src", "dst", "orders", p): o for p, o in ((0, 5), (3, 1234))}


def test_the_feed_hands_out_the_pollers_key_objects_and_only_partitions_it_lists():
    flow = FlowSettings("src", "dst", re.compile(".*"), re.compile(""), ReplicationPolicy())
    feed = OffsetSyncsFeed("src", None, {"syncs": flow})
    theirs = [PartitionKey("src", "dst", "orders", p) for p in range(4)]
    listed = {flow.id: {"orders": tuple(theirs)}}
    feed.use_topic_keys(lambda flow_id: listed.get(flow_id, {}))
    feed._apply("syncs", GOLDEN_KEY, GOLDEN_VALUE)
    feed._apply("syncs", *encode_offset_sync(OffsetSync("orders", 4, 7, 7)))  # not listed yet
    feed._apply("syncs", *encode_offset_sync(OffsetSync("other", 0, 9, 9)))  # no such topic yet
    latest = feed.latest()
    assert latest == {theirs[3]: 1234} and next(iter(latest)) is theirs[3]
    # Metadata lists them now: what the feed kept is handed out.
    listed[flow.id] = {"orders": (*theirs, PartitionKey("src", "dst", "orders", 4)),
                       "other": (PartitionKey("src", "dst", "other", 0),)}
    assert feed.latest() == {theirs[3]: 1234, PartitionKey("src", "dst", "orders", 4): 7,
                             PartitionKey("src", "dst", "other", 0): 9}


def test_a_partition_past_the_slots_is_kept_on_its_own():
    flow = FlowSettings("src", "dst", re.compile(".*"), re.compile(""), ReplicationPolicy())
    feed = OffsetSyncsFeed("src", None, {"syncs": flow})
    for _ in range(2):
        feed._apply("syncs", *encode_offset_sync(OffsetSync("orders", 2**31 - 1, 8, 8)))
        feed._apply("syncs", *encode_offset_sync(OffsetSync("orders", 1, 3, 3)))
    assert feed.latest() == {PartitionKey("src", "dst", "orders", 2**31 - 1): 8, PartitionKey("src", "dst", "orders", 1): 3}
    assert len(feed._topics["syncs", "orders"].offsets) == 2  # not an array up to the far partition


def test_the_feed_keeps_each_syncs_downstream_offset_for_target_progress():
    """Both paths (a key decoded in full, a key whose topic part was seen) keep D beside U."""
    flow = FlowSettings("src", "dst", re.compile(".*"), re.compile(""), ReplicationPolicy())
    feed = OffsetSyncsFeed("src", None, {"syncs": flow})
    feed._apply("syncs", GOLDEN_KEY, GOLDEN_VALUE)  # orders 3: 1234 -> 567, decoded in full
    feed._apply("syncs", *encode_offset_sync(OffsetSync("orders", 1, 40, 20)))  # the seen-key path
    feed._apply("syncs", *encode_offset_sync(OffsetSync("orders", 3, 1300, 600)))
    ((topic, upstream, downstream, _),) = feed.topic_syncs(flow.id)
    assert (topic, list(upstream), list(downstream)) == ("orders", [-1, 40, -1, 1300], [-1, 20, -1, 600])
    assert feed.topic_syncs(FlowSettings("dst", "src", re.compile(".*"), re.compile(""), ReplicationPolicy()).id) == []


def test_consecutive_syncs_count_the_target_records_written_more_than_once():
    """(D' - D) - (U' - U) where positive, per flow and topic, from the syncs read after the
    first read (a restart reads the topic again: its history must not count twice); each sync
    sets its partition's flag, which the next sync of that partition replaces."""
    flow = FlowSettings("src", "dst", re.compile(".*"), re.compile(""), ReplicationPolicy())
    feed = OffsetSyncsFeed("src", None, {"syncs": flow})

    def sync(partition: int, upstream: int, downstream: int) -> tuple[int, bool]:
        feed._apply("syncs", *encode_offset_sync(OffsetSync("orders", partition, upstream, downstream)))
        syncs = feed._topics["syncs", "orders"]
        return syncs.duplicate_records, bool(syncs.duplicated[partition])

    assert sync(0, 0, 0) == (0, False)
    assert sync(0, 10, 15) == (0, True)  # 5 duplicates in the first read: flagged, not counted
    feed.evidence_times()  # the first read is over
    assert sync(0, 20, 25) == (0, False)  # one target record per upstream offset
    assert sync(0, 30, 40) == (5, True)  # a retried batch of 5 landed twice
    assert sync(1, 7, 7) == (5, False)  # another partition's first sync: nothing to compare
    assert sync(0, 31, 41) == (5, False)  # the next sync clears the flag
    # A restarted task copies again from its commit (26): its first sync (the re-copy of 27)
    # counts every record the old task had copied past the commit (27..31), which it writes again.
    assert sync(0, 27, 42) == (5 + 5, True)
    assert sync(0, 40, 55) == (10, False)
    assert sync(0, 50, 58) == (10, False)  # fewer target records than offsets: skipped gaps, not negative duplicates
    assert sync(0, 60, 3) == (10, False)  # the remote topic went back (truncated, recreated): no count
    ((topic, _, _, flags),) = feed.topic_syncs(flow.id)
    assert (topic, list(flags)) == ("orders", [0, 0])
    assert feed.duplicates() == (DuplicateCount("src", "dst", "orders", 10),)


def test_no_duplicate_count_where_another_writer_can_feed_the_remote_topic():
    """Two identity flows into dst both mirror `orders`: each flow's syncs step over the other's
    records in dst's `orders`, which are no duplicates of its own."""
    from mirrorlag.config.writers import RemoteWriters

    identity = ReplicationPolicy(identity=True)
    first = FlowSettings("src", "dst", re.compile("orders|clicks"), re.compile(""), identity)
    second = FlowSettings("two", "dst", re.compile("orders"), re.compile(""), identity)
    feed = OffsetSyncsFeed("src", None, {"syncs": first}, writers={"dst": RemoteWriters("dst", [first, second])})
    feed.evidence_times()  # past the first read: counting
    for topic, u, d in (("orders", 0, 0), ("orders", 10, 30), ("clicks", 0, 0), ("clicks", 10, 12)):
        feed._apply("syncs", *encode_offset_sync(OffsetSync(topic, 0, u, d)))
    assert feed.duplicates() == (DuplicateCount("src", "dst", "clicks", 2),)


def test_a_transactional_target_counts_no_duplicates():
    """With exactly.once.source.support = enabled each transaction's commit marker takes a target
    offset, so consecutive syncs show D' - D > U' - U with nothing written twice (the real MM2
    did: one per transaction, tests/apache/test_mm2_transactions.py): no count, no flag, and no
    duplicate series for the flow."""
    flow = FlowSettings("src", "dst", re.compile(".*"), re.compile(""), ReplicationPolicy(), target_transactional=True)
    feed = OffsetSyncsFeed("src", None, {"syncs": flow})
    feed._apply("syncs", *encode_offset_sync(OffsetSync("orders", 0, 0, 0)))
    feed.evidence_times()
    for upstream, downstream in ((6, 7), (13, 15), (20, 23)):  # 7 records and a marker a transaction
        feed._apply("syncs", *encode_offset_sync(OffsetSync("orders", 0, upstream, downstream)))
    syncs = feed._topics["syncs", "orders"]
    assert (syncs.duplicate_records, list(syncs.duplicated)) == (0, [0])
    assert feed.duplicates() == ()


class _ChunkedReader:
    """A first read of the sync topic that takes three polls (a week of syncs behind a restart),
    then one new sync per drain; each drain's records are written at its time in `times`."""

    def __init__(self, chunks: list[list[tuple[bytes, bytes]]], times: list[float]) -> None:
        self.chunks, self.times, self.drains = chunks, times, 0
        self.through = False

    def drain(self, apply) -> None:
        chunk, at = self.chunks[self.drains], self.times[self.drains]
        self.drains += 1
        for key, value in chunk:
            apply("syncs", key, value, int(at * 1000))
        self.through = self.drains >= 3

    def read_through(self, topic: str) -> bool:
        return self.through

    def unread(self, topic: str) -> str | None:
        return None if self.through else "not read to its end yet"


def test_a_first_read_over_several_polls_counts_no_old_duplicate_and_dates_every_old_sync():
    # Issue 40 item 6: the first read ends when the topic is read to its end, not after the first poll.
    flow = FlowSettings("src", "dst", re.compile(".*"), re.compile(""), ReplicationPolicy())
    feed = OffsetSyncsFeed("src", None, {"syncs": flow})
    old = [encode_offset_sync(OffsetSync("orders", 0, u, d)) for u, d in ((0, 0), (10, 15), (20, 30), (30, 45))]
    new = [encode_offset_sync(OffsetSync("orders", 0, 40, 58))]  # 3 target records written twice
    week_ago, now = 1_000.0, 605_800.0
    feed.reader = _ChunkedReader([old[:1], old[1:3], old[3:], new], [week_ago, week_ago + 60, week_ago + 120, now])
    dated = []
    for _ in range(3):
        feed.offsets()
        dated.append(set(feed.evidence_times().values()))
    syncs = feed._topics["syncs", "orders"]
    assert syncs.duplicate_records == 0  # the old run's gaps were counted by the sidecar that saw them
    assert dated == [{week_ago}, {week_ago + 60}, {week_ago + 120}]  # old evidence, dated as written
    feed.offsets()
    assert (syncs.duplicate_records, feed.evidence_times()) == (3, {})  # past the first read: counted, poll-dated
