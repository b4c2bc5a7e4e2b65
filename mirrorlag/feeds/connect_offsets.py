"""The connect-offsets feed: LROs from the Connect source offsets MirrorSourceTask commits (docs/design.md §6).

Dedicated MM2 runs one Connect herder per flow A->B against the *target* cluster B; its offset
storage topic is `mm2-offsets.A.internal` (MirrorMakerConfig hard-codes the `.`, whatever
`replication.policy.separator` says) unless `offset.storage.topic` names another. The source, checkpoint and heartbeat connectors of that flow
all commit into it, each under its own name:

    key   ["MirrorSourceConnector",{"cluster":"A","partition":0,"topic":"t"}]   (any key order)
    value {"offset":123}      the offset of the last record copied (MM2 resumes at offset + 1)
    null value                a tombstone: the partition's offset was reset

Only MirrorSourceConnector records (also Strimzi's `A->B.MirrorSourceConnector`) of the flow's
own source cluster are LROs; the other
connectors' records are skipped silently. A record that does not decode is counted in
`bad_records` and skipped. Within the feed the newest record per partition is the truth, even
when it is smaller (MM2 restarted from an older commit: the engine reports a REWIND).

Connect commits offsets every `offset.flush.interval.ms` (default 60 s), so this LRO is a lower
bound that can trail the mirror by up to one flush interval.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from confluent_kafka import Consumer

from mirrorlag.config.settings import FlowSettings, Settings
from mirrorlag.formats import BadRecord, decode_connect_offset_key, decode_connect_offset_value
from mirrorlag.kafka.topic_reader import TopicReader, assign_only_consumer
from mirrorlag.interfaces import KeyOf, LroFeed
from mirrorlag.model import FlowId, PartitionKey

log = logging.getLogger(__name__)

FEED_NAME = "connect-offsets"


def connect_offsets_topic(flow: FlowSettings | FlowId, topics: Mapping[FlowId, str] | None = None) -> str:
    """The flow's Connect offset storage topic on its target cluster: an override from `topics`
    (keyed by FlowId), else the flow's configured one, else `mm2-offsets.<source alias>.internal`."""
    flow_id = flow.id if isinstance(flow, FlowSettings) else FlowId(*flow)
    if topics and flow_id in topics:
        return topics[flow_id]
    if isinstance(flow, FlowSettings):
        return flow.connect_offsets_topic
    return f"mm2-offsets.{flow_id.source}.internal"


@dataclass
class ConnectOffsetsFeed(LroFeed):
    """Reads one target cluster's Connect offset topics (one per flow) from the beginning, then
    keeps up. `consumer` may be None to drive `_apply` directly (unit tests)."""

    cluster_alias: str  # the target cluster holding the topics
    consumer: Consumer | None
    # topic -> the flows whose offsets it stores; a record belongs to the flow whose source alias is
    # its `cluster` (one flow per topic in dedicated MM2; overrides may share a topic)
    flows_by_topic: Mapping[str, Sequence[FlowId]]
    timeout_s: float = 10.0
    name: str = FEED_NAME
    bad_records: int = 0
    _latest: dict[PartitionKey, int] = field(default_factory=dict)
    _times: dict[PartitionKey, float] = field(default_factory=dict)  # record times since the last hand-out
    reader: TopicReader | None = None  # None: driven by hand through _apply (unit tests)
    # The poller's key of a (flow, topic, partition) (Poller._key_of), so the offsets are keyed by
    # the poller's own key objects; None (or a partition it does not list yet): a key of its own.
    key_of: KeyOf | None = None

    def use_keys(self, key_of: KeyOf) -> None:
        self.key_of = key_of

    def __post_init__(self) -> None:
        if self.consumer is not None:
            # Each commit is dated by its own record: a batch spans the topic's 25 partitions,
            # whose records are of any age.
            self.reader = TopicReader("Connect offsets", self.cluster_alias, self.consumer,
                                       list(self.flows_by_topic), self.timeout_s, timed=True)

    def offsets(self) -> dict[PartitionKey, int]:
        """Everything written up to now, applied in order: the newest record per partition wins."""
        assert self.reader is not None
        self.reader.drain(lambda topic, key, value, written_ms=-1: self._apply(key, value, topic, written_ms))
        return dict(self._latest)

    def _apply(self, key: bytes | None, value: bytes | None, topic: str | None = None,
               written_ms: int = -1) -> None:
        """Apply one record of `topic` (None: any of this feed's topics), written at `written_ms`
        (its timestamp; negative: none). Pure bookkeeping: no I/O."""
        try:
            decoded = decode_connect_offset_key(key)
        except BadRecord as exc:
            self.bad_records += 1
            log.debug("bad Connect offset key in %s: %s", topic, exc)
            return
        if decoded is None:
            return  # another connector's offsets (checkpoints, heartbeats)
        flow = self._flow_for(decoded.cluster, topic)
        if flow is None:
            return  # another source cluster's offsets: not this flow's
        partition_key = (self.key_of and self.key_of(flow, decoded.topic, decoded.partition)
                         or PartitionKey(flow.source, flow.target, decoded.topic, decoded.partition))
        try:
            offset = decode_connect_offset_value(value)
        except BadRecord as exc:
            self.bad_records += 1
            log.debug("bad Connect offset value in %s for %s: %s", topic, partition_key, exc)
            return
        if offset is None:
            self._latest.pop(partition_key, None)  # tombstone: the offset was reset
            self._times.pop(partition_key, None)
        else:
            self._latest[partition_key] = offset
            if written_ms >= 0:
                self._times[partition_key] = written_ms / 1000.0

    def evidence_read(self) -> dict[FlowId, str | None]:
        reader = self.reader
        return {} if reader is None else {
            flow: reader.unread(topic) for topic, flows in self.flows_by_topic.items() for flow in flows}

    def evidence_times(self) -> dict[PartitionKey, float]:
        """The commits' record times of the partitions whose offset was read since the last call."""
        times, self._times = self._times, {}
        return times

    def _flow_for(self, cluster: str, topic: str | None) -> FlowId | None:
        candidates = self.flows_by_topic.get(topic, ()) if topic is not None else (
            flow for flows in self.flows_by_topic.values() for flow in flows)
        for flow in candidates:
            if flow.source == cluster:
                return flow
        return None

    def forget(self, keys: Iterable[PartitionKey]) -> None:
        """Partitions that are gone: an LRO of the old log must never apply to a recreated one."""
        for key in keys:
            self._latest.pop(key, None)


def connect_offsets_feeds(settings: Settings, topics: Mapping[FlowId, str] | None = None) -> list[ConnectOffsetsFeed]:
    """One feed per target cluster of the configured flows. `topics` overrides a flow's offset
    storage topic (keyed by FlowId; by default the flow's own `connect_offsets_topic`)."""
    by_cluster: dict[str, dict[str, list[FlowId]]] = {}
    for flow in settings.flows:
        topic = connect_offsets_topic(flow, topics)
        by_cluster.setdefault(flow.target, {}).setdefault(topic, []).append(flow.id)
    return [
        ConnectOffsetsFeed(alias, assign_only_consumer(settings.clusters[alias]), flows_by_topic, settings.request_timeout_s)
        for alias, flows_by_topic in by_cluster.items()
    ]
