"""The day's pass in two halves, numpy over Arrow (no Spark in this module).

Map side (`partials`): the rows of some segments (read here with pyarrow, or handed over by
Spark's scan) become one row per partition key seen in them: the maxima of freshness and byte
lag, the partition's samples as (time, state) codes, both lag histograms as partial
(bucket, n, vmin, vmax, vsum) entries, and the report's 5-minute curves (slots.py). Histograms
and curves add up across parts exactly, and every sample's code travels (4 bytes for a time of
the day), so nothing that depends on the order of samples is computed here: a partition's
samples may be spread over any segments in any order.

Merge side (`merge`): the parts of each partition (Spark brings them together by key) give
its day: the codes are sorted once (a few time-ordered runs, which a stable sort merges) and
summarised by the rules partition_day.py states (`timeline`), the histograms are added up and
the partition's lag figures computed from them (`stats`). Everything but the sort runs once over all
of a task's partitions (segment reductions), not once per partition.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from mirrorlag.rollup import buckets, slots, writers
from mirrorlag.rollup.histograms import PERCENTILES
from mirrorlag.rollup.partition_day import CODE_BITS, DAY, HOUR_MS, HOURS, LOOK_BITS, LOOK_MAX, NULL_TS, SCALES, STAT_NAMES
from mirrorlag.rollup.schema import AT_RISK, GONE, IN_SYNC, STALLED, STATE_CODES, UNRECOGNIZED

KEY = ["source", "target", "topic", "partition"]
READ = [*KEY, "ts", "state", "record_lag", "time_lag_ms", "freshness_lag_ms", "byte_lag_estimate",
        "writer", "refresh_interval_ms"]
WRITER = "writer"  # the map side's parts are per partition and writer (writers.py)
MEASURES = {"record_lag": "record_lag", "time_lag": "time_lag_ms"}  # histogram name -> column
HIST = ["bucket", "n", "vmin", "vmax", "vsum"]
_STRINGS = ["source", "target", "topic", "state", "writer"]
_TYPES = {"partition": pa.int32(), "record_lag": pa.int64(), "time_lag_ms": pa.int64(),
          "freshness_lag_ms": pa.int64(), "byte_lag_estimate": pa.int64(), "refresh_interval_ms": pa.int64(),
          **{c: pa.string() for c in _STRINGS}}
_DTYPES = {**{f: np.int64 for f in HIST}, "vsum": np.float64}
# A partial row: the key, the maxima, the codes, and per measure the histogram entries and nulls.
# Arrays travel as binary values (their bytes): Spark copies a binary value at once, an array
# element by element (twice: into its rows and back into Arrow).
PARTIAL = pa.schema([
    *[pa.field(c, _TYPES[c]) for c in KEY], pa.field("freshness_max", pa.int64()), pa.field("byte_max", pa.int64()),
    # Whose samples these are, the longest poll interval among them (null: rows from before rows
    # had one), and their first and last time (a part without a timed sample: first > last).
    pa.field(WRITER, pa.string()), pa.field("interval_ms", pa.int64()),
    pa.field("span_first_ms", pa.int64()), pa.field("span_last_ms", pa.int64()),
    # The samples' (time, state) codes: of the day in 32 bits, relative to its start (4 bytes a
    # sample through the shuffle, not 8); any other (no time, a time outside the day) in full.
    pa.field("time_code", pa.binary()), pa.field("time_code_other", pa.binary()),
    # The STALLED samples of the day that carry a time lag: (time of the day << LOOK_BITS) | the
    # time lag (ms, at most LOOK_MAX), 8 bytes each: how far back the evidence dates the stall
    # (partition_day.py). Nothing for any other sample.
    pa.field("stall_since", pa.binary()),
    *[pa.field(f"{m}_{f}", pa.binary()) for m in MEASURES for f in HIST],
    *[pa.field(f"{m}_nulls", pa.int64()) for m in MEASURES],
    pa.field("series", pa.binary()),  # slots.SLOT records (HELD once merged): the report's curves
])


def _arrow(spark_type) -> pa.DataType:
    """The Arrow type of one of DAY's Spark types (longs, doubles, arrays and structs of them)."""
    name = spark_type.typeName()
    if name == "array":
        return pa.list_(_arrow(spark_type.elementType))
    if name == "struct":
        return pa.struct([pa.field(f.name, _arrow(f.dataType)) for f in spark_type.fields])
    return {"long": pa.int64(), "double": pa.float64()}[name]


# A merged row: the key, the maxima and the partition's day (partition_day.DAY).
# `doubled_writer`: a writer id whose samples of the partition come too close together for one
# sidecar (doubled_writers), null where none.
MERGED = pa.schema([*[PARTIAL.field(c) for c in (*KEY, "freshness_max", "byte_max")],
                    *[pa.field(f.name, _arrow(f.dataType)) for f in DAY.fields], PARTIAL.field("series"),
                    pa.field("doubled_writer", pa.string())])
# Two samples of one writer and partition less than half its poll interval apart this often in a
# day: two sidecars with one writer id (every poll gives one such pair while both run), not one
# slow poll followed by a quick one (one pair).
DOUBLED_PAIRS = 3
# What the topic and flow levels read of it: the key and the histograms.
MERGED_HISTS = pa.schema([MERGED.field(c) for c in (*KEY, *MEASURES)])
BATCH_GROUPS = 4096  # partitions per output batch: list offsets stay far below 2**31


# ---- reading -------------------------------------------------------------------------------

def read_segment(path: str) -> pa.Table:
    """One segment's READ columns as Spark's reader with the history schema gives them: a column
    missing from an old segment is null, extra columns are not read; strings stay dictionary
    encoded (the writer's Parquet dictionaries: no string is materialised per row)."""
    try:
        f = pq.ParquetFile(path, read_dictionary=_STRINGS)
    except KeyError:  # pyarrow: a dictionary column the file lacks (`writer`, before rows named theirs)
        names = pq.ParquetFile(path).schema_arrow.names
        f = pq.ParquetFile(path, read_dictionary=[c for c in _STRINGS if c in names])
    present = set(f.schema_arrow.names)
    t = f.read(columns=[c for c in READ if c in present], use_threads=False)
    n = t.num_rows
    cols = []
    for c in READ:
        if c in _STRINGS and c not in present:  # dictionary encoded as a present string column is
            cols.append(pa.DictionaryArray.from_arrays(pa.nulls(n, pa.int32()), pa.array([], pa.string())))
            continue  # (read_segments concatenates them, refusing string beside dictionary)
        if c not in present:
            cols.append(pa.nulls(n, pa.timestamp("ms", tz="UTC") if c == "ts" else _TYPES[c]))
            continue
        col = t.column(c)
        wanted = _TYPES.get(c)
        if wanted is not None and not (col.type == wanted or (pa.types.is_dictionary(col.type) and wanted == pa.string())):
            col = col.cast(wanted)
        cols.append(col)
    return pa.Table.from_arrays(cols, names=READ)


