"""Freshness lag (docs/design.md §3): how long ago the oldest record not yet copied (LRO + 1) was appended.

Each poll adds one point (LEO, time) to a partition's table; the time record `o` was appended is
interpolated from the two points bracketing it (the kafka-lag-exporter method, on the sidecar's
own clock, so no skew between the clusters' clocks enters). A point (L_i, t_i) says: at t_i the
next offset was L_i, so every record below L_i existed. Record `o` was therefore appended in
(t_{i-1}, t_i] for the first i with L_i > o, and with appends spread evenly over that interval it
was appended when the LEO passed o + 1:

    t_{i-1} + (o + 1 - L_{i-1}) * (t_i - t_{i-1}) / (L_i - L_{i-1})

which is exact when records arrive at a steady rate, and never leaves the interval.

An idle stretch (the same LEO at consecutive polls) is kept as one flat segment of two points:
the first time the LEO had that value and the last time it was seen with it. The first makes an
idle but uncopied partition age correctly (not "now - last sample"); the last puts the records
that end the idle stretch after it, not spread back over it.

The table is bounded: it answers from its newest `points` only. A record older than the oldest
of them was appended at or before that point's time, so the answer is then that point's age,
flagged as a lower bound, never an extrapolation (kafka-lag-exporter issue #496's "3 years").
It holds at most points + 1: when full, the oldest two are dropped, so a busy table moves every
other poll, not every poll.
It keeps only what a later answer can read (`prune`): the points from the one just below the
oldest uncopied record, since on one log the LRO only moves forward. A partition copied within a
poll holds two or three points; a stalled one fills its table. The columns store the tables
point slot by point slot, so the slots no table reaches cost no memory (`columns.table_planes`).

Compact, because every partition keeps one:
- Times are whole ticks of 1/1024 s, rounded *up* (`to_ticks`): a point's time never moves
  earlier, so "appended at or before the oldest point" stays a true lower bound. Finer than what
  is measured (a ListOffsets round trip; the history stores whole ms), and a power of two, so
  scaling is exact and a time on a 1/1024 s grid is kept exactly.
- A table's LEOs and times are 32-bit offsets from a per-table base LEO and base time (`FITS`).
  Within one table LEOs never decrease and times are polls of one clock, so the offsets span one
  table's life: 4.29e9 offsets or 48.5 days. When a new point does not fit, the bases move up to
  the oldest point; a table that spans more even so (an idle partition holding its flat segment's
  start for 49 days) moves to the few wide tables (64-bit, exact for any LEO and time) until the
  table restarts on a new log.

The functions work on a `TableBlock` (rows of tables, 32- or 64-bit) and rows of it; `Tables`
holds every partition's table (rows of the engine's columns, plus the wide ones) and runs them on
both kinds.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from mirrorlag.engine.columns import PartitionColumns
from mirrorlag.model import PartitionKey

FITS = 1 << 32  # an offset in [0, FITS) fits a narrow table's item
TICKS_PER_S = 1024  # a table's time unit, 1/1024 s


def to_ticks(t: float) -> int:
    """`t` (seconds) in whole ticks, rounded up (never earlier). Exact: scaling by a power of two
    does not round."""
    return math.ceil(t * TICKS_PER_S)


@dataclass
class TableBlock:
    """Rows of tables: the LEOs as offsets from `leo0` and the times (ticks) as offsets from
    `tick0`, `count` points in use per row, oldest first."""

    leo: np.ndarray  # (rows, width)
    tick: np.ndarray  # (rows, width)
    count: np.ndarray
    leo0: np.ndarray  # int64
    tick0: np.ndarray  # int64
    narrow: bool  # 32-bit items: every offset must fit in [0, FITS)


@dataclass
class _Widened:
    """Rows whose new point does not fit 32 bits even after their bases moved up."""

    rows: np.ndarray  # rows of the narrow block, bases already moved
    n: np.ndarray  # points kept
    dl: np.ndarray  # the new point's offsets from the moved bases
    dt: np.ndarray


def _cut(b: TableBlock, r: np.ndarray, n: np.ndarray, keep: np.ndarray) -> None:
    """Keep each row's newest `keep` of its `n` points, moved to the front."""
    # One slice copy per (keep, n) pair: a handful of pairs (flows' sizes), nearly always n = keep + 2.
    span = int(n.max()) + 1
    code = keep * span + n
    for pair in np.flatnonzero(np.bincount(code)).tolist():  # small ints: no sort
        k, m = divmod(pair, span)
        rs = r[code == pair]
        b.leo[rs, :k] = b.leo[rs, m - k:m]
        b.tick[rs, :k] = b.tick[rs, m - k:m]


