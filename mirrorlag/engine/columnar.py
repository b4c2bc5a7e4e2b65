"""The lag engine over columns: LagEngine's contract and exact results, with every partition's
state in typed arrays (a row per partition) and each poll's common cases computed for all
partitions at once.

Why: LagEngine keeps a slotted object per partition, ~10 boxed numbers, a sample list and a
freshness array each, ~1.35 KB a partition, and walks them in a Python loop. Here the same state
is ~0.76 KB of flat columns (the table holds its points + 1) and a poll is a few dozen numpy
operations over all of them: at 100k partitions the sidecar holds 261 instead of 334 MiB after
polling, and the update takes ~0.23 instead of ~0.31 s (tests/bench/RESULTS.md, fifth pass).
The snapshot it returns is columns too (model.RowColumns), built from these arrays: no Python
object per row.

How it stays exact: LagEngine (lag_engine.py) remains the reference. Each poll sorts its
partitions into what the array code here does (LEO unreadable; no LRO yet; the ordinary case:
time lag, freshness from the two newest points or the table, rewinds, rates, retention, states,
the record-lag window, a partition's first poll, a window restarted in a new shape, a full table
cut back) and the rare rest: a new log (RESET, or an LEO gone backwards without an LRO), and a
freshness table whose offsets outgrow 32 bits, that a smaller configured size must cut, or that
has widened to 64-bit items. The rare rows are loaded into LagEngine's own partition objects, run
through LagEngine.update and stored back, so they follow the reference code line for line.
tests/unit/test_columnar_engine.py checks that both engines give equal snapshots and counters,
poll after poll, on random estates and config changes.

Numbers: offsets are int64 (Kafka's offsets are), times float64; "unknown" is a mask beside an
int column and NaN in a float column (times are never NaN). Small counts, indexes and codes take
the narrowest type their bound allows and widen if it grows (_Columns). The window's min/max/sum
are float64, exact for lags below 2**53 as LagEngine's ints are.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from itertools import repeat
from operator import is_, is_not, itemgetter
from typing import Callable, Mapping, NamedTuple

import numpy as np

from mirrorlag.config.settings import EngineParams
from mirrorlag.engine import freshness
from mirrorlag.engine.lag_engine import LagEngine, _Flow, _Partition
from mirrorlag.model import (FlowId, LroReading, LroTable, PartitionKey, PartitionRow, PollObservation, RowColumns, Snapshot,
                             State, rows_in)

_STATES = list(State)
_CODE = {state: code for code, state in enumerate(_STATES)}
_FITS = freshness.FITS
_TICKS = float(freshness.TICKS_PER_S)
_NAN = float("nan")
_INT64_CEILING = 2.0 ** 63  # the first float past int64
_ABSENT = object()  # a key the poll's LEO map does not have (None there is an unreadable LEO)
_NO_READING = LroReading(0, "", 0.0, False)  # stands in for a missing LRO while the columns are built
_OFFSET, _FEED, _CHANGED_AT, _STALE = (itemgetter(i) for i in range(4))
assert LroReading._fields == ("offset", "feed", "changed_at", "stale")

# The per-partition columns, by type (a new partition: 0, False, NaN for the optional floats).
_INTS = ("prev_leo", "lro_seen", "rewind_mark", "la_x", "lb_x", "ca_x", "cb_x", "log_start", "sa_x", "sb_x",
         "lost_through", "f_leo0", "f_tick0")
_OPTIONAL_INTS = ("prev_leo", "lro_seen", "rewind_mark", "log_start")  # each with a has_<name> mask
_FLOATS = ("prev_t", "last_caught_up", "first_seen_t", "la_t", "lb_t", "ca_t", "cb_t", "ls_rate", "sa_t", "sb_t")
_OPTIONAL_FLOATS = ("last_caught_up", "first_seen_t", "lb_t", "ls_rate")  # NaN: None
_INT_TYPES = (np.int8, np.int16, np.int32, np.int64)


def _fit(bound: int) -> type:
    """The narrowest signed type that holds 0..bound (signed: a stray n - 1 cannot wrap to huge)."""
    return next(t for t in _INT_TYPES if bound <= np.iinfo(t).max)


class _Columns:
    """The per-partition state, one array per field, rows in the engine's key order.

    Small numbers get the narrowest type their bound allows, and a column's type only widens
    (`widen`, and `moved` keeps the wider): a table count is at most `points` (the table's
    width), a window index or count of samples at most `samples`, a poll count in a sample at
    most the engine's number of updates, and flow, shape and feed codes index the engine's
    lists, which only grow."""

    def __init__(self, n: int, samples: int, points: int) -> None:
        self.n = n
        self.samples = samples
        self.points = points
        self.a: dict[str, np.ndarray] = {}
        for name in _INTS:
            self.a[name] = np.zeros(n, np.int64)
        for name in _OPTIONAL_INTS:
            self.a["has_" + name] = np.zeros(n, bool)
        for name in _FLOATS:
            self.a[name] = np.full(n, _NAN if name in _OPTIONAL_FLOATS else 0.0)
        self.a["f_count"] = np.zeros(n, _fit(points))
        self.a["w_cur"] = np.zeros(n, _fit(samples))
        self.a["w_created"] = np.zeros(n, _fit(samples))
        self.a["shape"] = np.zeros(n, np.int8)
        self.a["flow"] = np.zeros(n, np.int8)
        # The newest LRO seen (a GONE row reports it): its offset and feed, not the LroReading,
        # so the LRO cache's readings need not outlive their poll. The feed is a code into the
        # engine's feed names, -1 for none seen.
        self.a["last_lro_off"] = np.zeros(n, np.int64)
        self.a["last_lro_feed"] = np.full(n, -1, np.int8)
        self.a["w_start"] = np.zeros((n, samples))
        # int32 from the start, not widened as polls go by: this is its type for 68 years of 1 s polls.
        self.a["w_count"] = np.zeros((n, samples), np.int32)
        self.a["w_min"] = np.full((n, samples), np.inf)
        self.a["w_max"] = np.full((n, samples), -np.inf)
        self.a["w_sum"] = np.zeros((n, samples))
        self.a["t_leo"] = np.zeros((n, points), np.uint32)
        self.a["t_tick"] = np.zeros((n, points), np.uint32)

    def moved(self, n: int, old_rows: np.ndarray, new_rows: np.ndarray, samples: int, points: int) -> "_Columns":
        """A new set of rows: new_rows[i] takes this set's old_rows[i]; the others start empty."""
        out = _Columns(n, max(samples, self.samples), max(points, self.points))
        for name, old in self.a.items():
            new = out.a[name]
            if new.dtype != old.dtype and np.promote_types(new.dtype, old.dtype) == old.dtype:
                new = out.a[name] = new.astype(old.dtype)  # widened before: stays so
            if old.ndim == 2:
                new[new_rows, :old.shape[1]] = old[old_rows]
            else:
                new[new_rows] = old[old_rows]
        return out

    def widen(self, name: str, bound: int) -> None:
        """Let column `name` hold values up to `bound`."""
        a = self.a[name]
        if bound > np.iinfo(a.dtype).max:
            self.a[name] = a.astype(_fit(bound))

    def __getattr__(self, name: str) -> np.ndarray:
        try:
            return self.__dict__["a"][name]
        except KeyError:
            raise AttributeError(name) from None


