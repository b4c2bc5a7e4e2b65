"""Retention (docs/design.md §3, AT_RISK): how far the source's log start is from the records the mirror
has not copied yet, and the records it deleted before they were copied.

The log start (ListOffsets earliest) is read less often than the LEO; a partition keeps its last
known value between reads. Retention deletes whole segments, so the log start moves in jumps: its
rate is measured with two checkpoints (as rates.py does) over a span at least as long as the
horizon AT_RISK forecasts, so that one segment deletion does not make the forecast flap.

Lost means data (docs/design.md §3): of the deleted offsets `[LRO + 1, log start)`, lost records are
only those the source probe proved data records: `[data_from, data_to)`, the first data record
it found at or after LRO + 1 and the records it received right after it, consecutive (a gap may
be a commit marker, an aborted record or compaction: from there on nothing is proved). Offsets
below data_from are no data (the probe read past them: transaction markers, aborted records),
neither lost nor unverified. The other deleted offsets, past data_to or where no probe proved
anything (its memory is gone after a restart, and a fetch below the log start fails), are
unverified: counted apart, and neither AT_RISK nor a critical alert rests on them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mirrorlag.engine.columns import PartitionColumns


def observe_log_starts(c: PartitionColumns, r: np.ndarray, value: np.ndarray, t: float, half_s: np.ndarray) -> None:
    """Log starts `value` of rows `r`, read at about `t`. A first reading, or a log start that
    went back (a new log, whose offsets restart), carries no rate history or lost count over."""
    if not r.size:
        return
    known = c.has_log_start[r]
    old = c.log_start[r]
    c.log_start[r] = value
    c.has_log_start[r] = True
    new_log = ~known | (value < old)
    c.lost_through[r[known & (value < old)]] = 0
    nl = r[new_log]
    c.sa_x[nl] = c.sb_x[nl] = value[new_log]
    c.sa_t[nl] = c.sb_t[nl] = t
    c.ls_rate[nl] = np.nan
    go = ~new_log
    r, value, half_s = r[go], value[go], half_s[go]
    shift = (t - c.sb_t[r]) >= half_s
    s = r[shift]
    c.sa_x[s] = c.sb_x[s]
    c.sa_t[s] = c.sb_t[s]
    c.sb_x[s] = value[shift]
    c.sb_t[s] = t
    span = t - c.sa_t[r]
    with np.errstate(divide="ignore", invalid="ignore"):
        c.ls_rate[r] = np.where(span > 0.0, (value - c.sa_x[r]) / span, np.nan)


def forget(c: PartitionColumns, r: np.ndarray, read_now: np.ndarray, t: float) -> None:
    """A new log: its rate history and lost count start again, from a log start read this poll
    (`read_now`), else from the next reading."""
    c.lost_through[r] = 0
    c.has_data_from[r] = False
    c.ls_rate[r] = np.nan
    now = r[read_now]
    c.sa_x[now] = c.sb_x[now] = c.log_start[now]
    c.sa_t[now] = c.sb_t[now] = t
    c.has_log_start[r[~read_now]] = False


@dataclass(frozen=True)
class Headroom:
    room: np.ndarray  # records retention may still delete before an uncopied one (0 when it did)
    known: np.ndarray  # the log start is known (room and lost are)
    room_s: np.ndarray  # seconds until it deletes an uncopied record
    room_s_known: np.ndarray  # in sight: the log start advances faster than the mirror copies
    lost: np.ndarray  # records deleted before they were copied, proved data ([data_from, data_to))
    newly_lost: np.ndarray  # of them, those not counted before (each lost offset counts once)
    unverified: np.ndarray  # deleted uncopied offsets whose kind no probe proved (maybe markers)
    newly_unverified: np.ndarray  # of them, those not counted before
    at_risk: np.ndarray


def prove_data(c: PartitionColumns, rows: np.ndarray, first_data: np.ndarray, data_to: np.ndarray) -> None:
    """The source probe found the first data record at or after LRO + 1 of `rows` at `first_data`,
    and every offset in [first_data, data_to) a data record (data_to > first_data)."""
    c.data_from[rows] = first_data
    c.data_to[rows] = data_to
    c.has_data_from[rows] = True


def headroom(c: PartitionColumns, r: np.ndarray, next_offset: np.ndarray, lag: np.ndarray, copy: np.ndarray,
             copy_known: np.ndarray, warn_s: np.ndarray) -> Headroom:
    """Rows `r` whose next record to copy is `next_offset` (LRO + 1; past the LEO where the probe
    proved no data left), `lag` records behind, copying at `copy` records/s. An unknown copy rate
    counts as 0: warn rather than hide. Offsets from `next_offset` below the log start were
    deleted uncopied, also where what is left holds nothing to copy (lag 0)."""
    known = c.has_log_start[r]
    start = c.log_start[r]
    lost = start - next_offset
    gone = known & (lost > 0)  # offsets deleted uncopied, of whatever kind
    # A proof for an earlier LRO + 1 holds while the LRO has not passed its run: an LRO + 1
    # inside the run starts the proved data there.
    had = c.has_data_from[r]
    proved = had & (c.data_to[r] > next_offset)
    c.has_data_from[r[had & ~proved]] = False
    c.data_from[r[proved]] = np.maximum(c.data_from[r[proved]], next_offset[proved])
    data = np.where(proved, c.data_from[r], next_offset)  # [data, data_end): proved data records
    data_end = np.where(proved, c.data_to[r], next_offset)  # past it the kind is unknown
    deleted = gone & proved & (start > data)  # proved: at least the record at data_from is gone
    counted = c.lost_through[r]
    newly = gone & (start > counted)
    since = np.maximum(next_offset, counted)
    # Each deleted offset counts once: lost inside [data, data_end), unverified past data_end
    # (from next_offset where nothing is proved), neither below data (no data).
    newly_lost = np.where(newly & deleted, np.minimum(start, data_end) - np.maximum(since, data), 0)
    newly_lost = np.maximum(newly_lost, 0)
    newly_unverified = np.where(newly, np.maximum(start - np.maximum(since, data_end), 0), 0)
    c.lost_through[r[newly]] = start[newly]
    room = np.maximum(-lost, 0)
    rate = c.ls_rate[r]
    closing = np.where(copy_known, rate - copy, rate)
    in_sight = known & ~deleted & (lag > 0) & ~np.isnan(rate) & (rate > 0.0) & (closing > 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        room_s = np.where(deleted, 0.0, room / closing)
    return Headroom(room, known, room_s, deleted | in_sight, np.where(deleted, np.minimum(start, data_end) - data, 0),
                    newly_lost, np.where(gone, np.maximum(start - data_end, 0), 0), newly_unverified,
                    deleted | (in_sight & (room_s < warn_s)))
