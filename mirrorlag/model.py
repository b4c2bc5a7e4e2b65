"""The shared vocabulary: partition keys, states, LRO readings and snapshot rows.

Everything here is plain data. Times are wall-clock seconds (float, `time.time()` scale) taken
by the edges and passed in; nothing here reads a clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from itertools import repeat
from operator import is_
from typing import Collection, Iterator, Mapping, NamedTuple, Sequence

import numpy as np


class FlowId(NamedTuple):
    """One enabled `source->target` pair of an MM2 config."""

    source: str
    target: str

    def __str__(self) -> str:
        return f"{self.source}->{self.target}"


class PartitionKey(NamedTuple):
    """A source partition as seen by one flow: (source alias, target alias, source topic, partition)."""

    source: str
    target: str
    topic: str
    partition: int

    @property
    def flow(self) -> FlowId:
        return FlowId(self.source, self.target)


class State(StrEnum):
    UNKNOWN = "UNKNOWN"  # no LRO yet, or no LEO this poll: never reported as 0
    IN_SYNC = "IN_SYNC"  # time lag <= replication.lag.time.max.ms
    LAGGING = "LAGGING"  # time lag > max while the LRO still moves
    STALLED = "STALLED"  # out of sync and the LRO has not moved for longer than the max (or went stale)
    AT_RISK = "AT_RISK"  # the source's retention will delete records not yet copied (or already did)
    RESET = "RESET"  # LEO went backwards or an LRO seen earlier is beyond the LEO
    REWIND = "REWIND"  # the LRO stepped back (MM2 resumed from an older commit) and is re-copying
    GONE = "GONE"  # partition left the flow; reported once, then dropped


class LroReading(NamedTuple):
    """What the LRO cache knows of one partition at the moment of a poll.

    A NamedTuple, like PartitionRow: cheap to build and out of the cyclic collector's sight. The
    LRO cache keeps columns, not readings: an LroTable builds one when a key is read (GONE rows,
    tests); the engine reads the columns."""

    offset: int  # source offset of the last record the target acknowledged
    feed: str  # which feed said so: "callback", "offset-syncs", ...
    changed_at: float  # when the sidecar first saw this value
    stale: bool  # the TTL expired without a newer value


def rows_in(old: Sequence[PartitionKey], new: Sequence[PartitionKey]) -> np.ndarray:
    """For each key of `new`, its position in `old` (-1: not there).

    By identity first, in numpy: the poller hands out the same key objects poll after poll, so a
    kept partition is the same object; only keys not found so (equal keys that are other objects:
    tests, a caller that builds its keys anew) are looked up by equality among the old keys left
    over. A dict of every old key to its row made 100k int objects at each topology change,
    and the allocator kept arenas that a survivor pinned. (`old` holds its objects alive, so no
    new key can have an old one's id.)"""
    n_old = len(old)
    new_ids = np.fromiter(map(id, new), np.int64, len(new))
    rows = np.full(len(new), -1, np.int64)
    if not n_old or not len(new):
        return rows
    old_ids = np.fromiter(map(id, old), np.int64, n_old)
    by_id = np.argsort(old_ids)
    sorted_ids = old_ids[by_id]
    at = np.minimum(np.searchsorted(sorted_ids, new_ids), n_old - 1)
    hit = sorted_ids[at] == new_ids
    rows[hit] = by_id[at[hit]]
    missing = np.flatnonzero(~hit)
    if missing.size:
        left = np.ones(n_old, bool)
        left[rows[hit]] = False
        spare = np.flatnonzero(left).tolist()
        if spare:
            index = dict(zip((old[i] for i in spare), spare))
            rows[missing] = np.fromiter(map(index.get, (new[i] for i in missing.tolist()), repeat(-1)), np.int64,
                                        missing.size)
    return rows


class LroTable(Mapping[PartitionKey, LroReading]):
    """Every known LRO at one poll, as a read-only Mapping of LroReadings (built on access) over
    the cache's columns as they were then, one row per key of `keys` (`used` marks the rows with
    an LRO). `aligned(keys)` gives them as columns in the order of other keys, without a Python
    object per partition (the engine's path)."""

    __slots__ = ("_keys", "_used", "_offset", "_feed", "_changed", "_stale", "_names", "_memo", "_index")

    def __init__(self, keys: Sequence[PartitionKey], used: np.ndarray, offset: np.ndarray, feed: np.ndarray,
                 changed: np.ndarray, stale: np.ndarray, names: Sequence[str], memo: list) -> None:
        self._keys = keys  # the cache's row order, shared with it while its partition set stays
        self._used = used
        self._offset, self._feed, self._changed, self._stale = offset, feed, changed, stale
        self._names = tuple(names)
        self._memo = memo  # [keys, table keys, row per key]: the last alignment, shared across polls
        # key -> row, built on the first read by key (GONE rows, tests): the engine reads columns,
        # and a dict kept from poll to poll would cost a dict entry a partition.
        self._index: dict[PartitionKey, int] | None = None

    @classmethod
    def of(cls, readings: Mapping[PartitionKey, LroReading]) -> "LroTable":
        """A table holding `readings` (tests, and callers that have readings rather than a cache)."""
        names = sorted({r.feed for r in readings.values()})
        code = {name: i for i, name in enumerate(names)}
        values = list(readings.values())
        return cls(list(readings), np.ones(len(values), bool), np.array([r.offset for r in values], np.int64),
                   np.array([code[r.feed] for r in values], np.int16), np.array([r.changed_at for r in values], float),
                   np.array([r.stale for r in values], bool), names, [None, None, None])

    def _rows(self) -> dict[PartitionKey, int]:
        if self._index is None:
            self._index = {self._keys[i]: i for i in np.flatnonzero(self._used).tolist()}
        return self._index

    def __getitem__(self, key: PartitionKey) -> LroReading:
        s = self._rows()[key]
        return LroReading(int(self._offset[s]), self._names[self._feed[s]], float(self._changed[s]), bool(self._stale[s]))

    def get(self, key: PartitionKey, default: LroReading | None = None) -> LroReading | None:  # type: ignore[override]
        return self[key] if key in self._rows() else default

    def __contains__(self, key: object) -> bool:
        return key in self._rows()

    def __iter__(self) -> Iterator[PartitionKey]:
        return iter(self._rows())

    def __len__(self) -> int:
        return int(np.count_nonzero(self._used))

    def aligned(self, keys: Sequence[PartitionKey]
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, tuple[str, ...]]:
        """For each of `keys`: (known, offset, changed_at, stale, feed code), 0 / 0.0 / False / -1
        where no LRO is known, and the feed names the codes index (int8 codes, as RowColumns
        keeps them). The row of each key is looked up once per key list and table key list (the
        engine hands in the same list poll after poll)."""
        memo = self._memo
        if keys is self._keys:
            at = None
        elif memo[0] is keys and memo[1] is self._keys:
            at = memo[2]
        else:
            # The same order (one flow: the poll's keys come sorted, as the engine keeps its rows)
            # needs no row per key; the same objects, compared at C level once per key list.
            if len(keys) == len(self._keys) and all(map(is_, keys, self._keys)):
                at = None
            else:
                at = rows_in(self._keys, keys)
            memo[:] = [keys, self._keys, at]
        if not len(self._offset):  # nothing known at all
            n = len(keys)
            return np.zeros(n, bool), np.zeros(n, np.int64), np.zeros(n), np.zeros(n, bool), np.full(n, -1, np.int8), self._names
        if at is None:
            known = self._used.copy()
            s: np.ndarray | slice = slice(None)
        else:
            s = np.where(at >= 0, at, 0)
            known = (at >= 0) & self._used[s]
        return (known, np.where(known, self._offset[s], 0), np.where(known, self._changed[s], 0.0),
                known & self._stale[s], np.where(known, self._feed[s], -1).astype(np.int8), self._names)


@dataclass(frozen=True, slots=True)
class PollObservation:
    """One poll's input to the lag engine.

    The LEO snapshot is taken at `leo_at`, before the LROs are read at `now` (docs/design.md §3).
    `leos` names every partition that exists in the flows now; None means its LEO could not be
    read this poll. A key absent from `leos` has left the flow. `log_starts` (ListOffsets
    earliest) is read less often than the LEO: a key absent from it keeps its last known value.
    `mean_record_bytes` is per flow, from feeds that know record sizes.
    `new_logs`: partitions whose topic was deleted and created again since the previous poll (its
    topic ID changed, KIP-516), a new log even where the LEO did not go back.
    `resolution_s`: by feed name, how often that feed's evidence can move at most (connect-offsets:
    once per offset flush): one value for every flow, or a value per flow (each flow's own target's
    flush; a flow not named: 0); a feed not named can move at every poll.
    `oldest_uncopied`: for partitions the poller probed on the source from LRO + 1 this poll, the
    append time (record timestamp, s) of the oldest data record not copied, or None where
    [LRO + 1, LEO) holds no data record at the mirror's isolation level (only transaction
    markers, or aborted records under read_committed: caught up).
    """

    leo_at: float
    now: float
    leos: Mapping[PartitionKey, int | None]
    lros: Mapping[PartitionKey, LroReading]
    log_starts: Mapping[PartitionKey, int] = field(default_factory=dict)
    mean_record_bytes: Mapping[FlowId, float] = field(default_factory=dict)
    new_logs: Collection[PartitionKey] = frozenset()
    resolution_s: Mapping[str, float | Mapping[FlowId, float]] = field(default_factory=dict)
    oldest_uncopied: Mapping[PartitionKey, float | None] = field(default_factory=dict)
    # Where the probe found a data record in [LRO + 1, LEO): the offset of the first one (the
    # records retention deletes below it are markers, never lost: docs/design.md §3, "Lost means data").
    first_data: Mapping[PartitionKey, int] = field(default_factory=dict)
    # Partitions the poller asked the probe about this poll that it did not answer (not
    # authorized, deferred by its per-poll bound, a timeout, data deleted): where their time lag
    # needed that answer, it is a flagged lower bound (docs/design.md §3).
    unprobed: Collection[PartitionKey] = frozenset()
    # Where the probe proved more than the first data record: the end r of the run of data records
    # it received from it, every offset in [first_data, r) a data record (lost when deleted
    # uncopied). A key with first_data and none here: r = first_data + 1.
    data_to: Mapping[PartitionKey, int] = field(default_factory=dict)

    def resolution(self, feed: str | None, flow: FlowId) -> float:
        """How often `feed`'s evidence of `flow` can move at most (s; 0: at every poll)."""
        res = self.resolution_s.get(feed, 0.0) if feed is not None else 0.0
        return res if isinstance(res, (int, float)) else res.get(flow, 0.0)


class PartitionRow(NamedTuple):
    """The engine's verdict on one partition at one poll: what every exporter shows.

    A NamedTuple, not a dataclass: the engine builds one per partition per poll (100k of them),
    and a tuple is four times cheaper to build. Immutable all the same.
    """

    key: PartitionKey
    state: State
    leo: int | None
    lro: int | None
    lro_feed: str | None
    lro_age_s: float | None  # now - changed_at of the LRO
    record_lag: int | None  # max(0, LEO - (LRO + 1)); None when unknown
    record_lag_min: float | None  # SampledStat window figures; None when no sample in the window
    record_lag_max: float | None
    record_lag_avg: float | None
    time_lag_s: float | None  # now - last_caught_up; 0 when caught up; None when unknown
    # How long the oldest uncopied record (offset LRO + 1) has waited since it was appended, from
    # the engine's (LEO, time) table. 0 when caught up. Beyond the table: the table's age, a lower bound.
    freshness_lag_s: float | None = None
    freshness_lower_bound: bool = False
    # The time lag counts from the sidecar's first look because the probe needed to date record
    # LRO + 1 did not answer: a lower bound, and the state is judged on it (never IN_SYNC).
    time_lag_lower_bound: bool = False
    byte_lag_estimate: int | None = None  # record lag x mean record size; None when no feed knows sizes
    append_rate: float | None = None  # source records/s over the sample windows
    copy_rate: float | None = None  # mirror records/s over the sample windows
    catch_up_s: float | None = None  # record lag / (copy rate - append rate) when the mirror gains
    log_start: int | None = None  # source log-start offset (ListOffsets earliest), last known
    retention_headroom_records: int | None = None  # copied records still before the log start moves past LRO + 1
    retention_headroom_s: float | None = None  # when retention will delete uncopied records; None: not in sight
    records_lost: int | None = None  # records the source deleted before they were copied, proved data
    # Deleted uncopied offsets whose kind no probe proved (a commit marker may be all they were).
    records_lost_unverified: int | None = None


STATES: tuple[State, ...] = tuple(State)  # a state's code in RowColumns.state is its index here
_STATE_OBJECTS = np.array(STATES, dtype=object)
_INT64 = np.iinfo(np.int64)

# How each row field after the key is held in RowColumns.
INT_FIELDS = ("leo", "lro", "record_lag", "byte_lag_estimate", "log_start", "retention_headroom_records",
              "records_lost", "records_lost_unverified")  # int64 and a validity mask
FLOAT_FIELDS = ("lro_age_s", "record_lag_min", "record_lag_max", "record_lag_avg", "time_lag_s",
                "freshness_lag_s", "append_rate", "copy_rate", "catch_up_s",
                "retention_headroom_s")  # float64, NaN where unknown
FLAG_FIELDS = ("freshness_lower_bound", "time_lag_lower_bound")  # bool, False where unset
assert set(PartitionRow._fields) == {"key", "state", "lro_feed", *FLAG_FIELDS, *INT_FIELDS, *FLOAT_FIELDS}


def _lean(a: np.ndarray) -> np.ndarray:
    """`a`, or its one value broadcast to its length where every element holds it, bit for bit
    (NaN as NaN, -0.0 apart from 0.0): a read-only view that keeps 8 bytes alive, not `a`."""
    if a.ndim != 1 or a.size < 2 or a.strides != (a.itemsize,) or a.itemsize not in (1, 2, 4, 8):
        return a
    bits = a.view(f"u{a.itemsize}")
    if not (bits == bits[0]).all():
        return a
    return np.broadcast_to(a[:1].copy(), a.shape)


class RowColumns:
    """A snapshot's rows as typed columns, one array per field, the rows in `keys` order.

    What every exporter reads: ~160 bytes a partition of flat arrays where rows as tuples of
    boxed numbers take ~540, and a column turns into Arrow or JSON without a Python object per
    row. `state` holds codes into STATES; INT_FIELDS are int64 with a mask in `valid` (Kafka's
    offsets are int64; an estimate past it is clipped); FLOAT_FIELDS are float64, NaN where
    unknown; the LRO's feed is a code into `feed_names` (int8, -1: no LRO), not a pointer per row
    (`lro_feed` gives the names). Never mutated once built: producers hand over arrays of their own.
    """

    __slots__ = ("keys", "state", "ints", "valid", "floats", "feed_code", "feed_names", "freshness_lower_bound",
                 "time_lag_lower_bound")

    def __init__(self, keys: Sequence[PartitionKey], state: np.ndarray, ints: dict[str, np.ndarray],
                 valid: dict[str, np.ndarray], floats: dict[str, np.ndarray], feed_code: np.ndarray,
                 feed_names: tuple[str, ...], freshness_lower_bound: np.ndarray,
                 time_lag_lower_bound: np.ndarray | None = None) -> None:
        self.keys = keys
        self.state = state
        self.ints = ints
        self.valid = valid
        self.floats = floats
        self.feed_code = feed_code
        self.feed_names = feed_names
        self.freshness_lower_bound = freshness_lower_bound
        self.time_lag_lower_bound = np.zeros(len(state), bool) if time_lag_lower_bound is None else time_lag_lower_bound

    @property
    def lro_feed(self) -> np.ndarray:
        """The feed each row's LRO came from, as an object array of names (None: no LRO)."""
        return np.array([*self.feed_names, None], dtype=object)[self.feed_code]  # -1: the None

    def feed_index(self) -> np.ndarray:
        """Each row's index into `(*feed_names, None)` (for a take() of per-feed texts)."""
        return np.where(self.feed_code < 0, len(self.feed_names), self.feed_code)

    def _codes_of(self, names: Sequence[str | None]) -> np.ndarray:
        """Codes of `names` (feeds' names, None for none) in these columns, adding new names."""
        known = list(self.feed_names)
        codes = []
        for name in names:
            if name is None:
                codes.append(-1)
                continue
            if name not in known:
                known.append(name)
            codes.append(known.index(name))
        if len(known) > np.iinfo(np.int8).max:
            raise ValueError(f"a snapshot holds at most {np.iinfo(np.int8).max} feed names")
        self.feed_names = tuple(known)
        return np.array(codes, np.int8)

    def __len__(self) -> int:
        return len(self.keys)

    @classmethod
    def empty(cls, n: int, keys: Sequence[PartitionKey]) -> "RowColumns":
        """n rows, every value unknown and every state UNKNOWN, to be filled in."""
        return cls(keys, np.full(n, STATES.index(State.UNKNOWN), np.int8),
                   {f: np.zeros(n, np.int64) for f in INT_FIELDS}, {f: np.zeros(n, bool) for f in INT_FIELDS},
                   {f: np.full(n, np.nan) for f in FLOAT_FIELDS}, np.full(n, -1, np.int8), (), np.zeros(n, bool),
                   np.zeros(n, bool))

    @classmethod
    def from_rows(cls, rows: Sequence[PartitionRow]) -> "RowColumns":
        out = cls.empty(len(rows), [row.key for row in rows])
        out.put(np.arange(len(rows)), rows)
        return out

    def put(self, at: np.ndarray, rows: Sequence[PartitionRow]) -> None:
        """Write rows into positions `at` (while the columns are being built)."""
        if not len(rows):
            return
        fields = list(zip(*rows))
        get = PartitionRow._fields.index
        code = {state: i for i, state in enumerate(STATES)}
        self.state[at] = [code[s] for s in fields[get("state")]]
        for name in INT_FIELDS:
            values = fields[get(name)]
            known = np.fromiter((v is not None for v in values), bool, len(values))
            self.valid[name][at] = known
            self.ints[name][at] = [min(max(round(v), _INT64.min), _INT64.max) if v is not None else 0 for v in values]
        for name in FLOAT_FIELDS:
            self.floats[name][at] = [np.nan if v is None else v for v in fields[get(name)]]
        self.feed_code[at] = self._codes_of(fields[get("lro_feed")])
        self.freshness_lower_bound[at] = [bool(v) for v in fields[get("freshness_lower_bound")]]
        self.time_lag_lower_bound[at] = [bool(v) for v in fields[get("time_lag_lower_bound")]]

    def place(self, at: np.ndarray, other: "RowColumns") -> None:
        """Write other's values into positions `at` (while the columns are being built); the
        keys stay: other's rows are those partitions'."""
        self.state[at] = other.state
        for name in INT_FIELDS:
            self.ints[name][at] = other.ints[name]
            self.valid[name][at] = other.valid[name]
        for name in FLOAT_FIELDS:
            self.floats[name][at] = other.floats[name]
        self.feed_code[at] = self._recoded(other)
        self.freshness_lower_bound[at] = other.freshness_lower_bound
        self.time_lag_lower_bound[at] = other.time_lag_lower_bound

    def _recoded(self, other: "RowColumns") -> np.ndarray:
        """other's feed codes as codes of these columns (whose names grow to hold other's)."""
        return np.append(self._codes_of(other.feed_names), np.int8(-1))[other.feed_code]

    def __add__(self, other: "RowColumns") -> "RowColumns":
        """These rows, then other's."""
        out = RowColumns(
            [*self.keys, *other.keys], np.concatenate([self.state, other.state]),
            {f: np.concatenate([v, other.ints[f]]) for f, v in self.ints.items()},
            {f: np.concatenate([v, other.valid[f]]) for f, v in self.valid.items()},
            {f: np.concatenate([v, other.floats[f]]) for f, v in self.floats.items()},
            self.feed_code, self.feed_names,
            np.concatenate([self.freshness_lower_bound, other.freshness_lower_bound]),
            np.concatenate([self.time_lag_lower_bound, other.time_lag_lower_bound]))
        out.feed_code = np.concatenate([self.feed_code, out._recoded(other)])
        return out

    def lean(self) -> "RowColumns":
        """The same rows, each column whose rows all hold one value (all NaN for a float) kept
        as that value broadcast to the rows' number: a read-only view of 8 bytes, not an array
        a row. A healthy estate's snapshot has many (no records lost, no catch-up estimate, no
        retention in sight, the flags unset, every state IN_SYNC), and the sidecar holds its
        latest snapshot between polls: ~40 of its ~155 bytes a partition."""
        return RowColumns(self.keys, _lean(self.state), {f: _lean(v) for f, v in self.ints.items()},
                          {f: _lean(v) for f, v in self.valid.items()}, {f: _lean(v) for f, v in self.floats.items()},
                          _lean(self.feed_code), self.feed_names, _lean(self.freshness_lower_bound),
                          _lean(self.time_lag_lower_bound))

    def __getitem__(self, part: slice) -> "RowColumns":
        """The rows of a slice (views of these arrays, not copies)."""
        return RowColumns(self.keys[part], self.state[part], {f: v[part] for f, v in self.ints.items()},
                          {f: v[part] for f, v in self.valid.items()}, {f: v[part] for f, v in self.floats.items()},
                          self.feed_code[part], self.feed_names, self.freshness_lower_bound[part],
                          self.time_lag_lower_bound[part])

    def column(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """A numeric field's values and where they are known."""
        if name in self.ints:
            return self.ints[name], self.valid[name]
        values = self.floats[name]
        return values, ~np.isnan(values)

    def states(self) -> np.ndarray:
        """The State of each row (an object array)."""
        return _STATE_OBJECTS[self.state]

    def rows(self) -> list[PartitionRow]:
        """The rows as PartitionRow tuples (for a piece at a time: ~540 bytes a row)."""
        cols: list[list] = []
        for name in PartitionRow._fields:
            if name == "key":
                cols.append(list(self.keys))
            elif name == "state":
                cols.append(self.states().tolist())
            elif name in self.ints:
                values = self.ints[name].astype(object)
                values[~self.valid[name]] = None
                cols.append(values.tolist())
            elif name in self.floats:
                values = self.floats[name].astype(object)
                values[np.isnan(self.floats[name])] = None
                cols.append(values.tolist())
            elif name == "lro_feed":
                cols.append(self.lro_feed.tolist())
            else:  # a flag
                cols.append(getattr(self, name).tolist())
        return list(map(tuple.__new__, repeat(PartitionRow), zip(*cols)))


class Snapshot:
    """Immutable result of one poll. Exporters read its columns; nobody mutates it.

    Built from rows (`Snapshot(taken_at, rows)`: tests, small tools) or, by the engine, from
    columns (`Snapshot.of(taken_at, columns)`). `rows` builds the PartitionRow tuples on each
    call: fine for a check or a test, not for a 100k-partition poll loop.
    """

    __slots__ = ("taken_at", "columns")

    def __init__(self, taken_at: float, rows: Sequence[PartitionRow] = ()) -> None:
        self.taken_at = taken_at
        self.columns = RowColumns.from_rows(rows)

    @classmethod
    def of(cls, taken_at: float, columns: RowColumns) -> "Snapshot":
        snap = object.__new__(cls)
        snap.taken_at = taken_at
        snap.columns = columns
        return snap

    def __len__(self) -> int:
        return len(self.columns)

    @property
    def rows(self) -> tuple[PartitionRow, ...]:
        return tuple(self.columns.rows())

    def by_key(self) -> dict[PartitionKey, PartitionRow]:
        return {row.key: row for row in self.rows}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Snapshot):
            return NotImplemented
        return self.taken_at == other.taken_at and self.rows == other.rows

    def __repr__(self) -> str:
        return f"Snapshot(taken_at={self.taken_at!r}, {len(self)} rows)"
