"""The lag engine: one PollObservation in, one Snapshot out (DESIGN §3).

Pure: no I/O, no clock, no threads. Every time comes from the observation, so the whole state
machine is testable without a broker. It is not thread-safe; one poller calls `update`.

Per partition it remembers only what §3 needs across polls: the previous LEO snapshot
(L_prev, t_prev), the last time it was seen caught up, the first poll that had both an LEO and
an LRO (the lower bound for a partition never seen caught up), the last LRO reading (for the
GONE row), the windowed record-lag stat, the (LEO, time) table behind freshness lag, two
checkpoints of the LEO and the LRO for the append and copy rates, and the last known log start
with two checkpoints for its rate and how far lost records were counted.

It runs over 100k partitions per poll, so the hot loop is written for it: per-partition state
lives in one slotted object (no per-partition sub-objects for the collector to traverse), the
common cases of the freshness table and of the rate trackers are inlined (the modules keep the
reference code, and property tests check the engine agrees with it), and rows are built as
tuples directly (the Snapshot turns them into columns).

The poller runs ColumnarLagEngine (columnar.py), which keeps the same state in flat columns and
computes the common cases for all partitions at once; this class is its reference (a property
test holds the two equal) and runs its rare rows.
"""

from __future__ import annotations

from typing import Callable, Mapping

from mirrorlag.config.settings import EngineParams
from tests.oracle import freshness
from tests.oracle.retention import log_start_window_s
from tests.oracle.sampled_stat import WindowedLagStat
from mirrorlag.model import (
    FlowId,
    LroReading,
    PartitionKey,
    PartitionRow,
    PollObservation,
    Snapshot,
    State,
)


class _Flow:
    """One flow's engine parameters, fetched once per update that has partitions of it (so a
    flow that left the config, with no partitions left, is never asked for). A handful exist."""

    __slots__ = (
        "flow", "gen", "max_s", "window_s", "num_samples", "shape", "rate_half_s", "points",
        "points_limit", "warn_s", "log_start_half_s", "mean_bytes",
    )

    def __init__(self, flow: FlowId) -> None:
        self.flow = flow
        self.gen = -1  # the update that last fetched params; -1: never
        self.max_s = 0.0
        self.window_s = 0.0
        self.num_samples = 0
        # (window_s, num_samples), a new object only when they change: one identity test per
        # partition tells whether its window must restart.
        self.shape: tuple[float, int] = (0.0, 0)
        self.rate_half_s = 0.0
        self.points = 2
        self.points_limit = 3
        self.warn_s = 0.0
        self.log_start_half_s = 0.0
        self.mean_bytes: float | None = None

    def refresh(
        self, params: Callable[[FlowId], EngineParams], gen: int, sizes: Mapping[FlowId, float]
    ) -> None:
        p = params(self.flow)
        self.max_s = p.lag_time_max_s
        self.window_s = p.sample_window_s
        self.num_samples = p.num_samples
        if self.shape != (p.sample_window_s, p.num_samples):
            self.shape = (p.sample_window_s, p.num_samples)
        # Rates span about the window stats' metrics.num.samples x sample.window.ms; their base
        # checkpoint moves every half of it (rates.WindowRate).
        rate_window_s = p.sample_window_s * p.num_samples
        self.rate_half_s = rate_window_s * 0.5
        self.points = max(2, p.freshness_points)  # interpolation needs two points
        self.points_limit = self.points + freshness.slack(self.points)
        self.warn_s = p.retention_warn_s
        self.log_start_half_s = log_start_window_s(rate_window_s, p.retention_warn_s) * 0.5
        self.mean_bytes = sizes.get(self.flow)
        self.gen = gen


