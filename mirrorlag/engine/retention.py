"""Retention headroom (DESIGN §3, AT_RISK): how far the source's log start is from the records the
mirror has not copied yet, and records it already deleted before they were copied.

The log start (ListOffsets earliest) is read less often than the LEO; a partition keeps its last
known value between reads. Retention deletes whole segments, so the log start moves in jumps: its
rate is measured over a long window (the engine passes max(rate window, retention warn time)) so a
single segment deletion does not make the forecast flap.
"""

from __future__ import annotations

from mirrorlag.engine.rates import WindowRate


class LogStart(WindowRate):
    """One partition's last known log start, its advance rate, and how far lost records have
    already been counted. It is its own rate tracker (one object per partition, not two)."""

    __slots__ = ("value", "rate", "lost_through")

    def __init__(self, value: int, t: float) -> None:
        WindowRate.__init__(self, value, t)
        self.value = value
        self.rate: float | None = None  # records/s the log start advances; None until measurable
        # The highest offset counted as lost so far (exclusive): each lost offset counts once.
        self.lost_through = 0

    def observe(self, value: int, t: float, window_s: float) -> None:
        """A new ListOffsets earliest reading taken at `t`."""
        if value < self.value:
            # The log start never goes back on one log: a new log (topic recreated). Its offsets
            # restart, so neither the rate history nor the lost count carries over.
            self.reset(value, t)
            self.value = value
            self.rate = None
            self.lost_through = 0
            return
        self.value = value
        self.rate = self.update(value, t, window_s)

    def count_lost(self, next_offset: int) -> int:
        """Records in [next_offset, log start) not counted before: the newly lost ones."""
        start = self.value
        counted = self.lost_through
        since = next_offset if next_offset > counted else counted
        if start <= since:
            return 0
        self.lost_through = start
        return start - since

    def __repr__(self) -> str:
        return f"LogStart(value={self.value}, rate={self.rate}, lost_through={self.lost_through})"


def records_lost(log_start: int, next_offset: int) -> int:
    """Records the source deleted before the mirror copied them (LRO + 1 = next_offset)."""
    lost = log_start - next_offset
    return lost if lost > 0 else 0


def headroom_records(log_start: int, next_offset: int) -> int:
    """Records retention may still delete before it deletes one the mirror has not copied."""
    room = next_offset - log_start
    return room if room > 0 else 0


def headroom_s(
    room: int, lost: int, log_start_rate: float | None, copy_rate: float | None
) -> float | None:
    """Seconds until retention deletes a record not yet copied: 0 when it already has; None when
    not in sight (the log start is not known to advance, or the mirror copies at least as fast).
    An unknown copy rate counts as 0: warn rather than hide."""
    if lost > 0:
        return 0.0
    if log_start_rate is None or not log_start_rate > 0.0:
        return None
    closing = log_start_rate - (copy_rate if copy_rate is not None else 0.0)
    if not closing > 0.0:
        return None
    return room / closing
