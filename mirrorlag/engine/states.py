"""A partition's state (DESIGN §3) from what the other rules found, as codes into model.STATES.

AT_RISK outranks the rest; out of sync (time lag > replication.lag.time.max.ms) is STALLED when
the mirror has records to copy and its LRO is not moving either (stale, or older than max), else
LAGGING: testing the LRO's age alone would flap an idle, caught-up partition on its next record.
In sync and rewound is REWIND. UNKNOWN, RESET and GONE are decided by the engine before these rules.
"""

from __future__ import annotations

import numpy as np

from mirrorlag.model import STATES, State

CODE = {state: np.int8(code) for code, state in enumerate(STATES)}


def states(at_risk: np.ndarray, time_lag: np.ndarray, max_s: np.ndarray, lag: np.ndarray, stale: np.ndarray,
           lro_age: np.ndarray, rewound: np.ndarray) -> np.ndarray:
    stalled = (lag > 0) & (stale | (lro_age > max_s))
    state = np.where(rewound, CODE[State.REWIND], CODE[State.IN_SYNC])
    state = np.where(time_lag > max_s, np.where(stalled, CODE[State.STALLED], CODE[State.LAGGING]), state)
    return np.where(at_risk, CODE[State.AT_RISK], state).astype(np.int8)
