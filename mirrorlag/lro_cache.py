"""The LRO cache: last replicated offset per partition, with KIP-971's TTL done right (DESIGN §4).

KIP-971 evicts an LRO after `replication.record.lag.metric.last.replicated.offset.ttl`. Forgetting
it would make a stalled partition's lag vanish exactly when it matters, so here the TTL only decides
*freshness*: an LRO is stale once it has not moved for the TTL, and the last known LRO of every
partition stays until the partition leaves its flow.

Feeds hand in their whole offset maps once per poll (never per record), so the TTL bookkeeping costs
one dict pass per poll. Within a feed its newest value is the truth (a step back is a rewind, which
the engine reports); across feeds the highest wins (DESIGN §6). Only the poller touches the cache.

It holds 100k partitions, so a partition is a slot in typed columns (offset, feed, changed_at,
stale) named by one dict entry, not an object: each poll's changes are a few numpy operations and
no object is built per partition. (It was an immutable LroReading per partition, replaced at every
poll where the offset moved: ~136 bytes a partition by RSS and 100k allocations a poll; before
that a cachetools.TTLCache beside a dict of mutable entries. The issue 7 memory benchmark.)
`update` hands out an LroTable: the Mapping of LroReadings the engines read, frozen at that poll,
with a column-wise path for the columnar engine. The TTL rule is TTLCache's: a value set at `t` is
stale from `t + ttl` on, and each expiry is counted once.
"""

from __future__ import annotations

from itertools import repeat
from typing import Iterable, Mapping

import numpy as np

from mirrorlag.model import LroTable, PartitionKey

FeedOffsets = Mapping[PartitionKey, int]


class LroCache:
    def __init__(self, ttl_s: float) -> None:
        self._ttl = ttl_s
        self._slots: dict[PartitionKey, int] = {}
        self._shared = False  # the last LroTable handed out holds _slots: copy before changing it
        self._free: list[int] = []  # slots of forgotten partitions, reused first
        self._offset = np.zeros(0, np.int64)
        self._feed = np.zeros(0, np.int16)  # codes into _names
        self._changed = np.zeros(0)
        self._stale = np.zeros(0, bool)
        self._used = np.zeros(0, bool)
        self._names: list[str] = []
        self._codes: dict[str, int] = {}
        self._memo: list = [None, None, None]
        self.evictions_total = 0  # partitions that went stale (TTL expired without a new LRO)

    def update(self, by_feed: Mapping[str, FeedOffsets], now: float) -> LroTable:
        """Merge this poll's offsets from every feed and return every known LRO.

        A partition no feed mentions keeps its last value (stale once its TTL has passed).
        """
        # Expire before applying this poll's offsets: a value that expired and moves again in the
        # same poll counts as one expiry and is fresh. (TTLCache's test exactly: expires <= now.)
        ttl = self._ttl
        expired = self._used & ~self._stale & (self._changed + ttl <= now)
        self._stale |= expired
        self.evictions_total += int(np.count_nonzero(expired))
        for feed, offsets in _by_feed(by_feed):
            at = self._slots_of(offsets)
            values = np.fromiter(offsets.values(), np.int64, len(offsets))
            moved = ~self._used[at] | (self._offset[at] != values)
            at = at[moved]
            self._offset[at] = values[moved]
            self._feed[at] = self._code(feed)
            self._changed[at] = now
            self._stale[at] = ttl <= 0
            self._used[at] = True
        self._shared = True
        return LroTable(self._slots, self._offset.copy(), self._feed.copy(), self._changed.copy(),
                        self._stale.copy(), self._names, self._memo)

    def forget(self, keys: Iterable[PartitionKey]) -> None:
        """Drop partitions that metadata says are gone or that left their flow."""
        for key in keys:
            if key in self._slots:
                slot = self._own_slots().pop(key)
                self._used[slot] = False
                self._free.append(slot)

    def __len__(self) -> int:
        return len(self._slots)

    def _own_slots(self) -> dict[PartitionKey, int]:
        """The key -> slot dict, copied first if a handed-out table still holds it."""
        if self._shared:
            self._slots = dict(self._slots)
            self._shared = False
        return self._slots

    def _code(self, feed: str) -> int:
        code = self._codes.get(feed)
        if code is None:
            code = self._codes[feed] = len(self._names)
            self._names.append(feed)
        return code

    def _slots_of(self, offsets: FeedOffsets) -> np.ndarray:
        """The slot of each key of `offsets`, in its order; new keys get slots (unused until set)."""
        at = np.fromiter(map(self._slots.get, offsets.keys(), repeat(-1)), np.int64, len(offsets))
        new = np.flatnonzero(at < 0)
        if new.size:
            slots = self._own_slots()
            keys = list(offsets.keys())
            top = len(slots) + len(self._free)  # every slot below is in use or free
            reused = self._free[len(self._free) - min(len(self._free), new.size):]
            del self._free[len(self._free) - len(reused):]
            fresh = list(range(top, top + new.size - len(reused)))
            self._grow(top + len(fresh))
            for i, slot in zip(new.tolist(), reused + fresh):
                slots[keys[i]] = slot
                at[i] = slot
        return at

    def _grow(self, size: int) -> None:
        """Room for `size` slots, doubling (a new partition set costs one copy, not one per key)."""
        if size <= len(self._used):
            return
        size = max(size, 2 * len(self._used), 16)
        for name in ("_offset", "_feed", "_changed", "_stale", "_used"):
            old = getattr(self, name)
            new = np.zeros(size, old.dtype)
            new[:len(old)] = old
            setattr(self, name, new)


def _by_feed(by_feed: Mapping[str, FeedOffsets]) -> list[tuple[str, FeedOffsets]]:
    """(feed, offsets) pairs in which each partition appears once, with the highest offset any
    feed reports and the feed that reported it. One feed's map passes through as it is."""
    feeds = [(feed, offsets) for feed, offsets in by_feed.items() if offsets]
    if len(feeds) <= 1:
        return feeds
    merged: dict[PartitionKey, tuple[int, str]] = {}
    for feed, offsets in feeds:
        for key, offset in offsets.items():
            current = merged.get(key)
            if current is None or offset > current[0]:
                merged[key] = (offset, feed)
    winners: dict[str, dict[PartitionKey, int]] = {}
    for key, (offset, feed) in merged.items():
        winners.setdefault(feed, {})[key] = offset
    return list(winners.items())
