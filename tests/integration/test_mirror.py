"""`python -m mirrorlag mirror` in its own process, checked against the bytes MM2 would write.

Every test uses fresh cluster aliases (s<hex>, d<hex>), so the fixed names MM2 uses
(mm2-offsets.<s>.internal, mm2-offset-syncs.<d>.internal, <s>.heartbeats) are its own. The mirror
also writes the fixed-name `heartbeats` topic on both brokers, and the sidecar's flows always
include `heartbeats`; so these tests run against a broker pair of their own, and never leave that
topic on the session brokers the sidecar tests share (fixture own_clusters).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Callable, Iterator

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, ConsumerGroupTopicPartitions, Message, Producer, TopicPartition

from mirrorlag.formats import (
    CONNECTOR_NAME,
    Checkpoint,
    decode_checkpoint,
    decode_connect_offset_key,
    decode_connect_offset_value,
    decode_heartbeat,
    decode_offset_sync,
)
from mirrorlag.groups.sync_store import SyncStore, translate
from tests.conftest import Clusters

pytestmark = pytest.mark.integration

LAG_MAX = 3


class Setup:
    """One test's aliases, topic and properties file."""

    def __init__(self, tmp_path: Path, clusters: Clusters, extra: str = "") -> None:
        tag = uuid.uuid4().hex[:8]
        self.clusters = clusters
        self.src, self.dst = f"s{tag}", f"d{tag}"
        self.topic = f"t-{tag}"
        self.remote = f"{self.src}.{self.topic}"
        self.sync_topic = f"mm2-offset-syncs.{self.dst}.internal"  # on the source
        self.offsets_topic = f"mm2-offsets.{self.src}.internal"  # on the target
        self.config = tmp_path / "mm2.properties"
        self.log = tmp_path / "mirror.log"
        self.config.write_text(
            f"clusters = {self.src}, {self.dst}\n"
            f"{self.src}.bootstrap.servers = {clusters.source}\n"
            f"{self.dst}.bootstrap.servers = {clusters.target}\n"
            f"{self.src}->{self.dst}.enabled = true\n"
            f"{self.src}->{self.dst}.topics = {self.topic}\n"
            f"offset.lag.max = {LAG_MAX}\n"
            f"emit.heartbeats.interval.seconds = 1\n"
            f"{extra}"
        )

    def start(self, *args: str, flush_ms: int = 60000) -> subprocess.Popen[bytes]:
        with open(self.log, "ab") as log:  # a file, not a pipe: a full pipe would block the mirror
            return subprocess.Popen(
                [sys.executable, "-m", "mirrorlag", "mirror", "--config", str(self.config),
                 "--offset-flush-interval-ms", str(flush_ms), *args],
                stdout=log, stderr=log)

    def stop(self, proc: subprocess.Popen[bytes]) -> None:
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
        assert proc.returncode == 0, self.log.read_text()
        assert time.monotonic() - started < 5

    def fill(self, counts: dict[int, int]) -> None:
        """The topic, with a partition for each of `counts` and that many records in it."""
        self.clusters.create_topic(self.topic, len(counts))
        for partition, n in counts.items():
            self.produce(partition, range(n))

    def produce(self, partition: int, offsets: range) -> None:
        """Records with known keys, headers and timestamps, one per batch (tansu's LEO quirk)."""
        producer = Producer({"bootstrap.servers": self.clusters.source, "batch.num.messages": 1, "linger.ms": 0})
        for i in offsets:
            producer.produce(self.topic, partition=partition, **record_fields(partition, i))
        assert producer.flush(15) == 0


def record_fields(partition: int, i: int) -> dict:
    return {
        "key": None if i == 3 else f"k{partition}-{i}".encode(),
        "value": None if i == 5 else f"v{partition}-{i}".encode() * 3,
        "headers": [("n", str(i).encode()), ("empty", b""), ("n", b"again")],
        "timestamp": 1_700_000_000_000 + partition * 1000 + i,
    }


