"""Fuzzing the decoders of MM2's topics through the feeds' whole read path (docs/design.md §6).

Each example is a batch of records, half of them byte-level mutations of valid ones (truncated,
flipped, spliced) so that the fuzz reaches past the first length check, handed to the feed by a
stand-in reader exactly as TopicReader.drain hands them over. The feed must never raise, must
count every record that does not decode exactly once, and must keep the newest good value per
partition (independently re-derived here from the records).

The default suite runs a few hundred batches per feed; the soak versions run 100,000 each:
    .venv/bin/python -m pytest -m soak tests/unit/test_fuzz.py
"""

from __future__ import annotations

import json
import re
import struct
from dataclasses import dataclass
from typing import Callable, Iterable

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from mirrorlag.config.policy import ReplicationPolicy
from mirrorlag.config.settings import FlowSettings
from mirrorlag.feeds.connect_offsets import ConnectOffsetsFeed
from mirrorlag.feeds.heartbeats import HeartbeatFeed
from mirrorlag.feeds.offset_syncs import OffsetSyncsFeed
from mirrorlag.formats import Heartbeat, OffsetSync, encode_heartbeat, encode_offset_sync
from mirrorlag.model import FlowId, PartitionKey

QUICK = 150
SOAK = 100_000
FLOW = FlowId("src", "dst")
SYNC_TOPIC = "mm2-offset-syncs.dst.internal"
OFFSETS_TOPIC = "mm2-offsets.src.internal"
HEARTBEATS_TOPIC = "src.heartbeats"

Record = tuple[bytes | None, bytes | None]


@dataclass
class ListReader:
    """Stands in for TopicReader: drain() hands over a fixed batch, in order, once."""

    topic: str
    records: list[Record]
    cluster_alias: str = "x"
    through: bool = False  # read to its end once: after the first drain

    def drain(self, apply: Callable[[str, bytes | None, bytes | None], None]) -> None:
        records, self.records = self.records, []
        for key, value in records:
            apply(self.topic, key, value)
        self.through = True

    def read_through(self, topic: str) -> bool:
        return self.through


# --- strategies ------------------------------------------------------------------------------

@st.composite
def mutated(draw: st.DrawFn, valid: st.SearchStrategy[bytes]) -> bytes:
    data = bytearray(draw(valid))
    for _ in range(draw(st.integers(0, 3))):
        op = draw(st.sampled_from(["truncate", "flip", "insert", "set"]))
        at = draw(st.integers(0, len(data)))
        if op == "truncate":
            del data[at:]
        elif op == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=4))
        elif data and at < len(data):
            data[at] = data[at] ^ (1 << draw(st.integers(0, 7))) if op == "flip" else draw(st.integers(0, 255))
    return bytes(data)


def fuzzed(valid: st.SearchStrategy[bytes]) -> st.SearchStrategy[bytes | None]:
    return st.one_of(st.none(), st.binary(max_size=48), valid, mutated(valid))


TOPICS = st.sampled_from(["orders", "payments", "zé", ""]) | st.text(max_size=12)
PARTITIONS = st.integers(0, 3) | st.integers(-2**31, 2**31 - 1)
OFFSETS = st.integers(0, 2**20) | st.integers(-2**63, 2**63 - 1)

sync_keys = st.builds(lambda t, p: encode_offset_sync(OffsetSync(t, p, 0, 0))[0], TOPICS, PARTITIONS)
sync_values = st.builds(lambda u, d: struct.pack(">qq", u, d), OFFSETS, OFFSETS)
sync_records = st.lists(st.tuples(fuzzed(sync_keys), fuzzed(sync_values)), max_size=20)

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
connect_keys = st.builds(
    lambda name, part, extra: json.dumps([name, {**extra, **part}]).encode(),
    st.sampled_from(["MirrorSourceConnector", "MirrorCheckpointConnector"]) | st.text(max_size=8),
    st.fixed_dictionaries({}, optional={"cluster": st.sampled_from(["src", "dst"]) | JSON,
                                        "topic": TOPICS | JSON, "partition": PARTITIONS | JSON}),
    st.dictionaries(st.text(max_size=6), JSON, max_size=2),
) | st.builds(lambda doc: json.dumps(doc).encode(), JSON)
connect_values = st.builds(lambda o: json.dumps({"offset": o}).encode(), OFFSETS | JSON) | st.builds(
    lambda doc: json.dumps(doc).encode(), JSON) | st.just(b'{"offset":' + b"9" * 5000 + b"}")
