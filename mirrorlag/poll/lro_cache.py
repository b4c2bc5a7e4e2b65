"""The LRO cache: last replicated offset per partition, with KIP-971's TTL done right (docs/design.md §4).

KIP-971 evicts an LRO after `replication.record.lag.metric.last.replicated.offset.ttl`. Forgetting
it would make a stalled partition's lag vanish exactly when it matters, so here the TTL only decides
*freshness*: an LRO is stale once it has not moved for the TTL, and the last known LRO of every
partition stays until the partition leaves its flow.

Feeds hand in their whole offset maps once per poll (never per record), so the TTL bookkeeping costs
one dict pass per poll. Within a feed its newest value is the truth (a step back is a rewind, which
the engine reports); across feeds the highest wins (docs/design.md §3). Only the poller touches the cache.

It holds 100k partitions, so a partition is a row of typed columns (offset, feed, changed_at,
stale), not an object, and the rows follow the poll's own list of partitions (the poller hands it
in): no key -> slot dict is kept (it would cost more memory a partition than the columns), and
each poll's changes are a few numpy operations over one C-level lookup per partition and feed.
A partition that leaves the poll's list leaves the cache, so a topic deleted and created again
starts without the old log's LRO.
`update` hands out an LroTable: the Mapping of LroReadings the engines read, frozen at that poll,
with a column-wise path for the engine. The TTL rule is TTLCache's: a value set at `t` is
stale from `t + ttl` on, and each expiry is counted once.
"""

from __future__ import annotations

from itertools import repeat
from typing import Iterable, Mapping, Sequence

import numpy as np

from mirrorlag.interfaces import NO_OFFSET, PollRows
from mirrorlag.model import LroTable, PartitionKey, rows_in

FeedOffsets = Mapping[PartitionKey, int]


