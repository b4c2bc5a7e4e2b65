"""Freshness lag (DESIGN §3): how long ago the oldest record not yet copied was appended.

Each poll adds one point (LEO, time) to a partition's table; the time record `o` was appended is
interpolated from the two points bracketing it (the kafka-lag-exporter method, on the sidecar's
own clock, so no skew between the clusters' clocks enters).

A point (L_i, t_i) says: at t_i the next offset was L_i, so every record below L_i existed. Record
`o` was therefore appended in (t_{i-1}, t_i] for the first i with L_i > o, and with appends spread
evenly over that interval it was appended when the LEO passed o + 1:

    t_{i-1} + (o + 1 - L_{i-1}) * (t_i - t_{i-1}) / (L_i - L_{i-1})

which is exact when records arrive at a steady rate, and never leaves the interval.

An idle stretch (the same LEO at consecutive polls) is kept as one flat segment of two points:
the first time the LEO had that value and the last time it was seen with it. The first makes an
idle but uncopied partition age correctly (not "now - last sample"); the last puts the records
that end the idle stretch after it, not spread back over it.

The table is bounded: it answers from its newest `cap` points only. A record older than the
oldest of them was appended at or before that point's time, so the answer is then that point's
age, flagged as a lower bound, never an extrapolation (kafka-lag-exporter issue #496's "3 years").

Compact: 100k partitions each keep up to 60 points, so a table is two typed arrays (8 bytes per
LEO, 8 per time) rather than lists of boxed ints; arrays are not objects the garbage collector
traverses, and the engine keeps the two in its own per-partition slots rather than in a table
object (one object fewer per partition). Points beyond `cap` are dropped in bulk, once
`slack(cap)` more have gathered: dropping one per poll would move the whole table in memory at
every poll of every busy partition.

The functions take the two arrays; `new_table()` makes an empty pair.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right


def new_table() -> tuple[array, array]:
    """An empty table: (LEOs, times), oldest first. LEOs never decrease within a table."""
    return array("q"), array("d")


def slack(cap: int) -> int:
    """How many points beyond `cap` a table may hold before the oldest are dropped."""
    return cap // 8 + 1


def points(offsets: array, times: array, cap: int) -> list[tuple[int, float]]:
    """The points the table answers from, oldest first."""
    lo = max(0, len(offsets) - cap)
    return list(zip(offsets[lo:], times[lo:]))


def clear(offsets: array, times: array) -> None:
    del offsets[:]
    del times[:]


def trim(offsets: array, times: array, cap: int) -> None:
    """Drop the points beyond the newest `cap`."""
    drop = len(offsets) - cap
    if drop > 0:
        del offsets[:drop]
        del times[:drop]


def add(offsets: array, times: array, leo: int, t: float, cap: int) -> None:
    """Record that the LEO was `leo` at `t`. A LEO below the newest one is a new log: the old
    log's history says nothing about it, so the table restarts."""
    n = len(offsets)
    if n:
        last = offsets[n - 1]
        if leo == last:
            if n >= 2 and offsets[n - 2] == leo:
                # Still idle: move the end of the flat segment, keep its start.
                times[n - 1] = t
                return
        elif leo < last:
            clear(offsets, times)
    offsets.append(leo)
    times.append(t)
    if len(offsets) > cap + slack(cap):
        trim(offsets, times, cap)


def appended_at(offsets: array, times: array, offset: int, cap: int) -> tuple[float, bool] | None:
    """When record `offset` was appended: (time, is_lower_bound).

    `is_lower_bound` means the record is older than the table: it was appended at or before the
    returned time (the oldest point's). None when it had not been appended as of the newest
    point, or the table is empty.
    """
    n = len(offsets)
    lo = n - cap if n > cap else 0
    i = bisect_right(offsets, offset, lo)  # the first point with LEO > offset
    if i == n:
        return None
    if i == lo:
        return (times[lo], True)
    l0 = offsets[i - 1]
    t0 = times[i - 1]
    # l0 <= offset < offsets[i]: never a division by zero, a flat segment is never chosen.
    return (t0 + (offset + 1 - l0) * (times[i] - t0) / (offsets[i] - l0), False)


def lag(offsets: array, times: array, next_offset: int, now: float, cap: int) -> tuple[float, bool]:
    """Freshness lag at `now` of a mirror whose next record to copy is `next_offset` (LRO + 1):
    (seconds, is_lower_bound). 0 when that record had not been appended as of the newest point
    (caught up)."""
    found = appended_at(offsets, times, next_offset, cap)
    if found is None:
        return (0.0, False)
    at, lower = found
    lag_s = now - at
    # A clock that stepped back could make it negative; a lag is never below 0.
    return (lag_s if lag_s > 0.0 else 0.0, lower)
