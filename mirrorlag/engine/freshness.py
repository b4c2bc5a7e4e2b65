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

The table is bounded: beyond `cap` points the oldest are dropped. A record older than the oldest
point was appended at or before that point's time, so the answer is then that point's age,
flagged as a lower bound, never an extrapolation (kafka-lag-exporter issue #496's "3 years").

Compact: 100k partitions each keep up to 60 points, so the points live in two typed arrays
(8 bytes per LEO, 8 per time) rather than lists of boxed ints, and arrays are not objects the
garbage collector has to traverse.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right


class FreshnessTable:
    """One partition's (LEO, time) points, oldest first: LEOs non-decreasing, a LEO that goes
    backwards (a new log) clears the table first."""

    __slots__ = ("offsets", "times")

    def __init__(self) -> None:
        self.offsets = array("q")  # LEO of each point
        self.times = array("d")  # when the poller saw it (seconds, the observation's leo_at)

    def __len__(self) -> int:
        return len(self.offsets)

    def __repr__(self) -> str:
        return f"FreshnessTable({list(zip(self.offsets, self.times))!r})"

    def clear(self) -> None:
        del self.offsets[:]
        del self.times[:]

    def add(self, leo: int, t: float, cap: int) -> None:
        """Record that the LEO was `leo` at `t`; keep at most `cap` (>= 2) points."""
        offsets = self.offsets
        n = len(offsets)
        if n:
            last = offsets[-1]
            if leo == last:
                if n >= 2 and offsets[-2] == leo:
                    # Still idle: move the end of the flat segment, keep its start.
                    self.times[-1] = t
                    return
            elif leo < last:
                self.clear()  # the log went backwards: its history says nothing about the new one
                n = 0
        offsets.append(leo)
        times = self.times
        times.append(t)
        if n >= cap:
            del offsets[: n + 1 - cap]
            del times[: n + 1 - cap]

    def appended_at(self, offset: int) -> tuple[float, bool] | None:
        """When record `offset` was appended: (time, is_lower_bound).

        `is_lower_bound` means the record is older than the table: it was appended at or before
        the returned time (the oldest point's). None when it had not been appended as of the
        newest point, or the table is empty.
        """
        offsets = self.offsets
        i = bisect_right(offsets, offset)  # the first point with LEO > offset
        if i == len(offsets):
            return None
        times = self.times
        if i == 0:
            return (times[0], True)
        l0 = offsets[i - 1]
        t0 = times[i - 1]
        # l0 <= offset < offsets[i]: never a division by zero, a flat segment is never chosen.
        return (t0 + (offset + 1 - l0) * (times[i] - t0) / (offsets[i] - l0), False)

    def lag(self, next_offset: int, now: float) -> tuple[float, bool]:
        """Freshness lag at `now` of a mirror whose next record to copy is `next_offset`
        (LRO + 1): (seconds, is_lower_bound). 0 when that record had not been appended as of the
        newest point (caught up)."""
        found = self.appended_at(next_offset)
        if found is None:
            return (0.0, False)
        at, lower = found
        lag = now - at
        # A clock that stepped back could make it negative; a lag is never below 0.
        return (lag if lag > 0.0 else 0.0, lower)
