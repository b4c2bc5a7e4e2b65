"""The offset-syncs feed: LROs from MM2's `mm2-offset-syncs.<alias>.internal` topic (docs/design.md §6).

MM2 writes a sync from its producer callback at most `offset.lag.max` records (or one offset flush)
behind what it copied, so this LRO is a lower bound: the lag it gives is at most that much too high.
Each sync's downstream offset is kept too: the target-progress feed translates the target's end
offset through it.

Consecutive syncs of a partition also show duplicates: MM2 copies records one target record each,
so between syncs (U, D) and (U', D') the target gains U' - U records unless some were written more
than once (Connect's producer retries a batch it is not sure landed; a restarted task copies again
from its last committed offset). `duplicate_records` counts (D' - D) - (U' - U) where positive. It
telescopes: over any run of syncs the counts add up to the target records written beyond the
upstream range covered, so after a restart the new task's first sync (from its first re-copy)
counts at once every record the old task copied past the commit, which it will write again.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from array import array
from dataclasses import dataclass, field
from itertools import repeat
from typing import Iterable, Mapping

import numpy as np

from confluent_kafka import Consumer

from mirrorlag.config.settings import FlowSettings, Settings
from mirrorlag.config.writers import RemoteWriters
from mirrorlag.formats import SYNC_KEY_PARTITION, SYNC_VALUE, BadRecord, decode_offset_sync
from mirrorlag.kafka.topic_reader import TopicReader, assign_only_consumer
from mirrorlag.interfaces import DuplicateCount, FeedHealth, FeedOff, LroFeed, TopicKeysOf
from mirrorlag.model import FlowId, PartitionKey

log = logging.getLogger(__name__)

FEED_NAME = "offset-syncs"

_unpack_sync = SYNC_VALUE.unpack_from
_unpack_partition = SYNC_KEY_PARTITION.unpack_from


def sync_topic_location(flow: FlowSettings) -> tuple[str, str]:
    """(cluster alias holding the topic, topic name) for a flow, per offset-syncs.topic.location."""
    if flow.offset_syncs_topic_location == "target":
        return flow.target, flow.policy.offset_syncs_topic(flow.source)
    return flow.source, flow.policy.offset_syncs_topic(flow.target)


# Partitions numbered below this are slots of their topic's array; a sync naming a higher one
# (no real topic has so many; junk may) is an entry of its own rather than a huge array.
_SLOTS = 1 << 16
_NONE = -1  # a slot with no sync yet (an upstream offset is never negative)


@dataclass
class _TopicSyncs:
    """One flow's topic: the newest sync by partition number, its upstream offset (_NONE: none)
    and its downstream offset (the target record it became), and whether it showed duplicates
    (1: the target gained more records since the partition's previous sync than upstream offsets
    were covered)."""

    flow: FlowSettings
    topic: str
    offsets: array = field(default_factory=lambda: array("q"))
    downstream: array = field(default_factory=lambda: array("q"))
    duplicated: array = field(default_factory=lambda: array("b"))
    duplicate_records: int = 0  # counted since the feed's first read (not during it: a restart would count them again)
    # While the feed's first read of the topic lasts: each partition's sync time (the record
    # batch's, seconds; 0: none). Dropped once handed out, so it costs nothing afterwards.
    times: array | None = None

    def store(self, partition: int, upstream: int, downstream: int) -> int:
        """Keep a partition's newest sync; return the target records it shows were written more
        than once since the previous one (0 without one, or where the target went back: a
        truncated or recreated remote topic)."""
        offsets = self.offsets
        if partition >= len(offsets):
            grow = partition + 1 - len(offsets)
            offsets.extend(repeat(_NONE, grow))
            self.downstream.extend(repeat(_NONE, grow))
            self.duplicated.extend(repeat(0, grow))
        previous = offsets[partition]
        offsets[partition] = upstream
        down = self.downstream
        before = down[partition]
        down[partition] = downstream
        extra = (downstream - before) - (upstream - previous)  # (D' - D) - (U' - U)
        # On a transactional target (exactly.once.source.support = enabled) every transaction's
        # commit marker takes a target offset: D' - D > U' - U without a record written twice
        # (the real MM2 counted one "duplicate" per transaction), and an aborted retry's records
        # are never read. No duplicate is counted there.
        if extra > 0 and previous != _NONE and downstream > before and not self.flow.target_transactional:
            self.duplicated[partition] = 1
            return extra
        self.duplicated[partition] = 0
        return 0

    def stamp(self, partition: int, at: float) -> None:
        times = self.times
        if times is None:
            times = self.times = array("d")
        if partition >= len(times):
            times.extend(repeat(0.0, partition + 1 - len(times)))
        times[partition] = at


@dataclass
class OffsetSyncsFeed(LroFeed):
    """Reads one cluster's offset-syncs topics (one per flow) from the beginning, then keeps up.
    `consumer` may be None to drive `_apply` directly (unit tests).

    Per partition it keeps 17 bytes: the newest sync's upstream and downstream offsets and whether
    it showed duplicates, in its topic's arrays, indexed by partition number. A compacted topic
    repeats a few thousand keys millions of times: a record whose key's topic part (everything before its INT32 partition) was seen before is read
    without decoding the key again, by that part's bytes and the key's last four. No dict is kept
    per partition: a key object and a dict entry each would cost many times the 8 bytes."""

    cluster_alias: str
    consumer: Consumer | None
    flows_by_topic: dict[str, FlowSettings]
    timeout_s: float = 10.0
    name: str = FEED_NAME
    bad_records: int = 0
    _topics: dict[tuple[str, str], _TopicSyncs] = field(default_factory=dict)  # (sync topic, topic)
    _prefixes: dict[str, dict[bytes, _TopicSyncs]] = field(default_factory=dict)  # sync topic -> key's topic part
    _far: dict[PartitionKey, int] = field(default_factory=dict)  # partitions numbered _SLOTS and up
    _dating: bool = True  # driven by hand (no reader): until the first evidence_times()
    reader: TopicReader | None = None  # None: driven by hand through _apply (unit tests)
    # Per flow, the poller's keys of each topic by partition number (Poller's keys by topic): the
    # offsets handed out are keyed by the poller's own key objects, and only partitions it lists
    # are (the others are kept until it does). None: every partition, under keys of the feed's own.
    topic_keys: TopicKeysOf | None = None
    # Per target alias, who can write its remote topics: where more than one writer can, a flow's
    # consecutive syncs show the other writers' records too, which are no duplicates of its own.
    writers: Mapping[str, RemoteWriters] = field(default_factory=dict)
    # Sync topics that more than one flow writes, with every such flow (docs/design.md §6: flows whose
    # offset-syncs topics share one name, as P->Q at location source and Q->P at location target
    # both write P's mm2-offset-syncs.Q.internal). A sync there belongs to the one flow whose
    # filters accept its source topic; where several do, to none (`ambiguous`, in feeds[].off).
    sharing: Mapping[str, tuple[FlowSettings, ...]] = field(default_factory=dict)
    ambiguous: dict[str, set[str]] = field(default_factory=dict)  # sync topic -> source topics
    _drain_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)  # the groups job reads beside

    def use_topic_keys(self, topic_keys: TopicKeysOf) -> None:
        self.topic_keys = topic_keys

    def __post_init__(self) -> None:
        if self.consumer is not None:
            self.reader = TopicReader("offset-syncs", self.cluster_alias, self.consumer,
                                       list(self.flows_by_topic), self.timeout_s, timed=True)

    def offsets(self) -> dict[PartitionKey, int]:
        """Everything written up to now, applied in order: the newest sync per partition wins."""
        assert self.reader is not None
        with self._drain_lock:
            self.reader.drain(self._apply)
        return self.latest()

    def latest(self) -> dict[PartitionKey, int]:
        """The newest sync of each partition (of those the poller lists, once it is given them)."""
        out: dict[PartitionKey | None, int] = {}
        for syncs in self._topics.values():
            offsets = syncs.offsets
            if not offsets:
                continue
            if self.topic_keys is None:
                flow = syncs.flow
                out.update((PartitionKey(flow.source, flow.target, syncs.topic, p), o)
                           for p, o in enumerate(offsets) if o != _NONE)
                continue
            by_partition = self.topic_keys(syncs.flow.id).get(syncs.topic)
            if by_partition is None:
                continue
            if min(offsets) != _NONE:  # a sync for every partition, the usual case: in C
                out.update(zip(by_partition, offsets))
            else:
                values = np.frombuffer(offsets, np.int64)[:len(by_partition)]
                have = np.flatnonzero(values != _NONE).tolist()
                out.update(zip(map(by_partition.__getitem__, have), values[have].tolist()))
        out.pop(None, None)  # partitions metadata does not list
        out.update(self._far)
        return out  # type: ignore[return-value]

    def _apply(self, sync_topic: str, key: bytes | None, value: bytes | None, written_ms: int = -1) -> None:
        """One sync record, written at `written_ms` (its timestamp; negative: none)."""
        prefixes = self._prefixes.get(sync_topic)
        if prefixes is None:
            prefixes = self._prefixes[sync_topic] = {}
        # A key whose topic part was seen: only the partition and the value's checks are left
        # (>= 16 bytes, non-negative); anything else takes the full decode, which counts it.
        if key is not None and value is not None and len(value) >= 16:
            syncs = prefixes.get(key[:-4])
            if syncs is not None:
                upstream, downstream = _unpack_sync(value)
                (partition,) = _unpack_partition(key, len(key) - 4)
                if upstream >= 0 and 0 <= partition < _SLOTS:
                    extra = syncs.store(partition, upstream, downstream)
                    if self._first_read(sync_topic):
                        self._stamp(syncs, partition, written_ms)
                    elif extra:
                        syncs.duplicate_records += extra
                    return
        try:
            sync = decode_offset_sync(key, value)
        except BadRecord as exc:
            self.bad_records += 1
            log.debug("bad offset sync in %s: %s", sync_topic, exc)
            return
        assert key is not None  # decode_offset_sync rejects a null key
        flow = self._flow_of(sync_topic, sync.topic)
        if flow is None:
            self.ambiguous.setdefault(sync_topic, set()).add(sync.topic)
            return
        if sync.partition >= _SLOTS:
            self._far[PartitionKey(flow.source, flow.target, sync.topic, sync.partition)] = sync.upstream_offset
            return
        syncs = self._topics.get((sync_topic, sync.topic))
        if syncs is None:
            syncs = self._topics[sync_topic, sync.topic] = _TopicSyncs(flow, sync.topic)
        if len(key) == 2 + len(sync.topic.encode()) + 4:  # exactly topic and partition: its part names the topic
            prefixes[key[:-4]] = syncs
        extra = syncs.store(sync.partition, sync.upstream_offset, sync.downstream_offset)
        if self._first_read(sync_topic):
            self._stamp(syncs, sync.partition, written_ms)
        elif extra:
            syncs.duplicate_records += extra

    def _first_read(self, sync_topic: str) -> bool:
        """Whether a sync now applied is of the topic's first read to its end, however many polls
        that takes: a restart reads the topic from its beginning, so such a sync is dated by its
        record time (old evidence) and its gap is no duplicate of this run's (counted before)."""
        return self._dating if self.reader is None else not self.reader.read_through(sync_topic)

    def _flow_of(self, sync_topic: str, topic: str) -> FlowSettings | None:
        flows = self.sharing.get(sync_topic)
        if not flows:
            return self.flows_by_topic[sync_topic]
        accepting = [flow for flow in flows if flow.should_replicate(topic)]
        return accepting[0] if len(accepting) == 1 else None

    def all_flows(self) -> Iterable[tuple[str, FlowSettings]]:
        """(sync topic, flow) for every flow whose syncs this feed reads."""
        for sync_topic, flow in self.flows_by_topic.items():
            yield from ((sync_topic, f) for f in self.sharing.get(sync_topic, (flow,)))

    @staticmethod
    def _stamp(syncs: _TopicSyncs, partition: int, written_ms: int) -> None:
        if written_ms >= 0:
            syncs.stamp(partition, written_ms / 1000.0)

    def evidence_read(self) -> dict[FlowId, str | None]:
        reader = self.reader
        return {} if reader is None else {flow.id: reader.unread(topic) for topic, flow in self.all_flows()}

    def evidence_times(self) -> dict[PartitionKey, float]:
        """The sync times of the first read to the end read since the last call (a restart reads
        the topic from its beginning, so an old sync is old evidence); later syncs arrive within a
        poll and are dated by it."""
        self._dating = False
        out: dict[PartitionKey, float] = {}
        for syncs in self._topics.values():
            times, syncs.times = syncs.times, None
            if not times:
                continue
            by_partition = (self.topic_keys(syncs.flow.id).get(syncs.topic, ()) if self.topic_keys is not None
                            else [PartitionKey(syncs.flow.source, syncs.flow.target, syncs.topic, p)
                                  for p in range(len(times))])
            out.update((key, at) for key, at in zip(by_partition, times) if key is not None and at > 0.0)
        return out

    def topic_syncs(self, flow: FlowId) -> list[tuple[str, array, array, array]]:
        """The flow's topics with syncs: (topic, upstream offsets, downstream offsets, duplicated
        flags), each array indexed by partition number, _NONE upstream where a partition has
        none. Live arrays: read them before the next drain."""
        return [(syncs.topic, syncs.offsets, syncs.downstream, syncs.duplicated) for syncs in self._topics.values()
                if syncs.flow.id == flow]

    def newest_sync(self, flow: FlowId, topic: str, partition: int) -> tuple[int, int] | None:
        """A partition's newest sync (upstream, downstream), for the groups job's thread (it seeds
        a partition its groups start to commit on): under the drain's lock, never one offset of
        one sync and the other of the next."""
        with self._drain_lock:
            for syncs in self._topics.values():
                if syncs.topic == topic and syncs.flow.id == flow:
                    if partition < len(syncs.offsets) and (upstream := syncs.offsets[partition]) != _NONE:
                        return upstream, syncs.downstream[partition]
                    return None
            return None  # a partition numbered past the arrays keeps its upstream offset only

    def duplicates(self) -> tuple[DuplicateCount, ...]:
        """Per flow and topic with syncs (of those the poller lists, once it is given them; not
        those another writer can feed too, nor those of a transactional target, where syncs cannot
        tell a duplicate from a marker), the target records written more than once so far."""
        listed = self.topic_keys
        return tuple(sorted(DuplicateCount(s.flow.source, s.flow.target, s.topic, s.duplicate_records)
                            for s in self._topics.values()
                            if (listed is None or s.topic in listed(s.flow.id)) and not self._shared(s)
                            and not s.flow.target_transactional))

    def _shared(self, syncs: _TopicSyncs) -> bool:
        writers = self.writers.get(syncs.flow.target)
        return writers is not None and writers.of(syncs.flow.policy.remote_topic(syncs.flow.source, syncs.topic)).shared

    def health(self) -> FeedHealth | None:
        health = super().health()
        if health is None:
            return None
        off = tuple(FeedOff(tuple(str(f.id) for f in self.sharing[sync_topic]), tuple(sorted(topics)),
                            f"the flows' offset syncs share {sync_topic} on {self.cluster_alias} and more than one "
                            "of them copies topics of these names: no sync tells whose it is")
                    for sync_topic, topics in sorted(self.ambiguous.items()))
        return dataclasses.replace(health, duplicates=self.duplicates(), off=health.off + off)

    def forget(self, keys: Iterable[PartitionKey]) -> None:
        """Partitions that are gone: an LRO of the old log must never apply to a recreated one."""
        for key in keys:
            self._far.pop(key, None)
            for sync_topic, flow in self.all_flows():
                syncs = self._topics.get((sync_topic, key.topic))
                if flow.id == key.flow and syncs is not None and key.partition < len(syncs.offsets):
                    syncs.offsets[key.partition] = _NONE


def offset_syncs_feeds(settings: Settings) -> list[OffsetSyncsFeed]:
    """One feed per cluster that holds offset-syncs topics of the configured flows that emit them
    (emit.offset-syncs.enabled); the writers of each remote topic count every flow, syncs or not."""
    by_cluster: dict[str, dict[str, list[FlowSettings]]] = {}
    for flow in settings.flows:
        if not flow.emit_offset_syncs:
            continue
        cluster, topic = sync_topic_location(flow)
        by_cluster.setdefault(cluster, {}).setdefault(topic, []).append(flow)
    writers = {target: RemoteWriters(target, settings.flows) for target in {flow.target for flow in settings.flows}}
    return [
        OffsetSyncsFeed(alias, assign_only_consumer(settings.clusters[alias]),
                        {topic: flows[0] for topic, flows in by_topic.items()}, settings.request_timeout_s,
                        writers=writers,
                        sharing={topic: tuple(flows) for topic, flows in by_topic.items() if len(flows) > 1})
        for alias, by_topic in by_cluster.items()
    ]
