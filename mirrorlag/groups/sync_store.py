"""A replica of MM2's OffsetSyncStore (connect/mirror OffsetSyncStore.java): the syncs MM2's
checkpoint task keeps per source partition and the translation it does with them.

MM2 keeps 64 slots per partition: slot 0 is the newest sync, and slot j holds a sync at most
2^j upstream offsets older than slot 0's, so old offsets translate coarsely and recent ones
finely. Until the store has read the sync topic to its end each sync replaces all slots, so
after a restart a partition holds only its newest sync until more arrive; since 3.7.1
(KAFKA-15905) only where the task could not read its checkpoints topic first, else older syncs
are kept from the start (`SyncStore.must_read_to_end`). A replica fed the same topic from the
start, read to its end before `read_to_end()`, holds what MM2 would hold had it restarted at the
same moment without its checkpoints: the translation MM2 gives at worst.

The rule is 3.5.2's and later's (KAFKA-15202: keep distinct older syncs when syncs are variably
spaced; 3.5.0 and 3.5.1 keep fewer), unchanged through 3.9.2 and 4.3.1, whose own classes
tests/apache/test_mm2_rules.py holds it to (every slot after every sync, and the translations).
Offsets are taken to stay below 2^62, where Java's long arithmetic never overflows.

Pure: syncs in, offsets out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

SYNCS_PER_PARTITION = 64


class Sync(NamedTuple):
    upstream: int
    downstream: int


def _invariant_b(i_sync: Sync, j_sync: Sync, i: int, j: int) -> bool:
    bound = j_sync.upstream + (1 << j) - (1 << i)
    return i_sync is j_sync or bound < 0 or i_sync.upstream <= bound


def _invariant_c(i_sync: Sync, j_sync: Sync, i: int) -> bool:
    bound = j_sync.upstream + (1 << max(i - 2, 0))
    return i_sync is j_sync or (bound >= 0 and i_sync.upstream >= bound)


def updated(slots: list[Sync], sync: Sync, read_to_end: bool) -> list[Sync]:
    """The slots after `sync` (OffsetSyncStore.updateSyncArray, the same invariants, the same
    preference for keeping distinct old syncs)."""
    if not read_to_end or slots[0].upstream > sync.upstream:
        return [sync] * SYNCS_PER_PARTITION
    original = slots
    slots = list(slots)
    replacement = sync
    replacement_index = 0
    slots[0] = replacement
    for current in range(1, SYNCS_PER_PARTITION):
        previous = current - 1
        while True:
            old = original[replacement_index]
            is_recent = _invariant_b(slots[previous], old, previous, current)
            separated_from_previous = _invariant_c(slots[previous], old, previous)
            nxt = current + 1
            separated_from_next = nxt >= SYNCS_PER_PARTITION or _invariant_c(old, slots[nxt], current)
            following = replacement_index + 1
            duplicate = following < SYNCS_PER_PARTITION and old is original[following]
            promote = is_recent and separated_from_previous and separated_from_next
            if promote:
                replacement = old
            skip = duplicate or not separated_from_previous
            if promote or skip:
                replacement_index += 1
            if not (replacement_index < current and skip):
                break
        if _invariant_b(slots[previous], slots[current], previous, current):
            break
        slots[current] = replacement
    return slots


def kept(slots: list[Sync]) -> list[Sync]:
    """The distinct syncs of the slots, newest first."""
    out: list[Sync] = []
    for s in slots:
        if not out or s is not out[-1]:
            out.append(s)
    return out


class Translation(NamedTuple):
    """MM2's answer for a group at upstream offset g: `downstream` is where the group resumes on
    the target (None: no checkpoint), `sync` the sync it used."""
    downstream: int | None
    sync: Sync | None


def translate(slots: list[Sync] | None, group_offset: int) -> Translation:
    """OffsetSyncStore.translateDownstream for a store that has read to its end: the newest kept
    sync (U, D) with U <= g gives D + (0 if g == U else 1); every kept sync above g gives -1 (MM2
    drops it: no checkpoint); no sync for the partition gives nothing."""
    if slots is None:
        return Translation(None, None)
    for s in slots:
        if s.upstream <= group_offset:
            return Translation(s.downstream + (0 if group_offset == s.upstream else 1), s)
    return Translation(None, slots[-1])


def upstream_of(slots: list[Sync] | None, downstream: int, transactional_target: bool = False) -> int | None:
    """The least source offset the target record at `downstream` can be a copy of. MM2 copies
    source records after a sync (U, D) in order, one target record each, so target record
    D + k is a copy of source record U + k or later (later where the source has gaps:
    transaction markers, compacted records). On a transactional target (exactly-once source
    support) each transaction's commit marker takes an offset too, after at least one record, so
    of those k offsets at least ceil(k / 2) are records: U + ceil(k / 2) or later. None where no
    kept sync lies at or below it."""
    if slots is None:
        return None
    for s in slots:
        if s.downstream <= downstream:
            k = downstream - s.downstream
            return s.upstream + ((k + 1) // 2 if transactional_target else k)
    return None


def records_at_least(offsets: int, transactional_target: bool = False) -> int:
    """The fewest target records `offsets` consecutive target offsets of MM2's copies can hold:
    all of them, or on a transactional target half (a commit marker after each record at worst)."""
    return max(0, offsets // 2 if transactional_target else offsets)


@dataclass
class SyncStore:
    """The replica for every partition of one flow's sync topic, keyed by (source topic, partition).

    `must_read_to_end` is MM2's initializationMustReadToEnd: True (the default) drops older syncs
    until `read_to_end()`; False keeps them from the start, as MirrorCheckpointTask starts its
    store after it read its checkpoints topic (3.7.1+, KAFKA-15905: start(!checkpointsReadOk)).
    Either way `ready` (translating at all) waits for `read_to_end()`."""
    _slots: dict[tuple[str, int], list[Sync]] = field(default_factory=dict)
    _read_to_end: bool = False
    must_read_to_end: bool = True

    def apply(self, topic: str, partition: int, upstream: int, downstream: int) -> None:
        key = (topic, partition)
        sync = Sync(upstream, downstream)
        slots = self._slots.get(key)
        keep_older = self._read_to_end or not self.must_read_to_end
        self._slots[key] = [sync] * SYNCS_PER_PARTITION if slots is None else updated(slots, sync, keep_older)

    @classmethod
    def keeping_history(cls) -> "SyncStore":
        """A store that never drops older syncs for being read at start: the densest history 64
        exponentially spaced slots can hold, the slots of MM2's store after a restart that read
        its checkpoints (must_read_to_end=False); ready at once (for mapping target offsets back)."""
        return cls(_read_to_end=True)

    def read_to_end(self) -> None:
        """The sync topic was read to its end once: from now on older syncs are kept (MM2's start())."""
        self._read_to_end = True

    @property
    def ready(self) -> bool:
        return self._read_to_end

    def slots(self, topic: str, partition: int) -> list[Sync] | None:
        return self._slots.get((topic, partition))

    def forget(self, topic: str, partition: int) -> None:
        self._slots.pop((topic, partition), None)
