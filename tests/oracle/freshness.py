"""Freshness lag (docs/design.md §3): how long ago the oldest record not yet copied was appended.

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

Compact, because 100k partitions each keep up to 60 (+ 1) points:

- Times are whole ticks of 1/1024 s, rounded *up* (`to_ticks`): a point's time never moves
  earlier, so "appended at or before the oldest point" stays a true lower bound, and an
  interpolated time moves by less than 1 ms. That is finer than what is measured: the poll's LEO
  snapshot time is only known to a ListOffsets round trip (milliseconds), and the history stores
  freshness in whole ms (`freshness_lag_ms`). A power of two, not 1000: scaling by it is exact
  in floating point, so a time that is a whole number of ticks (any poll schedule on a 1/1024 s
  grid, such as the tests' quarter seconds) is kept exactly and the answers do not change.
- A table is one typed array: the LEOs as offsets from a per-table base LEO in its first half,
  the times as offsets from a per-table base time (ticks) in its second half, 4 bytes each while
  they fit in 32 bits (`FITS`): 8 bytes a point instead of 16. Within one table the LEOs never
  decrease and the times are polls of one clock, so the offsets span one table's life:
  4.29e9 offsets or 48.5 days. When a new point does not fit, the bases move up to the oldest
  point (`_refit`); a table that spans more than that even so (an idle partition holding its
  flat segment's start for 49 days) widens to 8-byte items, exact for any LEO and time, until
  the table restarts (a new log).
- The array is allocated exactly: it grows by doubling up to `cap + slack(cap)` = `cap + 1`
  points, never over-allocates, and when it is full the oldest two are dropped (so a busy table
  moves every other poll, not every poll); the count of points in use is kept beside it. One
  point of slack, not more: a table then holds the same points as the engine's columns
  (mirrorlag.engine.freshness), so the two answer alike even after the configured size grows (a bigger
  slack would keep older points that the columns never had).
- Arrays are not objects the garbage collector traverses, and the engine keeps a table's four
  fields in its own per-partition slots (`Table`'s slot names) rather than in a table object.

The functions take anything with `Table`'s four attributes.
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_right
from typing import Protocol

_NARROW = "I"  # unsigned 32-bit: an offset from the base LEO or the base time (ticks)
_WIDE = "q"  # signed 64-bit: a table whose span does not fit in 32 bits
FITS = 1 << 32  # an offset in [0, FITS) fits a narrow item (the engine inlines the test)
assert array(_NARROW).itemsize == 4 and array(_WIDE).itemsize == 8
_EMPTY = array(_NARROW)  # shared by every empty table: a table only ever replaces it, never writes it
_MIN_CAPACITY = 4


class TableFields(Protocol):
    """A table's state: what the functions below read and write."""

    f_table: array  # [LEO - f_leo0 for each point] + [time (ticks) - f_tick0 for each point] + unused
    f_count: int  # points in use, oldest first
    f_leo0: int  # base LEO
    f_tick0: int  # base time, ticks


class Table:
    """A standalone table (the engine keeps the same four fields in its partition's slots)."""

    __slots__ = ("f_table", "f_count", "f_leo0", "f_tick0")

    def __init__(self) -> None:
        clear(self)


def new_table() -> Table:
    """An empty table. LEOs never decrease within a table."""
    return Table()


def slack(cap: int) -> int:
    """How many points beyond `cap` a table may hold before the oldest are dropped (see the module doc)."""
    return 1


TICKS_PER_S = 1024  # a table's time unit, 1/1024 s: see the module doc


def to_ticks(t: float) -> int:
    """`t` (seconds) in whole ticks, rounded up (never earlier). Exact: scaling by a power of two
    does not round."""
    return math.ceil(t * TICKS_PER_S)


def _capacity(tab: TableFields) -> int:
    return len(tab.f_table) >> 1


def _time(tab: TableFields, i: int) -> float:
    """The time of point `i`, seconds."""
    return (tab.f_tick0 + tab.f_table[_capacity(tab) + i]) / TICKS_PER_S


def points(tab: TableFields, cap: int) -> list[tuple[int, float]]:
    """The points the table answers from, oldest first."""
    n = tab.f_count
    return [(tab.f_leo0 + tab.f_table[i], _time(tab, i)) for i in range(max(0, n - cap), n)]


def clear(tab: TableFields) -> None:
    tab.f_table = _EMPTY
    tab.f_count = 0
    tab.f_leo0 = 0
    tab.f_tick0 = 0


def _rebuild(tab: TableFields, capacity: int, typecode: str, leo_shift: int = 0, tick_shift: int = 0) -> None:
    """The points into a new array of `capacity` points and `typecode` items, their offsets
    lowered by the shifts (the bases rise by them)."""
    old, n, c = tab.f_table, tab.f_count, _capacity(tab)
    new = array(typecode, [0]) * (2 * capacity)  # repetition allocates exactly; append would not
    new[0:n] = array(typecode, [x - leo_shift for x in old[0:n]])
    new[capacity:capacity + n] = array(typecode, [x - tick_shift for x in old[c:c + n]])
    tab.f_table = new
    # Only when they move: a large int plus 0 is a new object, and the base time is one int
    # shared by every table that started at the same poll.
    if leo_shift:
        tab.f_leo0 += leo_shift
    if tick_shift:
        tab.f_tick0 += tick_shift


