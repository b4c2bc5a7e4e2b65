"""One day of history: read, keyed by partition, and summarised per partition in one pass.

The pass (`partition_days`) has a map side and a merge, both numpy over Arrow (partials.py).
Each map task reads some of the day's segments (with pyarrow in the Python worker when the
history is a local path; else Spark's scan hands its rows over) and summarises them per
partition key: the maxima, the samples' (time, state) codes and partial lag histograms. Spark
shuffles those partial rows by key (a few per partition, not one per sample), and each merge
task gives its partitions' days: seconds per state, stall episodes, the hour heat map, both lag
histograms and the partition's lag figures.

A local history is read with pyarrow in the Python workers: Spark's scan handing rows to Python
(Arrow) costs many times pyarrow's read of the same columns (tests/bench/RESULTS.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timezone
from typing import Iterator

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, BinaryType, DataType, DoubleType, IntegerType, LongType, StringType, StructField, StructType, TimestampType

from mirrorlag.rollup import partials, partition_day
from mirrorlag.history.schema import SCHEMA as WRITER_SCHEMA
from mirrorlag.rollup.schema import PARTITION_KEY

DAY_MS = 86_400_000
SCAN_ROWS = 4_000_000  # rows of Spark's scan summarised at a time (a few hundred MB in numpy)


@dataclass(frozen=True)
class DayWindow:
    """The UTC day being rolled up, in epoch milliseconds."""

    day: date

    @property
    def start_ms(self) -> int:
        return int(datetime(self.day.year, self.day.month, self.day.day, tzinfo=timezone.utc).timestamp() * 1000)

    @property
    def end_ms(self) -> int:
        return self.start_ms + DAY_MS


def read_day(spark: SparkSession, day_path: str) -> DataFrame:
    """The day's segments with the history schema (Spark skips files starting with `.` or `_`)."""
    return spark.read.schema(HISTORY_SCHEMA).parquet(day_path)


def _spark_type(arrow_type: pa.DataType) -> DataType:
    if pa.types.is_timestamp(arrow_type):
        return TimestampType()
    if pa.types.is_list(arrow_type):
        return ArrayType(_spark_type(arrow_type.value_type))
    if pa.types.is_struct(arrow_type):
        return StructType([StructField(f.name, _spark_type(f.type)) for f in arrow_type])
    return {pa.string(): StringType(), pa.int32(): IntegerType(), pa.int64(): LongType(), pa.float64(): DoubleType(),
            pa.binary(): BinaryType()}[arrow_type]


def spark_schema(schema: pa.Schema) -> StructType:
    """An Arrow schema in Spark's types, every field nullable."""
    return StructType([StructField(f.name, _spark_type(f.type)) for f in schema])


# The reader is given this schema instead of inferring one: an extra column in some segments is
# ignored, a column missing from an old segment reads as null, and no file is opened to plan. It
# is the writer's own (mirrorlag.history.schema): a column the writer adds is read without an edit.
HISTORY_SCHEMA = spark_schema(WRITER_SCHEMA)


@dataclass(frozen=True)
class DaySource:
    """Where the day's rows come from: its segments, read by the Python workers with pyarrow
    (local paths), or Spark's own scan of the day's directory (any other URL)."""

    path: str  # the day's directory
    files: tuple[tuple[str, ...], ...] | None = None  # segments per map task, when read with pyarrow


def segment_groups(files: list[tuple[str, int]], group_bytes: int, min_groups: int) -> tuple[tuple[str, ...], ...]:
    """The day's segments (path, bytes) dealt into map tasks of about `group_bytes` each (at least
    `min_groups`, so every core gets work), biggest first onto the lightest task."""
    n = max(min_groups, -(-sum(size for _, size in files) // group_bytes))
    n = max(1, min(n, len(files)))
    tasks: list[list[str]] = [[] for _ in range(n)]
    load = [0] * n
    for path, size in sorted(files, key=lambda f: (-f[1], f[0])):
        i = load.index(min(load))
        tasks[i].append(path)
        load[i] += size
    return tuple(tuple(sorted(t)) for t in tasks if t)


def _map_partials(spark: SparkSession, source: DaySource, edges: np.ndarray, start_ms: int) -> DataFrame:
    schema = spark_schema(partials.PARTIAL)
    if source.files is None:
        def from_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            # Spark hands over its split in small batches: summarise a few million rows at a time.
            held: list[pa.RecordBatch] = []
            rows = 0
            for batch in batches:
                held.append(batch)
                rows += batch.num_rows
                if rows >= SCAN_ROWS:
                    yield from partials.partials(pa.Table.from_batches(held), edges, start_ms)
                    held, rows = [], 0
            if held:
                yield from partials.partials(pa.Table.from_batches(held), edges, start_ms)

        raw = read_day(spark, source.path).select(*partials.READ)
        return raw.mapInArrow(from_batches, schema)
    groups = source.files

    def from_files(ids: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in ids:
            for i in batch.column(0).to_pylist():
                yield from partials.partials(partials.read_segments(groups[i]), edges, start_ms)

    return spark.range(0, len(groups), 1, len(groups)).mapInArrow(from_files, schema)


def partition_days(spark: SparkSession, source: DaySource, window: DayWindow, max_gap_s: float,
                   edges: np.ndarray, tasks: int | None) -> DataFrame:
    """Columns: the partition key, freshness_max, byte_max, then partition_day.DAY's fields (each
    partition's day summarised) and `series` (its curves for the report: slots.py), from `tasks`
    merge tasks (None: spark.sql.shuffle.partitions).

    The map side (partials.partials) summarises each task's rows per partition key and writer;
    only those partial rows travel through the shuffle (a few per partition, not a row per
    sample), and the merge (partials.merge) gives each partition's day from the parts of the
    writers that count (writers.py). `max_gap_s` caps the time a sample stands for where its row
    does not say its poll interval (history written before rows did)."""
    parts = _map_partials(spark, source, edges, window.start_ms)
    parts = parts.repartition(tasks, *PARTITION_KEY) if tasks else parts.repartition(*PARTITION_KEY)
    start_ms, end_ms, cap_ms = window.start_ms, window.end_ms, int(max_gap_s * 1000)

    def merge(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        yield from partials.merge(pa.Table.from_batches(list(batches), schema=partials.PARTIAL), start_ms, end_ms, cap_ms)

    per = parts.mapInArrow(merge, spark_schema(partials.MERGED))
    # Spark takes any Python result for nullable; the hour arrays never are null, and the
    # tables' schemas have always said so.
    hours = {c: F.coalesce(F.col(c), F.array_repeat(F.lit(0).cast("long"), partition_day.HOURS)).alias(c)
             for c in ("hours_ms", "covered_hours_ms")}
    return per.select(*[hours.get(c, F.col(c)) for c in per.columns])


def level_figures(hists: DataFrame) -> DataFrame:
    """Every topic's and flow's lag figures from their partitions' histograms (`hists`: the
    partition key and partition_days' two histogram columns), in one shuffle: all of a flow's
    partitions go to one task, which gives its topics' figures and its own (partials.LEVELS:
    `level` says which)."""
    def figures(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        yield from partials.levels_figures(pa.Table.from_batches(list(batches), schema=partials.MERGED_HISTS))

    return hists.repartition("source", "target").mapInArrow(figures, spark_schema(partials.LEVELS))