connect_records = st.lists(st.tuples(fuzzed(connect_keys), fuzzed(connect_values)), max_size=20)

heartbeat_keys = st.builds(lambda s, t: encode_heartbeat(Heartbeat(s, t, 0))[0],
                           st.sampled_from(["up", "dst"]) | st.text(max_size=6),
                           st.sampled_from(["src", "dst"]) | st.text(max_size=6))
heartbeat_values = st.builds(lambda v, ms: struct.pack(">hq", v, ms), st.sampled_from([0, 0, 1, -1]), OFFSETS)
heartbeat_records = st.lists(st.tuples(fuzzed(heartbeat_keys), fuzzed(heartbeat_values)), max_size=20)


# --- independent expectations: what MM2's schemas say a record means -------------------------

def expected_sync(key: bytes | None, value: bytes | None) -> tuple[str, int, int] | None:
    """(topic, partition, upstream offset), or None when the record is bad."""
    if key is None or value is None or len(key) < 2 or len(value) < 16:
        return None
    length = int.from_bytes(key[:2], "big", signed=True)
    if length < 0 or len(key) < 2 + length + 4:
        return None
    try:
        topic = key[2:2 + length].decode("utf-8")
    except UnicodeDecodeError:
        return None
    partition = int.from_bytes(key[2 + length:6 + length], "big", signed=True)
    upstream = int.from_bytes(value[:8], "big", signed=True)
    return None if partition < 0 or upstream < 0 else (topic, partition, upstream)


def _json(raw: bytes) -> object:
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return ValueError


def _int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def expected_connect(key: bytes | None, value: bytes | None) -> str | tuple[PartitionKey, int | None]:
    """"bad", "skip" (another connector's or cluster's record), or (partition, offset or None)."""
    doc = ValueError if key is None else _json(key)
    if not (isinstance(doc, list) and len(doc) == 2 and isinstance(doc[0], str) and isinstance(doc[1], dict)):
        return "bad"
    if doc[0] != "MirrorSourceConnector":
        return "skip"
    cluster, topic, partition = (doc[1].get(k) for k in ("cluster", "topic", "partition"))
    if not (isinstance(cluster, str) and isinstance(topic, str) and _int(partition)):
        return "bad"
    if cluster != "src":
        return "skip"
    key_ = PartitionKey("src", "dst", topic, partition)
    if value is None:
        return key_, None
    body = _json(value)
    offset = body.get("offset") if isinstance(body, dict) else None
    return (key_, offset) if _int(offset) else "bad"


def expected_heartbeat(key: bytes | None, value: bytes | None) -> Heartbeat | None:
    if key is None or value is None or len(value) < 10:
        return None
    names, pos = [], 0
    for _ in range(2):
        if len(key) < pos + 2:
            return None
        length = int.from_bytes(key[pos:pos + 2], "big", signed=True)
        if length < 0 or len(key) < pos + 2 + length:
            return None
        try:
            names.append(key[pos + 2:pos + 2 + length].decode("utf-8"))
        except UnicodeDecodeError:
            return None
        pos += 2 + length
    if int.from_bytes(value[:2], "big", signed=True) != 0:
        return None
    return Heartbeat(names[0], names[1], int.from_bytes(value[2:10], "big", signed=True))


# --- the properties --------------------------------------------------------------------------

def run_batches(feed, topic: str, read: Callable[[], dict], batches: list[list[Record]],
                account: Callable[[dict, bytes | None, bytes | None], bool]) -> None:
    """Feed each batch through `read` (the feed's per-poll call); after each, the feed's count of
    bad records and its state must equal what `account` derives record by record (True: bad)."""
    bad, state = 0, {}
    for batch in batches:
        feed.reader = ListReader(topic, batch)
        got = read()
        bad += sum(account(state, key, value) for key, value in batch)
        assert feed.bad_records == bad
        assert got == state