def _refit(tab: TableFields, leo: int, tick: int) -> None:
    """Make room for a point (leo, tick) whose offsets do not fit narrow items: move the bases up
    to the oldest LEO and the earliest time held (the new point's included), and keep narrow
    items if every offset then fits, else widen."""
    t, n, c = tab.f_table, tab.f_count, _capacity(tab)
    new_leo = leo - tab.f_leo0
    new_tick = tick - tab.f_tick0
    times = t[c:c + n]
    leo_shift = t[0] if n else new_leo  # LEOs never decrease: the oldest is the smallest
    tick_shift = min(min(times, default=new_tick), new_tick)  # a clock may step back: the smallest
    top_tick = max(max(times, default=new_tick), new_tick)
    fits = new_leo - leo_shift < FITS and top_tick - tick_shift < FITS
    _rebuild(tab, c, _NARROW if fits else _WIDE, leo_shift, tick_shift)


def trim(tab: TableFields, cap: int) -> None:
    """Drop the points beyond the newest `cap`."""
    n = tab.f_count
    drop = n - cap
    if drop > 0:
        t, c = tab.f_table, _capacity(tab)
        # Equal-length slice assignments move the points in place, no new array.
        t[0:cap] = t[drop:n]
        t[c:c + cap] = t[c + drop:c + n]
        tab.f_count = cap


def prune(tab: TableFields, next_offset: int) -> None:
    """Drop the points older than the one bracketing record `next_offset` (LRO + 1) from below
    (the newest only, when caught up): on one log the LRO only moves forward."""
    n = tab.f_count
    drop = bisect_right(tab.f_table, next_offset - tab.f_leo0, 0, n) - 1
    if drop > 0:
        trim(tab, n - drop)


def add_ticks(tab: TableFields, leo: int, tick: int, cap: int) -> None:
    """Record that the LEO was `leo` at `tick` (`to_ticks` of the time). A LEO below the newest one is
    a new log: the old log's history says nothing about it, so the table restarts."""
    n = tab.f_count
    t = tab.f_table
    if n:
        last = t[n - 1]
        if leo == tab.f_leo0 + last:
            if n >= 2 and t[n - 2] == last:
                # Still idle: move the end of the flat segment, keep its start.
                d = tick - tab.f_tick0
                if 0 <= d < FITS or t.typecode == _WIDE:
                    t[_capacity(tab) + n - 1] = d
                    return
                # The new end does not fit: drop the old one and append the new one below.
                n = tab.f_count = n - 1
        elif leo < tab.f_leo0 + last:
            clear(tab)
            n = 0
    if not n:
        # The first point is the base: offsets 0.
        tab.f_leo0 = leo
        tab.f_tick0 = tick
    limit = cap + slack(cap)
    if n >= limit:
        # Full: keep the newest cap - 1, so that with this point the newest cap remain.
        trim(tab, cap - 1)
        n = tab.f_count
    c = _capacity(tab)
    if n == c or c > limit:
        # Grow by doubling up to the limit, exactly allocated (or shrink to a smaller cap's).
        c = min(limit, max(_MIN_CAPACITY, 2 * c))
        _rebuild(tab, c, tab.f_table.typecode)
    dl = leo - tab.f_leo0
    dt = tick - tab.f_tick0
    if not (dl < FITS and 0 <= dt < FITS) and tab.f_table.typecode == _NARROW:
        _refit(tab, leo, tick)
        dl = leo - tab.f_leo0
        dt = tick - tab.f_tick0
    t = tab.f_table
    t[n] = dl
    t[c + n] = dt
    tab.f_count = n + 1


def add(tab: TableFields, leo: int, t: float, cap: int) -> None:
    """`add_ticks` with the time in seconds."""
    add_ticks(tab, leo, to_ticks(t), cap)


def appended_at(tab: TableFields, offset: int, cap: int) -> tuple[float, bool] | None:
    """When record `offset` was appended: (time, is_lower_bound).

    `is_lower_bound` means the record is older than the table: it was appended at or before the
    returned time (the oldest point's). None when it had not been appended as of the newest
    point, or the table is empty.
    """
    n = tab.f_count
    lo = n - cap if n > cap else 0
    t = tab.f_table
    i = bisect_right(t, offset - tab.f_leo0, lo, n)  # the first point with LEO > offset
    if i == n:
        return None
    if i == lo:
        return (_time(tab, lo), True)
    l0 = t[i - 1]
    t0 = _time(tab, i - 1)
    # l0 <= offset < the next LEO: never a division by zero, a flat segment is never chosen.
    return (t0 + (offset + 1 - tab.f_leo0 - l0) * (_time(tab, i) - t0) / (t[i] - l0), False)


def lag(tab: TableFields, next_offset: int, now: float, cap: int) -> tuple[float, bool]:
    """Freshness lag at `now` of a mirror whose next record to copy is `next_offset` (LRO + 1):
    (seconds, is_lower_bound). 0 when that record had not been appended as of the newest point
    (caught up)."""
    found = appended_at(tab, next_offset, cap)
    if found is None:
        return (0.0, False)
    at, lower = found
    lag_s = now - at
    # A clock that stepped back could make it negative; a lag is never below 0.
    return (lag_s if lag_s > 0.0 else 0.0, lower)
