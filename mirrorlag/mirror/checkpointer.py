r"""The mirror's MirrorCheckpointTask: checkpoints of each accepted consumer group, translated with
MM2's own OffsetSyncStore rule (mirrorlag.groups.sync_store), and, where enabled, the groups'
offsets synced into the target (MirrorCheckpointTask.syncGroupOffset).

It follows MM2 3.7.1 and later (KAFKA-15905), the same in 3.9.2 and 4.3.1 (tests/apache/
test_mm2_rules.py holds the rules to those versions' classes): at start it reads the checkpoints it
wrote before, then the flow's offset-syncs topic from the beginning, keeping every sync if those
checkpoints could be read (else each partition's newest only, until the topic's end, as MM2 before
3.7.1 always did); it translates nothing until it has read the syncs to their end once; it writes a
checkpoint only when the translation moved (checkpointIsMoreRecent, against the checkpoints it
read too), with the time it read the group as the record's timestamp; and it syncs a group into
the target only while no consumer there is active, only forward.

It lists the source's groups at start and every `refresh.groups.interval.seconds` after (MM2's
connector does, 600 s by default; here 5 s unless set, as for topics), not at every emission, so a
new group is checkpointed only after the next listing, as with MM2; each checkpoint carries the
group's commit metadata and the time its offsets were asked for; an offset synced into the target
carries its checkpoint's metadata (Checkpoint.offsetAndMetadata).

Where it is not MM2:
- the topic filter's default `topics.exclude` is MM2 3.x's (`.*[\-\.]internal, .*\.replica, __.*`);
  MM2 4.1.0 and later (their jars; 3.9.x's not) exclude `mm2.*\.internal, .*\.replica, __.*`:
  set it explicitly to mirror those;
- it reads the target group's offsets when it syncs a group; MM2 reads them on its own schedule
  and syncs with what it read last.
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
from mirrorlag.formats import BadRecord, Checkpoint, decode_checkpoint_key, decode_offset_sync, encode_checkpoint
from mirrorlag.groups.checkpoints import CheckpointStore, Checkpointed
from mirrorlag.groups.group_offsets import list_groups, read_offsets
from mirrorlag.groups.sync_store import SyncStore, translate
from mirrorlag.kafka.topic_reader import TopicReader

log = logging.getLogger("mirrorlag.mirror")

TopicPart = tuple[str, int]
READ_TIMEOUT_S = 5.0
LOAD_TIMEOUT_S = 60.0  # how long the checkpoints written before may take to read at start
GROUPS_IN_FLIGHT = 8


@dataclass(frozen=True)
class CheckpointOptions:
    """A flow's checkpoint connector keys (MirrorCheckpointConfig)."""
    groups: GroupFilter
    emit_interval_s: float = 60.0  # emit.checkpoints.interval.seconds
    refresh_groups_interval_s: float | None = 5.0  # refresh.groups.interval.seconds; None: listed once
    sync_group_offsets: bool = False  # sync.group.offsets.enabled
    sync_interval_s: float = 60.0  # sync.group.offsets.interval.seconds


def new_checkpoints(group: str, offsets: Mapping[TopicPart, int], store: SyncStore,
                    last: Mapping[tuple[str, str, int], Checkpointed], remote: Callable[[str], str | None],
                    metadata: Mapping[TopicPart, str] | None = None) -> list[Checkpoint]:
    """MirrorCheckpointTask.checkpointsForGroup: the group's partitions on topics the checkpoint
    task accepts (`remote` names their checkpoint's topic, None for others: checkpoint_topic),
    translated where the store can, -1 dropped, and only where more recent than the last
    checkpoint (an upstream rewind, or the downstream offset advanced); each with the group's
    commit metadata of the partition (`metadata`, "" where none)."""
    metadata = metadata or {}
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
        out.append(Checkpoint(group, remote_topic, partition, upstream, downstream,
                              metadata.get((topic, partition), "")))
    return out


