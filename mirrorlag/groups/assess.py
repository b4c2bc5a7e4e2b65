"""One flow's consumer groups assessed: every committed partition of every accepted group on the
flow's copied topics, its readiness (readiness.py), and per group the figures the exporters show
(worst state, partitions by state, re-read sum and max, oldest checkpoint). Pure.

A group's re-read, on every screen that shows one figure a group (check --groups, the demo, the
rollup's samples), is the sum over its partitions: what the group would read again, all told.
The max, its worst partition's, is shown as such (Prometheus' stat="max")."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Mapping

from mirrorlag.groups.checkpoints import Checkpointed
from mirrorlag.groups.readiness import GroupState, Limits, PartitionEvidence, PartitionReadiness, partition_readiness, worst
from mirrorlag.groups.sync_store import Sync

TopicPart = tuple[str, int]


@dataclass(frozen=True)
class GroupPartition:
    topic: str  # the source topic
    partition: int
    committed: int
    checkpoint: Checkpointed | None
    target_offset: int | None
    readiness: PartitionReadiness


@dataclass
class GroupReadiness:
    group: str
    partitions: list[GroupPartition]
    active_on_target: bool = False  # members on the target: its consumers moved already
    state: GroupState = GroupState.READY
    by_state: Counter[GroupState] = field(default_factory=Counter)
    reread_sum: int = 0
    reread_max: int = 0
    reread_known: bool = False  # some partition's re-read is known (else the sum says nothing)
    skipped_sum: int = 0
    checkpoint_age_max_ms: int | None = None

    def __post_init__(self) -> None:
        states = [p.readiness.state for p in self.partitions]
        self.state = worst(states)
        self.by_state = Counter(states)
        rereads = [p.readiness.reread for p in self.partitions if p.readiness.reread is not None]
        self.reread_sum, self.reread_max, self.reread_known = sum(rereads), max(rereads, default=0), bool(rereads)
        self.skipped_sum = sum(p.readiness.skipped or 0 for p in self.partitions)
        ages = [p.readiness.checkpoint_age_ms for p in self.partitions if p.readiness.checkpoint_age_ms is not None]
        self.checkpoint_age_max_ms = max(ages, default=None)


@dataclass(frozen=True)
class FlowEvidence:
    """What one read of a flow gathered. `committed`: per accepted group, its committed source
    offsets on the flow's copied topics; `checkpoints`: keyed (group, remote topic, partition);
    `target_offsets`: per group, its committed offsets on the target (remote topic names);
    `members_on_target`: per group, its members there."""
    committed: Mapping[str, Mapping[TopicPart, int]]
    checkpoints: Mapping[tuple[str, str, int], Checkpointed]
    target_offsets: Mapping[str, Mapping[TopicPart, int]]
    members_on_target: Mapping[str, int]
    syncs_ready: bool
    checkpoints_read: bool = True  # the checkpoints topic was read to its end
    listed: int = 0  # groups the source listed (ListConsumerGroups shows only those the principal may Describe)


SlotsOf = Callable[[str, int], list[Sync] | None]  # (source topic, partition) -> kept syncs


def assess(evidence: FlowEvidence, remote: Callable[[str], str], slots: SlotsOf, lro: Callable[[str, int], int | None],
           limits: Limits, now_ms: int, history: SlotsOf | None = None,
           transactional_target: bool = False) -> list[GroupReadiness]:
    """`slots`: MM2's replica; `history`: the syncs resume points map back through (default:
    `slots`); `transactional_target`: the flow's MM2 writes its target in transactions."""
    history = slots if history is None else history
    # What depends on the partition alone, looked up once a partition (1,000 groups share it).
    shared: dict[TopicPart, tuple[str, int | None, list[Sync] | None, list[Sync] | None]] = {}
    out = []
    for group in sorted(evidence.committed):
        on_target = evidence.target_offsets.get(group, {})
        active = evidence.members_on_target.get(group, 0) > 0
        partitions = []
        for (topic, partition), g in sorted(evidence.committed[group].items()):
            if (known := shared.get((topic, partition))) is None:
                known = shared[topic, partition] = (remote(topic), lro(topic, partition), slots(topic, partition),
                                                    history(topic, partition))
            remote_topic, partition_lro, kept, kept_history = known
            checkpoint = evidence.checkpoints.get((group, remote_topic, partition))
            target_offset = on_target.get((remote_topic, partition))
            e = PartitionEvidence(
                group_offset=g, lro=partition_lro,
                checkpoint_downstream=None if checkpoint is None else checkpoint.downstream,
                checkpoint_upstream=None if checkpoint is None else checkpoint.upstream,
                checkpoint_ms=None if checkpoint is None else checkpoint.timestamp_ms,
                target_offset=target_offset)
            r = partition_readiness(e, kept, evidence.syncs_ready, limits, now_ms, kept_history,
                                    evidence.checkpoints_read, active, transactional_target)
            partitions.append(GroupPartition(topic, partition, g, checkpoint, target_offset, r))
        out.append(GroupReadiness(group, partitions, active))
    return out