def _by_row(values: Mapping[PartitionKey, int], keys: list[PartitionKey]) -> tuple[np.ndarray, np.ndarray]:
    """The rows of `keys` that `values` has a value for, and those values (int64), in row order."""
    if not values:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    found = list(map(values.get, keys))
    has = np.fromiter(map(is_not, found, repeat(None)), bool, len(found))
    rows = np.flatnonzero(has)
    return rows, _column(found, has, 0).astype(np.int64)[rows]


def _column(values: list, valid: np.ndarray, missing: object) -> np.ndarray:
    """The objects in an object array, `missing` where not valid."""
    out = np.empty(len(values), dtype=object)
    out[:] = values
    if not valid.all():
        out[~valid] = missing
    return out


class ColumnarLagEngine:
    """LagEngine's contract (see its docs and DESIGN §3) over columns."""

    def __init__(self, params: Callable[[FlowId], EngineParams]) -> None:
        self._params = params
        # The rows' keys, sorted. No key -> row dict is kept (~75 bytes a partition): a poll finds
        # its LEOs by these keys in the poll's own LEO map, which also tells whether the partition
        # set changed.
        self._keys: list[PartitionKey] = []
        self._flows: dict[FlowId, _Flow] = {}
        self._flow_list: list[_Flow] = []  # a row's `flow` column indexes it
        self._flow_ids: dict[FlowId, int] = {}
        self._shape_of_flow: dict[int, tuple[object, int]] = {}  # flow index -> (its shape object, shape id)
        self._shapes: list[tuple[float, int]] = [(0.0, 0)]  # shape id -> (window_s, num_samples)
        self._wide: dict[PartitionKey, array] = {}  # freshness tables that outgrew 32-bit offsets
        self._feed_names: list[str | None] = []  # a row's last_lro_feed code indexes it
        self._feed_codes: dict[str | None, int] = {}
        self._c = _Columns(0, 2, 4)
        self._gen = 0
        self.rewinds_total: dict[FlowId, int] = {}
        self.records_lost_total: dict[FlowId, int] = {}
        self._ref = LagEngine(params)  # runs the rare rows, on partitions loaded from the columns
        self._ref._flows = self._flows

    def __len__(self) -> int:
        return len(self._keys)

    # -- flows -------------------------------------------------------------------------------

    def _flow_index(self, flow: FlowId) -> int:
        i = self._flow_ids.get(flow)
        if i is None:
            i = self._flow_ids[flow] = len(self._flow_list)
            fl = self._flows.get(flow)
            if fl is None:
                fl = self._flows[flow] = _Flow(flow)
            self._flow_list.append(fl)
            self._c.widen("flow", i)
        return i

    def _shape_id(self, i: int) -> int:
        """The flow's current window shape as an id that changes exactly when LagEngine's shape
        object does (a partition restarts its window when they differ)."""
        fl = self._flow_list[i]
        seen = self._shape_of_flow.get(i)
        if seen is None or seen[0] is not fl.shape:
            seen = self._shape_of_flow[i] = (fl.shape, len(self._shapes))
            self._shapes.append((fl.window_s, fl.num_samples))
            self._c.widen("shape", seen[1])
        return seen[1]

    def _feed_code(self, feed: str | None) -> int:
        code = self._feed_codes.get(feed)
        if code is None:
            code = self._feed_codes[feed] = len(self._feed_names)
            self._feed_names.append(feed)
            self._c.widen("last_lro_feed", code)
        return code

    def _refresh(self, flow_rows: np.ndarray, gen: int, sizes) -> None:
        for i in np.unique(flow_rows).tolist():
            fl = self._flow_list[i]
            if fl.gen != gen:
                fl.refresh(self._params, gen, sizes)

    # -- the partition set ---------------------------------------------------------------------

    def _new_order(self, keys: list[PartitionKey], gen: int, sizes: Mapping[FlowId, float]) -> list[_GoneRow]:
        """Rows for a changed partition set: kept rows move, new ones start empty. Returns what
        the GONE rows report of the partitions that left (in key order)."""
        order = sorted(keys)
        # Array operations, not a tuple per kept row or a dict of every key: a topology change at
        # 100k partitions would otherwise make and drop ~300k small objects, which fragments the
        # allocator's arenas.
        was = rows_in(self._keys, order)
        kept = np.zeros(len(self._keys), bool)
        kept[was[was >= 0]] = True
        gone = [(self._keys[i], i) for i in np.flatnonzero(~kept).tolist()]  # in key order: the rows are sorted
        new_rows = np.flatnonzero(was >= 0)
        old_rows = was[new_rows]
        fresh = np.flatnonzero(was < 0).tolist()
        flows = np.empty(len(order), np.int32)
        flows[new_rows] = self._c.flow[old_rows]
        flows[fresh] = [self._flow_index(order[i].flow) for i in fresh]
        self._refresh(flows[fresh], gen, sizes)
        fls = self._flow_list
        samples = max([2] + [fls[i].num_samples for i in np.unique(flows[fresh]).tolist()])
        points = max([3] + [fls[i].points + 1 for i in np.unique(flows[fresh]).tolist()])
        old = self._c
        feeds = self._feed_names
        gone_rows = [_GoneRow(k, _last_lro(old, i, feeds), int(old.log_start[i]) if old.has_log_start[i] else None)
                     for k, i in gone]
        c = self._c = old.moved(len(order), old_rows, new_rows, samples, points)
        c.flow[:] = flows
        for i in fresh:
            c.shape[i] = self._shape_id(int(flows[i]))
        for k, _ in gone:
            self._wide.pop(k, None)
        self._keys = order
        return gone_rows

    # -- one poll ----------------------------------------------------------------------------------

    def update(self, obs: PollObservation) -> Snapshot:
        t = obs.leo_at
        now = obs.now
        leos = obs.leos
        sizes = obs.mean_record_bytes
        gen = self._gen = self._gen + 1
        gone: list[_GoneRow] = []
        # This poll's input as columns.
        # (C-level maps, not comprehensions: 100k partitions a poll.)
        # The partition set is unchanged when the poll's LEO map has as many keys as there are rows
        # and every row's key is among them.
        leo_obj = list(map(leos.get, self._keys, repeat(_ABSENT)))
        if len(leos) != len(leo_obj) or any(map(is_, leo_obj, repeat(_ABSENT))):
            gone = self._new_order(list(leos), gen, sizes)
            leo_obj = list(map(leos.__getitem__, self._keys))
        keys = self._keys
        c = self._c
        n = len(keys)
        has_leo = np.fromiter(map(is_not, leo_obj, repeat(None)), bool, n)
        leo = _column(leo_obj, has_leo, 0).astype(np.int64)
        has_r, off, changed, stale, feed, feed_names = _lro_columns(obs.lros, keys)
        if has_r.any():
            c.last_lro_off[has_r] = off[has_r]
            # The poll's feed codes (into feed_names) as the engine's own.
            c.last_lro_feed[has_r] = np.array([self._feed_code(name) for name in feed_names], np.int64)[feed[has_r]]

        # Params for the flows LagEngine would ask: of rows with an LEO, and of log starts.
        # A log start read for a key that is not a row (not in the flows) is ignored.
        log_rows, log_vals = _by_row(obs.log_starts, keys)
        self._refresh(np.concatenate([c.flow[log_rows], c.flow[has_leo]]), gen, sizes)
        fls = self._flow_list
        f = {name: np.array([getattr(fl, name) for fl in fls], float)
             for name in ("max_s", "window_s", "rate_half_s", "warn_s", "log_start_half_s")}
        f_samples = np.array([fl.num_samples for fl in fls], np.int64)
        f_points = np.array([fl.points for fl in fls], np.int64)
        # A table holds at most points + 1 (as LagEngine's, freshness.slack): only the newest
        # `points` ever answer, and dropping the oldest two every other poll is one array copy for
        # all the full tables at once.
        f_limit = f_points + 1
        f_bytes = np.array([np.nan if fl.mean_bytes is None else fl.mean_bytes for fl in fls])
        f_shape = np.array([self._shape_id(i) for i in range(len(fls))], np.int32)
        if (f_limit > c.points).any() or (f_samples > c.samples).any():
            all_rows = np.arange(n)
            c = self._c = c.moved(n, all_rows, all_rows, int(f_samples.max()), int(f_limit.max()))
        c.widen("w_count", gen)  # a sample's count grows by at most one an update
        row_flow = c.flow

        # Which rows the array code takes; the rest go through LagEngine.
        prev_known = c.has_prev_leo
        went_back = has_leo & prev_known & (leo < c.prev_leo)
        nxt = off + 1
        reset = has_leo & has_r & (went_back | ((nxt > leo) & (changed < t)))
        ordinary = has_leo & has_r & ~reset
        table_rows = has_leo & ~reset & ~(went_back & ~has_r)  # rows that add a point normally
        rare = reset | (has_leo & ~has_r & went_back)
        if self._wide:
            rare[[bisect_left(keys, k) for k in self._wide]] = True  # keys are sorted
        add = self._plan_table(c, np.flatnonzero(table_rows & ~rare), leo, t, row_flow, f_points, f_limit)
        rare[add.rare] = True
        rare_rows = np.flatnonzero(rare)
        vec = ~rare

        # Log starts first, as LagEngine observes them before its loop.
        lv = vec[log_rows]
        self._observe_log_starts(c, log_rows[lv], log_vals[lv], t, f["log_start_half_s"][row_flow[log_rows[lv]]])

        out = _Out(n)
        out.state[:] = _CODE[State.UNKNOWN]
        out.mask_measure = vec & ~ordinary  # UNKNOWN rows: the window is measured, not recorded
        # No LRO (and the LEO read): the LEO history still grows.
        plain = vec & has_leo & ~has_r
        c.prev_leo[plain] = leo[plain]
        c.has_prev_leo[plain] = True
        c.prev_t[plain] = t
        self._apply_table(c, add, np.flatnonzero(vec & table_rows))
        rows_o = np.flatnonzero(vec & ordinary)
        if rows_o.size:
            self._ordinary(c, out, rows_o, leo, off, changed, stale, t, now, f, f_points, f_bytes, f_shape, row_flow)
        self._measure(c, np.flatnonzero(out.mask_measure), now, out)

        cols = out.columns(keys, leo, has_leo, off, has_r, feed, feed_names, now, changed, c)
        if rare_rows.size:
            cols.place(rare_rows, self._run_rare(rare_rows, obs, gen))
        if gone:
            lros_now = obs.lros
            gone_rows = []
            for g in gone:
                r = lros_now.get(g.key) or g.last_lro
                gone_rows.append(PartitionRow(g.key, State.GONE, None, r and r.offset, r and r.feed, None, None, None,
                                              None, None, None, log_start=g.log_start))
            cols = cols + RowColumns.from_rows(gone_rows)
        return Snapshot.of(now, cols)

    # -- the ordinary case ------------------------------------------------------------------------

    def _ordinary(self, c: _Columns, out: "_Out", r: np.ndarray, leo: np.ndarray, off: np.ndarray,
                  changed: np.ndarray, stale: np.ndarray, t: float, now: float, f: dict[str, np.ndarray],
                  f_points: np.ndarray, f_bytes: np.ndarray, f_shape: np.ndarray, row_flow: np.ndarray) -> None:
        """LagEngine's loop body past the RESET test, for rows `r` (LEO and LRO known, a previous
        poll, the window filled in this flow's shape, the table's point already added)."""
        fl = row_flow[r]
        L = leo[r]
        O = off[r]
        N = O + 1
        age = now - changed[r]
        lag = np.maximum(L - N, 0)
        max_s = f["max_s"][fl]
        prev = c.prev_leo[r]
        pt = c.prev_t[r]
        caught = N >= L
        behind = ~caught

        # Time lag (KIP-16) and freshness.
        lcu = c.last_caught_up[r]
        lcu[caught] = t
        step = behind & c.has_prev_leo[r] & (N >= prev)  # all that existed at the previous poll is copied
        moved = step & (np.isnan(lcu) | (lcu < pt))
        lcu[moved] = pt[moved]
        fresh = np.zeros(r.size)
        lower = np.zeros(r.size, bool)
        with np.errstate(divide="ignore", invalid="ignore"):
            fast = now - (pt + (N + 1 - prev) * (t - pt) / (L - prev))
        fresh[step] = np.where(fast[step] < 0.0, 0.0, fast[step])
        look = behind & ~step
        if look.any():
            fresh[look], lower[look] = self._lookup(c, r[look], N[look], now, f_points[fl[look]])
        first = c.first_seen_t[r]
        since = np.where(np.isnan(lcu), first, lcu)
        unset = behind & np.isnan(since)
        first[unset] = t
        since[unset] = t
        time_lag = np.where(caught, 0.0, now - since)
        c.last_caught_up[r] = lcu
        c.first_seen_t[r] = first
        c.prev_leo[r] = L
        c.has_prev_leo[r] = True
        c.prev_t[r] = t

        # Rewinds (Burrow's REWIND): the LRO stepped back.
        seen = c.lro_seen[r]
        has_seen = c.has_lro_seen[r]
        mark = c.rewind_mark[r]
        has_mark = c.has_rewind_mark[r]
        rewound = has_seen & (O < seen)
        mark = np.where(rewound & ~(has_mark & (mark >= seen)), seen, mark)
        regained = ~rewound & has_mark & (O >= mark)
        has_mark = (has_mark | rewound) & ~regained
        c.rewind_mark[r] = mark
        c.has_rewind_mark[r] = has_mark
        c.lro_seen[r] = O
        c.has_lro_seen[r] = True
        if rewound.any():
            counts = np.bincount(fl[rewound], minlength=len(self._flow_list))
            for i in np.flatnonzero(counts).tolist():
                flow = self._flow_list[i].flow
                self.rewinds_total[flow] = self.rewinds_total.get(flow, 0) + int(counts[i])
            rw = r[rewound]
            c.ca_x[rw] = c.cb_x[rw] = O[rewound]
            c.ca_t[rw] = c.cb_t[rw] = now

        # Rates (rates.RatePair.update).
        b_t = c.lb_t[r]
        new = np.isnan(b_t)
        rn = r[new]
        c.la_x[rn] = c.lb_x[rn] = L[new]
        c.la_t[rn] = c.lb_t[rn] = t
        c.ca_x[rn] = c.cb_x[rn] = O[new]
        c.ca_t[rn] = c.cb_t[rn] = now
        shift = ~new & ((t - b_t) >= f["rate_half_s"][fl])
        rs = r[shift]
        c.la_x[rs] = c.lb_x[rs]
        c.la_t[rs] = b_t[shift]
        c.lb_x[rs] = L[shift]
        c.lb_t[rs] = t
        c.ca_x[rs] = c.cb_x[rs]
        c.ca_t[rs] = c.cb_t[rs]
        c.cb_x[rs] = O[shift]
        c.cb_t[rs] = now
        span_a = t - c.la_t[r]
        span_c = now - c.ca_t[r]
        a_valid = ~new & (span_a > 0.0)
        c_valid = ~new & (span_c > 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            append_rate = (L - c.la_x[r]) / span_a
            copy_rate = (O - c.ca_x[r]) / span_c
            gaining = behind & a_valid & c_valid & (copy_rate > append_rate)
            catch_up = np.where(caught, 0.0, lag / (copy_rate - append_rate))
        catch_valid = caught | gaining
        mean = f_bytes[fl]
        sized = ~np.isnan(mean)
        # Clipped to int64 as the snapshot clips LagEngine's exact ints (a cast past it wraps).
        estimate = np.rint(lag * np.where(sized, mean, 0.0))
        past = estimate >= _INT64_CEILING
        byte_lag = np.where(caught | ~sized | past, 0, estimate).astype(np.int64)
        byte_lag[past] = np.iinfo(np.int64).max

        # Retention.
        has_ls = c.has_log_start[r]
        ls = c.log_start[r]
        lost = ls - N
        gone_records = has_ls & (lost > 0)
        counted = c.lost_through[r]
        newly = gone_records & (ls > counted)
        if newly.any():
            since_off = np.where(N > counted, N, counted)
            amounts = (ls - since_off)[newly]
            c.lost_through[r[newly]] = ls[newly]
            totals = np.zeros(len(self._flow_list), np.int64)
            np.add.at(totals, fl[newly], amounts)
            for i in np.flatnonzero(totals).tolist():
                flow = self._flow_list[i].flow
                self.records_lost_total[flow] = self.records_lost_total.get(flow, 0) + int(totals[i])
        headroom = has_ls & ~gone_records
        room = np.where(gone_records, 0, -lost)
        ls_rate = c.ls_rate[r]
        closing = np.where(c_valid, ls_rate - copy_rate, ls_rate)
        in_sight = headroom & ~np.isnan(ls_rate) & (ls_rate > 0.0) & (closing > 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            room_s = np.where(gone_records, 0.0, room / closing)
        at_risk = gone_records | (in_sight & (room_s < f["warn_s"][fl]))

        # State.
        state = np.where(has_mark, _CODE[State.REWIND], _CODE[State.IN_SYNC])
        stalled = (lag > 0) & (stale[r] | (age > max_s))
        state = np.where(time_lag > max_s, np.where(stalled, _CODE[State.STALLED], _CODE[State.LAGGING]), state)
        state = np.where(at_risk, _CODE[State.AT_RISK], state)

        out.state[r] = state
        out.record_lag[r] = lag
        out.lag_valid[r] = True
        out.time_lag[r] = time_lag
        out.fresh[r] = fresh
        out.lower[r] = lower
        out.byte_lag[r] = byte_lag
        out.byte_valid[r] = sized
        out.append[r] = append_rate
        out.append_valid[r] = a_valid
        out.copy[r] = copy_rate
        out.copy_valid[r] = c_valid
        out.catch_up[r] = catch_up
        out.catch_valid[r] = catch_valid
        out.room[r] = room
        out.room_s[r] = room_s
        out.room_s_valid[r] = gone_records | in_sight
        out.lost[r] = np.where(gone_records, lost, 0)
        # The window: restarted in the flow's shape if that changed (LagEngine compares the
        # shape objects), then this lag recorded.
        shape = f_shape[fl]
        restart = c.shape[r] != shape
        if restart.any():
            rr = r[restart]
            c.shape[rr] = shape[restart]
            c.w_created[rr] = 0
            c.w_cur[rr] = 0
        self._measure(c, r, now, out, record=lag)

    # -- rare rows, through LagEngine -------------------------------------------------------------

    def _run_rare(self, rows: np.ndarray, obs: PollObservation, gen: int) -> RowColumns:
        ref = self._ref
        keys = [self._keys[i] for i in rows.tolist()]
        parts = [self._load(i, k) for i, k in zip(rows.tolist(), keys)]
        ref._parts = dict(zip(keys, parts))
        ref._order_keys = keys
        ref._order_parts = parts
        ref._gen = gen - 1  # the same update: flows already asked are not asked again
        ref.rewinds_total = {}
        ref.records_lost_total = {}
        leos, lros, starts = obs.leos, obs.lros, obs.log_starts
        snap = ref.update(PollObservation(
            obs.leo_at, obs.now, {k: leos[k] for k in keys},
            {k: r for k in keys if (r := lros.get(k)) is not None},
            {k: v for k in keys if (v := starts.get(k)) is not None},
            obs.mean_record_bytes,
        ))
        for mine, theirs in ((self.rewinds_total, ref.rewinds_total), (self.records_lost_total, ref.records_lost_total)):
            for flow, count in theirs.items():
                mine[flow] = mine.get(flow, 0) + count
        for i, k, part in zip(rows.tolist(), keys, parts):
            self._store(i, k, part)
        return snap.columns

    def _load(self, i: int, key: PartitionKey) -> _Partition:
        """Row i as LagEngine's partition object."""
        c = self._c
        p = object.__new__(_Partition)
        flow = int(c.flow[i])
        fl = self._flow_list[flow]
        p.fl = fl
        sid = int(c.shape[i])
        seen = self._shape_of_flow.get(flow)
        p.shape = fl.shape if seen is not None and seen[1] == sid and seen[0] is fl.shape else (None, sid)
        p._window_s, p._num_samples = self._shapes[sid]
        p._current = int(c.w_cur[i]) * 5
        d: list = []
        for j in range(int(c.w_created[i])):
            d += [float(c.w_start[i, j]), int(c.w_count[i, j]), float(c.w_min[i, j]), float(c.w_max[i, j]),
                  float(c.w_sum[i, j])]
        p._d = d if d else ()
        for name in _INTS:
            setattr(p, name, int(c.a[name][i]))
        for name in _OPTIONAL_INTS:
            if not c.a["has_" + name][i]:
                setattr(p, name, None)
        for name in _FLOATS:
            v = float(c.a[name][i])
            setattr(p, name, None if name in _OPTIONAL_FLOATS and v != v else v)
        p.last_lro = _last_lro(c, i, self._feed_names)
        n = int(c.f_count[i])
        p.f_count = n
        wide = self._wide.get(key)
        if wide is not None:
            p.f_table = wide
        elif n:
            p.f_table = array("I", c.t_leo[i, :n].tolist() + c.t_tick[i, :n].tolist())
        else:
            p.f_table = array("I")
        return p

    def _store(self, i: int, key: PartitionKey, p: _Partition) -> None:
        """LagEngine's partition object back into row i."""
        c = self._c
        flow = int(c.flow[i])
        if p.shape is self._flow_list[flow].shape:
            c.shape[i] = self._shape_id(flow)
        d = p._d
        created = len(d) // 5
        c.w_created[i] = created
        c.w_cur[i] = p._current // 5
        for j in range(created):
            c.w_start[i, j], c.w_count[i, j], c.w_min[i, j], c.w_max[i, j], c.w_sum[i, j] = d[5 * j:5 * j + 5]
        for name in _INTS:
            v = getattr(p, name)
            if name in _OPTIONAL_INTS:
                c.a["has_" + name][i] = v is not None
            c.a[name][i] = 0 if v is None else v
        for name in _FLOATS:
            v = getattr(p, name)
            c.a[name][i] = _NAN if v is None else v
        r = p.last_lro
        code = -1 if r is None else self._feed_code(r.feed)
        c.last_lro_feed[i] = code
        if r is not None:
            c.last_lro_off[i] = r.offset
        tab = p.f_table
        n = p.f_count
        c.f_count[i] = n
        if tab.typecode == "I":
            self._wide.pop(key, None)
            cap = len(tab) >> 1
            # All of LagEngine's points, as the row's width allows (the width only grows, and
            # covers every size configured so far). Not cut to this poll's points + 1: after the
            # configured size shrinks, LagEngine keeps its points until it next adds one, and a
            # size that grows back answers from them; such a row stays rare until then.
            keep = min(n, c.points)
            c.f_count[i] = keep
            c.t_leo[i, :keep] = tab[n - keep:n]
            c.t_tick[i, :keep] = tab[cap + n - keep:cap + n]
        else:
            self._wide[key] = tab

    # -- log starts ------------------------------------------------------------------------------

    @staticmethod
    def _observe_log_starts(c: _Columns, r: np.ndarray, v: np.ndarray, t: float, half_s: np.ndarray) -> None:
        """_Partition.observe_log_start over rows `r` with readings `v`."""
        if not r.size:
            return
        known = c.has_log_start[r]
        old = c.log_start[r]
        c.log_start[r] = v
        c.has_log_start[r] = True
        new_log = ~known | (v < old)
        c.lost_through[r[known & (v < old)]] = 0
        nl = r[new_log]
        c.sa_x[nl] = c.sb_x[nl] = v[new_log]
        c.sa_t[nl] = c.sb_t[nl] = t
        c.ls_rate[nl] = _NAN
        go = ~new_log
        r, v, half_s = r[go], v[go], half_s[go]
        shift = (t - c.sb_t[r]) >= half_s
        s = r[shift]
        c.sa_x[s] = c.sb_x[s]
        c.sa_t[s] = c.sb_t[s]
        c.sb_x[s] = v[shift]
        c.sb_t[s] = t
        span = t - c.sa_t[r]
        with np.errstate(divide="ignore", invalid="ignore"):
            c.ls_rate[r] = np.where(span > 0.0, (v - c.sa_x[r]) / span, _NAN)

    # -- the freshness table -----------------------------------------------------------------------

    @staticmethod
    def _plan_table(c: _Columns, rows: np.ndarray, leo: np.ndarray, t: float, row_flow: np.ndarray,
                    f_points: np.ndarray, f_limit: np.ndarray) -> "_TablePlan":
        """What freshness.add_ticks would do to each row's table, and which rows it cannot be
        done to here (a new log, offsets that no longer fit 32 bits, a table over its limit)."""
        p = _TablePlan()
        p.rows = rows
        p.tick = tick = freshness.to_ticks(t)
        n = c.f_count[rows].astype(np.int64)
        p.cap = f_points[row_flow[rows]]
        p.limit = f_limit[row_flow[rows]]
        p.leo = lv = leo[rows]
        base = c.f_leo0[rows]
        tick0 = c.f_tick0[rows]
        has = n > 0
        p.last_i = last_i = np.maximum(n - 1, 0)
        last_off = c.t_leo[rows, last_i].astype(np.int64)
        last = base + last_off
        same = has & (lv == last)
        back = has & (lv < last)
        idle = same & (n >= 2) & (c.t_leo[rows, np.maximum(n - 2, 0)].astype(np.int64) == last_off)
        p.d = d = tick - tick0
        p.idle = idle & (d >= 0) & (d < _FITS)
        appending = ~p.idle
        p.base = np.where(has, base, lv)
        p.tick0 = np.where(has, tick0, tick)
        p.dl = lv - p.base
        p.dt = tick - p.tick0
        fits = (p.dl < _FITS) & (p.dt >= 0) & (p.dt < _FITS)
        p.n = n
        p.rare = rows[back | (idle & ~p.idle) | (appending & ~fits) | (n > p.limit)]
        return p

    @staticmethod
    def _apply_table(c: _Columns, p: "_TablePlan", keep_rows: np.ndarray) -> None:
        """Carry out the plan on the rows of `keep_rows` (rows of the plan not sent to LagEngine)."""
        keep = np.isin(p.rows, keep_rows)
        r = p.rows[keep]
        if not r.size:
            return
        idle = p.idle[keep]
        c.t_tick[r[idle], p.last_i[keep][idle]] = p.d[keep][idle]
        a = ~idle
        r = r[a]
        n = p.n[keep][a].copy()
        cap = p.cap[keep][a]
        limit = p.limit[keep][a]
        c.f_leo0[r] = p.base[keep][a]
        c.f_tick0[r] = p.tick0[keep][a]
        full = n >= limit
        if full.any():
            # Full: keep the newest cap - 1 points (freshness.trim), so with this one cap remain.
            for cp, lim in set(zip(cap[full].tolist(), limit[full].tolist())):
                sel = full & (cap == cp) & (limit == lim)
                rs = r[sel]
                drop = lim - (cp - 1)
                c.t_leo[rs, :cp - 1] = c.t_leo[rs, drop:lim]
                c.t_tick[rs, :cp - 1] = c.t_tick[rs, drop:lim]
                n[sel] = cp - 1
        c.t_leo[r, n] = p.dl[keep][a]
        c.t_tick[r, n] = p.dt[keep][a]
        c.f_count[r] = n + 1

    @staticmethod
    def _lookup(c: _Columns, r: np.ndarray, nxt: np.ndarray, now: float, cap: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """freshness.lag for rows `r` whose next record to copy is `nxt`: (seconds, lower bound)."""
        n = c.f_count[r].astype(np.int64)
        lo = np.maximum(n - cap, 0)
        width = c.t_leo.shape[1]
        cols = np.arange(width)
        target = nxt - c.f_leo0[r]
        leos = c.t_leo[r].astype(np.int64)
        inside = (cols >= lo[:, None]) & (cols < n[:, None])
        i = lo + ((leos <= target[:, None]) & inside).sum(axis=1)  # bisect_right over [lo, n)
        tick0 = c.f_tick0[r]
        ticks = c.t_tick[r].astype(np.int64)
        at_i = (tick0 + np.take_along_axis(ticks, np.minimum(i, width - 1)[:, None], 1)[:, 0]) / _TICKS
        prev = np.maximum(i - 1, 0)
        t0 = (tick0 + np.take_along_axis(ticks, prev[:, None], 1)[:, 0]) / _TICKS
        l0 = np.take_along_axis(leos, prev[:, None], 1)[:, 0]
        li = np.take_along_axis(leos, np.minimum(i, width - 1)[:, None], 1)[:, 0]
        lower = i == lo
        with np.errstate(divide="ignore", invalid="ignore"):
            at = np.where(lower, (tick0 + np.take_along_axis(ticks, lo[:, None], 1)[:, 0]) / _TICKS,
                          t0 + (nxt + 1 - c.f_leo0[r] - l0) * (at_i - t0) / (li - l0))
        lag = now - at
        lag = np.where(lag > 0.0, lag, 0.0)
        done = i == n  # not appended as of the newest point: caught up
        return np.where(done, 0.0, lag), lower & ~done

    # -- the record-lag window -------------------------------------------------------------------

    def _measure(self, c: _Columns, r: np.ndarray, now: float, out: "_Out", record: np.ndarray | None = None) -> None:
        """WindowedLagStat.measure (or, with `record`, record_and_measure) over rows `r`."""
        if not r.size:
            return
        shapes = self._shapes
        window = np.array([s[0] for s in shapes])[c.shape[r]]
        samples = np.array([s[1] for s in shapes], np.int64)[c.shape[r]]
        width = c.w_start.shape[1]
        if record is not None:
            cur = c.w_cur[r].astype(np.int64)
            created = c.w_created[r].astype(np.int64)
            first = created == 0  # the first record starts sample 0, the current one
            adv = ~first & ((now - c.w_start[r, cur]) >= window)
            i = np.where(adv, (cur + 1) % samples, cur)
            c.w_cur[r] = i
            c.w_created[r] = np.where(first | (adv & (i >= created)), created + 1, created)  # created lazily
            adv |= first
            ra, ia, va = r[adv], i[adv], record[adv].astype(float)
            c.w_start[ra, ia] = now
            c.w_count[ra, ia] = 1
            c.w_min[ra, ia] = va
            c.w_max[ra, ia] = va
            c.w_sum[ra, ia] = va
            st = ~adv
            rs, js, vs = r[st], i[st], record[st].astype(float)
            c.w_count[rs, js] += 1
            c.w_min[rs, js] = np.minimum(c.w_min[rs, js], vs)
            c.w_max[rs, js] = np.maximum(c.w_max[rs, js], vs)
            c.w_sum[rs, js] += vs
        created = c.w_created[r].astype(np.int64)
        cols = np.arange(width)
        exists = cols < created[:, None]
        start = c.w_start[r]
        expired = exists & ((now - start) >= (samples * window)[:, None])
        if expired.any():
            er, ej = np.nonzero(expired)
            rows = r[er]
            c.w_start[rows, ej] = now
            c.w_count[rows, ej] = 0
            c.w_min[rows, ej] = np.inf
            c.w_max[rows, ej] = -np.inf
            c.w_sum[rows, ej] = 0.0
        count = c.w_count[r]
        live = exists & ~expired & (count > 0)
        total_n = np.where(live, count, 0).sum(axis=1)
        total = np.where(live, c.w_sum[r], 0.0).sum(axis=1)
        mn = np.where(live, c.w_min[r], np.inf).min(axis=1)
        mx = np.where(live, c.w_max[r], -np.inf).max(axis=1)
        some = total_n > 0
        out.mn[r] = mn
        out.mx[r] = mx
        with np.errstate(divide="ignore", invalid="ignore"):
            out.av[r] = total / total_n
        out.w_valid[r] = some


def _lro_columns(lros: Mapping[PartitionKey, LroReading], keys: list[PartitionKey]
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, tuple[str, ...]]:
    """The LROs of `keys` as columns (known, offset, changed_at, stale, feed code; 0 and -1
    where unknown) and the feed names the codes index: from the LRO cache's table column-wise,
    from any other Mapping by reading."""
    if isinstance(lros, LroTable):
        return lros.aligned(keys)
    n = len(keys)
    # A missing LRO reads as _NO_READING here, so every row has the four fields.
    # (C-level maps, not comprehensions: 100k partitions a poll.)
    readings = list(map(lros.get, keys, repeat(_NO_READING)))
    has_r = np.fromiter(map(is_not, readings, repeat(_NO_READING)), bool, n)
    feeds = list(map(_FEED, readings))
    names = tuple(dict.fromkeys(feed for feed, known in zip(feeds, has_r.tolist()) if known))
    codes = {name: i for i, name in enumerate(names)}
    feed = np.where(has_r, np.fromiter(map(codes.get, feeds, repeat(-1)), np.int8, n), -1).astype(np.int8)
    return (has_r, np.fromiter(map(_OFFSET, readings), np.int64, n), np.fromiter(map(_CHANGED_AT, readings), float, n),
            np.fromiter(map(_STALE, readings), bool, n), feed, names)


def _last_lro(c: _Columns, i: int, feeds: list[str | None]) -> LroReading | None:
    """Row i's newest LRO as a reading (only its offset and feed are ever read: a GONE row's)."""
    code = int(c.last_lro_feed[i])
    return LroReading(int(c.last_lro_off[i]), feeds[code], 0.0, False) if code >= 0 else None


class _GoneRow(NamedTuple):
    key: PartitionKey
    last_lro: LroReading | None
    log_start: int | None


class _TablePlan:
    """freshness.add_ticks worked out for a set of rows (`_plan_table`), carried out later on
    those not sent to LagEngine (`_apply_table`). Per row: its current count `n`, `cap` and
    `limit` (its flow's points, and points + 1), the new point's `leo`, offsets `dl`/`dt` from
    the bases `base`/`tick0` (new bases where the table is empty), and for an idle stretch
    (`idle`) the new end time's offset `d` at index `last_i`. `rare`: rows the plan cannot serve."""

    rows: np.ndarray
    rare: np.ndarray


class _Out:
    """This poll's row fields for the rows the array code computes."""

    def __init__(self, n: int) -> None:
        self.state = np.zeros(n, np.int8)
        self.mask_measure = np.zeros(n, bool)
        self.record_lag = np.zeros(n, np.int64)
        self.lag_valid = np.zeros(n, bool)
        self.mn = np.zeros(n)
        self.mx = np.zeros(n)
        self.av = np.zeros(n)
        self.w_valid = np.zeros(n, bool)
        self.time_lag = np.zeros(n)
        self.fresh = np.zeros(n)
        self.lower = np.zeros(n, bool)
        self.byte_lag = np.zeros(n, np.int64)
        self.byte_valid = np.zeros(n, bool)
        self.append = np.zeros(n)
        self.append_valid = np.zeros(n, bool)
        self.copy = np.zeros(n)
        self.copy_valid = np.zeros(n, bool)
        self.catch_up = np.zeros(n)
        self.catch_valid = np.zeros(n, bool)
        self.room = np.zeros(n, np.int64)
        self.room_s = np.zeros(n)
        self.room_s_valid = np.zeros(n, bool)
        self.lost = np.zeros(n, np.int64)

    def columns(self, keys: list[PartitionKey], leo: np.ndarray, has_leo: np.ndarray, off: np.ndarray,
                has_r: np.ndarray, feed: np.ndarray, feed_names: tuple[str, ...], now: float, changed: np.ndarray,
                c: _Columns) -> RowColumns:
        """The snapshot's columns, rows in key order (LagEngine's rows replace the rare ones
        afterwards). Arrays of this poll only: the engine's own columns are copied."""
        ordinary = self.lag_valid  # exactly the ordinary rows
        with_start = ordinary & c.has_log_start

        def known(values: np.ndarray, valid: np.ndarray) -> np.ndarray:
            return np.where(valid, values, _NAN)

        return RowColumns(
            keys, self.state,
            {"leo": leo, "lro": off, "record_lag": self.record_lag, "byte_lag_estimate": self.byte_lag,
             "log_start": c.log_start.copy(), "retention_headroom_records": self.room, "records_lost": self.lost},
            {"leo": has_leo, "lro": has_r, "record_lag": ordinary, "byte_lag_estimate": self.byte_valid,
             "log_start": c.has_log_start.copy(), "retention_headroom_records": with_start.copy(),
             "records_lost": with_start},
            {"lro_age_s": known(now - changed, has_r), "record_lag_min": known(self.mn, self.w_valid),
             "record_lag_max": known(self.mx, self.w_valid), "record_lag_avg": known(self.av, self.w_valid),
             "time_lag_s": known(self.time_lag, ordinary), "freshness_lag_s": known(self.fresh, ordinary),
             "append_rate": known(self.append, self.append_valid), "copy_rate": known(self.copy, self.copy_valid),
             "catch_up_s": known(self.catch_up, self.catch_valid), "retention_headroom_s": known(self.room_s, self.room_s_valid)},
            feed, feed_names,
            self.lower)
