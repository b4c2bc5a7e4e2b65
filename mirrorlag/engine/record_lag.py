"""Record lag and its byte estimate (docs/design.md §3).

record lag = max(0, LEO - (LRO + 1)): 0 when caught up (KIP-971 wrote LEO - LRO, which reads 1).
byte lag = record lag x the mean bytes per record a feed reported: an estimate, unknown (never 0)
where no feed knows record sizes.
"""

from __future__ import annotations

import numpy as np

_INT64_CEILING = 2.0 ** 63  # the first float past int64


def record_lag(leo: np.ndarray, next_offset: np.ndarray) -> np.ndarray:
    return np.maximum(leo - next_offset, 0)


def byte_lag(lag: np.ndarray, mean_bytes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(estimate, known), rounded half to even; clipped to int64's top (a cast past it wraps)."""
    sized = ~np.isnan(mean_bytes)
    estimate = np.rint(lag * np.where(sized, mean_bytes, 0.0))
    past = estimate >= _INT64_CEILING
    out = np.where(past, 0, estimate).astype(np.int64)
    out[past] = np.iinfo(np.int64).max
    return out, sized