class _Partition(WindowedLagStat):
    """What the engine remembers of one partition between polls: its record-lag window (it *is*
    the WindowedLagStat, which saves an object and a pointer hop per partition) plus the state of
    DESIGN §3: time lag, freshness table, rates and retention."""

    __slots__ = (
        "fl", "shape", "prev_leo", "prev_t", "last_caught_up", "first_seen_t", "last_lro",
        "lro_seen", "rewind_mark", "f_table", "f_count", "f_leo0", "f_tick0",
        "la_x", "la_t", "lb_x", "lb_t", "ca_x", "ca_t", "cb_x", "cb_t",
        "log_start", "ls_rate", "sa_x", "sa_t", "sb_x", "sb_t", "lost_through",
    )

    def __init__(self, fl: _Flow) -> None:
        WindowedLagStat.__init__(self, fl.window_s, fl.num_samples)
        self.fl = fl  # shared by the flow's partitions: no per-row FlowId build or dict lookup
        self.shape = fl.shape  # the window shape the stat was built with
        self.prev_leo: int | None = None
        self.prev_t: float = 0.0  # meaningful only while prev_leo is not None
        self.last_caught_up: float | None = None
        self.first_seen_t: float | None = None
        self.last_lro: LroReading | None = None
        self.lro_seen: int | None = None  # the last LRO seen on this log (a RESET starts a new log)
        self.rewind_mark: int | None = None  # the LRO before a step back, until it is regained
        # The freshness table: freshness.Table's fields, kept here rather than in a table object.
        # Its newest point is always (prev_leo, prev_t), the time in whole ticks.
        freshness.clear(self)
        # The append and copy rates: rates.RatePair's checkpoints, the LEO's (at leo_at) and the
        # LRO's (at now). lb_t None: no poll with both on this log yet.
        self.la_x = self.lb_x = self.ca_x = self.cb_x = 0
        self.la_t = self.ca_t = self.cb_t = 0.0
        self.lb_t: float | None = None
        # Retention: the last known log start (None until read on this log), its rate
        # (rates.WindowRate's checkpoints sa/sb), and the end of the lost offsets counted so far.
        self.log_start: int | None = None
        self.ls_rate: float | None = None
        self.sa_x = self.sb_x = 0
        self.sa_t = self.sb_t = 0.0
        self.lost_through = 0

    def observe_log_start(self, value: int, t: float, half_s: float) -> None:
        """A ListOffsets earliest reading taken at about `t` (rates.WindowRate.update, inlined)."""
        known = self.log_start
        self.log_start = value
        if known is None or value < known:
            # First reading on this log, or the log start went back: a new log, whose offsets
            # restart, so neither the rate history nor the lost count carries over.
            if known is not None:
                self.lost_through = 0
            self.sa_x = self.sb_x = value
            self.sa_t = self.sb_t = t
            self.ls_rate = None
            return
        if t - self.sb_t >= half_s:
            self.sa_x = self.sb_x
            self.sa_t = self.sb_t
            self.sb_x = value
            self.sb_t = t
        span = t - self.sa_t
        self.ls_rate = (value - self.sa_x) / span if span > 0.0 else None

    def new_log(self, read_now: bool, t: float) -> None:
        """The LEO went backwards or an old LRO lies beyond it: forget what belonged to the old
        log (LEO history, rates, lost count, log start), keeping a log start read this poll."""
        freshness.clear(self)
        self.lb_t = None
        self.lost_through = 0
        self.ls_rate = None
        if read_now:
            self.sa_x = self.sb_x = self.log_start
            self.sa_t = self.sb_t = t
        else:
            self.log_start = None


