"""The record-lag window (docs/design.md §3, KIP-971's -min, -max, -avg): Kafka's SampledStat over
`metrics.num.samples` samples of `metrics.sample.window.ms`.

Kafka keeps one SampledStat per statistic (Min, Max, Avg); the three record the same values at
the same times, so their samples have identical start times and counts: one set of samples
carrying min, max and sum gives the same three measurements. Samples are created lazily (Kafka's
list grows up to `samples` entries), advanced when the current one is complete (its start is a
window old), and purged by their *start* time, as the classic SampledStat does. "No sample has
events" is unknown rather than NaN.
"""

from __future__ import annotations

import numpy as np

from mirrorlag.engine.columns import PartitionColumns


def restart(c: PartitionColumns, r: np.ndarray, shape: np.ndarray) -> None:
    """Rows `r` whose flow's window shape is no longer theirs start an empty window in `shape`."""
    changed = c.shape[r] != shape
    if changed.any():
        rr = r[changed]
        c.shape[rr] = shape[changed]
        c.w_created[rr] = 0
        c.w_cur[rr] = 0


def record(c: PartitionColumns, r: np.ndarray, values: np.ndarray, now: float, window_s: np.ndarray,
           samples: np.ndarray) -> None:
    """SampledStat.record of `values` at `now` for rows `r` (each in its own shape)."""
    cur = c.w_cur[r].astype(np.int64)
    created = c.w_created[r].astype(np.int64)
    first = created == 0  # the first record starts sample 0, the current one
    adv = ~first & ((now - c.w_start[r, cur]) >= window_s)  # Sample.isComplete
    i = np.where(adv, (cur + 1) % samples, cur)
    c.w_cur[r] = i
    c.w_created[r] = np.where(first | (adv & (i >= created)), created + 1, created)
    adv |= first
    ra, ia, va = r[adv], i[adv], values[adv].astype(float)
    c.w_start[ra, ia] = now
    c.w_count[ra, ia] = 1
    c.w_min[ra, ia] = va
    c.w_max[ra, ia] = va
    c.w_sum[ra, ia] = va
    st = ~adv
    rs, js, vs = r[st], i[st], values[st].astype(float)
    c.w_count[rs, js] += 1
    c.w_min[rs, js] = np.minimum(c.w_min[rs, js], vs)
    c.w_max[rs, js] = np.maximum(c.w_max[rs, js], vs)
    c.w_sum[rs, js] += vs


def measure(c: PartitionColumns, r: np.ndarray, now: float, window_s: np.ndarray, samples: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """SampledStat.measure for rows `r`: (min, max, avg, known). Samples that expired are purged."""
    width = c.w_start.shape[1]
    created = c.w_created.take(r).astype(np.int64)
    exists = np.arange(width) < created[:, None]
    # take(), not c.w_start[r]: numpy's fancy indexing of a 2-D array's rows is ~20x slower.
    expired = exists & ((now - c.w_start.take(r, axis=0)) >= (samples * window_s)[:, None])
    if expired.any():
        er, ej = np.nonzero(expired)
        rows = r[er]
        c.w_start[rows, ej] = now
        c.w_count[rows, ej] = 0
        c.w_min[rows, ej] = np.inf
        c.w_max[rows, ej] = -np.inf
        c.w_sum[rows, ej] = 0.0
    count = c.w_count.take(r, axis=0)
    live = exists & ~expired & (count > 0)
    sums, mins, maxs = (a.take(r, axis=0) for a in (c.w_sum, c.w_min, c.w_max))
    # A sample (column) at a time: numpy reduces a short last axis (a few samples a row) slowly.
    total_n, total = np.zeros(r.size, count.dtype), np.zeros(r.size)
    mn, mx = np.full(r.size, np.inf), np.full(r.size, -np.inf)
    for j in range(width):
        on = live[:, j]
        total_n += np.where(on, count[:, j], 0)
        total += np.where(on, sums[:, j], 0.0)
        mn = np.minimum(mn, np.where(on, mins[:, j], np.inf))
        mx = np.maximum(mx, np.where(on, maxs[:, j], -np.inf))
    with np.errstate(divide="ignore", invalid="ignore"):
        av = total / total_n
    return mn, mx, av, total_n > 0
