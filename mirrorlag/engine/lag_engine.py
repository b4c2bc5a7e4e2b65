"""The lag engine: one PollObservation in, one Snapshot out (docs/design.md §3).

Pure: no I/O, no clock, no threads; every time comes from the observation. One poller calls
`update`. Each rule of docs/design.md §3 is a function over columns in a module named for it (time_lag,
freshness, rewinds, rates, record_lag, retention, states, window); `update` is the list of them
applied in order, to every partition they concern at once. The per-partition memory lives in
`columns.PartitionColumns`, a row per partition in key order.

A partition's row in one poll is one of:
- LEO unreadable: UNKNOWN; nothing is learnt from the gap (the window is measured, not recorded);
- nothing to copy (`[log start, LEO)` empty) and no LRO: IN_SYNC, record lag 0 (MM2 writes no
  sync or commit for a partition it never copied); with an LRO, caught up whatever it says
  (what retention deleted from LRO + 1 uncopied is still counted);
- no LRO yet: UNKNOWN; the LEO history still grows, which freshness needs once an LRO arrives;
- a new log (the topic ID changed, the LEO went backwards, or an LRO known before this LEO
  snapshot lies beyond it, impossible on one log): RESET, with no record lag (the LRO is the old
  log's), and what the old log's state said is forgotten; the poller then drops the old LRO;
- otherwise every rule runs;
- gone from the poll's partitions: GONE, reported once with its last LRO, then dropped.
"""

from __future__ import annotations

from bisect import bisect_left
from itertools import repeat
from operator import is_
from typing import Callable

import numpy as np

from mirrorlag.config.settings import EngineParams
from mirrorlag.engine import freshness, rates, retention, rewinds, time_lag, window
from mirrorlag.engine.columns import PartitionColumns
from mirrorlag.engine.flows import Flows
from mirrorlag.engine.observation import by_row, leo_column, lro_columns, probe_columns
from mirrorlag.engine.record_lag import byte_lag, record_lag
from mirrorlag.engine.states import CODE, states
from mirrorlag.model import FlowId, PartitionKey, PartitionRow, PollObservation, RowColumns, Snapshot, State, rows_in

_ABSENT = object()  # a key the poll's LEO map does not have (None there is an unreadable LEO)


