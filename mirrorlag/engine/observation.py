"""A poll's input (model.PollObservation) as columns in the engine's row order."""

from __future__ import annotations

from itertools import repeat
from operator import is_, is_not, itemgetter
from typing import Mapping, Sequence

import numpy as np

from mirrorlag.model import LroReading, LroTable, PartitionKey

_NO_READING = LroReading(0, "", 0.0, False)  # stands in for a missing LRO while the columns are built
_OFFSET, _FEED, _CHANGED_AT, _STALE = (itemgetter(i) for i in range(4))
assert LroReading._fields == ("offset", "feed", "changed_at", "stale")

# (C-level maps, not comprehensions, below: they run over every partition each poll.)


def objects(values: list, valid: np.ndarray, missing: object) -> np.ndarray:
    """The objects in an object array, `missing` where not valid."""
    out = np.empty(len(values), dtype=object)
    out[:] = values
    if not valid.all():
        out[~valid] = missing
    return out


def leo_column(found: list) -> tuple[np.ndarray, np.ndarray]:
    """The LEOs found for each row (None: unreadable): (known, LEO as int64, 0 where unknown)."""
    known = np.fromiter(map(is_not, found, repeat(None)), bool, len(found))
    return known, objects(found, known, 0).astype(np.int64)


def by_row(values: Mapping[PartitionKey, int], keys: Sequence[PartitionKey]) -> tuple[np.ndarray, np.ndarray]:
    """The rows of `keys` that `values` has a value for, and those values (int64), in row order."""
    if not values:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    has, column = leo_column(list(map(values.get, keys)))
    rows = np.flatnonzero(has)
    return rows, column[rows]


def lro_columns(lros: Mapping[PartitionKey, LroReading], keys: Sequence[PartitionKey]
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, tuple[str, ...]]:
    """The LROs of `keys` as columns (known, offset, changed_at, stale, feed code; 0 and -1
    where unknown) and the feed names the codes index: from the LRO cache's table column-wise,
    from any other Mapping by reading."""
    if isinstance(lros, LroTable):
        return lros.aligned(keys)
    n = len(keys)
    readings = list(map(lros.get, keys, repeat(_NO_READING)))
    has_r = np.fromiter(map(is_not, readings, repeat(_NO_READING)), bool, n)
    feeds = list(map(_FEED, readings))
    names = tuple(dict.fromkeys(feed for feed, known in zip(feeds, has_r.tolist()) if known))
    codes = {name: i for i, name in enumerate(names)}
    feed = np.where(has_r, np.fromiter(map(codes.get, feeds, repeat(-1)), np.int8, n), -1).astype(np.int8)
    return (has_r, np.fromiter(map(_OFFSET, readings), np.int64, n), np.fromiter(map(_CHANGED_AT, readings), float, n),
            np.fromiter(map(_STALE, readings), bool, n), feed, names)


def probe_columns(found_by_key: Mapping[PartitionKey, float | None], keys: Sequence[PartitionKey]
                  ) -> tuple[np.ndarray, np.ndarray]:
    """The source probe's answers for `keys`: (no data record left to copy, append time of the
    oldest uncopied record or NaN)."""
    n = len(keys)
    if not found_by_key:
        return np.zeros(n, bool), np.full(n, np.nan)
    found = list(map(found_by_key.get, keys, repeat(_NO_READING)))
    caught = np.fromiter(map(is_, found, repeat(None)), bool, n)
    timed = ~caught & np.fromiter(map(is_not, found, repeat(_NO_READING)), bool, n)
    return caught, objects(found, timed, np.nan).astype(float)
