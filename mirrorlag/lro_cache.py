"""The LRO cache: last replicated offset per partition, with KIP-971's TTL done right (DESIGN §4).

KIP-971 evicts an LRO after `replication.record.lag.metric.last.replicated.offset.ttl`. Forgetting
it would make a stalled partition's lag vanish exactly when it matters, so here the TTL only decides
*freshness*: an LRO is stale once it has not moved for the TTL, and the last known LRO of every
partition stays until the partition leaves its flow.

Feeds hand in their whole offset maps once per poll (never per record), so the TTL bookkeeping costs
one dict pass per poll. Within a feed its newest value is the truth (a step back is a rewind, which
the engine reports); across feeds the highest wins (DESIGN §6). Only the poller touches the cache.

It holds 100k partitions, so it keeps exactly one object per partition, the immutable LroReading it
hands out, replaced only when the offset moves or goes stale. (It was a cachetools.TTLCache of fresh
keys beside a dict of mutable entries, plus a new LroReading per partition per poll: two extra
objects per partition, ~220 bytes, and as many allocations per poll; the issue 7 memory benchmark.)
The TTL rule is TTLCache's: a value set at `t` is stale from `t + ttl` on, and each expiry is
counted once.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from mirrorlag.model import LroReading, PartitionKey

FeedOffsets = Mapping[PartitionKey, int]


class LroCache:
    def __init__(self, ttl_s: float) -> None:
        self._ttl = ttl_s
        self._known: dict[PartitionKey, LroReading] = {}
        self.evictions_total = 0  # partitions that went stale (TTL expired without a new LRO)

    def update(self, by_feed: Mapping[str, FeedOffsets], now: float) -> dict[PartitionKey, LroReading]:
        """Merge this poll's offsets from every feed and return every known LRO.

        A partition no feed mentions keeps its last value (stale once its TTL has passed).
        """
        known = self._known
        # Expire before applying this poll's offsets: a value that expired and moves again in the
        # same poll counts as one expiry and is fresh. (TTLCache's test exactly: expires <= now.)
        ttl = self._ttl
        expired = [key for key, r in known.items() if not r.stale and r.changed_at + ttl <= now]
        for key in expired:
            r = known[key]
            known[key] = LroReading(r.offset, r.feed, r.changed_at, True)
        self.evictions_total += len(expired)
        born_stale = ttl <= 0
        get = known.get
        new = tuple.__new__  # LroReading's own __new__ is a Python function: 2x the cost at 100k a poll
        # One feed (the common case) is read straight from its map; several are merged first.
        # Plain loops, not a generator of (key, offset, feed) tuples: this runs 100k times a poll.
        for feed, offsets in _by_feed(by_feed):
            for key, offset in offsets.items():
                r = get(key)
                if r is None or r[0] != offset:
                    known[key] = new(LroReading, (offset, feed, now, born_stale))
        return known.copy()

    def forget(self, keys: Iterable[PartitionKey]) -> None:
        """Drop partitions that metadata says are gone or that left their flow."""
        for key in keys:
            self._known.pop(key, None)

    def __len__(self) -> int:
        return len(self._known)


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
