"""Histogram buckets in numpy that are exactly Spark's (histograms.bucket), without Spark per value.

Spark's bucket of v >= 100 is 100 + floor(log(double(v) / 100) / log(GAMMA)), with the JVM's
log. numpy's log may differ from it in the last bit, and at v = 101 the quotient is exactly 1,
so computing the formula again in numpy could put a value in the next bucket. The formula is
monotone in v (the JVM's log is semi-monotone, IEEE division and floor are monotone), so it is
fully described by its edges: the smallest v of each bucket. `crossings` finds, for every
bucket, the double where numpy's formula steps up; the caller has Spark confirm each step on
both sides of it (histograms.exact_edges), and `edges` turns the confirmed doubles into integer
edges with exact IEEE arithmetic (int64 -> double and division are correctly rounded in numpy
and the JVM alike). `bucket` is then a binary search in that table.
"""

from __future__ import annotations

import math

import numpy as np

EXACT_BELOW = 100
GAMMA = 1.01
LOG_GAMMA = math.log(GAMMA)  # the literal Spark's expression divides by (computed in Python there too)
LAST = EXACT_BELOW + math.floor(math.log(np.iinfo(np.int64).max / EXACT_BELOW) / LOG_GAMMA)  # bucket of 2**63 - 1
WINDOW = 1024  # ulps either side of exp(k * c) searched for the step (the errors are ~100 ulps at most)


def steps(d: np.ndarray) -> np.ndarray:
    """floor(log(d) / c) as numpy computes it: the bucket of d = v / 100, less 100."""
    with np.errstate(divide="ignore"):
        return np.floor(np.log(d) / LOG_GAMMA)


def crossings() -> np.ndarray:
    """For buckets 101 .. LAST: the smallest double d with numpy's steps(d) >= bucket - 100."""
    k = np.arange(1, LAST - EXACT_BELOW + 1, dtype=np.float64)
    around = np.exp(k * LOG_GAMMA).view(np.int64)[:, None] + np.arange(-WINDOW, WINDOW + 1)
    reached = steps(around.view(np.float64)) >= k[:, None]
    first = reached.argmax(axis=1)
    if not (reached[:, 0] == 0).all() or not reached.any(axis=1).all():
        raise ArithmeticError("a bucket's step lies outside the searched window")
    return around[np.arange(k.size), first].view(np.float64)


def window(d: float, width: int = WINDOW) -> np.ndarray:
    """The doubles within `width` ulps of d (d > 0), ascending."""
    return (np.float64(d).view(np.int64) + np.arange(-width, width + 1)).view(np.float64)


def edges(crossing: np.ndarray) -> np.ndarray:
    """The smallest int64 v with double(v) / 100 >= d, for each confirmed crossing d (ascending):
    a binary search on v with numpy's IEEE arithmetic, as the JVM evaluates double(v) / 100."""
    lo = np.full(crossing.size, EXACT_BELOW, np.int64)  # double(lo) / 100 < d for every bucket > 100
    hi = np.full(crossing.size, np.iinfo(np.int64).max, np.int64)  # reaches every crossing up to LAST
    while (hi - lo > 1).any():
        mid = lo + (hi - lo) // 2
        up = mid.astype(np.float64) / EXACT_BELOW >= crossing
        hi, lo = np.where(up, mid, hi), np.where(up, lo, mid)
    # Buckets past the largest int64 (LAST is computed with Python's log) have no edge.
    return hi[hi.astype(np.float64) / EXACT_BELOW >= crossing]


def bucket(values: np.ndarray, table: np.ndarray) -> np.ndarray:
    """Spark's bucket of each value (int64, no nulls), given `table` = edges(confirmed crossings):
    numpy's formula, then moved to the table's bucket where it disagrees (a gather and two
    comparisons: cheaper than a binary search per value)."""
    top = EXACT_BELOW + table.size
    with np.errstate(divide="ignore", invalid="ignore"):
        guess = np.clip(steps(np.maximum(values, EXACT_BELOW) / EXACT_BELOW), 0, table.size).astype(np.int64)
    padded = np.r_[EXACT_BELOW, table, np.iinfo(np.int64).max]  # padded[k]: the smallest value of bucket 100 + k
    guess += values >= padded[np.minimum(guess + 1, table.size + 1)]
    guess -= values < padded[guess]
    if ((values >= EXACT_BELOW) & ((values < padded[guess]) | (values >= padded[np.minimum(guess + 1, table.size + 1)]))).any():
        guess = np.searchsorted(table, values, side="right")  # more than one bucket off: never seen
    return np.where(values < EXACT_BELOW, values, np.minimum(EXACT_BELOW + guess, top))
