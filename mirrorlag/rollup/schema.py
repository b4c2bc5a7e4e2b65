"""The state codes and keys the rollup works with. Free of Spark: the report's charts (drawn in
processes that never import PySpark) and the executors' numpy code use them too. The history's
columns in Spark's types are samples.HISTORY_SCHEMA.
"""

from __future__ import annotations

from mirrorlag.model import State

# States become small ints once, before the shuffle: narrower rows and integer comparisons.
# Derived from the enum, so a state added to model.py is known here without an edit.
STATE_CODES: dict[str, int] = {s.value: i for i, s in enumerate(State)}
UNRECOGNIZED = -1  # null or a value that is not a State (a newer sidecar, a corrupt row)
IN_SYNC = STATE_CODES[State.IN_SYNC.value]
STALLED = STATE_CODES[State.STALLED.value]
AT_RISK = STATE_CODES[State.AT_RISK.value]
GONE = STATE_CODES[State.GONE.value]

PARTITION_KEY = ["source", "target", "topic", "partition"]
TOPIC_KEY = ["source", "target", "topic"]
FLOW_KEY = ["source", "target"]
LEVEL_KEYS: dict[str, list[str]] = {"partition": PARTITION_KEY, "topic": TOPIC_KEY, "flow": FLOW_KEY}