class Reader:
    """Reads a topic from the beginning, all partitions, accumulating records."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex}",
                                  "enable.auto.commit": False, "isolation.level": "read_uncommitted"})
        self.assigned = False
        self.records: list[Message] = []

    def _assign(self) -> None:
        metadata = self.consumer.list_topics(self.topic, timeout=5)
        meta = metadata.topics.get(self.topic)
        if meta is not None and meta.error is None and meta.partitions:
            self.consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in meta.partitions])
            self.assigned = True

    def poll(self, seconds: float = 0.2) -> list[Message]:
        if not self.assigned:
            self._assign()
            if not self.assigned:
                time.sleep(seconds)
                return self.records
        for msg in self.consumer.consume(1000, timeout=seconds):
            if msg.error() is None:
                self.records.append(msg)
        return self.records

    def until(self, predicate: Callable[[list[Message]], bool], timeout: float = 15, what: str = "") -> list[Message]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate(self.poll()):
                return self.records
        raise AssertionError(f"timed out waiting for {what or self.topic}: {len(self.records)} records")

    def count_after(self, seconds: float) -> int:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.poll(0.1)
        return len(self.records)

    def close(self) -> None:
        self.consumer.close()


@pytest.fixture
def readers() -> Iterator[Callable[[str, str], Reader]]:
    opened: list[Reader] = []

    def make(bootstrap: str, topic: str) -> Reader:
        opened.append(Reader(bootstrap, topic))
        return opened[-1]

    yield make
    for reader in opened:
        reader.close()


def syncs_of(records: list[Message], topic: str) -> dict[int, list[tuple[int, int]]]:
    """(upstream, downstream) per partition of `topic`, in the order written."""
    out: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for msg in records:
        sync = decode_offset_sync(msg.key(), msg.value())
        if sync.topic == topic:
            out[sync.partition].append((sync.upstream_offset, sync.downstream_offset))
    return out


def committed_of(records: list[Message], cluster: str) -> dict[tuple[str, int], int | None]:
    """Newest Connect offset per (topic, partition) of the mirror's connector and source cluster."""
    out: dict[tuple[str, int], int | None] = {}
    for msg in records:
        key = decode_connect_offset_key(msg.key())
        assert key is not None and key.connector == CONNECTOR_NAME and key.cluster == cluster
        out[(key.topic, key.partition)] = decode_connect_offset_value(msg.value())
    return out


def expected_syncs(n: int, lag_max: int) -> list[tuple[int, int]]:
    """MM2's syncs for records 0..n-1 copied in one go to a fresh topic, then one offset commit:
    the immediate ones by PartitionState.update, plus the last record's delayed one."""
    immediate, last_sync = [], -1
    for offset in range(n):
        if last_sync == -1 or offset - (last_sync + 1) >= lag_max:
            immediate.append((offset, offset))
            last_sync = offset
    return immediate if immediate[-1][0] == n - 1 else [*immediate, (n - 1, n - 1)]


def test_copies_exactly_and_writes_mm2_syncs_offsets_and_heartbeats(tmp_path, own_clusters, readers):
    setup = Setup(tmp_path, own_clusters)
    counts = {0: 12, 1: 7}
    setup.fill(counts)
    proc = setup.start(flush_ms=1500)
    try:
        target = readers(own_clusters.target, setup.remote).until(lambda r: len(r) >= sum(counts.values()), what="the copy")
        by_partition: dict[int, list[Message]] = defaultdict(list)
        for msg in target:
            by_partition[msg.partition()].append(msg)
        for partition, n in counts.items():
            copied = sorted(by_partition[partition], key=Message.offset)
            assert [m.offset() for m in copied] == list(range(n))  # same partition, same offsets here
            for i, msg in enumerate(copied):
                want = record_fields(partition, i)
                assert (msg.key(), msg.value(), msg.headers(), msg.timestamp()) == (
                    want["key"], want["value"], want["headers"], (1, want["timestamp"]))

        # Offset syncs on the source: MM2's rule with offset.lag.max=3, then the delayed sync of
        # the last record at the first offset commit.
        expected = {p: expected_syncs(n, LAG_MAX) for p, n in counts.items()}
        assert expected[0] == [(0, 0), (4, 4), (8, 8), (11, 11)]
        syncs = readers(own_clusters.source, setup.sync_topic).until(
            lambda r: syncs_of(r, setup.topic) == expected, what=f"syncs {expected}")
        assert syncs_of(syncs, setup.topic) == expected

        # Connect offsets on the target: the last copied record's offset, not +1.
        offsets = readers(own_clusters.target, setup.offsets_topic).until(
            lambda r: {k: v for k, v in committed_of(r, setup.src).items() if k[0] == setup.topic}
            == {(setup.topic, 0): 11, (setup.topic, 1): 6}, what="committed offsets")
        assert {k for k in committed_of(offsets, setup.src)} >= {(setup.topic, 0), (setup.topic, 1)}

        # Heartbeats: Heartbeat(src, dst) into `heartbeats` on the target; Heartbeat(dst, src) into
        # `heartbeats` on the source, replicated to the target as `<src>.heartbeats`.
        def beats(reader: Reader, source: str, target: str) -> Callable[[list[Message]], bool]:
            def enough(records: list[Message]) -> bool:
                mine = [hb for hb in (decode_heartbeat(m.key(), m.value()) for m in records)
                        if (hb.source_alias, hb.target_alias) == (source, target)]
                return len(mine) >= 2 and all(abs(hb.timestamp_ms - time.time() * 1000) < 60_000 for hb in mine)
            return enough

        local = readers(own_clusters.target, "heartbeats")
        local.until(beats(local, setup.src, setup.dst), what="heartbeats on the target")
        replicated = readers(own_clusters.target, f"{setup.src}.heartbeats")
        replicated.until(beats(replicated, setup.dst, setup.src), what="replicated heartbeats")
    finally:
        setup.stop(proc)


