"""Whose samples count, and how long a sample may stand for (DESIGN §7 "A day's accounting").
Numpy only: the merge (partials.merge) calls these on its part rows.

Several sidecars may write one history: replicas > 1 on a shared volume or upload store, or a pod
replaced by one with another name (a rolling update). Per partition-day the merge keeps whole
writers: the one with the most samples (ties: the smaller id, then rows without a writer, written
before rows had one), then every other writer whose span (its first to its last sample) overlaps
no kept writer's span by more than HANDOFF_MS. So two sidecars polling side by side give the
figures of the fuller one, and a sidecar that took over from another adds its part of the day.

Whole writers, not single samples: the map side sums histograms and curves per writer, so they
cannot be taken apart sample by sample without shuffling every sample; and a partition's day then
comes from one sidecar's view at a time, never two views interleaved (two sidecars disagreeing
about a stall made one 3,600 s stall read as 240 episodes). The cost: where two writers overlap
for longer, the day has the fuller one's samples only, so a gap in it is not filled by the other.

A sample stands for the time to the partition's next one, at most GAP_POLLS times the poll
interval its writer recorded (`refresh_interval_ms`), or the rollup's --max-gap-seconds for rows
written before rows carried it; the partition-day's cap is the largest of its kept rows'.
"""

from __future__ import annotations

import numpy as np

# A gap of up to this many poll intervals is covered, beyond it no data. 4: at the default 15 s
# refresh interval exactly the 60 s the rollup capped at before rows had their interval (the
# figures of a default sidecar do not change), and three missed polls (a slow broker, a GC pause)
# are still data at any interval, while a sidecar down for longer is not.
GAP_POLLS = 4
# Two writers' spans may overlap this much and both count: a rolling update starts the new pod
# before the old one has stopped (its terminationGracePeriodSeconds is 30 s by default).
HANDOFF_MS = 10 * 60_000


def keep(key: np.ndarray, rank: np.ndarray, samples: np.ndarray, first: np.ndarray, last: np.ndarray) -> np.ndarray:
    """Which part rows count. Per part row: its partition (`key`, dense ids), its writer's `rank`
    (the order of writer ids, rows without a writer last), its sample count and the first and
    last time of its samples (first > last when it has no timed sample: it overlaps nothing)."""
    n_ranks = int(rank.max()) + 1 if rank.size else 1
    pair = key * n_ranks + rank
    pairs, at = np.unique(pair, return_inverse=True)
    n = np.bincount(at, weights=samples).astype(np.int64)
    lo = np.full(pairs.size, np.iinfo(np.int64).max)
    hi = np.full(pairs.size, np.iinfo(np.int64).min)
    np.minimum.at(lo, at, first)
    np.maximum.at(hi, at, last)
    p_key, p_rank = pairs // n_ranks, pairs % n_ranks
    kept = np.ones(pairs.size, bool)
    order = np.lexsort((p_rank, -n, p_key))  # per partition: most samples first, then the smaller id
    starts = np.flatnonzero(np.r_[True, p_key[order][1:] != p_key[order][:-1]])
    sizes = np.diff(np.r_[starts, order.size])
    for s, size in zip(starts[sizes > 1].tolist(), sizes[sizes > 1].tolist()):  # partitions with several writers
        chosen: list[int] = []
        for i in order[s:s + size].tolist():
            if any(min(hi[i], hi[j]) - max(lo[i], lo[j]) > HANDOFF_MS for j in chosen):
                kept[i] = False
            else:
                chosen.append(i)
    return kept[at]


def caps(interval_ms: np.ndarray, known: np.ndarray, group: np.ndarray, n: int, default_cap_ms: int) -> np.ndarray:
    """Each group's cap on the time one sample stands for, from its part rows' poll intervals
    (`known`: the row has one) and `default_cap_ms` for rows without."""
    out = np.full(n, np.iinfo(np.int64).min)
    np.maximum.at(out, group, np.where(known, interval_ms * GAP_POLLS, default_cap_ms))
    return out