class LagEngine:
    """Turns each poll's LEOs and LROs into per-partition lag rows and states."""

    def __init__(self, params: Callable[[FlowId], EngineParams]) -> None:
        # Asked once per flow per update, so a reloaded config takes effect at the next poll.
        self._flows = Flows(params)
        # The rows' keys, sorted. No key -> row dict is kept: a poll finds its LEOs by these keys
        # in the poll's own LEO map, which also tells whether the partition set changed.
        self._keys: list[PartitionKey] = []
        self._c = PartitionColumns(0, 2, 4)
        self._tables = freshness.Tables()
        self._feed_names: list[str | None] = []  # a row's last_lro_feed code indexes it
        self._feed_codes: dict[str | None, int] = {}
        self._gen = 0
        self.rewinds_total: dict[FlowId, int] = {}  # LRO steps back seen, per flow
        # Records the source deleted before the mirror copied them, per flow, each counted once:
        # proved data, and offsets of unknown kind (a marker may be all they were) apart.
        self.records_lost_total: dict[FlowId, int] = {}
        self.records_lost_unverified_total: dict[FlowId, int] = {}

    def __len__(self) -> int:
        """Partitions currently tracked (those in the previous update's `leos`)."""
        return len(self._keys)

    def update(self, obs: PollObservation) -> Snapshot:
        t, now = obs.leo_at, obs.now
        gen = self._gen = self._gen + 1
        gone: list[PartitionRow] = []
        leos = obs.leos
        found = list(map(leos.get, self._keys, repeat(_ABSENT)))
        if len(leos) != len(found) or any(map(is_, found, repeat(_ABSENT))):
            gone = self._follow(list(leos), gen, obs)
            found = list(map(leos.__getitem__, self._keys))
        keys = self._keys
        # This poll's input as columns, and the flows' parameters for it.
        has_leo, leo = leo_column(found)
        has_r, off, changed, stale, feed, feed_names = lro_columns(obs.lros, keys)
        self._remember_lros(has_r, off, feed, feed_names)
        log_rows, log_values = by_row(obs.log_starts, keys)  # a log start of a key not in the flows is ignored

        flows = self._flows
        asked = np.concatenate([self._c.flow[log_rows], self._c.flow[has_leo]]).astype(np.int64)
        flows.refresh(np.flatnonzero(np.bincount(asked)).tolist(), gen, obs.mean_record_bytes)
        f = flows.columns()
        c = self._c = self._c.grown(int(f.samples.max(initial=0)), int(f.limit.max(initial=0)))
        c.widen("w_count", gen)  # a sample's count grows by at most one an update
        c.widen("shape", len(flows.shapes) - 1)
        flow = c.flow
        # Probed on the source: no data record left in [LRO + 1, LEO) (transaction markers only)
        # is caught up; else the oldest uncopied record's append time.
        no_data, appended_at = probe_columns(obs.oldest_uncopied, keys)
        # Nothing to copy is caught up, whatever the feeds say: an empty [log start, LEO) (MM2
        # writes no sync or commit for a partition it never copied; retention may have emptied a
        # log behind an old LRO). What it deleted uncopied is retention's to judge, from LRO + 1.
        start, has_start = c.log_start, c.has_log_start
        if log_rows.size:  # this poll's log starts, read before they are observed below
            start, has_start = start.copy(), has_start.copy()
            start[log_rows], has_start[log_rows] = log_values, True
        empty = has_leo & ((leo == 0) | (has_start & (start >= leo)))
        nxt = np.where((no_data | empty) & has_leo & has_r, np.maximum(off + 1, leo), off + 1)
        # Per flow and feed (feed -1, none: the last column, 0).
        res_table = np.array([[obs.resolution(name, flows.flow_id(i)) for name in feed_names] + [0.0]
                              for i in range(len(flows))]).reshape(len(flows), len(feed_names) + 1)
        res = res_table[flow, feed]

        # Which rows are on a new log (RESET), and which get every rule.
        went_back = has_leo & c.has_prev_leo & (leo < c.prev_leo)
        renewed = np.zeros(len(keys), bool)
        if obs.new_logs:
            renewed[[i for i in map(self._row_of, obs.new_logs) if i is not None]] = True
        reset = has_leo & (went_back | renewed | (has_r & (nxt > leo) & (changed < t)))
        ordinary = has_leo & has_r & ~reset
        idle = empty & ~has_r & ~reset  # no LRO and nothing to copy: caught up (a new log: from its next poll)

        retention.observe_log_starts(c, log_rows, log_values, t, f.log_start_half_s[flow[log_rows]])
        self._new_log(np.flatnonzero(reset & has_r), log_rows, t, first_seen=t)
        self._new_log(np.flatnonzero(reset & ~has_r), log_rows, t, first_seen=np.nan)
        unread = np.flatnonzero(renewed & ~has_leo)  # recreated, its LEO unreadable: UNKNOWN, on the new log
        self._new_log(unread, log_rows, t, first_seen=np.nan)
        c.has_prev_leo[unread] = False
        with_leo = np.flatnonzero(has_leo)
        self._tables.add(c, keys, with_leo, leo[with_leo], t, f.points[flow[with_leo]], f.limit[flow[with_leo]])

        # Every rule, in order, for the rows with an LEO and an LRO on the same log.
        r = np.flatnonzero(ordinary)
        fl, L, lro, N = flow[r], leo[r], off[r], nxt[r]
        lag = record_lag(L, N)
        appended = appended_at[r]
        t_lag, caught, since_prev = time_lag.time_lag(c, r, N, L, appended, t, now)
        asked = np.zeros(r.size, bool)
        if obs.unprobed:
            asked = np.fromiter(map(obs.unprobed.__contains__, (keys[i] for i in r.tolist())), bool, r.size)
        t_lower = time_lag.unproved(c, r, ~caught, appended, asked)
        fresh = np.zeros(r.size)
        lower = np.zeros(r.size, bool)
        fresh[since_prev] = freshness.between_polls(c.prev_leo[r[since_prev]], c.prev_t[r[since_prev]],
                                                    L[since_prev], N[since_prev], t, now)
        look = ~caught & ~since_prev
        fresh[look], lower[look] = self._tables.lag(c, keys, r[look], N[look], now, f.points[fl[look]])
        # Older than the table: the probed append time says exactly when, where there is one.
        exact = lower & ~np.isnan(appended)
        fresh[exact] = np.maximum(now - appended[exact], 0.0)
        lower[exact] = False
        z = np.flatnonzero(idle)
        self._tables.prune(c, keys, np.concatenate([r, z]), np.concatenate([N, leo[z]]))  # what no later answer reads
        time_lag.time_lag(c, z, leo[z], leo[z], np.full(z.size, np.nan), t, now)  # caught up at t
        time_lag.remember(c, with_leo, leo[with_leo], t)
        rewound, back = rewinds.rewinds(c, r, lro)
        self._count(self.rewinds_total, fl[back], np.ones(int(back.sum()), np.int64))
        rates.restart_copy(c, r[back], lro[back], now)
        append, append_known, copy, copy_known = rates.rates(c, r, L, lro, t, now, f.rate_half_s[fl])
        catch_up, catch_up_known = rates.catch_up_s(lag, append, append_known, copy, copy_known)
        bytes_behind, sized = byte_lag(np.concatenate([lag, np.zeros(z.size, np.int64)]),
                                       f.mean_bytes[np.concatenate([fl, flow[z]])])
        proof_rows, proof_at = by_row(obs.first_data, keys)
        proof = ordinary[proof_rows]  # about this log's LRO + 1
        proof_rows, proof_at = proof_rows[proof], proof_at[proof]
        proof_to = proof_at + 1  # the first data record alone, where no run was proved
        if obs.data_to and proof_rows.size:
            ran, run_to = leo_column(list(map(obs.data_to.get, map(keys.__getitem__, proof_rows.tolist()))))
            proof_to = np.where(ran & (run_to > proof_at), run_to, proof_to)
        retention.prove_data(c, proof_rows, proof_at, proof_to)
        # An emptied log is judged from LRO + 1, but for what the probe proved no data (N is then past it).
        head = retention.headroom(c, r, np.where(empty[r] & ~no_data[r], lro + 1, N), lag, copy, copy_known,
                                  f.warn_s[fl])
        self._count(self.records_lost_total, fl, head.newly_lost)
        self._count(self.records_lost_unverified_total, fl, head.newly_unverified)
        state = states(head.at_risk, t_lag, f.max_s[fl], res[r], lag, stale[r], now - changed[r], rewound, t_lower)

        rz = np.concatenate([r, z])  # the rows whose record lag is known: a sample each
        window.restart(c, rz, f.shape[flow[rz]])
        shape_window, shape_samples = flows.shape_columns()
        window.record(c, rz, np.concatenate([lag, np.zeros(z.size, np.int64)]), now,
                      shape_window[c.shape[rz]], shape_samples[c.shape[rz]])
        every = np.arange(len(keys))
        w_min, w_max, w_avg, w_known = window.measure(c, every, now, shape_window[c.shape], shape_samples[c.shape])

        n = len(keys)
        codes = np.full(n, CODE[State.UNKNOWN], np.int8)
        codes[reset] = CODE[State.RESET]
        codes[r] = state
        codes[z] = CODE[State.IN_SYNC]
        lags = np.zeros(n, np.int64)
        lags[r] = lag

        def at_r(values: np.ndarray, dtype: type = float) -> np.ndarray:
            out = np.zeros(n, dtype)
            out[r] = values
            return out

        def at_rz(values: np.ndarray, dtype: type) -> np.ndarray:
            out = np.zeros(n, dtype)
            out[rz] = values
            return out

        def known_at_r(values: np.ndarray, known: np.ndarray | None = None, idle_value: float = np.nan) -> np.ndarray:
            out = np.full(n, np.nan)
            out[r] = values if known is None else np.where(known, values, np.nan)
            out[z] = idle_value
            return out

        retained = at_r(head.known, bool)
        retained[z] = c.has_log_start[z]  # nothing to copy: nothing at risk, nothing lost (0s)
        cols = RowColumns(
            keys, codes,
            {"leo": leo, "lro": off, "record_lag": lags, "byte_lag_estimate": at_rz(bytes_behind, np.int64),
             "log_start": c.log_start.copy(), "retention_headroom_records": at_r(head.room, np.int64),
             "records_lost": at_r(head.lost, np.int64),
             "records_lost_unverified": at_r(head.unverified, np.int64)},
            {"leo": has_leo, "lro": has_r, "record_lag": ordinary | idle, "byte_lag_estimate": at_rz(sized, bool),
             "log_start": c.has_log_start.copy(), "retention_headroom_records": retained,
             "records_lost": retained, "records_lost_unverified": retained},
            {"lro_age_s": np.where(has_r, now - changed, np.nan),
             "record_lag_min": np.where(w_known, w_min, np.nan), "record_lag_max": np.where(w_known, w_max, np.nan),
             "record_lag_avg": np.where(w_known, w_avg, np.nan),
             "time_lag_s": known_at_r(t_lag, idle_value=0.0), "freshness_lag_s": known_at_r(fresh, idle_value=0.0),
             "append_rate": known_at_r(append, append_known), "copy_rate": known_at_r(copy, copy_known),
             "catch_up_s": known_at_r(catch_up, catch_up_known, idle_value=0.0),
             "retention_headroom_s": known_at_r(head.room_s, head.room_s_known)},
            feed, feed_names, at_r(lower, bool), at_r(t_lower, bool))
        if gone:
            cols = cols + RowColumns.from_rows(gone)
        return Snapshot.of(now, cols.lean())  # held between polls: constant columns as one value

    def _row_of(self, key: PartitionKey) -> int | None:
        i = bisect_left(self._keys, key)  # the keys are sorted
        return i if i < len(self._keys) and self._keys[i] == key else None

    def _new_log(self, r: np.ndarray, log_rows: np.ndarray, t: float, first_seen: float) -> None:
        """Rows `r` are on a new log (recreated or truncated): what the old log's state says is
        forgotten by every rule; a log start read this poll is the new log's."""
        if not r.size:
            return
        time_lag.forget(self._c, r, first_seen)
        rewinds.forget(self._c, r)
        rates.forget(self._c, r)
        retention.forget(self._c, r, np.isin(r, log_rows), t)
        self._tables.clear(self._c, self._keys, r)

    def _remember_lros(self, has_r: np.ndarray, off: np.ndarray, feed: np.ndarray, feed_names: tuple[str, ...]) -> None:
        """The newest LRO of each row, which its GONE row reports."""
        if not has_r.any():
            return
        c = self._c
        c.last_lro_off[has_r] = off[has_r]
        codes = np.array([self._feed_code(name) for name in feed_names], np.int64)
        c.last_lro_feed[has_r] = codes[feed[has_r]]

    def _feed_code(self, name: str | None) -> int:
        code = self._feed_codes.get(name)
        if code is None:
            code = self._feed_codes[name] = len(self._feed_names)
            self._feed_names.append(name)
            self._c.widen("last_lro_feed", code)
        return code

    def _count(self, totals: dict[FlowId, int], flow_rows: np.ndarray, amounts: np.ndarray) -> None:
        """Add per-row `amounts` to per-flow `totals`."""
        if not amounts.any():
            return
        sums = np.zeros(len(self._flows), np.int64)
        np.add.at(sums, flow_rows, amounts)
        for i in np.flatnonzero(sums).tolist():
            flow = self._flows.flow_id(i)
            totals[flow] = totals.get(flow, 0) + int(sums[i])

    def _follow(self, keys: list[PartitionKey], gen: int, obs: PollObservation) -> list[PartitionRow]:
        """A changed partition set: kept rows move, new ones start empty. Returns the GONE rows of
        the partitions that left (in key order), with their last LRO (this poll's if it has one)."""
        order = sorted(keys)
        # Array operations, not a tuple per kept row or a dict of every key: a topology change
        # would otherwise make and drop several small objects per partition.
        was = rows_in(self._keys, order)
        kept = np.zeros(len(self._keys), bool)
        kept[was[was >= 0]] = True
        old = self._c
        flows = self._flows
        gone = []
        for i in np.flatnonzero(~kept).tolist():  # in key order: the rows are sorted
            key = self._keys[i]
            r = obs.lros.get(key)
            code = int(old.last_lro_feed[i])
            offset, feed = (r.offset, r.feed) if r is not None else \
                (int(old.last_lro_off[i]), self._feed_names[code]) if code >= 0 else (None, None)
            gone.append(PartitionRow(key, State.GONE, None, offset, feed, None, None, None, None, None, None,
                                     log_start=int(old.log_start[i]) if old.has_log_start[i] else None))
        self._tables.forget([self._keys[i] for i in np.flatnonzero(~kept).tolist()])
        new_rows = np.flatnonzero(was >= 0)
        fresh = np.flatnonzero(was < 0)
        flow = np.empty(len(order), np.int64)
        flow[new_rows] = old.flow[was[new_rows]]
        flow[fresh] = [flows.index(order[i].flow) for i in fresh.tolist()]
        flows.refresh(np.flatnonzero(np.bincount(flow[fresh])).tolist(), gen, obs.mean_record_bytes)
        c = self._c = old.moved(len(order), was[new_rows], new_rows, old.samples, old.points)
        c.widen("flow", len(flows) - 1)
        c.widen("shape", len(flows.shapes) - 1)
        c.flow[:] = flow
        c.shape[fresh] = flows.columns().shape[flow[fresh]]
        self._keys = order
        return gone