def add(b: TableBlock, rows: np.ndarray, leo: np.ndarray, tick: int, points: np.ndarray,
        limit: np.ndarray) -> _Widened | None:
    """Record that each row's LEO was `leo` at `tick`. A LEO below the table's newest is a new
    log: its table restarts. Returns the narrow rows that need 64-bit items (not yet written)."""
    if not rows.size:
        return None
    n = b.count[rows].astype(np.int64)
    has = n > 0
    last_i = np.maximum(n - 1, 0)
    last_off = b.leo[rows, last_i].astype(np.int64)
    last = b.leo0[rows] + last_off
    idle = has & (n >= 2) & (leo == last) & (b.leo[rows, np.maximum(n - 2, 0)].astype(np.int64) == last_off)
    d = tick - b.tick0[rows]
    end_fits = ((d >= 0) & (d < FITS)) if b.narrow else np.ones(rows.size, bool)
    # Still idle: move the end of the flat segment, keep its start.
    moving = idle & end_fits
    b.tick[rows[moving], last_i[moving]] = d[moving]
    # An end that does not fit is dropped and the point appended below.
    n = np.where(idle & ~end_fits, n - 1, n)
    go = ~moving
    r, lv, n, points, limit = rows[go], leo[go], n[go], points[go], limit[go]
    n[has[go] & (lv < last[go])] = 0  # a new log
    empty = n == 0
    b.leo0[r[empty]] = lv[empty]  # the first point is the base: offsets 0
    b.tick0[r[empty]] = tick
    full = n >= limit
    if full.any():
        # Keep the newest points - 1, so that with this point the newest `points` remain.
        _cut(b, r[full], n[full], points[full] - 1)
        n[full] = points[full] - 1
    dl = lv - b.leo0[r]
    dt = tick - b.tick0[r]
    widened = None
    if b.narrow:
        out = np.flatnonzero(~((dl < FITS) & (dt >= 0) & (dt < FITS)))
        if out.size:
            dl[out], dt[out], wide = _refit(b, r[out], n[out], dl[out], dt[out])
            if wide.any():
                w = out[wide]
                widened = _Widened(r[w], n[w], dl[w], dt[w])
                stay = np.ones(r.size, bool)
                stay[w] = False
                r, n, dl, dt = r[stay], n[stay], dl[stay], dt[stay]
    b.leo[r, n] = dl
    b.tick[r, n] = dt
    b.count[r] = n + 1
    return widened


