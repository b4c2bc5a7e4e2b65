"""The mirror's MirrorCheckpointTask: checkpoints of each accepted consumer group, translated with
MM2's own OffsetSyncStore rule (mirrorlag.groups.sync_store), and, where enabled, the groups'
offsets synced into the target (MirrorCheckpointTask.syncGroupOffset).

Like MM2 it reads the flow's offset-syncs topic from the beginning and translates nothing until it
has read it to its end once; it writes a checkpoint only when the translation moved
(checkpointIsMoreRecent), with the time it read the group as the record's timestamp; and it syncs
a group into the target only while no consumer there is active, only forward.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from mirrorlag.config.group_filter import GroupFilter
from mirrorlag.config.settings import FlowSettings
from mirrorlag.formats import BadRecord, Checkpoint, decode_offset_sync, encode_checkpoint
from mirrorlag.groups.checkpoints import CheckpointStore, Checkpointed
from mirrorlag.groups.group_offsets import list_groups, read_offsets
from mirrorlag.groups.sync_store import SyncStore, translate
from mirrorlag.kafka.topic_reader import TopicReader

log = logging.getLogger("mirrorlag.mirror")

TopicPart = tuple[str, int]
READ_TIMEOUT_S = 5.0
GROUPS_IN_FLIGHT = 8


@dataclass(frozen=True)
class CheckpointOptions:
    """A flow's checkpoint connector keys (MirrorCheckpointConfig)."""
    groups: GroupFilter
    emit_interval_s: float = 60.0  # emit.checkpoints.interval.seconds
    sync_group_offsets: bool = False  # sync.group.offsets.enabled
    sync_interval_s: float = 60.0  # sync.group.offsets.interval.seconds


def new_checkpoints(group: str, offsets: Mapping[TopicPart, int], store: SyncStore,
                    last: Mapping[tuple[str, str, int], Checkpointed], remote: Callable[[str], str | None]) -> list[Checkpoint]:
    """MirrorCheckpointTask.checkpointsForGroup: the group's partitions on topics the flow copies
    (`remote` names their remote topic, None for others), translated where the store can, -1
    dropped, and only where more recent than the last checkpoint (an upstream rewind, or the
    downstream offset advanced)."""
    if not store.ready:
        return []
    out = []
    for (topic, partition), upstream in sorted(offsets.items()):
        remote_topic = remote(topic)
        if remote_topic is None:
            continue
        downstream = translate(store.slots(topic, partition), upstream).downstream
        if downstream is None:
            continue
        before = last.get((group, remote_topic, partition))
        if before is not None and not (upstream < before.upstream or downstream > before.downstream):
            continue
        out.append(Checkpoint(group, remote_topic, partition, upstream, downstream, ""))
    return out


def offsets_to_sync(converted: Mapping[TopicPart, int], on_target: Mapping[TopicPart, int] | None) -> dict[TopicPart, int]:
    """MirrorCheckpointTask.syncGroupOffset for one idle group: every converted offset of a group
    the target does not know, else only those ahead of the target's own."""
    if on_target is None:
        return dict(converted)
    return {tp: o for tp, o in converted.items() if on_target.get(tp, -1) < o}


@dataclass
class CheckpointTask:
    flow: FlowSettings
    options: CheckpointOptions
    source_admin: AdminClient
    target_admin: AdminClient
    producer: Producer  # into the target
    sync_reader: TopicReader | None  # the flow's offset-syncs topic (None: syncs disabled)
    store: SyncStore = field(default_factory=SyncStore)
    checkpoints: CheckpointStore = field(default_factory=CheckpointStore)  # what we wrote
    next_emit: float = 0.0
    next_sync: float = 0.0
    warn: Callable[[str, str], None] = lambda key, message: log.warning("%s", message)

    @property
    def topic(self) -> str:
        return self.flow.policy.checkpoints_topic(self.flow.source)

    def start(self) -> None:
        """Read the sync topic to its end once: MM2 translates nothing before."""
        if self.sync_reader is not None:
            self.sync_reader.drain(self._apply_sync)
            if all(self.sync_reader.unread(t) is None for t in self.sync_reader.topics):
                self.store.read_to_end()
        now = time.monotonic()
        self.next_emit = now + self.options.emit_interval_s
        self.next_sync = now + self.options.sync_interval_s

    def _apply_sync(self, _topic: str, key: bytes | None, value: bytes | None) -> None:
        try:
            sync = decode_offset_sync(key, value)
        except BadRecord:
            return
        self.store.apply(sync.topic, sync.partition, sync.upstream_offset, sync.downstream_offset)

    def _remote(self, topic: str) -> str | None:
        return self.flow.policy.remote_topic(self.flow.source, topic) if self.flow.should_replicate(topic) else None

    def tick(self, now: float) -> None:
        if self.sync_reader is not None:
            self.sync_reader.drain(self._apply_sync)
            if not self.store.ready and all(self.sync_reader.unread(t) is None for t in self.sync_reader.topics):
                self.store.read_to_end()
        if now >= self.next_emit:
            self.next_emit = now + self.options.emit_interval_s
            self._emit()
        if self.options.sync_group_offsets and now >= self.next_sync:
            self.next_sync = now + self.options.sync_interval_s
            self._sync_groups()

    def _emit(self) -> None:
        try:
            groups = [g for g in list_groups(self.source_admin, READ_TIMEOUT_S) if self.options.groups.accepts(g)]
        except KafkaException as exc:
            self.warn(f"groups:{self.flow.id}", f"{self.flow.id}: cannot list consumer groups: {exc.args[0]}")
            return
        stamp_ms = int(time.time() * 1000)
        read = read_offsets(self.source_admin, groups, GROUPS_IN_FLIGHT, READ_TIMEOUT_S)
        for group, offsets in read.offsets.items():
            for c in new_checkpoints(group, offsets, self.store, self.checkpoints.newest, self._remote):
                key, value = encode_checkpoint(c)
                self.producer.produce(self.topic, key=key, value=value, partition=0, timestamp=stamp_ms)
                self.checkpoints.apply(self.topic, key, value, stamp_ms)

    def _sync_groups(self) -> None:
        by_group: dict[str, dict[TopicPart, int]] = {}
        for (group, topic, partition), c in self.checkpoints.newest.items():
            by_group.setdefault(group, {})[(topic, partition)] = c.downstream
        if not by_group:
            return
        described = self.target_admin.describe_consumer_groups(list(by_group), request_timeout=READ_TIMEOUT_S)
        for group, converted in by_group.items():
            try:
                description = described[group].result(timeout=READ_TIMEOUT_S + 1)
            except Exception as exc:
                self.warn(f"describe:{group}", f"{self.flow.id}: cannot describe group {group} on {self.flow.target}: {exc}")
                continue
            if description.members:
                continue  # consumers are active there: MM2 leaves the group alone
            read = read_offsets(self.target_admin, [group], 1, READ_TIMEOUT_S)
            on_target = read.offsets.get(group) or None
            wanted = offsets_to_sync(converted, on_target)
            if not wanted:
                continue
            request = ConsumerGroupTopicPartitions(group, [TopicPartition(t, p, o) for (t, p), o in sorted(wanted.items())])
            try:
                for future in self.target_admin.alter_consumer_group_offsets([request], request_timeout=READ_TIMEOUT_S).values():
                    future.result(timeout=READ_TIMEOUT_S + 1)
            except Exception as exc:
                self.warn(f"alter:{group}", f"{self.flow.id}: cannot sync group {group}'s offsets into {self.flow.target}: {exc}")

    def close(self) -> None:
        if self.sync_reader is not None:
            self.sync_reader.close()