def test_restart_resumes_from_the_committed_offset_and_copies_the_rest_again(tmp_path, own_clusters, readers):
    setup = Setup(tmp_path, own_clusters)
    own_clusters.create_topic(setup.topic, 1)
    setup.produce(0, range(10))
    target = readers(own_clusters.target, setup.remote)
    offsets = readers(own_clusters.target, setup.offsets_topic)

    def committed() -> int | None:
        offsets.count_after(0.3)
        return committed_of(offsets.records, setup.src).get((setup.topic, 0))

    # Run 1: copy 0..9; SIGTERM commits offset 9 (no periodic commit in a minute).
    proc = setup.start()
    target.until(lambda r: len(r) >= 10)
    setup.stop(proc)
    assert committed() == 9

    # Run 2 resumes at 10, copies 10..14 and dies without committing.
    setup.produce(0, range(10, 15))
    proc = setup.start()
    target.until(lambda r: len(r) >= 15)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=5)
    assert committed() == 9
    assert [m.offset() for m in target.records] == list(range(15))  # resumed: nothing copied twice yet

    # Run 3 resumes from the committed 9 + 1: 10..14 land a second time, at 15..19.
    proc = setup.start()
    try:
        copies = target.until(lambda r: len(r) >= 20)
        assert target.count_after(1.0) == 20
        again = sorted(copies, key=Message.offset)[15:]
        assert [m.headers()[0][1] for m in again] == [str(i).encode() for i in range(10, 15)]
        assert [m.value() for m in again] == [record_fields(0, i)["value"] for i in range(10, 15)]
    finally:
        setup.stop(proc)
    assert committed() == 14
    # A fresh PartitionState syncs the first record at once: upstream 10 is now downstream 15,
    # the step back MM2 shows after a restart; 14 -> 19 is lag.max past it.
    syncs = readers(own_clusters.source, setup.sync_topic).until(
        lambda r: syncs_of(r, setup.topic).get(0, [])[-2:] == [(10, 15), (14, 19)], what="syncs after restart")
    assert syncs_of(syncs, setup.topic)[0][:3] == [(0, 0), (4, 4), (8, 8)]


def test_rate_limit_and_pause_by_signal(tmp_path, own_clusters, readers):
    setup = Setup(tmp_path, own_clusters)
    own_clusters.create_topic(setup.topic, 1)
    rate = 25
    setup.produce(0, range(50))
    proc = setup.start("--max-records-per-second", str(rate), flush_ms=1000)
    try:
        target = readers(own_clusters.target, setup.remote)
        target.until(lambda r: len(r) >= 1, what="the first copy")
        first = time.monotonic()
        target.until(lambda r: len(r) >= 50)
        # Heartbeats share the budget, so 50 records take at least (50 - burst) / 25 s.
        assert time.monotonic() - first >= 1.2

        proc.send_signal(signal.SIGUSR1)
        time.sleep(0.5)  # copies already in flight land
        source_beats = readers(own_clusters.source, "heartbeats")
        replicated_beats = readers(own_clusters.target, f"{setup.src}.heartbeats")
        paused_copies = target.count_after(0.2)
        beats_before = source_beats.count_after(0.3)
        replicated_before = replicated_beats.count_after(0.3)
        setup.produce(0, range(50, 55))
        time.sleep(2.0)
        assert target.count_after(0.2) == paused_copies == 50, "paused: nothing copied"
        assert source_beats.count_after(0.3) > beats_before, "heartbeats into the source go on"
        assert replicated_beats.count_after(0.3) == replicated_before, "replicated heartbeats stop"

        proc.send_signal(signal.SIGUSR2)
        target.until(lambda r: len(r) >= 55, what="copies after resume")
        assert replicated_beats.until(lambda r: len(r) > replicated_before, what="heartbeats after resume")
    finally:
        setup.stop(proc)
    assert "copying paused" in setup.log.read_text()



