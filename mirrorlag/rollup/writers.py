"""Whose samples count, and how long a sample may stand for (docs/design.md §7 "A day's accounting").
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
Within a handoff's overlap (both writers kept) the samples' times and states (which every sample
carries through the shuffle) of the writer chosen later are dropped where the one chosen first
has its span (choose's windows): durations, stall episodes and `samples` come from one writer per
time span. The lag figures (histograms) and the report's curves, summed per writer on the map
side, still hold both writers' samples of that overlap: at most HANDOFF_MS of them.

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
    """Which part rows count (choose's first answer)."""
    return choose(key, rank, samples, first, last)[0]


def choose(key: np.ndarray, rank: np.ndarray, samples: np.ndarray, first: np.ndarray,
           last: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Which part rows count, and per row the spans whose samples of it do not. Per part row: its
    partition (`key`, dense ids), its writer's `rank` (the order of writer ids, rows without a
    writer last), its sample count and the first and last time of its samples (first > last when
    it has no timed sample: it overlaps nothing).

    Returns (kept, lo, hi): `lo` and `hi` (rows x K, K windows at most per row, empty ones lo > hi)
    bound the spans, inclusive, where a writer kept after another overlaps the other's span (a
    handoff of up to HANDOFF_MS): there the writer chosen first counts alone, so the partition's
    samples come from one writer per time span, never two interleaved."""
    n_ranks = int(rank.max()) + 1 if rank.size else 1
    pair = key * n_ranks + rank
    pairs, at = np.unique(pair, return_inverse=True)
    at = at.reshape(-1)
    n = np.bincount(at, weights=samples).astype(np.int64)
    lo = np.full(pairs.size, np.iinfo(np.int64).max)
    hi = np.full(pairs.size, np.iinfo(np.int64).min)
    np.minimum.at(lo, at, first)
    np.maximum.at(hi, at, last)
    p_key, p_rank = pairs // n_ranks, pairs % n_ranks
    kept = np.ones(pairs.size, bool)
    windows: list[tuple[int, int, int]] = []  # (pair, lo, hi)
    order = np.lexsort((p_rank, -n, p_key))  # per partition: most samples first, then the smaller id
    starts = np.flatnonzero(np.r_[True, p_key[order][1:] != p_key[order][:-1]])
    sizes = np.diff(np.r_[starts, order.size])
    for s, size in zip(starts[sizes > 1].tolist(), sizes[sizes > 1].tolist()):  # partitions with several writers
        chosen: list[int] = []
        for i in order[s:s + size].tolist():
            overlaps = [(max(lo[i], lo[j]), min(hi[i], hi[j])) for j in chosen]
            if any(b - a > HANDOFF_MS for a, b in overlaps):
                kept[i] = False
                continue
            windows += [(i, a, b) for a, b in overlaps if a <= b]
            chosen.append(i)
    width = max(np.bincount([w[0] for w in windows]).max(), 1) if windows else 0
    w_lo = np.full((pairs.size, width), np.iinfo(np.int64).max)
    w_hi = np.full((pairs.size, width), np.iinfo(np.int64).min)
    filled = np.zeros(pairs.size, np.int64)
    for i, a, b in windows:
        w_lo[i, filled[i]], w_hi[i, filled[i]] = a, b
        filled[i] += 1
    return kept[at], w_lo[at], w_hi[at]


def outside(ts: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Which samples (times `ts`, each with its row's windows `lo`, `hi` from choose) count."""
    out = np.ones(ts.size, bool)
    for k in range(lo.shape[1]):
        out &= (ts < lo[:, k]) | (ts > hi[:, k])
    return out


def caps(interval_ms: np.ndarray, known: np.ndarray, group: np.ndarray, n: int, default_cap_ms: int) -> np.ndarray:
    """Each group's cap on the time one sample stands for, from its part rows' poll intervals
    (`known`: the row has one) and `default_cap_ms` for rows without."""
    out = np.full(n, np.iinfo(np.int64).min)
    np.maximum.at(out, group, np.where(known, interval_ms * GAP_POLLS, default_cap_ms))
    return out