def _refit(b: TableBlock, r: np.ndarray, n: np.ndarray, dl: np.ndarray, dt: np.ndarray
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Make room for new points whose offsets do not fit 32 bits: move each row's bases up to its
    oldest LEO and earliest time held (the new point's included). Returns the new points' offsets
    from the moved bases, and which rows still do not fit."""
    w = max(int(n.max(initial=0)), 1)  # the points held: planes past them stay untouched
    held = np.arange(w)[None, :] < n[:, None]
    leos = b.leo[r, :w].astype(np.int64)
    ticks = b.tick[r, :w].astype(np.int64)
    leo_shift = np.where(n > 0, leos[:, 0], dl)  # LEOs never decrease: the oldest is the smallest
    # A clock may step back: the smallest time, not the oldest point's.
    tick_shift = np.minimum(np.where(held, ticks, np.iinfo(np.int64).max).min(axis=1), dt)
    top = np.maximum(np.where(held, ticks, np.iinfo(np.int64).min).max(axis=1), dt)
    b.leo[r, :w] = np.where(held, leos - leo_shift[:, None], 0)
    b.tick[r, :w] = np.where(held, ticks - tick_shift[:, None], 0)
    b.leo0[r] += leo_shift
    b.tick0[r] += tick_shift
    dl = dl - leo_shift
    return dl, dt - tick_shift, ~((dl < FITS) & (top - tick_shift < FITS))


def between_polls(prev_leo: np.ndarray, prev_t: np.ndarray, leo: np.ndarray, next_offset: np.ndarray, t: float,
                  now: float) -> np.ndarray:
    """Freshness lag of rows whose next record to copy was appended since the previous poll (the
    LEO went from `prev_leo` at `prev_t` to `leo` at `t`): the interpolation between the table's
    two newest points, without a search."""
    seconds = now - (prev_t + (next_offset + 1 - prev_leo) * (t - prev_t) / (leo - prev_leo))
    return np.where(seconds < 0.0, 0.0, seconds)


def lag(b: TableBlock, rows: np.ndarray, next_offset: np.ndarray, now: float,
        points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Freshness lag at `now` of rows whose next record to copy is `next_offset` (LRO + 1):
    (seconds, is_lower_bound). 0 when that record had not been appended as of the newest point
    (caught up); a clock that stepped back never makes it negative."""
    n = b.count[rows].astype(np.int64)
    lo = np.maximum(n - points, 0)
    width = max(int(n.max(initial=0)), 1)  # the points held: planes past them are never read
    cols = np.arange(width)
    target = next_offset - b.leo0[rows]
    leos = b.leo[rows, :width].astype(np.int64)
    inside = (cols >= lo[:, None]) & (cols < n[:, None])
    i = lo + ((leos <= target[:, None]) & inside).sum(axis=1)  # the first point with LEO > offset
    tick0 = b.tick0[rows]
    ticks = b.tick[rows, :width].astype(np.int64)

    def at(j: np.ndarray) -> np.ndarray:
        return np.take_along_axis(ticks, np.minimum(j, width - 1)[:, None], 1)[:, 0]

    prev = np.maximum(i - 1, 0)
    t_i = (tick0 + at(i)) / TICKS_PER_S
    t0 = (tick0 + at(prev)) / TICKS_PER_S
    l0 = np.take_along_axis(leos, prev[:, None], 1)[:, 0]
    li = np.take_along_axis(leos, np.minimum(i, width - 1)[:, None], 1)[:, 0]
    lower = i == lo  # older than the table: appended at or before its oldest point
    with np.errstate(divide="ignore", invalid="ignore"):
        appended = np.where(lower, (tick0 + at(lo)) / TICKS_PER_S,
                            t0 + (next_offset + 1 - b.leo0[rows] - l0) * (t_i - t0) / (li - l0))
    seconds = now - appended
    seconds = np.where(seconds > 0.0, seconds, 0.0)
    done = i == n  # not appended as of the newest point: caught up
    return np.where(done, 0.0, seconds), lower & ~done


def prune(b: TableBlock, rows: np.ndarray, next_offset: np.ndarray) -> None:
    """Drop each row's points older than the one bracketing record `next_offset` (LRO + 1) from
    below: on one log the LRO only moves forward, so no later answer reads them. A caught-up
    table keeps its newest point only. What is left answers every later offset as the whole
    table would; only a rewind below the kept points reads a lower bound (the oldest kept point's
    age) instead of an interpolation."""
    n = b.count[rows].astype(np.int64)
    width = int(n.max(initial=0))
    if width < 2:
        return
    held = np.arange(width)[None, :] < n[:, None]
    below = (b.leo[rows, :width].astype(np.int64) <= (next_offset - b.leo0[rows])[:, None]) & held
    drop = np.maximum(below.sum(axis=1) - 1, 0)  # LEOs never decrease: the points at or below come first
    cut = np.flatnonzero(drop)
    if cut.size:
        r, m = rows[cut], n[cut]
        _cut(b, r, m, m - drop[cut])
        b.count[r] = m - drop[cut]


class Tables:
    """Every partition's table: in the engine's columns (32-bit), or among the few wide ones
    (64-bit, kept by partition key) once its span outgrows 32 bits."""

    def __init__(self) -> None:
        self.wide: dict[PartitionKey, tuple[np.ndarray, np.ndarray, int, int, int]] = {}

    def _split(self, keys: Sequence[PartitionKey], rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Positions in `rows` of the narrow tables and of the wide ones."""
        if not self.wide:
            return np.arange(rows.size), np.zeros(0, np.int64)
        wide_rows = np.array(sorted(bisect_left(keys, k) for k in self.wide), np.int64)  # keys are sorted
        is_wide = np.isin(rows, wide_rows)
        return np.flatnonzero(~is_wide), np.flatnonzero(is_wide)

    @staticmethod
    def _narrow(c: PartitionColumns) -> TableBlock:
        return TableBlock(c.t_leo, c.t_tick, c.f_count, c.f_leo0, c.f_tick0, True)

    def _wide_block(self, keys: list[PartitionKey], width: int) -> TableBlock:
        k = len(keys)
        b = TableBlock(np.zeros((k, width), np.int64), np.zeros((k, width), np.int64), np.zeros(k, np.int64),
                       np.zeros(k, np.int64), np.zeros(k, np.int64), False)
        for i, key in enumerate(keys):
            leo, tick, b.count[i], b.leo0[i], b.tick0[i] = self.wide[key]
            b.leo[i, :leo.size] = leo
            b.tick[i, :tick.size] = tick
        return b

    def _keep_wide(self, keys: list[PartitionKey], b: TableBlock) -> None:
        for i, key in enumerate(keys):
            self.wide[key] = (b.leo[i].copy(), b.tick[i].copy(), int(b.count[i]), int(b.leo0[i]), int(b.tick0[i]))

    def clear(self, c: PartitionColumns, keys: Sequence[PartitionKey], rows: np.ndarray) -> None:
        """Restart the tables of `rows` (a new log: the old one's history says nothing of it)."""
        c.f_count[rows] = 0
        c.f_leo0[rows] = 0
        c.f_tick0[rows] = 0
        if self.wide:
            for i in rows.tolist():
                self.wide.pop(keys[i], None)

    def forget(self, keys: Sequence[PartitionKey]) -> None:
        """Partitions that left."""
        for key in keys:
            self.wide.pop(key, None)

    def add(self, c: PartitionColumns, keys: Sequence[PartitionKey], rows: np.ndarray, leo: np.ndarray, t: float,
            points: np.ndarray, limit: np.ndarray) -> None:
        """Add the point (leo, t) to the tables of `rows` (`leo`, `points`, `limit` per row)."""
        tick = to_ticks(t)
        narrow, wide = self._split(keys, rows)
        grown = add(self._narrow(c), rows[narrow], leo[narrow], tick, points[narrow], limit[narrow])
        if grown is not None:
            # Into 64-bit items, with the point that did not fit.
            gk = [keys[i] for i in grown.rows.tolist()]
            b = TableBlock(c.t_leo[grown.rows].astype(np.int64), c.t_tick[grown.rows].astype(np.int64),
                           grown.n + 1, c.f_leo0[grown.rows].copy(), c.f_tick0[grown.rows].copy(), False)
            j = np.arange(grown.rows.size)
            b.leo[j, grown.n] = grown.dl
            b.tick[j, grown.n] = grown.dt
            self._keep_wide(gk, b)
        if wide.size:
            wk = [keys[i] for i in rows[wide].tolist()]
            b = self._wide_block(wk, c.points)
            add(b, np.arange(wide.size), leo[wide], tick, points[wide], limit[wide])
            self._keep_wide(wk, b)

    def prune(self, c: PartitionColumns, keys: Sequence[PartitionKey], rows: np.ndarray,
              next_offset: np.ndarray) -> None:
        """`prune` for `rows`, narrow or wide; then the pages of the planes no table uses go back."""
        narrow, wide = self._split(keys, rows)
        prune(self._narrow(c), rows[narrow], next_offset[narrow])
        if wide.size:
            wk = [keys[i] for i in rows[wide].tolist()]
            b = self._wide_block(wk, c.points)
            prune(b, np.arange(wide.size), next_offset[wide])
            self._keep_wide(wk, b)
        c.release_table_planes()

    def lag(self, c: PartitionColumns, keys: Sequence[PartitionKey], rows: np.ndarray, next_offset: np.ndarray,
            now: float, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """`lag` for `rows`, narrow or wide."""
        seconds = np.zeros(rows.size)
        lower = np.zeros(rows.size, bool)
        narrow, wide = self._split(keys, rows)
        seconds[narrow], lower[narrow] = lag(self._narrow(c), rows[narrow], next_offset[narrow], now, points[narrow])
        if wide.size:
            b = self._wide_block([keys[i] for i in rows[wide].tolist()], c.points)
            seconds[wide], lower[wide] = lag(b, np.arange(wide.size), next_offset[wide], now, points[wide])
        return seconds, lower
