"""The history row: one per partition per poll. The Spark rollup and outside users read these
columns by name and type, so they change only with a new column, never a renamed or retyped one."""

from __future__ import annotations

from operator import itemgetter

import numpy as np
import pyarrow as pa

from mirrorlag.model import STATES, RowColumns

TS_TYPE = pa.timestamp("ms", tz="UTC")

SCHEMA = pa.schema([
    pa.field("ts", TS_TYPE, nullable=False),  # the snapshot's taken_at
    pa.field("source", pa.string(), nullable=False),
    pa.field("target", pa.string(), nullable=False),
    pa.field("topic", pa.string(), nullable=False),
    pa.field("partition", pa.int32(), nullable=False),
    pa.field("leo", pa.int64()),  # null when the LEO could not be read (and for GONE rows)
    pa.field("lro", pa.int64()),  # null when no feed knows an LRO yet
    pa.field("lro_feed", pa.string()),
    pa.field("record_lag", pa.int64()),  # null when unknown, never 0
    pa.field("time_lag_ms", pa.int64()),
    pa.field("freshness_lag_ms", pa.int64()),
    pa.field("byte_lag_estimate", pa.int64()),
    pa.field("state", pa.string(), nullable=False),
    # Added with issue 32; segments written before have neither (a reader gets nulls). Constant in
    # a segment: Parquet keeps each as one dictionary entry and a run, a few bytes a segment.
    pa.field("writer", pa.string()),  # the sidecar that wrote the row (mirrorlag.history.writer.id)
    pa.field("refresh_interval_ms", pa.int64()),  # its poll interval; null when polling is off
])

_STATE_TEXTS = pa.array([state.value for state in STATES], pa.string())  # State is a StrEnum: stored as its name


def encode(ts_ms: int, cols: RowColumns, writer: str | None = None, refresh_interval_ms: int | None = None) -> pa.RecordBatch:
    """One snapshot's rows as a record batch of SCHEMA (runs on the writer's thread, not the
    poller's): the snapshot's numpy columns become Arrow arrays without a Python object per row.
    `writer` and `refresh_interval_ms` are the same on every row (the rollup's accounting)."""
    n = len(cols)
    keys = cols.keys

    def ints(name: str) -> pa.Array:
        values, valid = cols.column(name)
        return pa.array(values, mask=~valid)

    return pa.RecordBatch.from_arrays([
        pa.repeat(pa.scalar(ts_ms, TS_TYPE), n),
        pa.array(list(map(itemgetter(0), keys)), pa.string()),
        pa.array(list(map(itemgetter(1), keys)), pa.string()),
        pa.array(list(map(itemgetter(2), keys)), pa.string()),
        pa.array(list(map(itemgetter(3), keys)), pa.int32()),
        ints("leo"),
        ints("lro"),
        pa.array([*cols.feed_names, None], pa.string()).take(pa.array(cols.feed_index())),
        ints("record_lag"),
        _millis(cols.floats["time_lag_s"]),
        _millis(cols.floats["freshness_lag_s"]),
        ints("byte_lag_estimate"),
        _STATE_TEXTS.take(pa.array(cols.state)),
        pa.repeat(pa.scalar(writer, pa.string()), n),
        pa.repeat(pa.scalar(refresh_interval_ms, pa.int64()), n),
    ], schema=SCHEMA)


def _millis(seconds: np.ndarray) -> pa.Array:
    """Float seconds -> int64 milliseconds, rounded; NaN (unknown), infinities and values past
    int64 become null."""
    ms = np.rint(seconds * 1000.0)
    known = np.isfinite(ms) & (ms >= -(2.0 ** 63)) & (ms < 2.0 ** 63)
    return pa.array(np.where(known, ms, 0.0).astype(np.int64), mask=~known)
