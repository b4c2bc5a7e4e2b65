"""The LRO cache: last replicated offset per partition, with KIP-971's TTL done right (DESIGN §4).

KIP-971 evicts an LRO after `replication.record.lag.metric.last.replicated.offset.ttl`. Forgetting
it would make a stalled partition's lag vanish exactly when it matters, so here the TTL only decides
*freshness*: a cachetools.TTLCache holds the partitions whose LRO moved within the TTL, and the last
known LRO of every partition stays as a plain value until the partition leaves its flow.

Feeds hand in whole offset maps once per poll (never per record), so the TTL bookkeeping costs one
dict pass per poll. Not thread-safe by design: only the poller touches it.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Iterable, Mapping

from cachetools import TTLCache

from mirrorlag.model import LroReading, PartitionKey


@dataclass(slots=True)
class _Known:
    offset: int
    feed: str
    changed_at: float


class LroCache:
    def __init__(self, ttl_s: float) -> None:
        self._now = 0.0
        # Keys whose LRO changed within the TTL. The timer is the poll time handed in, not a clock.
        self._fresh: TTLCache[PartitionKey, bool] = TTLCache(sys.maxsize, ttl_s, timer=lambda: self._now)
        self._known: dict[PartitionKey, _Known] = {}
        self.evictions_total = 0  # partitions that went stale (TTL expired without a new LRO)

    def apply(self, feed: str, offsets: Mapping[PartitionKey, int], now: float) -> int:
        """Take one feed's newest offsets; returns how many partitions changed.

        A feed may step its own LRO back (the mirror restarted from an older committed offset);
        a different feed only replaces a value it beats, since across feeds the highest LRO wins.
        """
        self._expire(now)  # count expiries here, or TTLCache's own expire-on-set would hide them
        known, fresh = self._known, self._fresh
        changed = 0
        for key, offset in offsets.items():
            entry = known.get(key)
            if entry is None:
                known[key] = _Known(offset, feed, now)
            elif entry.offset == offset or (entry.feed != feed and offset < entry.offset):
                continue
            else:
                entry.offset, entry.feed, entry.changed_at = offset, feed, now
            fresh[key] = True
            changed += 1
        return changed

    def readings(self, now: float) -> dict[PartitionKey, LroReading]:
        """Every known LRO, marked stale where its TTL expired; counts the new evictions."""
        self._expire(now)
        fresh = self._fresh
        return {
            key: LroReading(e.offset, e.feed, e.changed_at, key not in fresh)
            for key, e in self._known.items()
        }

    def _expire(self, now: float) -> None:
        self._now = now
        self.evictions_total += len(self._fresh.expire(now))

    def forget(self, keys: Iterable[PartitionKey]) -> None:
        """Drop partitions that metadata says are gone or that left their flow."""
        for key in keys:
            self._known.pop(key, None)
            self._fresh.pop(key, None)

    def __len__(self) -> int:
        return len(self._known)
