"""Per consumer group and partition: where the group would resume on the target if it failed over
now, and what that costs it (docs/design.md §9). Pure: offsets and times in, figures and a state out.

Offsets follow Kafka's convention: a committed offset G is the next record the group reads, so
it has consumed every source record below G; the target holds copies of source records up to
the LRO (the last replicated offset), so below LRO + 1.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum

from mirrorlag.groups.sync_store import Sync, records_at_least, translate, upstream_of


class GroupState(Enum):
    """Worst first: the order `worst` ranks partitions by."""
    SKIPS = "SKIPS"  # would resume beyond what it consumed: records never seen (a group reset below MM2's oldest sync)
    UNMAPPED = "UNMAPPED"  # a resume point no kept sync maps back to the source: the cost is unknown
    NOT_CHECKPOINTED = "NOT_CHECKPOINTED"  # committed on a mirrored partition, no checkpoint
    # What a failover now costs comes before why: an owed, old checkpoint is often why the re-read
    # is high, and the partition row says so (checkpoint_old) whichever state it reads.
    REREAD_HIGH = "REREAD_HIGH"  # would read more records again than the limit
    CHECKPOINT_OLD = "CHECKPOINT_OLD"  # MM2 owes a newer checkpoint and the newest is older than the limit
    READY = "READY"


_RANK = {s: i for i, s in enumerate(GroupState)}
# The LRO a partition is given where it has none and nothing to copy (never written, or emptied):
# MM2 copied nothing of it, and nothing is owed.
NONE_COPIED = -1


def group_lro(lro: int | None, record_lag: int | None) -> int | None:
    """The LRO a group partition is judged by: the poll's, or NONE_COPIED where it has none and
    nothing to copy."""
    return NONE_COPIED if lro is None and record_lag == 0 else lro


class NotCheckpointedBecause(Enum):
    CHECKPOINTS_UNREAD = "MM2's checkpoints topic on the target has not been read (missing, or not permitted)"
    SYNCS_LOADING = "the offset syncs are not read to their end yet (MM2 translates nothing before)"
    NO_SYNC = "no offset sync for the partition"
    OLDER_THAN_SYNCS = "the group's offset is older than every kept offset sync"
    # MM2 before 3.7.1, and one that could not reload its checkpoints at start, drops older syncs
    # while it reads the sync topic: after a restart it cannot translate an offset only those
    # covered. 3.7.1+ keeps them (the real 3.9 and 4.x translate such a group after a restart).
    OLDER_THAN_SYNCS_AFTER_RESTART = ("MM2 has not written it; an MM2 before 3.7.1 (or one that could not reload "
                                      "its checkpoints) cannot after a restart: only syncs it then drops cover the "
                                      "group's offset")
    NOT_WRITTEN = "MM2 has not written it (checkpoint task behind or down, or the group new)"


# A checkpoint this many of its flow's emission intervals old, and owed, is old (the default).
CHECKPOINT_INTERVALS_OLD = 3


@dataclass(frozen=True)
class Limits:
    reread_max_records: int
    checkpoint_max_age_ms: int  # 0: CHECKPOINT_INTERVALS_OLD x the flow's emit.checkpoints.interval.seconds

    def for_flow(self, emit_checkpoints_interval_s: float) -> "Limits":
        """The limits for a flow MM2 checkpoints every `emit_checkpoints_interval_s`: a checkpoint
        is never fresher than that, so a fixed age would call a healthy slow emitter's old."""
        if self.checkpoint_max_age_ms:
            return self
        return replace(self, checkpoint_max_age_ms=int(CHECKPOINT_INTERVALS_OLD * emit_checkpoints_interval_s * 1000))


@dataclass(frozen=True)
class PartitionEvidence:
    group_offset: int  # G: committed on the source
    lro: int | None  # the flow's last replicated offset of the partition (None: not known; -1: none copied)
    checkpoint_downstream: int | None  # the newest checkpoint's downstream offset
    checkpoint_upstream: int | None  # ... the group's source offset it translated
    checkpoint_ms: int | None  # ... and its record timestamp (when MM2 read the group)
    target_offset: int | None  # the group's committed offset on the target (MM2's group offset sync)


@dataclass(frozen=True)
class PartitionReadiness:
    state: GroupState
    resume_target: int | None  # where it would resume on the target
    resume_source: int | None  # the least source offset that target offset maps back to
    reread: int | None  # records consumed already that it would read again (at most)
    skipped: int  # records it would never see
    not_yet_mirrored: int  # records consumed on the source that the target does not hold yet
    checkpoint_age_ms: int | None
    because: NotCheckpointedBecause | None = None
    checkpoint_old: bool = False  # MM2 owes a newer checkpoint and the newest is older than the limit


