"""Histogram buckets in numpy that are exactly Spark's (histograms.bucket), without Spark.

Spark's bucket of v >= 100 is 100 + floor(log(double(v) / 100) / log(GAMMA)), and Spark's `log`
is Java's StrictMath.log: fdlibm 5.3's __ieee754_log, bit for bit on every JVM (the Java
specification requires it). `strict_log` is that algorithm in numpy (IEEE double operations,
each rounded on its own, so the same bits), and `strict_buckets` the whole formula.

The formula is monotone in v (int64 -> double, the division, fdlibm's log and floor all are), so
it is fully described by its edges, the smallest v of each bucket: `exact_edges` finds them by
a binary search on v, a pure function (no Spark job; the same table on every machine), and
`bucket` looks values up in them (`strict_buckets`, the formula itself, costs some 25 numpy
operations a value, too many for every value of a day).
"""

from __future__ import annotations

import math

import numpy as np

EXACT_BELOW = 100
GAMMA = 1.01
LOG_GAMMA = math.log(GAMMA)  # the literal Spark's expression divides by (computed in Python there too)

# fdlibm 5.3, e_log.c: ln(2) in two parts and the coefficients of its polynomial.
LN2_HI = 6.93147180369123816490e-01  # 3fe62e42 fee00000
LN2_LO = 1.90821492927058770002e-10  # 3dea39ef 35793c76
LG1, LG2, LG3, LG4, LG5, LG6, LG7 = (6.666666666666735130e-01, 3.999999999940941908e-01, 2.857142874366239149e-01,
                                     2.222219843214978396e-01, 1.818357216161805012e-01, 1.531383769920937332e-01,
                                     1.479819860511658591e-01)


def strict_log(x: np.ndarray) -> np.ndarray:
    """Java's StrictMath.log (fdlibm's __ieee754_log) of positive normal doubles, bit for bit.

    The operations of e_log.c in its order, every branch computed and the right one chosen
    per value (numpy rounds each operation on its own: no fused multiply-add)."""
    x = np.asarray(x, np.float64)
    if not ((x >= np.finfo(np.float64).tiny) & (x < np.inf)).all():
        raise ValueError("strict_log takes positive normal doubles only")
    bits = x.view(np.int64)
    hx = bits >> 32  # the high word (x > 0: no sign bit)
    k = (hx >> 20) - 1023
    hx &= 0x000FFFFF
    i = (hx + 0x95F64) & 0x100000
    # The exponent set so that x lies in [sqrt(2)/2, sqrt(2)): x or x/2, normalized.
    x = ((bits & 0xFFFFFFFF) | ((hx | (i ^ 0x3FF00000)) << 32)).view(np.float64)
    k += i >> 20
    f = x - 1.0
    dk = k.astype(np.float64)
    # |f| < 2**-20
    r_small = f * f * (0.5 - 0.33333333333333333 * f)
    tiny = np.where(f == 0.0, np.where(k == 0, 0.0, dk * LN2_HI + dk * LN2_LO),
                    np.where(k == 0, f - r_small, dk * LN2_HI - ((r_small - dk * LN2_LO) - f)))
    s = f / (2.0 + f)
    z = s * s
    w = z * z
    r = z * (LG1 + w * (LG3 + w * (LG5 + w * LG7))) + w * (LG2 + w * (LG4 + w * LG6))  # t2 + t1
    hfsq = 0.5 * f * f
    far = ((hx - 0x6147A) | (0x6B851 - hx)) > 0
    big = np.where(k == 0, f - (hfsq - s * (hfsq + r)), dk * LN2_HI - ((hfsq - (s * (hfsq + r) + dk * LN2_LO)) - f))
    near = np.where(k == 0, f - s * (f - r), dk * LN2_HI - ((s * (f - r) - dk * LN2_LO) - f))
    return np.where((0x000FFFFF & (2 + hx)) < 3, tiny, np.where(far, big, near))


def strict_buckets(values: np.ndarray) -> np.ndarray:
    """Spark's bucket of each int64 value >= 100, computed as Spark computes it (the definition;
    ~25 numpy operations a value)."""
    quotient = np.asarray(values, np.int64).astype(np.float64) / EXACT_BELOW
    return EXACT_BELOW + np.floor(strict_log(quotient) / LOG_GAMMA).astype(np.int64)


def exact_edges() -> np.ndarray:
    """The smallest int64 of each bucket above 100 up to the bucket of 2**63 - 1, as Spark places
    values: a binary search on v for all buckets at once (63 halvings)."""
    top = int(strict_buckets(np.array([np.iinfo(np.int64).max]))[0])
    want = np.arange(EXACT_BELOW + 1, top + 1)
    lo = np.full(want.size, EXACT_BELOW, np.int64)  # below every bucket's edge: in bucket 100
    hi = np.full(want.size, np.iinfo(np.int64).max, np.int64)  # in `top`: at or past every edge
    while (hi - lo > 1).any():
        mid = lo + (hi - lo) // 2
        up = strict_buckets(mid) >= want
        hi, lo = np.where(up, mid, hi), np.where(up, lo, mid)
    return hi


def bucket(values: np.ndarray, table: np.ndarray) -> np.ndarray:
    """Spark's bucket of each value (int64, no nulls), given `table` = exact_edges(): a value's
    bucket above 100 is 100 + the number of edges at or below it (numpy's binary search, which
    starts from the previous answer when values ascend, as a partition's sorted values do)."""
    return np.where(values < EXACT_BELOW, values, EXACT_BELOW + np.searchsorted(table, values, side="right"))
