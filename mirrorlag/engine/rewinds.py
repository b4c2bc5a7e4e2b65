"""Rewinds (docs/design.md §3, REWIND, as Burrow reports for consumers): a feed's LRO stepped back, because
MM2 resumed from its last committed offset and copies those records again. The partition reads
REWIND until the old LRO is regained; each step back is counted.
"""

from __future__ import annotations

import numpy as np

from mirrorlag.engine.columns import PartitionColumns


def rewinds(c: PartitionColumns, r: np.ndarray, lro: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows `r` with their LRO: (still rewound, stepped back this poll)."""
    seen = c.lro_seen[r]
    mark = c.rewind_mark[r]
    has_mark = c.has_rewind_mark[r]
    back = c.has_lro_seen[r] & (lro < seen)
    mark = np.where(back & ~(has_mark & (mark >= seen)), seen, mark)
    regained = ~back & has_mark & (lro >= mark)
    has_mark = (has_mark | back) & ~regained
    c.rewind_mark[r] = mark
    c.has_rewind_mark[r] = has_mark
    c.lro_seen[r] = lro
    c.has_lro_seen[r] = True
    return has_mark, back


def forget(c: PartitionColumns, r: np.ndarray) -> None:
    """A new log: stepping back onto it is no rewind."""
    c.has_lro_seen[r] = False
    c.has_rewind_mark[r] = False
