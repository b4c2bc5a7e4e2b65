"""The heartbeat feed: how fresh the newest MM2 heartbeat that crossed each flow is.

MirrorHeartbeatConnector writes a Heartbeat(source alias, target alias, now) every second into the
`heartbeats` topic of the cluster it targets. For a flow A->B, the heartbeats written INTO A
(target alias A) are replicated by MirrorSourceConnector to B's `policy.remote_topic(A,
"heartbeats")`: `A.heartbeats` under IdentityReplicationPolicy too (it names heartbeats topics as
DefaultReplicationPolicy does). Heartbeats of clusters further upstream reach A's `heartbeats` as
well, so the feed keeps only heartbeats whose target alias is the flow's source alias.

The topic grows by one record a second forever, so the feed starts near its end (the last
`tail_records` records of each partition), never at the beginning. A flow whose topic does not
exist, or that has seen no heartbeat of its own yet, is absent from `newest()`: unknown, never 0.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from confluent_kafka import Consumer

from mirrorlag.config.settings import FlowSettings, Settings
from mirrorlag.formats import BadRecord, decode_heartbeat
from mirrorlag.kafka.topic_reader import TopicReader, assign_only_consumer, tail
from mirrorlag.interfaces import HeartbeatSource
from mirrorlag.model import FlowId

log = logging.getLogger(__name__)

FEED_NAME = "heartbeats"
TAIL_RECORDS = 50


def heartbeats_topic(flow: FlowSettings) -> str:
    """Where the flow's replicated heartbeats land on its target cluster."""
    return flow.policy.remote_topic(flow.source, flow.policy.heartbeats_topic)


@dataclass
class HeartbeatFeed(HeartbeatSource):
    """Tails one target cluster's replicated heartbeat topics. `consumer` may be None to drive
    `_apply` directly (unit tests)."""

    cluster_alias: str  # the target cluster holding the topics
    consumer: Consumer | None
    flows_by_topic: Mapping[str, Sequence[FlowId]]  # under the identity policy, flows share `heartbeats`
    timeout_s: float = 10.0
    tail_records: int = TAIL_RECORDS
    name: str = FEED_NAME
    bad_records: int = 0
    _newest: dict[FlowId, int] = field(default_factory=dict)
    reader: TopicReader | None = None  # None: driven by hand through _apply (unit tests)

    def __post_init__(self) -> None:
        if self.consumer is not None:
            self.reader = TopicReader("heartbeats", self.cluster_alias, self.consumer, list(self.flows_by_topic),
                                       self.timeout_s, start=tail(self.tail_records, self.timeout_s),
                                       on_gone=self._forget)

    def newest(self) -> dict[FlowId, int]:
        """Newest heartbeat timestamp (ms since the epoch, the emitter's clock) per flow, after
        draining what has arrived. Call once per poll."""
        assert self.reader is not None
        self.reader.drain(self._apply)
        return dict(self._newest)

    def _forget(self, topic: str) -> None:
        """The topic was deleted: its flows are unknown until it exists again."""
        for flow in self.flows_by_topic.get(topic, ()):  # a flow reads exactly one heartbeats topic
            self._newest.pop(flow, None)

    def _apply(self, topic: str, key: bytes | None, value: bytes | None) -> None:
        """Apply one record of `topic`. Pure bookkeeping: no I/O."""
        try:
            heartbeat = decode_heartbeat(key, value)
        except BadRecord as exc:
            self.bad_records += 1
            log.debug("bad heartbeat in %s: %s", topic, exc)
            return
        for flow in self.flows_by_topic.get(topic, ()):
            if heartbeat.target_alias == flow.source:  # emitted into the source: it crossed the mirror
                if heartbeat.timestamp_ms > self._newest.get(flow, -1):
                    self._newest[flow] = heartbeat.timestamp_ms


def heartbeat_feeds(settings: Settings) -> list[HeartbeatFeed]:
    """One feed per target cluster of the configured flows."""
    by_cluster: dict[str, dict[str, list[FlowId]]] = {}
    for flow in settings.flows:
        by_cluster.setdefault(flow.target, {}).setdefault(heartbeats_topic(flow), []).append(flow.id)
    return [
        HeartbeatFeed(alias, assign_only_consumer(settings.clusters[alias]), flows_by_topic, settings.request_timeout_s)
        for alias, flows_by_topic in by_cluster.items()
    ]