def test_checkpoints_and_synced_group_offsets_by_mm2s_rule(tmp_path, own_clusters, readers):
    setup = Setup(tmp_path, own_clusters, extra=(
        "emit.checkpoints.interval.seconds = 1\n"
        "sync.group.offsets.enabled = true\n"
        "sync.group.offsets.interval.seconds = 1\n"))
    counts = {0: 12, 1: 7}
    setup.fill(counts)
    proc = setup.start(flush_ms=1000)
    try:
        expected_syncs_ = {p: expected_syncs(n, LAG_MAX) for p, n in counts.items()}
        syncs = readers(own_clusters.source, setup.sync_topic).until(
            lambda r: syncs_of(r, setup.topic) == expected_syncs_, what="syncs")
        # Only now do groups commit, so every checkpoint is translated with all the syncs.
        group, console = f"app-{setup.src}", f"console-consumer-{setup.src}"
        committed = {0: 6, 1: 7}
        for g in (group, console):
            own_clusters.commit_group(g, {(setup.topic, p): o for p, o in committed.items()})
        # MM2's rule by hand: kept syncs of p0 are (11,11), (8,8), (0,0) ((4,4) fell out of the
        # exponentially spaced slots), so g=6 resumes at 0 + 1; p1's newest sync (6,6) gives 7.
        store = SyncStore()
        store.read_to_end()
        for p, pairs in syncs_of(syncs, setup.topic).items():
            for u, d in pairs:
                store.apply(setup.topic, p, u, d)
        want = {p: translate(store.slots(setup.topic, p), g).downstream for p, g in committed.items()}
        assert want == {0: 1, 1: 7}

        def newest(records: list[Message]) -> dict[tuple[str, str, int], tuple[Checkpoint, int]]:
            return {(c.group, c.topic, c.partition): (c, m.timestamp()[1])
                    for m in records for c in [decode_checkpoint(m.key(), m.value())]}

        checkpoints = readers(own_clusters.target, f"{setup.src}.checkpoints.internal")
        read = checkpoints.until(lambda r: {k[2] for k in newest(r) if k[0] == group} == {0, 1}, what="checkpoints")
        got = newest(read)
        for p, g in committed.items():
            checkpoint, stamp = got[(group, setup.remote, p)]
            assert (checkpoint.upstream_offset, checkpoint.downstream_offset) == (g, want[p])
            assert abs(stamp - time.time() * 1000) < 30_000
        assert not [k for k in got if k[0] == console]  # groups.exclude's default

        target = own_clusters.admin("target")
        deadline = time.monotonic() + 15
        synced: dict[int, int] = {}
        while time.monotonic() < deadline and synced != want:
            answer = target.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(timeout=5)
            synced = {tp.partition: tp.offset for tp in answer.topic_partitions or () if tp.topic == setup.remote}
            time.sleep(0.3)
        assert synced == want

        # Restarted, it reads the checkpoints it wrote before the syncs (MM2 3.7.1+, KAFKA-15905),
        # so it keeps every sync again (p0's 6 still resumes at 1, not -1 from the newest (11, 11))
        # and writes nothing it wrote already; a group new since writes its first checkpoint.
        setup.stop(proc)
        proc = setup.start(flush_ms=1000)
        later = f"app-later-{setup.src}"
        own_clusters.commit_group(later, {(setup.topic, p): o for p, o in committed.items()})
        before = len(checkpoints.poll())

        def later_at(p0: int) -> Callable[[list[Message]], bool]:
            return lambda r: (c := newest(r[before:]).get((later, setup.remote, 0))) is not None and c[0].downstream_offset == p0

        checkpoints.until(later_at(want[0]), what="the new group's checkpoints")
        first = newest(checkpoints.records[before:])
        assert {k[2]: first[k][0].downstream_offset for k in first if k[0] == later} == want
        # One more pass, written after all of the first: had the first rewritten `group`, it shows now.
        own_clusters.commit_group(later, {(setup.topic, 0): 11})
        checkpoints.until(later_at(11), what="the new group's next checkpoint")
        assert {k for k in newest(checkpoints.records[before:]) if k[0] == group} == set()
    finally:
        setup.stop(proc)