def read_segments(paths: Sequence[str]) -> pa.Table:
    return pa.concat_tables([read_segment(p) for p in paths], promote_options="permissive")


# ---- keys ----------------------------------------------------------------------------------

def _codes(col: pa.Array) -> tuple[np.ndarray, int]:
    """Dense codes of a column's values (null is a value of its own) and how many there can be."""
    if pa.types.is_integer(col.type) and not pa.types.is_dictionary(col.type):
        # Small integers (partition numbers): their offset from the smallest is a code.
        v, valid = _values(col)
        lo = int(v[valid].min()) if valid.any() else 0
        span = int(v[valid].max()) - lo + 1 if valid.any() else 0
        if span <= 4 * len(col) + 1024:
            return np.where(valid, v - lo, span), span + 1
    if not pa.types.is_dictionary(col.type):
        col = pc.dictionary_encode(col)
    values = pc.dictionary_encode(col.dictionary)  # a dictionary may repeat a value (chunks unified)
    canon = np.append(values.indices.to_numpy(zero_copy_only=False), len(values.dictionary))
    idx = col.indices if col.null_count == 0 else pc.fill_null(col.indices, len(col.dictionary))
    return canon[idx.to_numpy(zero_copy_only=False)], len(values.dictionary) + 1


def group_ids(columns: Sequence[pa.Array]) -> tuple[np.ndarray, int]:
    """A dense id per row for the combination of `columns` (nulls equal to each other), and the
    number of ids, in order of first appearance. The columns' codes are combined in one long
    (re-coded on the way should their product ever pass 2**62, so it never overflows)."""
    ids, n = np.zeros(len(columns[0]), np.int64), 1
    for col in columns:
        codes, card = _codes(col)
        if n * card >= 1 << 62:
            ids, n = _recode(ids)
        ids, n = ids * card + codes, n * card
    return _recode(ids)


