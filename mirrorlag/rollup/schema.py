"""The history columns the rollup reads, and the state codes it works with.

The reader is given this schema instead of inferring one: an extra column in some segments is
ignored, a column missing from an old segment reads as null, and no file is opened to plan.
"""

from __future__ import annotations

from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType, TimestampType

from mirrorlag.model import State

HISTORY_SCHEMA = StructType([
    StructField("ts", TimestampType()),
    StructField("source", StringType()),
    StructField("target", StringType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("leo", LongType()),
    StructField("lro", LongType()),
    StructField("lro_feed", StringType()),
    StructField("record_lag", LongType()),
    StructField("time_lag_ms", LongType()),
    StructField("freshness_lag_ms", LongType()),
    StructField("byte_lag_estimate", LongType()),
    StructField("state", StringType()),
])

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