class LroCache:
    def __init__(self, ttl_s: float) -> None:
        self._ttl = ttl_s
        self._keys: Sequence[PartitionKey] = []  # the rows' partitions (a list, or the poller's tuple)
        self._offset = np.zeros(0, np.int64)
        self._feed = np.zeros(0, np.int16)  # codes into _names
        self._changed = np.zeros(0)
        self._stale = np.zeros(0, bool)
        self._used = np.zeros(0, bool)  # the row has an LRO
        self._names: list[str] = []
        self._codes: dict[str, int] = {}
        self._memo: list = [None, None, None]
        self.evictions_total = 0  # partitions that went stale (TTL expired without a new LRO)
        self._previous_now: float | None = None

    def update(self, by_feed: Mapping[str, FeedOffsets], now: float,
               keys: Sequence[PartitionKey] | None = None,
               written_at: Mapping[str, Mapping[PartitionKey, float]] | None = None) -> LroTable:
        """Merge this poll's offsets from every feed and return every known LRO.

        `keys` are the partitions that exist now (the poll's): an offset for any other partition
        is ignored (junk, or a topic not discovered yet: feeds keep what they read, so it enters
        once discovered), and a partition no longer among them is dropped. Without `keys`, every
        partition the cache holds stays and those the feeds name are added.
        A partition no feed mentions keeps its last value (stale once its TTL has passed).
        `written_at`, per feed, dates the records behind its offsets: a new value whose record was
        written before the previous update (at the first, more than a TTL ago: an old sync or
        commit read at start), or that a feed read late, changed then, not now, so its age and
        TTL count from then (docs/design.md §3). Newer records count from now: dated by the brokers'
        clock, a record written just after this poll's LEO snapshot must not look older than it.
        A value several feeds report takes the oldest of their dates: whichever wins the tie, the
        mirror has been there since the oldest record saying so.
        """
        self._align(keys if keys is not None else self._with_new(by_feed))
        # Expire before applying this poll's offsets: a value that expired and moves again in the
        # same poll counts as one expiry and is fresh. (TTLCache's test exactly: expires <= now.)
        ttl = self._ttl
        expired = self._used & ~self._stale & (self._changed + ttl <= now)
        self._stale |= expired
        self.evictions_total += int(np.count_nonzero(expired))
        best, code = self._highest(by_feed)
        given = best != _NONE
        at = np.flatnonzero(given & (~self._used | (self._offset != best)))
        self._offset[at] = best[at]
        self._feed[at] = code[at]
        self._changed[at] = now
        self._stale[at] = ttl <= 0
        self._used[at] = True
        if written_at and at.size:
            self._date(at, best, by_feed, written_at, now)
        self._previous_now = now
        return self._table()

    def fill(self, feed: str, offsets: Mapping[PartitionKey, int], now: float) -> LroTable:
        """After `update`: `offsets` for rows that no other feed has given an LRO (the poller's
        `log start - 1` of partitions MM2 never copied); a feed's own LRO always stands."""
        code = self._code(feed)
        at = rows_in(self._keys, list(offsets))
        value = np.fromiter(offsets.values(), np.int64, len(offsets))
        value, at = value[at >= 0], at[at >= 0]
        take = ~self._used[at] | ((self._feed[at] == code) & (self._offset[at] != value))  # new, or moved
        at, value = at[take], value[take]
        self._offset[at] = value
        self._feed[at] = code
        self._changed[at] = now
        self._stale[at] = self._ttl <= 0
        self._used[at] = True
        return self._table()

    def backdate(self, feed: str, since: Mapping[PartitionKey, float], now: float) -> LroTable:
        """`feed`'s LROs of `since`'s keys have not moved since those times (when earlier than known)."""
        at = rows_in(self._keys, list(since))
        when = np.fromiter(since.values(), float, len(since))
        ours = at >= 0
        ours[ours] = self._used[at[ours]] & (self._feed[at[ours]] == self._code(feed))
        when, at = when[ours], at[ours]
        self._changed[at] = np.minimum(self._changed[at], when)
        self._stale[at] = self._changed[at] + self._ttl <= now
        return self._table()

    def forget(self, keys: Iterable[PartitionKey]) -> None:
        """Drop the LROs of `keys` and keep their rows: a partition whose log is new (RESET, or
        its topic ID changed) has no LRO until a feed reports one again, and one that left its
        flow has none either (a key list handed to `update` drops its row by itself).
        One C-level membership test per row, and only when there are keys to drop."""
        drop = set(keys)
        if drop and (n := len(self._keys)):
            self._used &= ~np.fromiter(map(drop.__contains__, self._keys), bool, n)

    def _table(self) -> LroTable:
        return LroTable(self._keys, self._used.copy(), self._offset.copy(), self._feed.copy(), self._changed.copy(),
                        self._stale.copy(), self._names, self._memo)

    def __len__(self) -> int:
        return int(np.count_nonzero(self._used))

    def _date(self, at: np.ndarray, best: np.ndarray, by_feed: Mapping[str, FeedOffsets],
              written_at: Mapping[str, Mapping[PartitionKey, float]], now: float) -> None:
        """Rows `at` took a new value this update: where a feed reporting that value dates its
        record before the previous update, it changed then (the oldest such date)."""
        before = self._previous_now if self._previous_now is not None else now - self._ttl
        keys = list(map(self._keys.__getitem__, at.tolist()))
        for feed, times in written_at.items():
            offsets = by_feed.get(feed)
            if not times or not offsets:
                continue
            reported = np.fromiter(map(offsets.get, keys, repeat(_NONE)), np.int64, at.size)
            same = np.flatnonzero(reported == best[at])  # positions in `at` whose value this feed reports
            when = np.fromiter(map(times.get, map(keys.__getitem__, same.tolist()), repeat(np.nan)), float, same.size)
            older = when < before
            rows = at[same[older]]
            self._changed[rows] = np.minimum(self._changed[rows], when[older])
            self._stale[rows] = self._changed[rows] + self._ttl <= now

    def _highest(self, by_feed: Mapping[str, FeedOffsets]) -> tuple[np.ndarray, np.ndarray]:
        """Per row, the highest offset any feed reports (_NONE where none does) and the code of
        the feed that reported it: within a feed its newest value is the truth, across feeds
        the highest wins, and the first feed named wins a tie. One C-level lookup per row and feed."""
        n = len(self._keys)
        best = np.full(n, _NONE, np.int64)
        code = np.zeros(n, np.int16)
        for feed, offsets in by_feed.items():
            if not offsets:
                continue
            if isinstance(offsets, PollRows) and offsets.rows is self._keys:  # aligned already
                values = np.where(offsets.offsets == NO_OFFSET, _NONE, offsets.offsets)
            else:
                values = np.fromiter(map(offsets.get, self._keys, repeat(_NONE)), np.int64, n)
            wins = values > best
            best[wins] = values[wins]
            code[wins] = self._code(feed)
        return best, code

    def _code(self, feed: str) -> int:
        code = self._codes.get(feed)
        if code is None:
            if len(self._names) == np.iinfo(np.int8).max:  # tables hand out int8 codes
                raise ValueError(f"more than {len(self._names)} LRO feeds")
            code = self._codes[feed] = len(self._names)
            self._names.append(feed)
        return code

    def _with_new(self, by_feed: Mapping[str, FeedOffsets]) -> Sequence[PartitionKey]:
        """The rows' keys and, after them, every key a feed names that is not one (no key list)."""
        held = set(self._keys)
        new = dict.fromkeys(key for offsets in by_feed.values() for key in offsets if key not in held)
        return [*self._keys, *new] if new else self._keys

    def _align(self, keys: Sequence[PartitionKey]) -> None:
        """Rows in the order of `keys`: a kept partition keeps its values, a new one starts empty.
        An unchanged list (the common case) keeps the rows' list object, so the tables' alignment
        memo holds poll after poll."""
        if keys is self._keys or (type(keys) is type(self._keys) and keys == self._keys):  # C-level, identity first
            return
        keys = keys if isinstance(keys, (list, tuple)) else list(keys)  # held as given: the poller's tuple
        was = rows_in(self._keys, keys)
        kept = np.flatnonzero(was >= 0)
        for name in ("_offset", "_feed", "_changed", "_stale", "_used"):
            column = getattr(self, name)
            moved = np.zeros(len(keys), column.dtype)
            moved[kept] = column[was[kept]]
            setattr(self, name, moved)
        self._keys = keys


_NONE = np.iinfo(np.int64).min  # no offset: below any a feed reports
# The pseudo-feed of a partition no feed gives an LRO, once a feed of its flow has read its evidence: MM2
# owes every record from the log start (the LRO is `log start - 1`; docs/design.md §3).
LOG_START = "log-start"