def _not_checkpointed(slots: list[Sync] | None, history: list[Sync] | None, syncs_ready: bool,
                      group_offset: int, checkpoints_read: bool) -> NotCheckpointedBecause:
    if not checkpoints_read:
        return NotCheckpointedBecause.CHECKPOINTS_UNREAD
    if not syncs_ready:
        return NotCheckpointedBecause.SYNCS_LOADING
    if slots is None:
        return NotCheckpointedBecause.NO_SYNC
    if translate(history, group_offset).downstream is None:
        return NotCheckpointedBecause.OLDER_THAN_SYNCS
    if translate(slots, group_offset).downstream is None:
        return NotCheckpointedBecause.OLDER_THAN_SYNCS_AFTER_RESTART
    return NotCheckpointedBecause.NOT_WRITTEN


def _owed(e: PartitionEvidence, slots: list[Sync] | None, syncs_ready: bool) -> bool:
    """Whether MM2 owes the partition a newer checkpoint than its newest. It writes one only when
    the translation moves on or the group went back (MirrorCheckpointTask.checkpointIsMoreRecent):
    a group that moved without passing a sync keeps its older checkpoint, which stays true (the
    real MM2 does so, tests/apache/test_mm2_groups.py). Translated through the syncs every MM2
    holds at least (the replica's), so a debt claimed is one MM2 has on any version."""
    if e.checkpoint_downstream is None or e.checkpoint_upstream is None or not syncs_ready:
        return False
    translated = translate(slots, e.group_offset).downstream
    if translated is None:
        return False  # MM2 cannot translate it either: it writes nothing
    return e.group_offset < e.checkpoint_upstream or translated > e.checkpoint_downstream


def partition_readiness(e: PartitionEvidence, slots: list[Sync] | None, syncs_ready: bool,
                        limits: Limits, now_ms: int, history: list[Sync] | None = None,
                        checkpoints_read: bool = True, active_on_target: bool = False,
                        transactional_target: bool = False) -> PartitionReadiness:
    """`slots`: the syncs MM2 holds (why no checkpoint); `history`: the syncs a resume point is
    mapped back through (default: `slots`); `checkpoints_read`: the checkpoints topic was read
    to its end (else a missing checkpoint may only not have been reached); `active_on_target`:
    the group's consumers run on the target (it failed over: its offsets there move past the
    source's G, which is no skip); `transactional_target`: MM2 writes the target in transactions,
    whose commit markers take target offsets (re-read: still at most; skipped: at least)."""
    g = e.group_offset
    history = slots if history is None else history
    not_yet_mirrored = 0 if e.lro is None else max(0, g - (e.lro + 1))
    age = None if e.checkpoint_ms is None else max(0, now_ms - e.checkpoint_ms)
    # A group MM2 synced on the target resumes from its own committed offset there; otherwise a
    # failover resumes it from the checkpoint (RemoteClusterUtils.translateOffsets).
    resume = e.target_offset if e.target_offset is not None else e.checkpoint_downstream
    if resume is None and g == 0 and e.lro == NONE_COPIED:
        # It consumed nothing and MM2 copied nothing (a partition never written, say): MM2 writes no
        # checkpoint for it, and none is needed: the target's start and end are one, nothing to skip.
        return PartitionReadiness(GroupState.READY, None, None, 0, 0, 0, age)
    if resume is None:
        return PartitionReadiness(GroupState.NOT_CHECKPOINTED, None, None, None, 0, not_yet_mirrored, age,
                                  _not_checkpointed(slots, history, syncs_ready, g, checkpoints_read))
    source = upstream_of(history, resume, transactional_target)
    if source is None:
        return PartitionReadiness(GroupState.UNMAPPED, resume, None, None, 0, not_yet_mirrored, age)
    # Skipped: data records in [G, source). MM2 copies source records from G onwards at target
    # offsets from translate(G) on, so at most resume - translate(G) of them lie before the resume
    # point: offsets MM2 copied nothing of (a commit marker at G, an aborted or compacted record)
    # are no records skipped.
    skipped = 0 if active_on_target else max(0, source - g)
    if skipped and (first_copy := translate(history, g).downstream) is not None:
        skipped = min(skipped, records_at_least(resume - first_copy, transactional_target))
    held = g if e.lro is None else min(g, e.lro + 1)
    reread = max(0, held - source)
    old = age is not None and age > limits.checkpoint_max_age_ms and _owed(e, slots, syncs_ready)
    if skipped:
        state = GroupState.SKIPS
    elif reread > limits.reread_max_records:
        state = GroupState.REREAD_HIGH
    elif old:
        state = GroupState.CHECKPOINT_OLD
    else:
        state = GroupState.READY
    return PartitionReadiness(state, resume, source, reread, skipped, not_yet_mirrored, age, checkpoint_old=old)


def worst(states: list[GroupState]) -> GroupState:
    """A group's state on a flow: the worst of its partitions' (READY with none)."""
    return min(states, key=_RANK.__getitem__, default=GroupState.READY)
