"""The LRO cache: last replicated offset per partition, with KIP-971's TTL done right (DESIGN §4).

KIP-971 evicts an LRO after `replication.record.lag.metric.last.replicated.offset.ttl`. Forgetting
it would make a stalled partition's lag vanish exactly when it matters, so here the TTL only decides
*freshness*: a cachetools.TTLCache holds the partitions whose LRO moved within the TTL, and the last
known LRO of every partition stays as a plain value until the partition leaves its flow.

Feeds hand in their whole offset maps once per poll (never per record), so the TTL bookkeeping costs
one dict pass per poll. Within a feed its newest value is the truth (a step back is a rewind, which
the engine reports); across feeds the highest wins (DESIGN §6). Only the poller touches the cache.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Iterable, Mapping

from cachetools import TTLCache

from mirrorlag.model import LroReading, PartitionKey

FeedOffsets = Mapping[PartitionKey, int]


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

    def update(self, by_feed: Mapping[str, FeedOffsets], now: float) -> dict[PartitionKey, LroReading]:
        """Merge this poll's offsets from every feed and return every known LRO.

        A partition no feed mentions keeps its last value (stale once its TTL has passed).
        """
        self._now = now
        self.evictions_total += len(self._fresh.expire(now))  # before any set: TTLCache expires on set too
        known, fresh = self._known, self._fresh
        for key, (offset, feed) in _highest(by_feed).items():
            entry = known.get(key)
            if entry is None:
                known[key] = _Known(offset, feed, now)
            elif entry.offset != offset:
                entry.offset, entry.feed, entry.changed_at = offset, feed, now
            else:
                continue
            fresh[key] = True
        return {key: LroReading(e.offset, e.feed, e.changed_at, key not in fresh) for key, e in known.items()}

    def forget(self, keys: Iterable[PartitionKey]) -> None:
        """Drop partitions that metadata says are gone or that left their flow."""
        for key in keys:
            self._known.pop(key, None)
            self._fresh.pop(key, None)

    def __len__(self) -> int:
        return len(self._known)


def _highest(by_feed: Mapping[str, FeedOffsets]) -> dict[PartitionKey, tuple[int, str]]:
    """Per partition, the highest offset any feed reports, and which feed reported it."""
    merged: dict[PartitionKey, tuple[int, str]] = {}
    for feed, offsets in by_feed.items():
        if not merged:
            merged = {key: (offset, feed) for key, offset in offsets.items()}
            continue
        for key, offset in offsets.items():
            current = merged.get(key)
            if current is None or offset > current[0]:
                merged[key] = (offset, feed)
    return merged
