"""A partition's state (docs/design.md §3) from what the other rules found, as codes into model.STATES.

Out of sync is a time lag over `replication.lag.time.max.ms` plus the resolution of the evidence
(`res`: how often the winning feed's LRO can move at most, e.g. once per offset flush; 0 for a
feed that moves with every copied record or every poll): a once-per-flush feed cannot prove
"caught up" more often, so a healthy mirror stays IN_SYNC between its flushes. Out of sync is
STALLED when the mirror has records to copy and its LRO is not moving either: unmoved for longer
than max + res, or, for evidence of poll resolution, stale (its KIP-971 TTL expired; a feed that
moves once per flush is stale between flushes by nature, so the flag says nothing there). Else
LAGGING: testing the LRO's age alone would flap an idle, caught-up partition on its next record.
AT_RISK outranks the rest; in sync and rewound is REWIND. UNKNOWN, RESET and GONE are decided by
the engine before these rules.
"""

from __future__ import annotations

import numpy as np

from mirrorlag.model import STATES, State

CODE = {state: np.int8(code) for code, state in enumerate(STATES)}


def states(at_risk: np.ndarray, time_lag: np.ndarray, max_s: np.ndarray, res: np.ndarray, lag: np.ndarray,
           stale: np.ndarray, lro_age: np.ndarray, rewound: np.ndarray, lower: np.ndarray | None = None) -> np.ndarray:
    """`lower`: the time lag is only a lower bound (the probe needed for it did not answer): judged
    on the bound, over the limit it is out of sync as usual; under it, it proves nothing: UNKNOWN,
    never IN_SYNC."""
    limit = max_s + res
    stalled = (lag > 0) & ((lro_age > limit) | (stale & (res == 0.0)))
    state = np.where(rewound, CODE[State.REWIND], CODE[State.IN_SYNC])
    if lower is not None:
        state = np.where(lower, CODE[State.UNKNOWN], state)
    state = np.where(time_lag > limit, np.where(stalled, CODE[State.STALLED], CODE[State.LAGGING]), state)
    return np.where(at_risk, CODE[State.AT_RISK], state).astype(np.int8)
