"""Time lag (docs/design.md §3, KIP-16 transposed to a mirror): how long since the partition was last
caught up.

Each poll at time t takes the LEO snapshot L_t before reading the LRO. If LRO + 1 >= L_t the
partition is caught up and last_caught_up = t; else if LRO + 1 >= L_prev everything that existed
at the previous poll has been copied, so last_caught_up = max(last_caught_up, t_prev). Caught up
can only be credited to poll times, so time lag reads high by at most one poll interval, never
low. A partition never seen caught up counts from the first poll that had both an LEO and an LRO,
or from the append time of record LRO + 1 where the source was probed for it and it is earlier:
that record has waited uncopied since then, so the mirror was not caught up at any time after.
A mirror that stalled an hour before the sidecar started reads an hour of time lag at once.
"""

from __future__ import annotations

import numpy as np

from mirrorlag.engine.columns import PartitionColumns


def time_lag(c: PartitionColumns, r: np.ndarray, next_offset: np.ndarray, leo: np.ndarray, appended_at: np.ndarray,
             t: float, now: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows `r` with an LEO and an LRO (`appended_at`: record LRO + 1's append time, NaN where not
    probed): (time lag, caught up, copied all that existed at the previous poll but not since).
    Reads the previous snapshot; `remember` moves it afterwards."""
    caught = next_offset >= leo
    behind = ~caught
    lcu = c.last_caught_up[r]
    lcu[caught] = t
    pt = c.prev_t[r]
    since_prev = behind & c.has_prev_leo[r] & (next_offset >= c.prev_leo[r])
    later = since_prev & (np.isnan(lcu) | (lcu < pt))
    lcu[later] = pt[later]
    first = c.first_seen_t[r]
    since = np.where(np.isnan(lcu), first, lcu)
    unset = behind & np.isnan(since)
    first[unset] = t
    earlier = behind & np.isnan(lcu) & (appended_at < first)  # NaN compares False
    first[earlier] = appended_at[earlier]
    since = np.where(np.isnan(lcu), first, lcu)
    c.last_caught_up[r] = lcu
    c.first_seen_t[r] = first
    return np.where(caught, 0.0, now - since), caught, since_prev


def remember(c: PartitionColumns, r: np.ndarray, leo: np.ndarray, t: float) -> None:
    """This poll's LEO snapshot becomes rows `r`'s previous one."""
    c.prev_leo[r] = leo
    c.has_prev_leo[r] = True
    c.prev_t[r] = t


def forget(c: PartitionColumns, r: np.ndarray, first_seen: float) -> None:
    """A new log: the old log's catch-up times say nothing about it. `first_seen`: when time lag
    counts from until caught up (NaN: the next poll with an LRO)."""
    c.last_caught_up[r] = np.nan
    c.first_seen_t[r] = first_seen
    c.proof[r] = 0


def unproved(c: PartitionColumns, r: np.ndarray, behind: np.ndarray, appended_at: np.ndarray,
             unanswered: np.ndarray) -> np.ndarray:
    """Rows `r` (after `time_lag`) whose time lag is only a lower bound (docs/design.md §3, "A claim the
    evidence cannot prove is flagged"): never seen caught up, so it counts from the first look,
    and the probe asked for record LRO + 1's append time (`unanswered`: this poll) has never
    answered on this log. A probed time, once, or a credited catch-up proves it."""
    proof = c.proof[r]
    proof[behind & unanswered & (proof == 0)] = 1
    proof[behind & ~np.isnan(appended_at)] = 2
    c.proof[r] = proof
    return behind & (proof == 1) & np.isnan(c.last_caught_up[r])
