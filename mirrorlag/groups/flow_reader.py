"""Gathers one flow's evidence for failover readiness (docs/design.md §9), on its own cadence and thread,
never the LEO poll's: the accepted groups' committed offsets on the source, MM2's checkpoints on
the target, the groups' own offsets and members on the target, and the syncs MM2 keeps for the
partitions those groups committed on (a replica of its OffsetSyncStore, fed from the flow's
offset-syncs topic).

Two stores of syncs, for partitions some group committed on only:
- `syncs`, MM2's replica: it drops every older sync while the topic is first read, as MM2 before
  3.7.1 (or one that could not reload its checkpoints) does after a restart, so it says what MM2
  can translate at worst (why a group has no checkpoint, whether MM2 owes one);
- `history`, the same exponentially spaced 64 slots without that drop, as MM2 3.7.1+ reads the
  topic after a restart: the syncs a checkpoint's downstream offset is mapped back to the source
  through. A checkpoint MM2 wrote with syncs it held before our start still finds them here, as
  long as the compacted topic held them.
A partition first seen after the topic was read is seeded with its newest sync (from the
offset-syncs feed, which keeps one per partition). Mapping back goes through the newest kept sync
at or below the offset, so the source offset is a lower bound and a re-read an upper one.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Callable

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from mirrorlag.config.group_filter import GroupFilter
from mirrorlag.config.settings import FlowSettings, Settings
from mirrorlag.feeds.offset_syncs import sync_topic_location
from mirrorlag.formats import BadRecord, decode_offset_sync
from mirrorlag.groups.assess import FlowEvidence
from mirrorlag.groups.checkpoints import CheckpointStore
from mirrorlag.groups.group_offsets import GroupsRead, list_groups, members, read_offsets
from mirrorlag.groups.sync_store import SyncStore
from mirrorlag.kafka.source import make_admin
from mirrorlag.kafka.topic_reader import TopicReader, assign_only_consumer

log = logging.getLogger(__name__)

TopicPart = tuple[str, int]
Seed = Callable[[str, int], tuple[int, int] | None]  # (topic, partition) -> newest (U, D)


@dataclass
class FlowGroupsReader:
    flow: FlowSettings
    groups: GroupFilter
    source_admin: AdminClient
    target_admin: AdminClient
    checkpoint_reader: TopicReader  # the target's <source>.checkpoints.internal, timed
    sync_reader: TopicReader  # the flow's offset-syncs topic, from its beginning
    seed: Seed = lambda topic, partition: None
    read_target_offsets: bool = False  # sync.group.offsets.enabled: where groups resume on the target
    max_in_flight: int = 8
    timeout_s: float = 10.0
    checkpoints: CheckpointStore = field(default_factory=CheckpointStore)
    syncs: SyncStore = field(default_factory=SyncStore)
    history: SyncStore = field(default_factory=SyncStore.keeping_history)
    bad_syncs: int = 0
    last_error: str | None = None  # why the last read could not list the source's groups
    _watched: set[TopicPart] = field(default_factory=set)
    # Seeded partitions: the seed's upstream offset, until the sync topic's reader passes it (the
    # feed that seeds may be a few records ahead; an older sync then is no rewind)
    _seeded: dict[TopicPart, int] = field(default_factory=dict)
    _first: list[str] = field(default_factory=list)  # groups a read ran out of time before

    def read(self) -> FlowEvidence | None:
        """One read; None when the source's groups could not be listed (`last_error` says why)."""
        try:
            every = list_groups(self.source_admin, self.timeout_s)
        except KafkaException as exc:
            self.last_error = f"cannot list the consumer groups of {self.flow.source}: {exc.args[0]}"
            return None
        self.last_error = None
        listed = [g for g in every if self.groups.accepts(g)]
        accepted, first = set(listed), set(self._first)  # groups the last read did not reach go first
        order = [g for g in self._first if g in accepted] + [g for g in listed if g not in first]
        committed = read_offsets(self.source_admin, order, self.max_in_flight, self.timeout_s,
                                 wanted=self.flow.should_checkpoint)
        self._first = committed.unread
        self._watch(committed)
        self.sync_reader.drain(self._apply_sync)
        if not self.syncs.ready and all(self.sync_reader.unread(t) is None for t in self.sync_reader.topics):
            self.syncs.read_to_end()
        self.checkpoint_reader.drain(self.checkpoints.apply)
        groups = sorted(committed.offsets)
        target = GroupsRead()
        if self.read_target_offsets and groups:
            target = read_offsets(self.target_admin, groups, self.max_in_flight, self.timeout_s)
        return FlowEvidence(
            committed=committed.offsets, checkpoints=dict(self.checkpoints.newest),
            target_offsets=target.offsets, members_on_target=members(self.target_admin, groups, self.timeout_s),
            syncs_ready=self.syncs.ready,
            checkpoints_read=all(self.checkpoint_reader.unread(t) is None for t in self.checkpoint_reader.topics),
            listed=len(every))

    def _watch(self, committed: GroupsRead) -> None:
        for offsets in committed.offsets.values():
            for tp in offsets:
                if tp not in self._watched:
                    self._watched.add(tp)
                    if not self.syncs.ready:
                        continue  # the topic's first read is still to come: it brings every kept sync
                    newest = self.seed(*tp)
                    if newest is not None:
                        self.syncs.apply(tp[0], tp[1], *newest)
                        self.history.apply(tp[0], tp[1], *newest)
                        self._seeded[tp] = newest[0]

    def _apply_sync(self, _sync_topic: str, key: bytes | None, value: bytes | None) -> None:
        try:
            sync = decode_offset_sync(key, value)
        except BadRecord:
            self.bad_syncs += 1
            return
        tp = (sync.topic, sync.partition)
        if tp not in self._watched:
            return
        seeded = self._seeded.get(tp)
        if seeded is not None:
            if sync.upstream_offset < seeded:
                return
            del self._seeded[tp]
        self.syncs.apply(sync.topic, sync.partition, sync.upstream_offset, sync.downstream_offset)
        self.history.apply(sync.topic, sync.partition, sync.upstream_offset, sync.downstream_offset)

    def close(self) -> None:
        self.checkpoint_reader.close()
        self.sync_reader.close()


def flow_readers(settings: Settings, timeout_s: float, seed_of: Callable[[FlowSettings], Seed] | None = None) -> list[FlowGroupsReader]:
    """A reader for each flow MM2 checkpoints (emit.checkpoints.enabled, with offset syncs)."""
    readers = []
    for flow in settings.flows:
        if not flow.emit_checkpoints:
            continue
        source, target = settings.clusters[flow.source], settings.clusters[flow.target]
        sync_alias, sync_topic = sync_topic_location(flow)
        readers.append(FlowGroupsReader(
            flow=flow, groups=flow.group_filter,
            source_admin=make_admin(source, timeout_s), target_admin=make_admin(target, timeout_s),
            checkpoint_reader=TopicReader("checkpoints", flow.target, assign_only_consumer(target),
                                          [flow.policy.checkpoints_topic(flow.source)], timeout_s, timed=True),
            sync_reader=TopicReader("offset-syncs", sync_alias, assign_only_consumer(settings.clusters[sync_alias]),
                                    [sync_topic], timeout_s),
            seed=(lambda topic, partition: None) if seed_of is None else seed_of(flow),
            read_target_offsets=flow.sync_group_offsets,
            max_in_flight=settings.failover.groups_max_in_flight, timeout_s=timeout_s))
    return readers
