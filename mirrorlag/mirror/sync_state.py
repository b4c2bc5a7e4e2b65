"""MM2's offset-sync emission (apache/kafka connect/mirror OffsetSyncWriter.java), pure.

`PartitionState.update` is the rule that decides whether an acknowledged record's
(upstream, downstream) pair is written to the offset-syncs topic at once; `OffsetSyncWriter` keeps
MM2's two queues around it: syncs the rule did not emit wait as the partition's *delayed* sync until
the next offset commit, and at most `MAX_OUTSTANDING_OFFSET_SYNCS` syncs are in flight, the rest
wait as *pending* (newest per partition wins). No Kafka here: the caller passes `send` and reports
each sent sync's completion.

OffsetSyncWriter exists from 3.9.0 (KAFKA-16254 moved it out of MirrorSourceTask, where the same
rule and queues lived before); 3.9.2's and 4.3.1's are the same, and tests/apache/
test_mm2_rules.py holds this replica to both, operation by operation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from mirrorlag.formats import OffsetSync

MAX_OUTSTANDING_OFFSET_SYNCS = 10  # OffsetSyncWriter.MAX_OUTSTANDING_OFFSET_SYNCS


@dataclass(slots=True)
class PartitionState:
    """OffsetSyncWriter.PartitionState: one source partition's sync bookkeeping."""

    max_offset_lag: int  # offset.lag.max
    previous_upstream_offset: int = -1
    previous_downstream_offset: int = -1
    last_sync_downstream_offset: int = -1
    # Sticky until reset(), as in MM2: the writer resets after every sync it queues.
    should_sync_offsets: bool = False

    def update(self, upstream_offset: int, downstream_offset: int) -> bool:
        """Record one acknowledged record; True if an offset sync should be emitted now."""
        no_previous_sync = self.last_sync_downstream_offset == -1
        # OffsetSync.translateDownstream maps to one past the last sync, hence the +1.
        too_stale = downstream_offset - (self.last_sync_downstream_offset + 1) >= self.max_offset_lag
        skipped_upstream = upstream_offset - self.previous_upstream_offset != 1
        truncated_downstream = downstream_offset < self.previous_downstream_offset
        if no_previous_sync or too_stale or skipped_upstream or truncated_downstream:
            self.last_sync_downstream_offset = downstream_offset
            self.should_sync_offsets = True
        self.previous_upstream_offset = upstream_offset
        self.previous_downstream_offset = downstream_offset
        return self.should_sync_offsets

    def reset(self) -> None:
        self.should_sync_offsets = False


TopicPart = tuple[str, int]


@dataclass
class OffsetSyncWriter:
    """OffsetSyncWriter's queues. Call `completed()` once per `send` when its delivery report arrives."""

    max_offset_lag: int
    send: Callable[[OffsetSync], None]
    max_outstanding: int = MAX_OUTSTANDING_OFFSET_SYNCS
    partition_states: dict[TopicPart, PartitionState] = field(default_factory=dict)
    # Insertion-ordered like MM2's LinkedHashMaps: re-putting a key keeps its place.
    delayed: dict[TopicPart, OffsetSync] = field(default_factory=dict)
    pending: dict[TopicPart, OffsetSync] = field(default_factory=dict)
    outstanding: int = 0

    def maybe_queue(self, topic: str, partition: int, upstream_offset: int, downstream_offset: int) -> None:
        """maybeQueueOffsetSyncs: pending if the rule fires, else the partition's delayed sync."""
        key = (topic, partition)
        state = self.partition_states.get(key)
        if state is None:
            state = self.partition_states[key] = PartitionState(self.max_offset_lag)
        sync = OffsetSync(topic, partition, upstream_offset, downstream_offset)
        if state.update(upstream_offset, downstream_offset):
            self.delayed.pop(key, None)
            self.pending[key] = sync
            state.reset()
        else:
            self.delayed[key] = sync

    def fire_pending(self) -> None:
        """firePendingOffsetSyncs: send pending syncs, oldest first, while fewer than the max are in flight."""
        while self.pending and self.outstanding < self.max_outstanding:
            key = next(iter(self.pending))
            sync = self.pending.pop(key)
            self.outstanding += 1
            try:
                self.send(sync)
            except Exception:
                self.outstanding -= 1  # never sent: nothing will report it
                raise

    def promote_delayed(self) -> None:
        """promoteDelayedOffsetSyncs: at an offset commit, delayed syncs become pending."""
        self.pending.update(self.delayed)
        self.delayed.clear()

    def completed(self) -> None:
        """A sent sync was acknowledged or failed (MM2 releases its semaphore either way)."""
        self.outstanding = max(0, self.outstanding - 1)
