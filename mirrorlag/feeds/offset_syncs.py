"""The offset-syncs feed: LROs from MM2's `mm2-offset-syncs.<alias>.internal` topic (DESIGN §6).

MM2 writes a sync from its producer callback at most `offset.lag.max` records (or one offset flush)
behind what it copied, so this LRO is a lower bound: the lag it gives is at most that much too high.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass, field

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from mirrorlag.config.settings import FlowSettings, Settings
from mirrorlag.formats import BadRecord, decode_offset_sync
from mirrorlag.kafka.source import LIBRDKAFKA_LOGGER
from mirrorlag.model import PartitionKey

log = logging.getLogger(__name__)

FEED_NAME = "offset-syncs"


def sync_topic_location(flow: FlowSettings) -> tuple[str, str]:
    """(cluster alias holding the topic, topic name) for a flow, per offset-syncs.topic.location."""
    if flow.offset_syncs_topic_location == "target":
        return flow.target, flow.policy.offset_syncs_topic(flow.source)
    return flow.source, flow.policy.offset_syncs_topic(flow.target)


@dataclass
class OffsetSyncsFeed:
    """Reads one cluster's offset-syncs topics (one per flow) from the beginning, then keeps up."""

    cluster_alias: str
    consumer: Consumer
    flows_by_topic: dict[str, FlowSettings]
    timeout_s: float
    name: str = FEED_NAME
    bad_records: int = 0
    _latest: dict[PartitionKey, int] = field(default_factory=dict)
    _assigned: set[str] = field(default_factory=set)
    _missing_logged: set[str] = field(default_factory=set)
    _at_eof: set[tuple[str, int]] = field(default_factory=set)

    def offsets(self) -> dict[PartitionKey, int]:
        """Everything written up to now, applied in order: the newest sync per partition wins."""
        self._assign_new_topics()
        if self._assigned:
            self._read_to_end()
        return dict(self._latest)

    def _assign_new_topics(self) -> None:
        pending = set(self.flows_by_topic) - self._assigned
        if not pending:
            return
        try:
            metadata = self.consumer.list_topics(timeout=self.timeout_s)
        except KafkaException:
            return  # the poller reports the cluster; we retry next poll
        new = []
        for topic in sorted(pending):
            meta = metadata.topics.get(topic)
            if meta is None or meta.error is not None:
                if topic not in self._missing_logged:
                    self._missing_logged.add(topic)
                    log.warning("offset-syncs topic %s not found on cluster %s; waiting for it",
                                topic, self.cluster_alias)
                continue
            new += [TopicPartition(topic, p, OFFSET_BEGINNING) for p in meta.partitions]
            self._assigned.add(topic)
        if new:
            self.consumer.incremental_assign(new)

    def _read_to_end(self) -> None:
        """Drain what has arrived; on the first read, go on until every partition reported EOF.

        A partition stays "at end" until a newer sync arrives (librdkafka reports EOF once per
        arrival at the end), so a quiet topic costs one short consume per poll, not a timeout.
        """
        deadline = time.monotonic() + self.timeout_s
        assigned = {(tp.topic, tp.partition) for tp in self.consumer.assignment()}
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            messages = self.consumer.consume(num_messages=10_000, timeout=min(remaining, 0.1))
            for msg in messages:
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        self._at_eof.add((msg.topic(), msg.partition()))
                    continue
                self._at_eof.discard((msg.topic(), msg.partition()))
                self._apply(msg.topic(), msg.key(), msg.value())
            if not messages and assigned <= self._at_eof:
                break

    def _apply(self, sync_topic: str, key: bytes | None, value: bytes | None) -> None:
        try:
            sync = decode_offset_sync(key, value)
        except BadRecord as exc:
            self.bad_records += 1
            log.debug("bad offset sync in %s: %s", sync_topic, exc)
            return
        flow = self.flows_by_topic[sync_topic]
        self._latest[PartitionKey(flow.source, flow.target, sync.topic, sync.partition)] = sync.upstream_offset

    def close(self) -> None:
        self.consumer.close()


def offset_syncs_feeds(settings: Settings) -> list[OffsetSyncsFeed]:
    """One feed per cluster that holds offset-syncs topics of the configured flows."""
    by_cluster: dict[str, dict[str, FlowSettings]] = {}
    for flow in settings.flows:
        cluster, topic = sync_topic_location(flow)
        by_cluster.setdefault(cluster, {})[topic] = flow
    feeds = []
    for alias, flows_by_topic in by_cluster.items():
        config = dict(settings.clusters[alias].client)
        config.update({
            "group.id": f"mirrorlag-{uuid.uuid4().hex[:12]}",  # never joins: we assign()
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "logger": LIBRDKAFKA_LOGGER,
        })
        feeds.append(OffsetSyncsFeed(alias, Consumer(config), flows_by_topic, settings.request_timeout_s))
    return feeds
