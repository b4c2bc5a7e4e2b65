"""The group history row: one per consumer group partition per groups run (docs/design.md §9), beside the
partitions' history in `<history dir>/_groups/` (a name readers of the partitions' history skip:
Spark and pyarrow pass over paths that start with `_`). Columns change only by a new column."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import pyarrow as pa

from mirrorlag.history.schema import TS_TYPE

GROUPS_DIR = "_groups"

SCHEMA = pa.schema([
    pa.field("ts", TS_TYPE, nullable=False),  # when the run assessed the flow
    pa.field("source", pa.string(), nullable=False),
    pa.field("target", pa.string(), nullable=False),
    pa.field("group", pa.string(), nullable=False),
    pa.field("topic", pa.string(), nullable=False),  # the source topic
    pa.field("partition", pa.int32(), nullable=False),
    pa.field("committed", pa.int64(), nullable=False),  # the group's offset on the source (G)
    pa.field("resume_source_offset", pa.int64()),  # where it would resume, mapped back to the source
    pa.field("reread_records", pa.int64()),  # null where it cannot be told (no checkpoint, unmapped)
    pa.field("skipped_records", pa.int64()),
    pa.field("not_yet_mirrored_records", pa.int64()),
    pa.field("checkpoint_age_ms", pa.int64()),
    pa.field("state", pa.string(), nullable=False),
    pa.field("because", pa.string()),  # why NOT_CHECKPOINTED, where the evidence shows it
    pa.field("active_on_target", pa.bool_(), nullable=False),
    pa.field("writer", pa.string()),
    pa.field("refresh_interval_ms", pa.int64()),  # the groups cadence (mirrorlag.failover.interval.ms)
])


@dataclass(frozen=True)
class GroupRows:
    """One groups run's rows (rows.partition_row dicts) as the segment writer takes them."""

    taken_at: float
    columns: Sequence[dict[str, Any]]


def encode(ts_ms: int, rows: Sequence[dict[str, Any]], writer: str | None = None,
           refresh_interval_ms: int | None = None) -> pa.RecordBatch:
    """A run's rows as a record batch of SCHEMA (on the writer's encoder thread)."""
    def column(name: str) -> list[Any]:
        return [row[name] for row in rows]

    flows = [row["flow"].split("->", 1) for row in rows]
    age = [None if a is None else round(a * 1000) for a in column("checkpoint_age_s")]
    n = len(rows)
    return pa.RecordBatch.from_arrays([
        pa.repeat(pa.scalar(ts_ms, TS_TYPE), n),
        pa.array([f[0] for f in flows], pa.string()),
        pa.array([f[1] for f in flows], pa.string()),
        pa.array(column("group"), pa.string()),
        pa.array(column("topic"), pa.string()),
        pa.array(column("partition"), pa.int32()),
        pa.array(column("committed"), pa.int64()),
        pa.array(column("resume_source_offset"), pa.int64()),
        pa.array(column("reread_records"), pa.int64()),
        pa.array(column("skipped_records"), pa.int64()),
        pa.array(column("not_yet_mirrored_records"), pa.int64()),
        pa.array(age, pa.int64()),
        pa.array(column("state"), pa.string()),
        pa.array(column("because"), pa.string()),
        pa.array(column("active_on_target"), pa.bool_()),
        pa.repeat(pa.scalar(writer, pa.string()), n),
        pa.repeat(pa.scalar(refresh_interval_ms, pa.int64()), n),
    ], schema=SCHEMA)
