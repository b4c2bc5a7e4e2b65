"""The offset-syncs feed: LROs from MM2's `mm2-offset-syncs.<alias>.internal` topic (DESIGN §6).

MM2 writes a sync from its producer callback at most `offset.lag.max` records (or one offset flush)
behind what it copied, so this LRO is a lower bound: the lag it gives is at most that much too high.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Callable, Iterable

from confluent_kafka import Consumer

from mirrorlag.config.settings import FlowSettings, Settings
from mirrorlag.formats import SYNC_UPSTREAM_OFFSET, BadRecord, decode_offset_sync
from mirrorlag.kafka.topic_reader import TopicReader, assign_only_consumer
from mirrorlag.model import FlowId, PartitionKey

log = logging.getLogger(__name__)

FEED_NAME = "offset-syncs"

_unpack_upstream = SYNC_UPSTREAM_OFFSET.unpack_from


def sync_topic_location(flow: FlowSettings) -> tuple[str, str]:
    """(cluster alias holding the topic, topic name) for a flow, per offset-syncs.topic.location."""
    if flow.offset_syncs_topic_location == "target":
        return flow.target, flow.policy.offset_syncs_topic(flow.source)
    return flow.source, flow.policy.offset_syncs_topic(flow.target)


@dataclass
class OffsetSyncsFeed:
    """Reads one cluster's offset-syncs topics (one per flow) from the beginning, then keeps up.
    `consumer` may be None to drive `_apply` directly (unit tests)."""

    cluster_alias: str
    consumer: Consumer | None
    flows_by_topic: dict[str, FlowSettings]
    timeout_s: float = 10.0
    name: str = FEED_NAME
    bad_records: int = 0
    _latest: dict[PartitionKey, int] = field(default_factory=dict)
    # sync topic -> raw key bytes -> its PartitionKey: a compacted topic repeats a few thousand
    # keys millions of times, and decoding each key again cost most of a restart's drain.
    _keys: dict[str, dict[bytes, PartitionKey]] = field(default_factory=dict)
    reader: TopicReader | None = None  # None: driven by hand through _apply (unit tests)
    # The poller's key of a (flow, topic, partition) (Poller._key_of), so that the key cache and
    # the offsets hold the key objects the poller, the LRO cache and the engine hold, not a second
    # one per partition; None (or a partition it does not list yet): the feed makes its own.
    key_of: Callable[[FlowId, str, int], PartitionKey | None] | None = None

    def use_keys(self, key_of: Callable[[FlowId, str, int], PartitionKey | None]) -> None:
        self.key_of = key_of

    def __post_init__(self) -> None:
        if self.consumer is not None:
            self.reader = TopicReader("offset-syncs", self.cluster_alias, self.consumer,
                                       list(self.flows_by_topic), self.timeout_s)

    def offsets(self) -> dict[PartitionKey, int]:
        """Everything written up to now, applied in order: the newest sync per partition wins."""
        assert self.reader is not None
        self.reader.drain(self._apply)
        return dict(self._latest)

    def _apply(self, sync_topic: str, key: bytes | None, value: bytes | None) -> None:
        keys = self._keys.setdefault(sync_topic, {})
        partition_key = keys.get(key) if key is not None else None
        # A key seen before decoded fine: only the value's checks are left (>= 16 bytes, a
        # non-negative upstream offset); anything else takes the full decode, which counts it.
        if partition_key is not None and value is not None and len(value) >= 16:
            (upstream,) = _unpack_upstream(value)
            if upstream >= 0:
                self._latest[partition_key] = upstream
                return
        try:
            sync = decode_offset_sync(key, value)
        except BadRecord as exc:
            self.bad_records += 1
            log.debug("bad offset sync in %s: %s", sync_topic, exc)
            return
        assert key is not None  # decode_offset_sync rejects a null key
        flow = self.flows_by_topic[sync_topic]
        partition_key = (self.key_of and self.key_of(flow.id, sync.topic, sync.partition)
                         or PartitionKey(flow.source, flow.target, sync.topic, sync.partition))
        keys[key] = partition_key
        self._latest[partition_key] = sync.upstream_offset

    def forget(self, keys: Iterable[PartitionKey]) -> None:
        """Partitions that are gone: an LRO of the old log must never apply to a recreated one."""
        gone = set(keys)
        for key in gone:
            self._latest.pop(key, None)
        for raw_keys in self._keys.values():  # rare (a partition went GONE): one pass is fine
            for raw in [raw for raw, key in raw_keys.items() if key in gone]:
                del raw_keys[raw]

    def close(self) -> None:
        if self.reader is not None:
            self.reader.close()


def offset_syncs_feeds(settings: Settings) -> list[OffsetSyncsFeed]:
    """One feed per cluster that holds offset-syncs topics of the configured flows."""
    by_cluster: dict[str, dict[str, FlowSettings]] = {}
    for flow in settings.flows:
        cluster, topic = sync_topic_location(flow)
        by_cluster.setdefault(cluster, {})[topic] = flow
    return [
        OffsetSyncsFeed(alias, assign_only_consumer(settings.clusters[alias]), flows_by_topic, settings.request_timeout_s)
        for alias, flows_by_topic in by_cluster.items()
    ]
