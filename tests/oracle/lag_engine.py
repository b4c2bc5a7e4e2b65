"""The oracle lag engine: docs/design.md §3 as a plain loop over partitions, one rule after another.

Written to be read beside docs/design.md §3, not to be fast: each partition is an object holding its
record-lag window, its freshness table, its rate checkpoints and its log start, and each poll
walks the partitions in key order. mirrorlag.engine.LagEngine must give exactly these snapshots
and counters (tests/unit/test_engine_vs_oracle.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

from mirrorlag.config.settings import EngineParams
from mirrorlag.model import FlowId, LroReading, PartitionKey, PartitionRow, PollObservation, Snapshot, State
from tests.oracle import freshness
from tests.oracle.rates import RatePair, WindowRate, catch_up_s
from tests.oracle.retention import headroom_records, headroom_s, log_start_window_s, records_lost, split_deleted
from tests.oracle.sampled_stat import WindowedLagStat


class _Flow:
    """One flow's parameters, asked for at most once per update."""

    def __init__(self, flow: FlowId) -> None:
        self.flow = flow
        self.gen = -1  # the update that last asked; -1: never
        self.p = EngineParams()
        # The window's (window_s, num_samples): a new object whenever they change, so a window
        # built in an older shape restarts (even if the shape has since changed back).
        self.shape: tuple[float, int] = (0.0, 0)
        self.mean_bytes: float | None = None

    def refresh(self, params: Callable[[FlowId], EngineParams], gen: int, sizes: Mapping[FlowId, float]) -> None:
        if self.gen == gen:
            return
        self.p = params(self.flow)
        if self.shape != (self.p.sample_window_s, self.p.num_samples):
            self.shape = (self.p.sample_window_s, self.p.num_samples)
        self.mean_bytes = sizes.get(self.flow)
        self.gen = gen

    @property
    def points(self) -> int:
        return max(2, self.p.freshness_points)  # interpolation needs two points

    @property
    def rate_window_s(self) -> float:
        return self.p.sample_window_s * self.p.num_samples


@dataclass
class _Partition:
    fl: _Flow
    window: WindowedLagStat
    shape: tuple[float, int]  # the flow's shape object the window was built in
    table: freshness.Table = field(default_factory=freshness.new_table)
    prev: tuple[int, float] | None = None  # the previous LEO snapshot (L_prev, t_prev)
    last_caught_up: float | None = None
    first_seen: float | None = None  # the first poll with an LEO and an LRO, never caught up since
    last_lro: LroReading | None = None  # the GONE row reports it
    lro_seen: int | None = None  # the last LRO on this log
    rewind_mark: int | None = None  # the LRO before a step back, until regained
    rates: RatePair | None = None  # None until a poll with both an LEO and an LRO on this log
    log_start: int | None = None
    log_start_rate: WindowRate | None = None
    ls_rate: float | None = None
    lost_through: int = 0  # lost offsets below this were counted
    data_from: int | None = None  # the first data record at or after LRO + 1, where a probe proved it
    data_to: int | None = None  # every offset in [data_from, data_to) a data record (the probe's run)
    # What proves a time lag counted from the first look: 0 nothing asked, 1 the probe asked to
    # date record LRO + 1 has not answered on this log, 2 it answered.
    proof: int = 0

    def observe_log_start(self, value: int, t: float) -> None:
        known = self.log_start
        self.log_start = value
        if known is None or value < known:
            # A first reading, or the log start went back: a new log, whose offsets restart.
            if known is not None:
                self.lost_through = 0
            self.log_start_rate = WindowRate(value, t)
            self.ls_rate = None
            return
        self.ls_rate = self.log_start_rate.update(value, t, log_start_window_s(self.fl.rate_window_s, self.fl.p.retention_warn_s))

    def new_log(self, read_now: bool, t: float, first_seen: float | None) -> None:
        """Recreated or truncated: forget what belonged to the old log."""
        self.last_caught_up = None
        self.first_seen = first_seen
        self.proof = 0
        self.lro_seen = self.rewind_mark = None
        freshness.clear(self.table)
        self.rates = None
        self.lost_through = 0
        self.data_from = self.data_to = None
        self.ls_rate = None
        if read_now:
            self.log_start_rate = WindowRate(self.log_start, t)
        else:
            self.log_start = None


