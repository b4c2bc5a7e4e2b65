"""Retention headroom (docs/design.md §3, AT_RISK): how far the source's log start is from the records the
mirror has not copied yet, and the records it already deleted before they were copied.

The log start (ListOffsets earliest) is read less often than the LEO; a partition keeps its last
known value between reads. Retention deletes whole segments, so the log start moves in jumps: the
engine measures its rate (a `rates.WindowRate`) over `log_start_window_s`, at least as long as
the horizon AT_RISK forecasts, so that one segment deletion does not make the forecast flap.

Lost means data (docs/design.md §3): of the deleted uncopied offsets, lost records are those a source
probe proved data records, `[data_from, data_to)` (the first data record at or after LRO + 1 and
the run of records received right after it, no gap); offsets below data_from are no data (never
counted); the rest are unverified, counted apart.

Pure arithmetic; the engine keeps the per-partition state (and inlines the hot parts).
"""

from __future__ import annotations


def log_start_window_s(rate_window_s: float, warn_s: float) -> float:
    """The span the log-start rate is measured over."""
    return rate_window_s if rate_window_s > warn_s else warn_s


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
    closing = log_start_rate if copy_rate is None else log_start_rate - copy_rate
    if not closing > 0.0:
        return None
    return room / closing


def newly_lost(counted_through: int, next_offset: int, through: int) -> int:
    """Lost offsets [next_offset, through) not counted yet, when every offset below
    `counted_through` that was ever lost has been counted: each lost offset counts once, however
    many polls see it (the caller then moves counted_through up to `through`)."""
    since = next_offset if next_offset > counted_through else counted_through
    return through - since if through > since else 0


def split_deleted(since: int, log_start: int, next_offset: int, data_from: int | None,
                  data_to: int | None) -> tuple[int, int]:
    """Deleted uncopied offsets [since, log_start) (since >= next_offset = LRO + 1) as (lost,
    unverified): lost inside the proved data [data_from, data_to), unverified past it (or all of
    them where no probe proved anything), neither below data_from."""
    if data_from is None or data_to is None:
        return 0, max(log_start - since, 0)
    lost = min(log_start, data_to) - max(since, data_from)
    return max(lost, 0), max(log_start - max(since, data_to), 0)
