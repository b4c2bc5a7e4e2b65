"""The history columns the rollup reads, and the state codes it works with.

The reader is given this schema instead of inferring one: an extra column in some segments is
ignored, a column missing from an old segment reads as null, and no file is opened to plan.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.types import DataType, IntegerType, LongType, StringType, StructField, StructType, TimestampType

from mirrorlag.history.schema import SCHEMA as WRITER_SCHEMA
from mirrorlag.model import State

_SPARK_TYPES = {pa.string(): StringType(), pa.int32(): IntegerType(), pa.int64(): LongType()}


def _spark_type(arrow_type: pa.DataType) -> DataType:
    return TimestampType() if pa.types.is_timestamp(arrow_type) else _SPARK_TYPES[arrow_type]


# The writer's own schema (mirrorlag.history.schema) in Spark's types, every column nullable: a
# column the writer adds is read without an edit here, and one missing from an old segment is null.
HISTORY_SCHEMA = StructType([StructField(f.name, _spark_type(f.type)) for f in WRITER_SCHEMA])

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