def check_offset_syncs(batches: list[list[Record]]) -> None:
    def account(latest: dict, key: bytes | None, value: bytes | None) -> bool:
        if (sync := expected_sync(key, value)) is None:
            return True
        latest[PartitionKey("src", "dst", sync[0], sync[1])] = sync[2]
        return False

    flow = FlowSettings("src", "dst", re.compile(".*"), re.compile(""), ReplicationPolicy())
    feed = OffsetSyncsFeed("src", None, {SYNC_TOPIC: flow})
    run_batches(feed, SYNC_TOPIC, feed.offsets, batches, account)


def check_connect_offsets(batches: list[list[Record]]) -> None:
    def account(latest: dict, key: bytes | None, value: bytes | None) -> bool:
        meaning = expected_connect(key, value)
        if isinstance(meaning, tuple):
            partition, offset = meaning
            if offset is None:
                latest.pop(partition, None)
            else:
                latest[partition] = offset
        return meaning == "bad"

    feed = ConnectOffsetsFeed("dst", None, {OFFSETS_TOPIC: [FLOW]})
    run_batches(feed, OFFSETS_TOPIC, feed.offsets, batches, account)


def check_heartbeats(batches: list[list[Record]]) -> None:
    def account(newest: dict, key: bytes | None, value: bytes | None) -> bool:
        if (heartbeat := expected_heartbeat(key, value)) is None:
            return True
        if heartbeat.target_alias == "src" and heartbeat.timestamp_ms > newest.get(FLOW, -1):
            newest[FLOW] = heartbeat.timestamp_ms
        return False

    feed = HeartbeatFeed("dst", None, {HEARTBEATS_TOPIC: [FLOW]})
    run_batches(feed, HEARTBEATS_TOPIC, feed.newest, batches, account)


CASES: list[tuple[str, Callable[[list[list[Record]]], None], st.SearchStrategy]] = [
    ("offset_syncs", check_offset_syncs, sync_records),
    ("connect_offsets", check_connect_offsets, connect_records),
    ("heartbeats", check_heartbeats, heartbeat_records),
]


def _fuzz_test(check: Callable[[list[list[Record]]], None], records: st.SearchStrategy, examples: int) -> Callable:
    @settings(max_examples=examples, deadline=None, database=None if examples > QUICK else settings().database,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(st.lists(records, min_size=1, max_size=3))
    def test(batches: list[list[Record]]) -> None:
        check(batches)

    return test


def _tests(examples: int, marks: Iterable[pytest.MarkDecorator] = ()) -> dict[str, Callable]:
    made = {}
    for name, check, records in CASES:
        test = _fuzz_test(check, records, examples)
        for mark in marks:
            test = mark(test)
        made[f"test_{name}_feed_never_raises_and_counts_every_bad_record" + ("_soak" if marks else "")] = test
    return made


globals().update(_tests(QUICK))
globals().update(_tests(SOAK, [pytest.mark.soak]))


def test_the_expectations_agree_with_golden_records():
    """The re-derived meanings are right on records built by MM2's rules (the oracle is tested too)."""
    key, value = encode_offset_sync(OffsetSync("orders", 3, 1234, 567))
    assert expected_sync(key, value) == ("orders", 3, 1234)
    assert expected_sync(key[:-1], value) is None
    golden = b'["MirrorSourceConnector",{"cluster":"src","partition":3,"topic":"orders"}]'
    assert expected_connect(golden, b'{"offset":1234}') == (PartitionKey("src", "dst", "orders", 3), 1234)
    assert expected_connect(golden, None) == (PartitionKey("src", "dst", "orders", 3), None)
    assert expected_connect(golden, b'{"offset":-1}') == "bad"
    assert expected_connect(b'["MirrorCheckpointConnector",{}]', b"x") == "skip"
    assert expected_heartbeat(*encode_heartbeat(Heartbeat("dst", "src", 7))) == Heartbeat("dst", "src", 7)
