"""What an unpatched MirrorMaker 2 leaves for mirrorlag to read, computed from a model `Mirror`:
its offset syncs and the target partition.

- Target partition: one record per acknowledged copy, in ack order (`Mirror.copies_t/_u`), re-copies
  after a restart included: record D of the target is a copy of upstream `copies_u[D]`, and the
  target's end offset at t is the number of acks by t. (MM2 writing the target in transactions,
  `exactly.once.source.support = enabled`, would make markers take target offsets: the
  target-progress feed is off there, so it is not modelled.)
- Offset syncs: apache/kafka connect/mirror OffsetSyncWriter, applied to every ack in order
  (MirrorSourceTask.commitRecord -> maybeQueueOffsetSyncs, then firePendingOffsetSyncs). Per task
  lifetime a PartitionState (previousUpstream, previousDownstream, lastSyncDownstream, all -1 at
  start) decides a sync that is sent at once when
      lastSyncDownstream == -1                                   (noPreviousSyncThisLifetime)
   or downstream - (lastSyncDownstream + 1) >= offset.lag.max    (translatedOffsetTooStale)
   or upstream - previousUpstream != 1                           (skippedUpstreamRecord: a marker,
                                                                  an aborted record, a compacted or
                                                                  deleted one, a rewind)
   or downstream < previousDownstream                            (truncatedDownstreamTopic)
  and only those set lastSyncDownstream. Any other ack replaces the partition's delayed sync,
  which MirrorSourceTask.commit() (each offset flush, every offset.flush.interval.ms of the task's
  life) promotes and sends. A restart (a phase with a rewind) is a new task: fresh state, the
  delayed sync lost, a new flush schedule. The writer's limit of 10 outstanding syncs is not
  modelled (it would only delay syncs: older evidence, never higher).
  The producer's send is asynchronous: a sync becomes readable on the offset-syncs topic, and so
  to the sidecar's feed, `sync_delay` s after it was sent.
- Duplicates (`retries`): Connect's producer is not idempotent; a batch it retries after a lost
  ack lands twice. At the first ack at or after each retry's time, the next `k` acks' records are
  first written unacknowledged, then again as the acked copies commitRecord sees (their downstream
  offsets are the second copies'). Upstream offsets stay consecutive, so no sync rule fires for it:
  the next sync (offset.lag.max target records on, or the flush) shows D' - D > U' - U.
- A second writer (`foreign`): another flow's copies (two flows into one identity topic) appended
  to the target partition, `n` records at each time: records MM2's syncs of this flow never name.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.sim.model import Mirror


@dataclass(frozen=True)
class MM2Config:
    offset_lag_max: int = 100  # offset.lag.max
    flush_interval: float = 60.0  # the worker's offset.flush.interval.ms, s
    flush_phase: float = 0.0  # the first lifetime's flush schedule began this long before the mirror's start
    sync_delay: float = 0.05  # a sync is readable this long after it is sent
    target_progress: bool = True  # the sidecar's target-progress feed is on
    # The feed copies the newest syncs, then asks the target for its end offsets (a ListOffsets
    # round trip): the syncs are taken this long before the target's end offset is read (at the
    # poll's `now`; at most the poll's eps, so both stay after the LEO snapshot).
    target_read_delay: float = 0.0
    retries: tuple[tuple[float, int], ...] = ()  # (from when, records) batches written twice
    foreign: tuple[tuple[float, int], ...] = ()  # (when, records) a second writer appends to the target


@dataclass(frozen=True)
class Sync:
    visible_at: float  # readable on the offset-syncs topic from then on
    sent_at: float  # the record's timestamp: evidence dating
    upstream: int
    downstream: int
    lifetime: int  # index of the task lifetime that wrote it (0: before the first restart)
    immediate: bool  # sent from the ack (a rule above), not promoted at a flush


class MM2Model:
    """The offset syncs MM2 writes for one `Mirror`, and what the target holds, at any time."""

    def __init__(self, mirror: Mirror, config: MM2Config, start: float = 0.0) -> None:
        self.mirror = mirror
        self.config = config
        syncs: list[Sync] = []
        restarts = mirror.restarts
        # The first task began before its first copy (the model's initial records were copied as
        # they arrived); its flush schedule runs from then, shifted by `flush_phase`.
        first = min(start, mirror.copies_t[0]) if mirror.copies_t else start
        lifetime_starts = [first - config.flush_phase, *restarts]
        lag_max, every = config.offset_lag_max, config.flush_interval

        def flushes(life: int, upto: float) -> list[float]:
            """Flush instants of lifetime `life` strictly before `upto` (its end)."""
            s0 = lifetime_starts[life]
            out, k = [], 1
            while s0 + k * every < upto:
                out.append(s0 + k * every)
                k += 1
            return out

        # Acks grouped by lifetime: an ack at or after restart r belongs to lifetime r + 1.
        copies_t, copies_u = mirror.copies_t, mirror.copies_u
        n = len(copies_t)
        self._build_target(config)
        ack_d = self.ack_downstream
        i = 0
        for life in range(len(lifetime_starts)):
            end = restarts[life] if life < len(restarts) else float("inf")
            prev_u = prev_d = last_sync_d = -1
            delayed: tuple[float, int, int] | None = None  # (ack time, upstream, downstream)
            flush_at = flushes(life, min(end, copies_t[-1] + every + 1.0 if n else start))
            f = 0
            while i < n and copies_t[i] < end:
                at, u, d = copies_t[i], copies_u[i], ack_d[i]
                while f < len(flush_at) and flush_at[f] < at:  # flushes before this ack
                    if delayed is not None:
                        syncs.append(Sync(flush_at[f] + config.sync_delay, flush_at[f], delayed[1], delayed[2], life, False))
                        delayed = None
                    f += 1
                if last_sync_d == -1 or d - (last_sync_d + 1) >= lag_max or u - prev_u != 1 or d < prev_d:
                    last_sync_d = d
                    syncs.append(Sync(at + config.sync_delay, at, u, d, life, True))
                    delayed = None
                else:
                    delayed = (at, u, d)
                prev_u, prev_d = u, d
                i += 1
            for fl in flush_at[f:]:  # the lifetime's remaining flushes (a restart loses the delayed sync)
                if delayed is not None and fl < end:
                    syncs.append(Sync(fl + config.sync_delay, fl, delayed[1], delayed[2], life, False))
                    delayed = None
        syncs.sort(key=lambda s: s.visible_at)  # one producer, one delay: the topic's order
        self.syncs = syncs
        self._visible = [s.visible_at for s in syncs]
        self.lifetime_starts = lifetime_starts

    def _build_target(self, config: MM2Config) -> None:
        """The target partition: (time, upstream offset or -1 for a second writer's record,
        acked) per record, and each ack's downstream offset."""
        copies_t, copies_u = self.mirror.copies_t, self.mirror.copies_u
        n = len(copies_t)
        twice = [0] * n  # acks whose record was first written unacknowledged
        for at, k in config.retries:
            j = bisect_left(copies_t, at)
            for i in range(j, min(n, j + k)):
                twice[i] = 1
        entries: list[tuple[float, int, bool]] = []
        i = 0
        while i < n:
            if twice[i]:
                j = i
                while j < n and twice[j]:  # the batch's first attempt, then its acked copies
                    j += 1
                entries += [(copies_t[i], copies_u[x], False) for x in range(i, j)]
                entries += [(copies_t[x], copies_u[x], True) for x in range(i, j)]
                i = j
            else:
                entries.append((copies_t[i], copies_u[i], True))
                i += 1
        for at, k in sorted(config.foreign):
            where = bisect_right([e[0] for e in entries], at)
            entries[where:where] = [(at, -1, False)] * k
        self.target_t = [e[0] for e in entries]
        self.target_u = [e[1] for e in entries]
        self.target_acked = [e[2] for e in entries]
        self.ack_downstream = [d for d, e in enumerate(entries) if e[2]]
        self._unacked_below = [0]  # records no ack names below each offset
        for e in entries:
            self._unacked_below.append(self._unacked_below[-1] + (not e[2]))

    def target_end(self, t: float) -> int:
        """The target partition's end offset at t."""
        return bisect_right(self.target_t, t)

    def unacked(self, after: int, t: float) -> int:
        """Target records above offset `after` written by t that no ack names: duplicates and a
        second writer's records, what a translation through a sync at `after` counts too many."""
        end = self.target_end(t)
        return self._unacked_below[end] - self._unacked_below[min(after + 1, end)]

    def newest_sync(self, t: float) -> Sync | None:
        """The newest sync readable at t: what the offset-syncs feed holds for the partition."""
        i = bisect_right(self._visible, t) - 1
        return None if i < 0 else self.syncs[i]

    def lifetime(self, t: float) -> int:
        """The task lifetime running at t."""
        return bisect_right(self.mirror.restarts, t)

    def recopy_windows(self) -> list[Recopy]:
        """Per restart that copied anything: from its first ack until its first sync is readable,
        the newest readable sync is the previous task's, and the target already holds re-copies."""
        out = []
        t, u = self.mirror.copies_t, self.mirror.copies_u
        for life, r in enumerate(self.mirror.restarts, start=1):
            i = bisect_left(t, r)  # the first ack at or after the restart (acks at r are the new task's)
            if i >= len(t) or self.lifetime(t[i]) != life:
                continue  # restarted again (or the run ended) before copying anything
            first_sync = next(s for s in self.syncs if s.lifetime == life)
            # A read of the target at x pairs with the syncs taken at x - target_read_delay.
            end = first_sync.visible_at + self.config.target_read_delay
            out.append(Recopy(t[i], end, u[i - 1] if i else -1, u[i]))
        return out


@dataclass(frozen=True)
class Recopy:
    start: float  # the restarted task's first ack
    end: float  # its first sync (noPreviousSyncThisLifetime) readable, plus the target read's delay
    acked_before: int  # the last record acked before the restart
    resumed_at: int  # the first record copied after it

    @property
    def twice(self) -> int:
        """Records copied again: the most the translation can read above the truth."""
        return max(0, self.acked_before + 1 - self.resumed_at)