class LagEngine:
    """Turns each poll's LEOs and LROs into per-partition lag rows and states."""

    __slots__ = (
        "_params", "_parts", "_flows", "_order_keys", "_order_parts", "_gen", "rewinds_total",
        "records_lost_total",
    )

    def __init__(self, params: Callable[[FlowId], EngineParams]) -> None:
        # Asked once per flow per update, so a reloaded config takes effect at the next poll.
        self._params = params
        self._parts: dict[PartitionKey, _Partition] = {}
        self._flows: dict[FlowId, _Flow] = {}
        # The previous update's keys, sorted, and their partitions: reused while the partition set
        # is unchanged, which is nearly every poll (sorting 100k keys costs ~0.1 s here, and
        # walking the partitions alongside saves a dict lookup per row). Two flat lists rather
        # than (key, partition) pairs: 100k fewer objects for the garbage collector to traverse.
        self._order_keys: list[PartitionKey] = []
        self._order_parts: list[_Partition] = []
        self._gen = 0
        self.rewinds_total: dict[FlowId, int] = {}  # LRO steps back seen, per flow (like Burrow's REWIND)
        # Offsets the source deleted before the mirror copied them, per flow, each counted once.
        self.records_lost_total: dict[FlowId, int] = {}

    def __len__(self) -> int:
        """Partitions currently tracked (those in the previous update's `leos`)."""
        return len(self._parts)

    def update(self, obs: PollObservation) -> Snapshot:
        t = obs.leo_at
        now = obs.now
        leos = obs.leos
        lros_get = obs.lros.get
        log_starts = obs.log_starts
        sizes = obs.mean_record_bytes
        parts = self._parts
        params = self._params
        gen = self._gen = self._gen + 1

        UNKNOWN = State.UNKNOWN
        IN_SYNC = State.IN_SYNC
        LAGGING = State.LAGGING
        STALLED = State.STALLED
        AT_RISK = State.AT_RISK
        RESET = State.RESET
        REWIND = State.REWIND
        rewinds = self.rewinds_total
        lost_total = self.records_lost_total
        Row = PartitionRow
        # Rows are built with tuple.__new__, as PartitionRow(...) does, minus its Python-level
        # argument handling, which costs as much as the rest of a row. Every row names all 21
        # fields (a test checks the length).
        new_row = tuple.__new__
        table_add = freshness.add_ticks
        t_ticks = freshness.to_ticks(t)  # the freshness tables' time for this poll: one int, shared
        FITS = freshness.FITS

        gone: list[tuple[PartitionKey, _Partition]] = []
        if leos.keys() != parts.keys():
            for key in sorted(k for k in parts if k not in leos):
                gone.append((key, parts.pop(key)))
            flows = self._flows
            for key in leos:
                if key not in parts:
                    flow = key.flow
                    fl = flows.get(flow)
                    if fl is None:
                        fl = flows[flow] = _Flow(flow)
                    if fl.gen != gen:
                        fl.refresh(params, gen, sizes)
                    parts[key] = _Partition(fl)
            order_keys = self._order_keys = sorted(parts)
            self._order_parts = [parts[key] for key in order_keys]

        # Log starts come for some partitions only (they are read less often): walk just those.
        parts_get = parts.get
        for key, value in log_starts.items():
            part = parts_get(key)
            if part is not None:  # else not in the flows
                fl = part.fl
                if fl.gen != gen:
                    fl.refresh(params, gen, sizes)
                part.observe_log_start(value, t, fl.log_start_half_s)

        rows: list[PartitionRow] = []
        append = rows.append
        for key, part in zip(self._order_keys, self._order_parts):
            leo = leos[key]
            r = lros_get(key)
            if r is not None:
                part.last_lro = r

            if leo is None:
                # LEO unreadable: unknown, and the time-lag state must not learn from a gap.
                mn, mx, av = part.measure(now)
                if r is None:
                    append(new_row(Row, (key, UNKNOWN, None, None, None, None, None, mn, mx, av, None,
                                         None, False, None, None, None, None, part.log_start,
                                         None, None, None)))
                else:
                    append(new_row(Row, (key, UNKNOWN, None, r.offset, r.feed, now - r.changed_at,
                                         None, mn, mx, av, None, None, False, None, None, None,
                                         None, part.log_start, None, None, None)))
                continue

            fl = part.fl
            if fl.gen != gen:
                fl.refresh(params, gen, sizes)
            prev_leo = part.prev_leo
            went_back = prev_leo is not None and leo < prev_leo

            if r is None:
                if went_back:
                    # A new log: catch-up times and LROs of the old one say nothing about it.
                    part.last_caught_up = None
                    part.first_seen_t = None
                    part.lro_seen = part.rewind_mark = None
                    part.new_log(key in log_starts, t)
                part.prev_leo = leo
                part.prev_t = t
                # The LEO history still grows: freshness needs it once an LRO arrives.
                table_add(part, leo, t_ticks, fl.points)
                mn, mx, av = part.measure(now)
                append(new_row(Row, (key, UNKNOWN, leo, None, None, None, None, mn, mx, av, None,
                                     None, False, None, None, None, None, part.log_start,
                                     None, None, None)))
                continue

            off = r.offset
            nxt = off + 1
            age = now - r.changed_at
            lag = leo - nxt
            if lag < 0:
                lag = 0

            if went_back or (nxt > leo and r.changed_at < t):
                # RESET: the log went backwards, or an LRO known before this LEO snapshot lies
                # beyond it (impossible on one log). Time lag restarts from this poll.
                part.last_caught_up = None
                part.first_seen_t = t
                part.prev_leo = leo
                part.prev_t = t
                part.lro_seen = part.rewind_mark = None  # stepping back onto a new log is no rewind
                part.new_log(key in log_starts, t)
                table_add(part, leo, t_ticks, fl.points)
                mn, mx, av = part.measure(now)
                append(new_row(Row, (key, RESET, leo, off, r.feed, age, lag, mn, mx, av, None,
                                     None, False, None, None, None, None, part.log_start,
                                     None, None, None)))
                continue

            max_s = fl.max_s
            # The freshness table; until this point is added its newest is (prev_leo, prev_t).
            tab = part.f_table
            n = part.f_count
            c = len(tab) >> 1
            dl = leo - part.f_leo0
            dt = t_ticks - part.f_tick0
            if leo != prev_leo and n < c <= fl.points_limit and dl < FITS and 0 <= dt < FITS:
                # freshness.add_ticks's common case, inlined: a new point where the array has room
                # and its offsets fit (leo > prev_leo, the table's newest LEO, so dl > 0).
                tab[n] = dl
                tab[c + n] = dt
                part.f_count = n + 1
            else:
                # Idle (the flat segment grows), full (old points are dropped in bulk), growing,
                # or offsets that do not fit.
                table_add(part, leo, t_ticks, fl.points)

            if nxt >= leo:
                # Caught up with the LEO as of t. (nxt > leo with a fresh LRO: records were
                # appended and copied between the LEO snapshot and the LRO read.)
                part.last_caught_up = t
                time_lag = 0.0
                fresh = 0.0
                lower = False
            else:
                lcu = part.last_caught_up
                if prev_leo is not None and nxt >= prev_leo:
                    # Everything that existed at t_prev has been copied by now.
                    pt = part.prev_t
                    if lcu is None or lcu < pt:
                        lcu = part.last_caught_up = pt
                    # Record nxt was appended in (pt, t], while the LEO went from prev_leo to
                    # leo: freshness.lag between the table's two newest points, without a search.
                    fresh = now - (pt + (nxt + 1 - prev_leo) * (t - pt) / (leo - prev_leo))
                    if fresh < 0.0:
                        fresh = 0.0
                    lower = False
                else:
                    fresh, lower = freshness.lag(part, nxt, now, fl.points)
                since = lcu
                if since is None:
                    # Never seen caught up: the time since the first poll that had both an LEO
                    # and an LRO is a lower bound. Set lazily, which is the same poll: any
                    # earlier one with both would have been caught up and set last_caught_up.
                    since = part.first_seen_t
                    if since is None:
                        since = part.first_seen_t = t
                time_lag = now - since
            part.prev_leo = leo
            part.prev_t = t

            seen = part.lro_seen
            mark = part.rewind_mark
            if seen is not None and off < seen:
                # MM2 resumed from an older commit and copies those records again (Burrow's REWIND).
                mark = part.rewind_mark = seen if mark is None or mark < seen else mark
                rewinds[key.flow] = rewinds.get(key.flow, 0) + 1
                # Its progress restarts from the older offset, and so does the copy rate
                # (rates.RatePair.restart_copy); the source's append rate goes on.
                part.ca_x = part.cb_x = off
                part.ca_t = part.cb_t = now
            elif mark is not None and off >= mark:
                mark = part.rewind_mark = None  # everything copied before the rewind is copied again
            part.lro_seen = off

            # rates.RatePair.update, inlined.
            b_t = part.lb_t
            if b_t is None:
                part.la_x = part.lb_x = leo
                part.la_t = part.lb_t = t
                part.ca_x = part.cb_x = off
                part.ca_t = part.cb_t = now
                append_rate = copy_rate = None
            else:
                if t - b_t >= fl.rate_half_s:
                    part.la_x = part.lb_x
                    part.la_t = b_t
                    part.lb_x = leo
                    part.lb_t = t
                    part.ca_x = part.cb_x
                    part.ca_t = part.cb_t
                    part.cb_x = off
                    part.cb_t = now
                span = t - part.la_t
                append_rate = (leo - part.la_x) / span if span > 0.0 else None
                span = now - part.ca_t
                copy_rate = (off - part.ca_x) / span if span > 0.0 else None

            if lag == 0:
                catch_up = 0.0
                byte_lag = None if fl.mean_bytes is None else 0
            else:
                # rates.catch_up_s, inlined.
                if copy_rate is not None and append_rate is not None and copy_rate > append_rate:
                    catch_up = lag / (copy_rate - append_rate)
                else:
                    catch_up = None
                mean_bytes = fl.mean_bytes
                # An estimate: absent, never 0, when no feed knows record sizes.
                byte_lag = None if mean_bytes is None else round(lag * mean_bytes)

            log_start = part.log_start
            if log_start is None:
                room = room_s = lost = None
                at_risk = False
            else:
                lost = log_start - nxt
                if lost > 0:
                    # Records already lost are counted, never hidden: [LRO + 1, log start) was
                    # deleted and can no longer be copied.
                    room = 0
                    room_s = 0.0
                    at_risk = True
                    # retention.newly_lost, inlined: each lost offset counts once.
                    counted = part.lost_through
                    if log_start > counted:
                        part.lost_through = log_start
                        flow = fl.flow
                        lost_total[flow] = (
                            lost_total.get(flow, 0) + log_start - (nxt if nxt > counted else counted)
                        )
                else:
                    room = -lost
                    lost = 0
                    # retention.headroom_s, inlined.
                    ls_rate = part.ls_rate
                    if ls_rate is not None and ls_rate > 0.0:
                        closing = ls_rate if copy_rate is None else ls_rate - copy_rate
                        if closing > 0.0:
                            room_s = room / closing
                            at_risk = room_s < fl.warn_s
                        else:
                            room_s = None
                            at_risk = False
                    else:
                        room_s = None
                        at_risk = False

            if at_risk:
                state = AT_RISK
            elif time_lag > max_s:
                # Out of sync. STALLED only when the LRO is not moving either: testing age alone
                # would flap an idle, caught-up partition (stale LRO) on its next single record.
                state = STALLED if lag > 0 and (r.stale or age > max_s) else LAGGING
            elif mark is not None:
                state = REWIND
            else:
                state = IN_SYNC

            if part.shape is not fl.shape:
                # The flow's window config changed: restart the window with the new shape.
                WindowedLagStat.__init__(part, fl.window_s, fl.num_samples)
                part.shape = fl.shape
            mn, mx, av = part.record_and_measure(lag, now)
            append(new_row(Row, (
                key, state, leo, off, r.feed, age, lag, mn, mx, av, time_lag,
                fresh, lower, byte_lag, append_rate, copy_rate, catch_up,
                log_start, room, room_s, lost,
            )))

        GONE = State.GONE
        for key, part in gone:
            r = lros_get(key) or part.last_lro
            if r is None:
                append(new_row(Row, (key, GONE, None, None, None, None, None, None, None, None, None,
                                     None, False, None, None, None, None, part.log_start,
                                     None, None, None)))
            else:
                append(new_row(Row, (key, GONE, None, r.offset, r.feed, None, None, None, None, None,
                                     None, None, False, None, None, None, None, part.log_start,
                                     None, None, None)))

        return Snapshot(now, tuple(rows))