def _recode(ids: np.ndarray) -> tuple[np.ndarray, int]:
    period = _period(ids)
    if period:  # polls of the same keys in one order (Groups): no hashing of every row
        return np.tile(np.arange(period), ids.size // period), period
    combined = pc.dictionary_encode(pa.array(ids))
    return combined.indices.to_numpy().astype(np.int64), len(combined.dictionary)


class Groups:
    """Rows ordered by group id: `order` (stable), the groups' starts and sizes. `polls`: the
    rows are that many polls of the same groups in the same order (the sidecar writes each poll's
    partitions in one order until its topology changes), so `order` is a transpose and each
    group's rows are a row of a (groups, polls) array; 0 when not."""

    def __init__(self, ids: np.ndarray, n: int) -> None:
        self.ids, self.n = ids, n
        self.polls = _polls(ids, n)
        if self.polls:
            self.order = np.arange(ids.size).reshape(self.polls, n).T.ravel()
            self.sizes = np.full(n, self.polls)
        else:
            self.order = np.argsort(ids, kind="stable")
            self.sizes = np.bincount(ids, minlength=n)
        self.starts = np.r_[0, np.cumsum(self.sizes)[:-1]]

    def first_rows(self) -> np.ndarray:
        return self.order[self.starts]

    def of_sorted(self) -> np.ndarray:
        """The group of each row in `order`."""
        return np.repeat(np.arange(self.n), self.sizes)


def _period(ids: np.ndarray) -> int:
    """p if `ids` are repeats of their first p values, all distinct (p > 1 repeats); else 0."""
    again = np.flatnonzero(ids == ids[0]) if ids.size else ids
    if again.size < 2 or ids.size % again[1]:
        return 0
    p = int(again[1])
    first = ids[:p]
    if not (ids.reshape(-1, p) == first).all() or np.unique(first).size != p:
        return 0
    return p


def _polls(ids: np.ndarray, n: int) -> int:
    """k if `ids` (group_ids: numbered in order of first appearance) are k repeats of 0 .. n - 1, else 0."""
    if not n or ids.size % n or ids.size == n:
        return 0
    polls = ids.size // n
    return polls if (ids.reshape(polls, n) == np.arange(n)).all() else 0


# ---- map side ------------------------------------------------------------------------------

def _values(col: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """int64 values (nulls as 0) and the validity mask."""
    if col.null_count == 0:
        return col.to_numpy(zero_copy_only=False).astype(np.int64, copy=False), np.ones(len(col), bool)
    valid = col.is_valid().to_numpy(zero_copy_only=False)
    return pc.fill_null(col, 0).to_numpy(zero_copy_only=False).astype(np.int64, copy=False), valid


def _ts_ms(col: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Epoch milliseconds as Spark's unix_millis gives them (floor), and the validity mask."""
    unit = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}[col.type.unit] if pa.types.is_timestamp(col.type) else 1_000
    raw, valid = _values(col.cast(pa.int64()))
    return (raw * 1_000 if unit == 1 else raw // (unit // 1_000)), valid


def state_codes(col: pa.Array) -> np.ndarray:
    """samples.state_code in numpy: a State's code, UNRECOGNIZED for null or any other text."""
    if not pa.types.is_dictionary(col.type):
        col = pc.dictionary_encode(col)
    table = np.array([STATE_CODES.get(s, UNRECOGNIZED) for s in col.dictionary.to_pylist()] + [UNRECOGNIZED], np.int64)
    return table[pc.fill_null(col.indices, len(col.dictionary)).to_numpy(zero_copy_only=False)]


def time_codes(ms: np.ndarray, timed: np.ndarray, state: np.ndarray) -> np.ndarray:
    """partition_day.time_and_code for every row: (ts, state code) in one long, null times first."""
    return (np.where(timed, ms, NULL_TS) << CODE_BITS) | (state + 1)


def _day_codes(ms: np.ndarray, timed: np.ndarray, state: np.ndarray, start_ms: int, groups: Groups) -> dict[str, pa.Array]:
    """PARTIAL's two code columns for rows in group order."""
    rel = ms - start_ms
    inside = timed & (rel >= 0) & (rel < HOURS * HOUR_MS)
    short = ((rel << CODE_BITS) | (state + 1))
    if inside.all():
        return {"time_code": _blobs(short.astype(np.int32), groups.sizes),
                "time_code_other": _blobs(np.zeros(0, np.int64), np.zeros(groups.n, np.int64))}
    of = groups.of_sorted()
    return {"time_code": _blobs(short[inside].astype(np.int32), np.bincount(of[inside], minlength=groups.n)),
            "time_code_other": _blobs(time_codes(ms, timed, state)[~inside], np.bincount(of[~inside], minlength=groups.n))}


def _stall_since(ms: np.ndarray, timed: np.ndarray, state: np.ndarray, time_lag: tuple[np.ndarray, np.ndarray],
                 start_ms: int, groups: Groups) -> pa.Array:
    """PARTIAL's stall_since column for rows in group order: each STALLED sample of the day with a
    time lag, as (its time of the day << LOOK_BITS) | its time lag (clipped to LOOK_MAX)."""
    lag, known = time_lag
    rel = ms - start_ms
    marked = timed & known & (state == STALLED) & (rel >= 0) & (rel < HOURS * HOUR_MS)
    if not marked.any():
        return _blobs(np.zeros(0, np.int64), np.zeros(groups.n, np.int64))
    packed = (rel[marked] << LOOK_BITS) | np.clip(lag[marked], 0, LOOK_MAX)
    return _blobs(packed, np.bincount(groups.of_sorted()[marked], minlength=groups.n))


def _merged_stall_since(parts: pa.Table, groups: Groups, start_ms: int, lo: np.ndarray,
                        hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The parts' stall_since entries of every group, as sorted unique keys (group << LOOK_BITS
    | time of the day) and each key's look-back (the largest where one time has several); none
    of a sample in its row's windows (one_view)."""
    values, lengths = _flat(parts.column("stall_since"), groups.order, np.int64)
    if not values.size:
        return values, values
    if lo.shape[1]:
        row = np.repeat(groups.order, lengths)
        counts = writers.outside((values >> LOOK_BITS) + start_ms, lo[row], hi[row])
        values, lengths = values[counts], np.bincount(np.arange(lengths.size).repeat(lengths)[counts], minlength=lengths.size)
    key = (np.repeat(groups.of_sorted(), lengths) << LOOK_BITS) | (values >> LOOK_BITS)
    back = values & LOOK_MAX
    order = np.lexsort((back, key))
    key, back = key[order], back[order]
    last = np.r_[key[1:] != key[:-1], True]  # each key's largest look-back is its last
    return key[last], back[last]


def _merged_codes(parts: pa.Table, groups: Groups, start_ms: int) -> tuple[np.ndarray, np.ndarray]:
    """The codes of part rows `groups.order` in full (time_codes), and each row's count."""
    short, n_short = _flat(parts.column("time_code"), groups.order, np.int32)
    other, n_other = _flat(parts.column("time_code_other"), groups.order, np.int64)
    codes = short.astype(np.int64) + (start_ms << CODE_BITS)  # the low bits of start << CODE_BITS are 0
    if not other.size:
        return codes, n_short
    lengths = n_short + n_other
    out = np.empty(int(lengths.sum()), np.int64)
    at_short = np.repeat(np.r_[0, np.cumsum(lengths)[:-1]], n_short) + (
        np.arange(short.size) - np.repeat(np.r_[0, np.cumsum(n_short)[:-1]], n_short))
    rest = np.ones(out.size, bool)
    rest[at_short] = False
    out[at_short], out[rest] = codes, other  # each row: its day's codes, then its others
    return out, lengths


def _maxima(col: pa.Array, groups: Groups) -> pa.Array:
    v, valid = _values(col)
    if groups.polls:  # a group's rows are a column of (polls, groups)
        rows = np.where(valid, v, np.iinfo(np.int64).min).reshape(groups.polls, groups.n)
        return pa.array(rows.max(axis=0), pa.int64(), mask=~valid.reshape(groups.polls, groups.n).any(axis=0))
    v = np.where(valid, v, np.iinfo(np.int64).min)[groups.order]
    has = np.add.reduceat(valid[groups.order], groups.starts) > 0
    return pa.array(np.maximum.reduceat(v, groups.starts), pa.int64(), mask=~has)


def _pack(major: np.ndarray, minor: np.ndarray) -> np.ndarray:
    """Order by (major, minor): one packed long when both fit, else lexsort."""
    lo, hi = (int(minor.min()), int(minor.max())) if minor.size else (0, 0)
    bits = max(1, (hi - lo).bit_length())
    if major.size and int(major.max()).bit_length() + bits < 63:
        return np.argsort((major << bits) | (minor - lo))
    return np.lexsort((minor, major))


@dataclass
class Entries:
    """Histogram entries (group, bucket, n, vmin, vmax, vsum), one per (group, bucket), in that order."""

    group: np.ndarray
    bucket: np.ndarray
    n: np.ndarray
    vmin: np.ndarray
    vmax: np.ndarray
    vsum: np.ndarray

    @classmethod
    def aggregate(cls, group: np.ndarray, bucket: np.ndarray, n: np.ndarray, vmin: np.ndarray,
                  vmax: np.ndarray, vsum: np.ndarray) -> "Entries":
        """Entries of any number of rows per (group, bucket), in any order."""
        order = _pack(group, bucket)
        group, bucket = group[order], bucket[order]
        first = np.flatnonzero(np.r_[True, (group[1:] != group[:-1]) | (bucket[1:] != bucket[:-1])]) if group.size else group
        if not first.size:
            return cls(group, bucket, n, vmin, vmax, vsum)
        return cls(group[first], bucket[first], np.add.reduceat(n[order], first), np.minimum.reduceat(vmin[order], first),
                   np.maximum.reduceat(vmax[order], first),
                   np.add.reduceat(vsum[order], first))  # integer-valued: exact below 2**53

    @classmethod
    def of_sorted(cls, group: np.ndarray, values: np.ndarray, table: np.ndarray) -> "Entries":
        """Entries of values ordered by (group, value): a bucket's values are a run (buckets grow
        with the value), so its min and max are the run's ends, and nothing is sorted here."""
        if not values.size:
            empty = np.zeros(0, np.int64)
            return cls(empty, empty, empty, empty, empty, np.zeros(0))
        bucket = buckets.bucket(values, table)
        first = np.flatnonzero(np.r_[True, (group[1:] != group[:-1]) | (bucket[1:] != bucket[:-1])])
        ends = np.r_[first[1:], values.size]
        return cls(group[first], bucket[first], ends - first, values[first], values[ends - 1],
                   np.add.reduceat(values.astype(np.float64), first))

    def counts(self, groups: int) -> np.ndarray:
        return np.bincount(self.group, minlength=groups)


def _histogram(v: np.ndarray, valid: np.ndarray, groups: Groups, table: np.ndarray) -> tuple[Entries, np.ndarray]:
    """A measure's entries per group (values in group order), and each group's count of nulls."""
    of = groups.of_sorted()
    nulls = groups.sizes - np.add.reduceat(valid, groups.starts) if groups.n else groups.sizes
    if groups.polls:
        # Each group's values are a row: sort the rows (numpy's vectorised sort of equal rows is
        # much cheaper than ordering (group, bucket) pairs), nulls last.
        rows = np.sort(np.where(valid, v, np.iinfo(np.int64).max).reshape(groups.n, groups.polls), axis=1)
        known = np.arange(groups.polls) < (groups.polls - nulls)[:, None]
        flat = rows.ravel() if known.all() else rows[known]
        return Entries.of_sorted(of[known.ravel()] if flat.size < of.size else of, flat, table), nulls
    v, of = v[valid], of[valid]
    ones = np.ones(v.size, np.int64)
    return Entries.aggregate(of, buckets.bucket(v, table), ones, v, v, v.astype(np.float64)), nulls


def _lists(values: np.ndarray, counts: np.ndarray, type_: pa.DataType, mask: np.ndarray | None = None) -> pa.ListArray:
    offsets = pa.array(np.r_[0, np.cumsum(counts)].astype(np.int32))
    return pa.ListArray.from_arrays(offsets, pa.array(values, type_, mask=mask))


def _blobs(values: np.ndarray, counts: np.ndarray) -> pa.BinaryArray:
    """Consecutive runs of `values` (`counts` long) as binary values, without a copy."""
    offsets = (np.r_[0, np.cumsum(counts)] * values.dtype.itemsize).astype(np.int32)
    return pa.Array.from_buffers(pa.binary(), counts.size, [None, pa.py_buffer(offsets), pa.py_buffer(np.ascontiguousarray(values))])


def _key_columns(table: pa.Table, rows: np.ndarray, keys: Sequence[str] = KEY) -> list[pa.Array]:
    cols = []
    for c in keys:
        col = table.column(c).chunk(0).take(pa.array(rows))  # tables here are combined: one chunk
        cols.append(col.dictionary_decode() if pa.types.is_dictionary(col.type) else col)
    return cols


def _spans(ms: np.ndarray, timed: np.ndarray, groups: Groups) -> tuple[np.ndarray, np.ndarray]:
    """Each group's first and last time (rows in group order); first > last when it has none."""
    first = np.minimum.reduceat(np.where(timed, ms, np.iinfo(np.int64).max), groups.starts)
    last = np.maximum.reduceat(np.where(timed, ms, np.iinfo(np.int64).min), groups.starts)
    return first, last


def partials(table: pa.Table, table_edges: np.ndarray, start_ms: int) -> Iterator[pa.RecordBatch]:
    """The map side over some rows of the day starting at start_ms (READ columns; the writer's
    two may be missing): PARTIAL rows, one per key and writer."""
    table = table.unify_dictionaries().combine_chunks()
    if not table.num_rows:
        return
    cols = {c: table.column(c).chunk(0) if c in table.column_names else pa.nulls(table.num_rows, _TYPES[c]) for c in READ}
    groups = Groups(*group_ids([cols[c] for c in (*KEY, WRITER)]))
    order = groups.order
    ms, timed = (x[order] for x in _ts_ms(cols["ts"]))
    state = state_codes(cols["state"])[order]
    values = {m: tuple(x[order] for x in _values(cols[c])) for m, c in MEASURES.items()}
    firsts = pa.array(groups.first_rows())
    out: dict[str, pa.Array] = dict(zip(KEY, _key_columns(table, groups.first_rows())))
    out["freshness_max"] = _maxima(cols["freshness_lag_ms"], groups)
    out["byte_max"] = _maxima(cols["byte_lag_estimate"], groups)
    writer = cols[WRITER].take(firsts)
    out[WRITER] = writer.dictionary_decode() if pa.types.is_dictionary(writer.type) else writer
    out["interval_ms"] = _maxima(cols["refresh_interval_ms"], groups)
    out["span_first_ms"], out["span_last_ms"] = (pa.array(x) for x in _spans(ms, timed, groups))
    out.update(_day_codes(ms, timed, state, start_ms, groups))
    out["stall_since"] = _stall_since(ms, timed, state, values["time_lag"], start_ms, groups)
    for m in MEASURES:
        entries, nulls = _histogram(*values[m], groups, table_edges)
        counts = entries.counts(groups.n)
        for f in HIST:
            out[f"{m}_{f}"] = _blobs(getattr(entries, f), counts)
        out[f"{m}_nulls"] = pa.array(nulls, pa.int64())
    curves = slots.of_samples(groups.of_sorted(), ms, timed, state, values["record_lag"], values["time_lag"], start_ms)
    out["series"] = _blobs(curves.records, curves.counts(groups.n))
    yield from pa.Table.from_pydict(out, schema=PARTIAL).to_batches(BATCH_GROUPS)


# ---- merge side ----------------------------------------------------------------------------

def _flat(col: pa.ChunkedArray, order: np.ndarray, dtype: type) -> tuple[np.ndarray, np.ndarray]:
    """The arrays (_blobs) of rows `order`, concatenated, and each row's length."""
    blobs = col.chunk(0).take(pa.array(order))  # tables here are combined: one chunk
    width = np.dtype(dtype).itemsize
    offsets = np.frombuffer(blobs.buffers()[1], np.int32)[blobs.offset: blobs.offset + len(blobs) + 1]
    data = blobs.buffers()[2]
    values = np.frombuffer(data, dtype, count=int(offsets[-1] - offsets[0]) // width, offset=int(offsets[0])) if data else np.zeros(0, dtype)
    return values, np.diff(offsets) // width


def _sorted_codes(codes: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Each group's codes sorted: its parts are a few time-ordered runs, which a stable sort
    (timsort) merges many times faster than a sort of the whole task would order them."""
    out = np.empty_like(codes)
    start = 0
    for size in sizes.tolist():
        end = start + size
        out[start:end] = np.sort(codes[start:end], kind="stable")
        start = end
    return out


def _segment_sum(values: np.ndarray, starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Sums of consecutive segments (empty segments sum to 0, which reduceat does not give)."""
    if not values.size:
        return np.zeros(sizes.size, values.dtype)
    sums = np.add.reduceat(values, np.minimum(starts, values.size - 1))
    return np.where(sizes > 0, sums, 0)


def accounted_ms(ts: np.ndarray, timed: np.ndarray, state: np.ndarray, last: np.ndarray, start_ms: int, end_ms: int,
                 cap: np.ndarray, first_at: np.ndarray, run_at: np.ndarray,
                 look_back: Callable[[np.ndarray], np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The time each sample accounts for (partition_day.py's rule), samples in their partition's
    (time, state) order, `last` marking each partition's last sample, `cap` each sample's cap,
    `first_at` the index of each partition's first timed sample, `run_at` those of the other
    samples that start a run of STALLED samples, `look_back(at)` those samples' time lags (-1:
    none). Returns (interval, at, back): each sample's time, and the samples that reach back
    before their time (`at`, ascending within `first_at` then `run_at`) by how much (`back`).

    A sample runs to where the partition's next one's span begins (the next sample, or its
    look-back), at most the cap, the last one to end_ms (at most the cap too); a sample without a
    time for the cap; a GONE sample for none. The day's first sample also stands for the time
    since midnight, at most the cap (a STALLED one with a time lag: at most that too); the first
    STALLED sample of a run for the time back to when its time lag says the partition fell behind,
    at most to the previous sample and the cap. Only those few samples are looked at again."""
    following = np.r_[ts[1:], end_ms] if ts.size else ts
    following[last] = end_ms
    interval = np.where(timed, np.minimum(np.maximum(following - ts, 0), cap), cap)
    at = np.concatenate([first_at, run_at]).astype(np.int64)
    is_first = np.r_[np.ones(first_at.size, bool), np.zeros(run_at.size, bool)]
    t, own_cap = ts[at], cap[at]
    prev = np.where(is_first, start_ms, ts[np.maximum(at - 1, 0)] if ts.size else 0)
    room = np.minimum(np.maximum(t - np.maximum(prev, start_ms), 0), own_cap)
    lag = look_back(at)
    evidence = lag >= 0
    back = np.where(evidence, np.minimum(room, lag), np.where(is_first, room, 0))
    back = np.where((t >= start_ms) & (t < end_ms) & (state[at] != GONE), back, 0)
    # The previous sample now runs to where this one's span begins.
    moved = ~is_first & (back > 0)
    j = at[moved] - 1
    interval[j] = np.minimum(np.maximum(t[moved] - back[moved] - ts[j], 0), cap[j])
    interval[at] += back
    interval[state == GONE] = 0
    return interval, at, back


def _look_backs(group: np.ndarray, ts: np.ndarray, state: np.ndarray, start_ms: int,
                stall_since: tuple[np.ndarray, np.ndarray]) -> Callable[[np.ndarray], np.ndarray]:
    """look_back for accounted_ms: samples `at`'s look-backs from the merged stall_since entries
    (-1 where a sample has none: not STALLED, or no time lag)."""
    keys, backs = stall_since

    def of(at: np.ndarray) -> np.ndarray:
        out = np.full(at.size, -1, np.int64)
        if not keys.size or not at.size:
            return out
        rel = ts[at] - start_ms
        mine = np.flatnonzero((state[at] == STALLED) & (rel >= 0) & (rel < HOURS * HOUR_MS))
        wanted = (group[at[mine]] << LOOK_BITS) | rel[mine]
        pos = np.minimum(np.searchsorted(keys, wanted), keys.size - 1)
        found = keys[pos] == wanted
        out[mine[found]] = backs[pos[found]]
        return out

    return of


def timeline(codes: np.ndarray, sizes: np.ndarray, start_ms: int, end_ms: int, cap_ms: int | np.ndarray,
             stall_since: tuple[np.ndarray, np.ndarray] | None = None) -> dict[str, pa.Array]:
    """Each group's day from its samples' codes, by the rules partition_day.py states (the time
    each sample accounts for, out of sync, at risk, stalled, stall episodes, by hour), for every
    group at once; `codes` sorted within groups of `sizes`; `cap_ms`: one cap, or each group's;
    `stall_since`: the STALLED samples' look-backs (_merged_stall_since)."""
    n = sizes.size
    starts = np.r_[0, np.cumsum(sizes)[:-1]].astype(np.int64)
    ends = starts + sizes
    group = np.repeat(np.arange(n), sizes)
    ts, state = codes >> CODE_BITS, (codes & ((1 << CODE_BITS) - 1)) - 1
    timed = ts != NULL_TS
    last = np.zeros(codes.size, bool)
    last[ends[sizes > 0] - 1] = True
    stalled = state == STALLED
    # A stall episode: a run of STALLED samples within one partition.
    run_start = stalled & ~np.r_[False, stalled[:-1] & ~last[:-1]]
    untimed = np.bincount(group[~timed], minlength=n)
    has_time = untimed < sizes
    first_at = (starts + untimed)[has_time]  # untimed samples sort first in their group
    run_at = np.flatnonzero(run_start)
    run_at = run_at[~np.isin(run_at, first_at)]
    cap = np.repeat(np.broadcast_to(np.asarray(cap_ms, np.int64), (n,)), sizes)
    interval, _, _ = accounted_ms(ts, timed, state, last, start_ms, end_ms, cap, first_at, run_at,
                                  _look_backs(group, ts, state, start_ms,
                                              stall_since if stall_since is not None else (np.zeros(0, np.int64),) * 2))
    hour = np.where(timed, np.clip((ts - start_ms) // HOUR_MS, 0, HOURS - 1), 0)  # its sample's hour, look-back and all
    out_of_sync = np.where((state != IN_SYNC) & (state != GONE), interval, 0)
    run = np.cumsum(run_start) - 1
    run_ms = np.bincount(run[stalled], weights=interval[stalled], minlength=int(run_start.sum())).astype(np.int64)
    run_group = group[run_start]
    episodes = np.bincount(run_group, minlength=n)
    longest = np.zeros(n, np.int64)
    np.maximum.at(longest, run_group, run_ms)
    first_ms = np.where(has_time, ts[np.minimum(starts + untimed, max(codes.size - 1, 0))] if codes.size else 0, 0)
    lastv = np.where(has_time, ts[np.maximum(ends - 1, 0)] if codes.size else 0, 0)

    def hours(ms: np.ndarray) -> pa.ListArray:
        # bincount sums in doubles: exact, as these are integers far below 2**53.
        by = np.bincount(group * HOURS + hour, weights=ms, minlength=n * HOURS).astype(np.int64)
        return _lists(by, np.full(n, HOURS), pa.int64())

    return {
        "samples": pa.array(sizes.astype(np.int64)),
        "covered_ms": pa.array(_segment_sum(interval, starts, sizes)),
        "out_of_sync_ms": pa.array(_segment_sum(out_of_sync, starts, sizes)),
        "at_risk_ms": pa.array(_segment_sum(np.where(state == AT_RISK, interval, 0), starts, sizes)),
        "stalled_ms": pa.array(_segment_sum(np.where(stalled, interval, 0), starts, sizes)),
        "unknown_state_samples": pa.array(np.bincount(group[state == UNRECOGNIZED], minlength=n).astype(np.int64)),
        "first_ms": pa.array(first_ms, pa.int64(), mask=~has_time),
        "last_ms": pa.array(lastv, pa.int64(), mask=~has_time),
        "hours_ms": hours(out_of_sync), "covered_hours_ms": hours(interval),
        "stall_episodes": pa.array(episodes.astype(np.int64)), "longest_stall_ms": pa.array(longest),
    }


def stats(e: Entries, nulls: np.ndarray, name: str) -> dict[str, pa.Array]:
    """Per group: min, avg, max, p50, p95, p99 (nearest rank, reported as the vmax of the bucket
    holding it: histograms.py) and the null count, named as partition_day.STAT_NAMES has them."""
    n = nulls.size
    counts = e.counts(n)
    total = np.bincount(e.group, weights=e.n, minlength=n).astype(np.int64) if e.group.size else np.zeros(n, np.int64)
    has = total > 0
    starts = np.r_[0, np.cumsum(counts)[:-1]]
    cum = np.cumsum(e.n)
    before = np.where(starts > 0, cum[np.maximum(starts - 1, 0)] if cum.size else 0, 0)
    scale = SCALES[name]
    lo = np.minimum.reduceat(e.vmin, np.minimum(starts, max(e.vmin.size - 1, 0))) if e.vmin.size else np.zeros(n, np.int64)
    hi = np.maximum.reduceat(e.vmax, np.minimum(starts, max(e.vmax.size - 1, 0))) if e.vmax.size else np.zeros(n, np.int64)
    vsum = _segment_sum(e.vsum, starts, counts)

    def value(x: np.ndarray) -> pa.Array:  # scale 1 keeps the values' own type (records stay integers)
        return pa.array(x if scale == 1.0 else x / scale, mask=~has)

    figures = [value(lo), pa.array(np.where(has, vsum, 0.0) / np.maximum(total, 1) / scale, mask=~has), value(hi)]
    for per_mille in PERCENTILES.values():
        rank = np.maximum(1, (total * per_mille + 999) // 1000)
        at = np.searchsorted(cum, before + rank) if cum.size else np.zeros(n, np.int64)
        figures.append(value(e.vmax[np.minimum(at, max(e.vmax.size - 1, 0))] if e.vmax.size else np.zeros(n, np.int64)))
    figures.append(pa.array(nulls.astype(np.int64)))
    return dict(zip(STAT_NAMES[name], figures))


def histogram_column(e: Entries, nulls: np.ndarray) -> pa.StructArray:
    """As the rows Spark's group-by by bucket gave: per group its buckets in order, then a null
    bucket (null vmin, vmax, vsum) holding the samples without a value, if any."""
    n = nulls.size
    known = e.counts(n)
    sizes = known + (nulls > 0)
    starts = np.r_[0, np.cumsum(sizes)[:-1]]
    total = int(sizes.sum())
    at_known = np.repeat(starts, known) + (np.arange(e.group.size) - np.repeat(np.r_[0, np.cumsum(known)[:-1]], known))
    at_null = (starts + known)[nulls > 0]
    mask = np.ones(total, bool)
    mask[at_known] = False

    def scatter(values: np.ndarray, null_value: np.ndarray | None = None) -> np.ndarray:
        out = np.zeros(total, values.dtype)
        out[at_known] = values
        if null_value is not None:
            out[at_null] = null_value
        return out

    offsets = pa.array(np.r_[0, np.cumsum(sizes)].astype(np.int32))
    fields = [
        pa.array(scatter(e.bucket), pa.int64(), mask=mask),
        pa.array(scatter(e.n, nulls[nulls > 0]), pa.int64()),
        pa.array(scatter(e.vmin), pa.int64(), mask=mask),
        pa.array(scatter(e.vmax), pa.int64(), mask=mask),
        pa.array(scatter(e.vsum), pa.float64(), mask=mask),
    ]
    return pa.StructArray.from_arrays([pa.ListArray.from_arrays(offsets, f) for f in fields], names=HIST)


def _merged_entries(parts: pa.Table, groups: Groups, m: str) -> Entries:
    flat = {f: _flat(parts.column(f"{m}_{f}"), groups.order, _DTYPES[f]) for f in HIST}
    lengths = flat["bucket"][1]
    # Each part row's entries belong to its group: rows in `order` are grouped already.
    group = np.repeat(groups.of_sorted(), lengths)
    return Entries.aggregate(group, *[flat[f][0] for f in HIST])


def _writer_ranks(col: pa.Array) -> np.ndarray:
    """Each row's writer as its rank among the writer ids (sorted), rows without one last."""
    enc = col if pa.types.is_dictionary(col.type) else pc.dictionary_encode(col)
    names = enc.dictionary.to_pylist()
    rank = np.empty(len(names) + 1, np.int64)
    rank[sorted(range(len(names)), key=names.__getitem__)] = np.arange(len(names))
    rank[-1] = len(names)
    return rank[pc.fill_null(enc.indices, len(names)).to_numpy(zero_copy_only=False)]


def one_view(parts: pa.Table) -> tuple[pa.Table, np.ndarray, np.ndarray]:
    """The part rows that count (writers.choose): all of them when one writer wrote the history;
    and per row the windows (lo, hi: rows x K) where its samples do not count (K = 0: none)."""
    rank = _writer_ranks(parts.column(WRITER).chunk(0))
    if not rank.size or (rank == rank[0]).all():
        return parts, *(np.zeros((parts.num_rows, 0), np.int64),) * 2
    key, _ = group_ids([parts.column(c).chunk(0) for c in KEY])
    samples = (pc.binary_length(parts.column("time_code")).to_numpy(zero_copy_only=False) // 4
               + pc.binary_length(parts.column("time_code_other")).to_numpy(zero_copy_only=False) // 8)
    first, last = (parts.column(c).to_numpy() for c in ("span_first_ms", "span_last_ms"))
    kept, lo, hi = writers.choose(key, rank, samples, first, last)
    return parts.filter(pa.array(kept)).combine_chunks(), lo[kept], hi[kept]


def counted_samples(table: pa.Table, end_ms: int, default_cap_ms: int) -> pa.Table:
    """The rows of `table` (READ columns of some partitions' whole day, e.g. the report's short
    history drawn sample by sample) that the tables count, as `merge` counts them: the writers
    writers.keep keeps per partition, each partition's cap from its rows' poll intervals
    (writers.caps; `default_cap_ms` for rows without one), its samples in (time, state) order
    (partition_day.py); added columns: `ms`, the time in epoch milliseconds (null: none),
    `accounted_ms`, the time the sample accounts for, and `held_ms`, the part of it after the
    sample (the rest, the midnight gap or a stall's look-back, lies before it)."""
    table = table.unify_dictionaries().combine_chunks()
    n = table.num_rows
    if not n:
        return (table.append_column("ms", pa.array([], pa.int64())).append_column("accounted_ms", pa.array([], pa.int64()))
                .append_column("held_ms", pa.array([], pa.int64())))
    start_ms = end_ms - HOURS * HOUR_MS
    cols = {c: table.column(c).chunk(0) if c in table.column_names else pa.nulls(n, _TYPES[c]) for c in READ}
    key, n_keys = group_ids([cols[c] for c in KEY])
    ms, timed = _ts_ms(cols["ts"])
    counted, lo, hi = writers.choose(key, _writer_ranks(cols[WRITER]), np.ones(n, np.int64),
                                     np.where(timed, ms, np.iinfo(np.int64).max), np.where(timed, ms, np.iinfo(np.int64).min))
    interval, known = _values(cols["refresh_interval_ms"])
    cap = writers.caps(interval[counted], known[counted], key[counted], n_keys, default_cap_ms)
    # Within a handoff, the writer chosen first alone (timeless rows are in no window).
    counted &= writers.outside(np.where(timed, ms, NULL_TS), lo, hi)
    lag, lag_known = _values(cols["time_lag_ms"])
    rows = np.flatnonzero(counted)
    state = state_codes(cols["state"])[rows]
    order = np.lexsort((time_codes(ms[rows], timed[rows], state), key[rows]))  # per partition, by (time, state)
    rows, key, state = rows[order], key[rows][order], state[order]
    ts, is_timed = np.where(timed[rows], ms[rows], NULL_TS), timed[rows]
    last = np.r_[key[1:] != key[:-1], True]
    first = is_timed & np.r_[True, last[:-1] | ~is_timed[:-1]]  # untimed samples sort first
    stalled = state == STALLED
    run_start = stalled & ~np.r_[False, stalled[:-1] & ~last[:-1]]
    # As the merge finds them: one look-back per partition and time, the largest of its STALLED rows'.
    marked = is_timed & lag_known[rows] & stalled & (ts >= start_ms) & (ts < end_ms)
    look_back = np.full(rows.size, -1, np.int64)
    if marked.any():
        at = np.flatnonzero(marked)
        pairs, which = np.unique(np.stack([key[at], ts[at]]), axis=1, return_inverse=True)
        largest = np.full(pairs.shape[1], -1, np.int64)
        np.maximum.at(largest, which.ravel(), np.clip(lag[rows][at], 0, LOOK_MAX))
        look_back[at] = largest[which.ravel()]
    spans, at, back = accounted_ms(ts, is_timed, state, last, start_ms, end_ms, cap[key], np.flatnonzero(first),
                                   np.flatnonzero(run_start & ~first), look_back.__getitem__)
    held = spans.copy()
    held[at] -= back
    return (table.take(pa.array(rows)).append_column("ms", pa.array(ms[rows], pa.int64(), mask=~timed[rows]))
            .append_column("accounted_ms", pa.array(spans, pa.int64())).append_column("held_ms", pa.array(held, pa.int64())))


def _close_pairs(ts: np.ndarray, owner: np.ndarray, poll_ms: np.ndarray) -> np.ndarray:
    """Per sample (times in order within each owner, `poll_ms` per sample, 0: unknown): whether it
    comes less than half its owner's poll interval after the owner's previous one."""
    close = np.zeros(ts.size, bool)
    if ts.size > 1:
        timed = ts != NULL_TS
        close[1:] = ((owner[1:] == owner[:-1]) & timed[1:] & timed[:-1] & (poll_ms[1:] > 0)
                     & (2 * (ts[1:] - ts[:-1]) < poll_ms[1:]))
    return close


def doubled_writers(parts: pa.Table, groups: Groups, codes: np.ndarray, lengths: np.ndarray,
                    ordered: np.ndarray, sizes: np.ndarray) -> pa.Array:
    """Per group: the writer id whose samples of it came less than half its poll interval apart
    DOUBLED_PAIRS times or more (two sidecars with one mirrorlag.history.writer.id), else null.
    `codes` (in part rows' order, `lengths` each) and `ordered` (sorted within groups of
    `sizes`) are the samples that count. Where a group's samples all come from one writer, its
    sorted codes say it at once; only groups with several writers (a handoff) sort their samples
    by writer again."""
    n = groups.n
    writer = parts.column(WRITER).chunk(0)
    rank = _writer_ranks(writer)
    interval, known = _values(parts.column("interval_ms").chunk(0))
    poll_row = np.where(known, interval, 0)
    ranked = rank[groups.order]  # each group's part rows together (a group has one at least)
    lo, hi = np.minimum.reduceat(ranked, groups.starts), np.maximum.reduceat(ranked, groups.starts)
    poll = np.maximum.reduceat(poll_row[groups.order], groups.starts)
    # One writer's groups: pairs of consecutive samples closer than half the longest poll
    # interval of any such group (few, or none), then each against its own group's.
    single = (lo == hi) & (poll > 0)
    count = np.zeros(n, np.int64)
    if single.any() and ordered.size > 1:
        # On the codes themselves (time << CODE_BITS | state): a time step of at most h is a code
        # step of at most (h << CODE_BITS) + the largest state code, a superset checked after.
        half = (int(poll[single].max()) - 1) // 2
        at = np.flatnonzero(ordered[1:] - ordered[:-1] <= (half << CODE_BITS) + (1 << CODE_BITS) - 1) + 1
        starts = np.r_[0, np.cumsum(sizes)[:-1]]
        g = np.searchsorted(starts, at, side="right") - 1  # an empty group shares its start with the next: the last of them
        now, before = ordered[at] >> CODE_BITS, ordered[at - 1] >> CODE_BITS
        close = single[g] & (starts[g] != at) & (before != NULL_TS) & (2 * (now - before) < poll[g])
        count = np.bincount(g[close], minlength=n)
    flagged_row = groups.first_rows()  # a single writer's group: any of its rows names it
    several = np.flatnonzero(lo != hi)
    if several.size:  # each writer of these groups on its own
        row = np.repeat(groups.order, lengths)
        mine = np.isin(groups.ids[row], several)
        row, ts = row[mine], codes[mine] >> CODE_BITS
        pair = groups.ids[row] * (int(rank.max()) + 1) + rank[row]
        order = np.lexsort((ts, pair))
        row, ts, pair = row[order], ts[order], pair[order]
        close = _close_pairs(ts, pair, poll_row[row])
        if close.any():
            pairs, at = np.unique(pair[close], return_inverse=True)
            per_pair = np.bincount(at.reshape(-1))
            worst = np.zeros(n, np.int64)
            np.maximum.at(worst, pairs // (int(rank.max()) + 1), per_pair)
            count = np.maximum(count, worst)
            rows_of = np.zeros(n, np.int64)
            pick = per_pair >= DOUBLED_PAIRS
            # Name a flagged writer's row: the first row of each flagged pair.
            first_row = row[close][np.r_[True, pair[close][1:] != pair[close][:-1]]]
            rows_of[pairs[pick] // (int(rank.max()) + 1)] = first_row[pick]
            flagged_row = np.where(np.isin(np.arange(n), several), rows_of, flagged_row)
    flagged = count >= DOUBLED_PAIRS
    names = writer.take(pa.array(flagged_row))
    names = names.dictionary_decode() if pa.types.is_dictionary(names.type) else names
    return pc.if_else(pa.array(flagged), names, pa.nulls(n, pa.string()))


def merge(parts: pa.Table, start_ms: int, end_ms: int, cap_ms: int) -> Iterator[pa.RecordBatch]:
    """The merge side: PARTIAL rows (any number per key and writer) -> one row per key with its
    day, from the writers that count (one_view); `cap_ms`: the cap on a sample's time where its
    rows do not say their poll interval (writers.caps)."""
    parts = parts.combine_chunks()
    if not parts.num_rows:
        return
    parts, lo, hi = one_view(parts)
    groups = Groups(*group_ids([parts.column(c).chunk(0) for c in KEY]))
    out: dict[str, pa.Array] = dict(zip(KEY, _key_columns(parts, groups.first_rows())))
    for c in ("freshness_max", "byte_max"):
        out[c] = _maxima(parts.column(c).chunk(0), groups)
    codes, lengths = _merged_codes(parts, groups, start_ms)
    stall_since = _merged_stall_since(parts, groups, start_ms, lo, hi)
    if lo.shape[1]:  # a handoff: within it, the samples of the writer chosen first alone
        row = np.repeat(groups.order, lengths)
        counts = writers.outside(codes >> CODE_BITS, lo[row], hi[row])
        codes, lengths = codes[counts], np.bincount(np.arange(lengths.size).repeat(lengths)[counts], minlength=lengths.size)
    sizes = np.bincount(groups.of_sorted(), weights=lengths, minlength=groups.n).astype(np.int64)
    interval, known = _values(parts.column("interval_ms").chunk(0))
    cap = writers.caps(interval, known, groups.ids, groups.n, cap_ms)
    ordered = _sorted_codes(codes, sizes)
    out.update(timeline(ordered, sizes, start_ms, end_ms, cap, stall_since))
    out["doubled_writer"] = doubled_writers(parts, groups, codes, lengths, ordered, sizes)
    for m in MEASURES:
        entries = _merged_entries(parts, groups, m)
        nulls = np.bincount(groups.ids, weights=parts.column(f"{m}_nulls").to_numpy(), minlength=groups.n).astype(np.int64)
        out.update(stats(entries, nulls, m))
        out[m] = histogram_column(entries, nulls)
    records, lengths = _flat(parts.column("series"), groups.order, slots.SLOT)
    curves = slots.Slots.of_records(np.repeat(groups.of_sorted(), lengths), records)
    out["series"] = _blobs(curves.held(cap), curves.counts(groups.n))
    out = {f.name: out[f.name] for f in MERGED}
    yield from pa.Table.from_pydict(out, schema=MERGED).to_batches(BATCH_GROUPS)


# ---- topics and flows ----------------------------------------------------------------------

def level_schema(keys: Sequence[str]) -> pa.Schema:
    """A topic's or flow's lag figures: its key, then STAT_NAMES of both measures."""
    stats_fields = [f for f in MERGED if any(f.name in STAT_NAMES[m] for m in MEASURES)]
    return pa.schema([*[PARTIAL.field(k) for k in keys], *stats_fields])


def _filled(values: pa.Array) -> np.ndarray:
    """Values in their own numpy type, nulls as 0."""
    return (values if values.null_count == 0 else pc.fill_null(values, 0)).to_numpy(zero_copy_only=False)


def _level_entries(hist: pa.StructArray, groups: Groups) -> tuple[Entries, np.ndarray]:
    """The histogram entries of each group's partitions (MERGED's histogram column), and each
    group's samples without a value (the partitions' null buckets)."""
    rows = pa.array(groups.order)
    lists = {f: child.take(rows) for f, child in zip(HIST, hist.flatten())}
    group = np.repeat(groups.of_sorted(), pc.list_value_length(lists["bucket"]).to_numpy(zero_copy_only=False))
    bucket = pc.list_flatten(lists["bucket"])
    known = bucket.is_valid().to_numpy(zero_copy_only=False)
    values = {f: _filled(pc.list_flatten(lists[f])) for f in HIST}
    nulls = np.bincount(group[~known], weights=values["n"][~known], minlength=groups.n).astype(np.int64)
    return Entries.aggregate(group[known], *[values[f][known] for f in HIST]), nulls


def level_figures(per: pa.Table, keys: Sequence[str]) -> Iterator[pa.RecordBatch]:
    """Per key of a level (topic or flow; `per`: MERGED rows, all of each key's partitions):
    its lag figures from its partitions' histograms added up, as `stats` gives a partition's."""
    per = per.combine_chunks()
    if not per.num_rows:
        return
    groups = Groups(*group_ids([per.column(c).chunk(0) for c in keys]))
    out: dict[str, pa.Array] = dict(zip(keys, _key_columns(per, groups.first_rows(), keys)))
    for m in MEASURES:
        out.update(stats(*_level_entries(per.column(m).chunk(0), groups), m))
    yield from pa.Table.from_pydict(out, schema=level_schema(keys)).to_batches(BATCH_GROUPS)


# Topic and flow figures in one table: `level` says which; a flow's row has a null topic.
LEVELS = pa.schema([pa.field("level", pa.string()), *level_schema(["source", "target", "topic"])])


def levels_figures(per: pa.Table) -> Iterator[pa.RecordBatch]:
    """The topic and flow figures of `per` (MERGED_HISTS rows, all of each flow's partitions) as LEVELS rows."""
    for level, keys in (("topic", ["source", "target", "topic"]), ("flow", ["source", "target"])):
        for batch in level_figures(per, keys):
            n = batch.num_rows
            yield pa.RecordBatch.from_arrays(
                [pa.array([level] * n, pa.string()),
                 *[batch.column(f.name) if f.name in keys or f.name not in ("source", "target", "topic")
                   else pa.nulls(n, f.type) for f in LEVELS if f.name != "level"]],
                schema=LEVELS)