def checkpoint_topic(flow: FlowSettings, topic: str) -> str | None:
    """The topic on the target a group's offsets on source `topic` are checkpointed under, None
    where MM2 writes no checkpoint (MirrorCheckpointTask.shouldCheckpointTopic, renameTopicPartition).

    Only the flow's topic filter (`topics`, `topics.exclude`) decides: unlike the source
    connector's, the checkpoint task's filter excludes no internal topic or cycle by itself, and
    heartbeats only where the filter does. A topic that came from the target (`B.orders` on A,
    for A->B) is checkpointed under its original name (`orders`), so that its groups can fail back."""
    if flow.topics_include.fullmatch(topic) is None or flow.topics_exclude.fullmatch(topic) is not None:
        return None
    policy = flow.policy
    if policy.topic_source(topic) == flow.target:
        return policy.original_topic(topic)
    return policy.remote_topic(flow.source, topic)


def converted_offsets(newest: Mapping[tuple[str, str, int], Checkpointed]) -> dict[str, dict[TopicPart, int]]:
    """CheckpointStore.computeConvertedUpstreamOffset: each group's newest checkpoints, as the
    offsets to resume at on the target."""
    by_group: dict[str, dict[TopicPart, int]] = {}
    for (group, topic, partition), c in newest.items():
        by_group.setdefault(group, {})[(topic, partition)] = c.downstream
    return by_group


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
    # The checkpoints topic itself (timed), read once at start as MM2's CheckpointStore does;
    # None: nothing read, as when MM2 cannot read it (or before 3.7.1).
    checkpoint_reader: TopicReader | None = None
    store: SyncStore = field(default_factory=SyncStore)
    checkpoints: CheckpointStore = field(default_factory=CheckpointStore)  # read at start, then what we wrote
    next_emit: float = 0.0
    next_sync: float = 0.0
    groups: list[str] | None = None  # the groups last listed (None: not yet)
    next_listing: float = 0.0
    load_timeout_s: float = LOAD_TIMEOUT_S
    warn: Callable[[str, str], None] = lambda key, message: log.warning("%s", message)
    _load_deadline: float = 0.0

    @property
    def topic(self) -> str:
        return self.flow.policy.checkpoints_topic(self.flow.source)

    @property
    def started(self) -> bool:
        """The checkpoints written before were read (or given up on) and the syncs' read began."""
        return self.checkpoint_reader is None

    def start(self) -> None:
        """MirrorCheckpointTask.start: first the checkpoints it wrote before (CheckpointStore.start),
        then the sync topic, keeping every sync if those checkpoints could be read and else only
        each partition's newest until the topic's end (OffsetSyncStore.start(!checkpointsReadOk));
        nothing is translated before that end. A checkpoints topic not read through at once is
        read on at each tick, nothing else done meanwhile, until `load_timeout_s`."""
        now = time.monotonic()
        self._load_deadline = now + self.load_timeout_s
        self.next_emit = now + self.options.emit_interval_s
        self.next_sync = now + self.options.sync_interval_s
        if self.checkpoint_reader is None:
            self._start_syncs(loaded=False)
        else:
            self._load_checkpoints(now)

    def _load_checkpoints(self, now: float) -> None:
        reader = self.checkpoint_reader
        assert reader is not None
        reader.drain(self._load_checkpoint)
        loaded = all(reader.unread(t) is None for t in reader.topics)
        if not loaded and now < self._load_deadline:
            return
        if not loaded:
            self.warn(f"checkpoints:{self.flow.id}", f"{self.flow.id}: could not read {self.topic} on "
                      f"{self.flow.target} in {self.load_timeout_s:g} s; translating with syncs read from now on")
        reader.close()
        self.checkpoint_reader = None
        self._start_syncs(loaded)

    def _load_checkpoint(self, topic: str, key: bytes | None, value: bytes | None, timestamp_ms: int) -> None:
        """CheckpointStore.readCheckpoints: the task's groups only."""
        try:
            group = decode_checkpoint_key(key)[0]
        except BadRecord:
            return
        if self.options.groups.accepts(group):
            self.checkpoints.apply(topic, key, value, timestamp_ms)

    def _start_syncs(self, loaded: bool) -> None:
        self.store.must_read_to_end = not loaded
        if self.sync_reader is not None:
            self.sync_reader.drain(self._apply_sync)
            if all(self.sync_reader.unread(t) is None for t in self.sync_reader.topics):
                self.store.read_to_end()

    def _apply_sync(self, _topic: str, key: bytes | None, value: bytes | None) -> None:
        try:
            sync = decode_offset_sync(key, value)
        except BadRecord:
            return
        self.store.apply(sync.topic, sync.partition, sync.upstream_offset, sync.downstream_offset)

    def _remote(self, topic: str) -> str | None:
        return checkpoint_topic(self.flow, topic)

    def tick(self, now: float) -> None:
        if not self.started:
            self._load_checkpoints(now)
            return  # MM2 polls nothing before its checkpoint store is initialized
        if self.sync_reader is not None:
            self.sync_reader.drain(self._apply_sync)
            if not self.store.ready and all(self.sync_reader.unread(t) is None for t in self.sync_reader.topics):
                self.store.read_to_end()
        if now >= self.next_emit:
            self.next_emit = now + self.options.emit_interval_s
            self._emit(now)
        if self.options.sync_group_offsets and now >= self.next_sync:
            self.next_sync = now + self.options.sync_interval_s
            self._sync_groups()

    def _list_groups(self, now: float) -> list[str] | None:
        """The groups to checkpoint: those listed at start and every refresh.groups.interval.seconds
        after (MirrorCheckpointConnector's refresh), filtered; None while none were listed yet."""
        refresh = self.options.refresh_groups_interval_s
        if self.groups is None or (refresh is not None and now >= self.next_listing):
            try:
                listed = list_groups(self.source_admin, READ_TIMEOUT_S)
            except KafkaException as exc:
                self.warn(f"groups:{self.flow.id}", f"{self.flow.id}: cannot list consumer groups: {exc.args[0]}")
                return self.groups
            self.groups = [g for g in listed if self.options.groups.accepts(g)]
            self.next_listing = now + (refresh or 0.0)
        return self.groups

    def _emit(self, now: float) -> None:
        groups = self._list_groups(now)
        if not groups:
            return
        read = read_offsets(self.source_admin, groups, GROUPS_IN_FLIGHT, READ_TIMEOUT_S)
        for group, offsets in read.offsets.items():
            stamp_ms = read.asked_at_ms[group]  # MM2: the time it read this group
            for c in new_checkpoints(group, offsets, self.store, self.checkpoints.newest, self._remote,
                                     read.metadata.get(group)):
                key, value = encode_checkpoint(c)
                self.producer.produce(self.topic, key=key, value=value, partition=0, timestamp=stamp_ms)
                self.checkpoints.apply(self.topic, key, value, stamp_ms)

    def _sync_groups(self) -> None:
        by_group = converted_offsets(self.checkpoints.newest)
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
            newest = self.checkpoints.newest
            request = ConsumerGroupTopicPartitions(group, [TopicPartition(t, p, o, metadata=newest[group, t, p].metadata)
                                                           for (t, p), o in sorted(wanted.items())])
            try:
                for future in self.target_admin.alter_consumer_group_offsets([request], request_timeout=READ_TIMEOUT_S).values():
                    future.result(timeout=READ_TIMEOUT_S + 1)
            except Exception as exc:
                self.warn(f"alter:{group}", f"{self.flow.id}: cannot sync group {group}'s offsets into {self.flow.target}: {exc}")

    def close(self) -> None:
        if self.sync_reader is not None:
            self.sync_reader.close()
        if self.checkpoint_reader is not None:
            self.checkpoint_reader.close()