def _row(key: PartitionKey, state: State, leo: int | None, r: LroReading | None, now: float,
         window: tuple, log_start: int | None, **more) -> PartitionRow:
    mn, mx, av = window
    return PartitionRow(key, state, leo, r and r.offset, r and r.feed, None if r is None else now - r.changed_at,
                        more.pop("record_lag", None), mn, mx, av, more.pop("time_lag_s", None), log_start=log_start,
                        **more)


class LagEngine:
    def __init__(self, params: Callable[[FlowId], EngineParams]) -> None:
        self._params = params
        self._parts: dict[PartitionKey, _Partition] = {}
        self._flows: dict[FlowId, _Flow] = {}
        self._gen = 0
        self.rewinds_total: dict[FlowId, int] = {}
        self.records_lost_total: dict[FlowId, int] = {}
        self.records_lost_unverified_total: dict[FlowId, int] = {}

    def __len__(self) -> int:
        return len(self._parts)

    def _flow(self, flow: FlowId) -> _Flow:
        fl = self._flows.get(flow)
        if fl is None:
            fl = self._flows[flow] = _Flow(flow)
        return fl

    def update(self, obs: PollObservation) -> Snapshot:
        t, now, gen = obs.leo_at, obs.now, self._gen + 1
        self._gen = gen
        sizes = obs.mean_record_bytes

        gone = [(key, self._parts.pop(key)) for key in sorted(k for k in self._parts if k not in obs.leos)]
        for key in obs.leos:
            if key not in self._parts:
                fl = self._flow(key.flow)
                fl.refresh(self._params, gen, sizes)
                self._parts[key] = _Partition(fl, WindowedLagStat(fl.p.sample_window_s, fl.p.num_samples), fl.shape)

        for key, value in obs.log_starts.items():
            part = self._parts.get(key)
            if part is not None:  # else not in the flows
                part.fl.refresh(self._params, gen, sizes)
                part.observe_log_start(value, t)

        rows = [self._partition(key, self._parts[key], obs) for key in sorted(self._parts)]
        for key, part in gone:
            r = obs.lros.get(key) or part.last_lro
            rows.append(PartitionRow(key, State.GONE, None, r and r.offset, r and r.feed, None, None, None, None,
                                     None, None, log_start=part.log_start))
        return Snapshot(now, tuple(rows))

    @staticmethod
    def _window(part: _Partition) -> WindowedLagStat:
        """The record-lag window, restarted if the flow's window config changed."""
        fl = part.fl
        if part.shape is not fl.shape:
            part.window = WindowedLagStat(fl.p.sample_window_s, fl.p.num_samples)
            part.shape = fl.shape
        return part.window

    def _partition(self, key: PartitionKey, part: _Partition, obs: PollObservation) -> PartitionRow:
        t, now = obs.leo_at, obs.now
        leo = obs.leos[key]
        r = obs.lros.get(key)
        if r is not None:
            part.last_lro = r
        if leo is None:
            # LEO unreadable: unknown, and nothing is learnt from the gap (but a recreated topic
            # is a new log all the same).
            if key in obs.new_logs:
                part.new_log(key in obs.log_starts, t, first_seen=None)
                part.prev = None
            return _row(key, State.UNKNOWN, None, r, now, part.window.measure(now), part.log_start)

        fl = part.fl
        fl.refresh(self._params, self._gen, obs.mean_record_bytes)
        # A new log: the topic was recreated (its ID changed) or the log went backwards.
        new_log = key in obs.new_logs or (part.prev is not None and leo < part.prev[0])
        prev = part.prev
        # Nothing to copy: an empty [log start, LEO) is caught up, with or without an LRO.
        empty = leo == 0 or (part.log_start is not None and part.log_start >= leo)
        if r is None:
            if new_log:
                part.new_log(key in obs.log_starts, t, first_seen=None)
            part.prev = (leo, t)
            freshness.add(part.table, leo, t, fl.points)  # freshness needs the history once an LRO arrives
            if new_log or not empty:
                state = State.RESET if new_log else State.UNKNOWN
                return _row(key, state, leo, None, now, part.window.measure(now), part.log_start)
            part.last_caught_up = t
            freshness.prune(part.table, leo)
            window = self._window(part).record_and_measure(0, now)
            return _row(key, State.IN_SYNC, leo, None, now, window, part.log_start, record_lag=0, time_lag_s=0.0,
                        freshness_lag_s=0.0, byte_lag_estimate=None if fl.mean_bytes is None else 0, catch_up_s=0.0,
                        **dict.fromkeys(("retention_headroom_records", "records_lost", "records_lost_unverified"),
                                        None if part.log_start is None else 0))

        # The source probe at LRO + 1: no data record left (transaction markers only) is caught
        # up; else when the oldest uncopied record was appended.
        probed = obs.oldest_uncopied.get(key, ...)
        nxt = max(r.offset + 1, leo) if probed is None or empty else r.offset + 1
        # What retention judges: the offsets from LRO + 1 it deleted uncopied, also where what
        # is left holds nothing to copy (but not those the probe proved no data).
        first = r.offset + 1 if empty and probed is not None else nxt
        appended_at = probed if isinstance(probed, float) else None
        lag = max(0, leo - nxt)
        if new_log or (nxt > leo and r.changed_at < t):
            # RESET (or an LRO known before this LEO snapshot lies beyond it, impossible on one
            # log): the LRO is the old log's, so no lag; time lag restarts from this poll.
            part.new_log(key in obs.log_starts, t, first_seen=t)
            part.prev = (leo, t)
            freshness.add(part.table, leo, t, fl.points)
            return _row(key, State.RESET, leo, r, now, part.window.measure(now), part.log_start)

        freshness.add(part.table, leo, t, fl.points)

        # Time lag (KIP-16) and freshness.
        if nxt >= leo:
            part.last_caught_up = t
            time_lag, fresh, lower = 0.0, 0.0, False
        else:
            if prev is not None and nxt >= prev[0]:
                # Everything that existed at the previous poll is copied; record nxt was appended
                # since, while the LEO went from L_prev to leo: interpolate on the polls' times.
                p_leo, p_t = prev
                if part.last_caught_up is None or part.last_caught_up < p_t:
                    part.last_caught_up = p_t
                fresh = max(0.0, now - (p_t + (nxt + 1 - p_leo) * (t - p_t) / (leo - p_leo)))
                lower = False
            else:
                fresh, lower = freshness.lag(part.table, nxt, now, fl.points)
                if lower and appended_at is not None:  # older than the table: the record says when
                    fresh, lower = max(now - appended_at, 0.0), False
            if part.last_caught_up is None:
                if part.first_seen is None:
                    part.first_seen = t
                if appended_at is not None and appended_at < part.first_seen:
                    # Record LRO + 1 has waited uncopied since then: not caught up at any time after.
                    part.first_seen = appended_at
            since = part.first_seen if part.last_caught_up is None else part.last_caught_up
            time_lag = now - since
            # Never seen caught up, and the probe asked to date record LRO + 1 has not answered:
            # the time lag counts from the first look, a lower bound (docs/design.md §3).
            if key in obs.unprobed and part.proof == 0:
                part.proof = 1
            if appended_at is not None:
                part.proof = 2
        unproved = nxt < leo and part.proof == 1 and part.last_caught_up is None
        freshness.prune(part.table, nxt)
        part.prev = (leo, t)

        # Rewinds.
        if part.lro_seen is not None and r.offset < part.lro_seen:
            if part.rewind_mark is None or part.rewind_mark < part.lro_seen:
                part.rewind_mark = part.lro_seen
            self.rewinds_total[key.flow] = self.rewinds_total.get(key.flow, 0) + 1
            if part.rates is not None:
                part.rates.restart_copy(r.offset, now)
        elif part.rewind_mark is not None and r.offset >= part.rewind_mark:
            part.rewind_mark = None
        part.lro_seen = r.offset

        # Rates, catch-up and byte lag.
        if part.rates is None:
            part.rates = RatePair(leo, t, r.offset, now)
            append_rate = copy_rate = None
        else:
            append_rate, copy_rate = part.rates.update(leo, t, r.offset, now, fl.rate_window_s)
        catch_up = catch_up_s(lag, copy_rate, append_rate)
        byte_lag = None if fl.mean_bytes is None else round(lag * fl.mean_bytes)

        # Retention. Lost means data: deleted offsets count as lost records where a probe proved
        # them data records (the first at or after LRO + 1 and the run received after it); below
        # it they are markers (never lost); past the run or with no proof, unverified (counted
        # apart, no AT_RISK from them).
        if key in obs.first_data:
            part.data_from = obs.first_data[key]
            run_to = obs.data_to.get(key)
            part.data_to = run_to if run_to is not None and run_to > part.data_from else part.data_from + 1
        if part.data_from is not None and part.data_to is not None:
            if part.data_to <= first:  # the LRO passed the run: no longer a proof
                part.data_from = part.data_to = None
            elif part.data_from < first:  # the LRO inside the run: the rest of it is still data
                part.data_from = first
        if part.log_start is None:
            room = room_s = lost = unverified = None
            at_risk = False
        else:
            # Offsets from LRO + 1 below the log start were deleted uncopied (none where the
            # probe proved no data left: `first` is then past the LEO).
            gone = records_lost(part.log_start, first)
            lost, unverified = split_deleted(first, part.log_start, first, part.data_from, part.data_to) if gone else (0, 0)
            room = headroom_records(part.log_start, first)
            room_s = headroom_s(room, lost, part.ls_rate, copy_rate) if lag or lost else None
            at_risk = lost > 0 or (room_s is not None and room_s < fl.p.retention_warn_s)
            if gone > 0:  # each deleted offset is counted once, as lost or as unverified
                since = max(first, part.lost_through)
                counted, unseen = split_deleted(since, part.log_start, first, part.data_from, part.data_to)
                if counted:
                    self.records_lost_total[key.flow] = self.records_lost_total.get(key.flow, 0) + counted
                if unseen:
                    total = self.records_lost_unverified_total
                    total[key.flow] = total.get(key.flow, 0) + unseen
                part.lost_through = max(part.lost_through, part.log_start)

        # State: out of sync past max plus the resolution of the winning feed's evidence.
        res = obs.resolution(r.feed, key.flow)
        limit = fl.p.lag_time_max_s + res
        if at_risk:
            state = State.AT_RISK
        elif time_lag > limit:
            # Not moving: unmoved for longer than the limit, or stale where evidence moves every poll.
            stalled = lag > 0 and (now - r.changed_at > limit or (r.stale and res == 0.0))
            state = State.STALLED if stalled else State.LAGGING
        elif unproved:  # a lower bound under the limit proves nothing: never IN_SYNC
            state = State.UNKNOWN
        elif part.rewind_mark is not None:
            state = State.REWIND
        else:
            state = State.IN_SYNC

        window = self._window(part).record_and_measure(lag, now)
        return _row(key, state, leo, r, now, window, part.log_start, record_lag=lag, time_lag_s=time_lag,
                    freshness_lag_s=fresh, freshness_lower_bound=lower, byte_lag_estimate=byte_lag,
                    time_lag_lower_bound=unproved,
                    append_rate=append_rate, copy_rate=copy_rate, catch_up_s=catch_up,
                    retention_headroom_records=room, retention_headroom_s=room_s, records_lost=lost,
                    records_lost_unverified=unverified)
