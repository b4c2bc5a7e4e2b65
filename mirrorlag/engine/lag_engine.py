"""The lag engine: one PollObservation in, one Snapshot out (DESIGN §3).

Pure: no I/O, no clock, no threads. Every time comes from the observation, so the whole state
machine is testable without a broker. It is not thread-safe; one poller calls `update`.

Per partition it remembers only what §3 needs across polls: the previous LEO snapshot
(L_prev, t_prev), the last time it was seen caught up, the first poll that had both an LEO and
an LRO (the lower bound for a partition never seen caught up), the last LRO reading (for the
GONE row), the windowed record-lag stat, the (LEO, time) table behind freshness lag and the
append rate, two LRO checkpoints for the copy rate, and the last known log start.
"""

from __future__ import annotations

from typing import Callable, Mapping

from mirrorlag.config.settings import EngineParams
from mirrorlag.engine.freshness import FreshnessTable
from mirrorlag.engine.retention import LogStart
from mirrorlag.engine.sampled_stat import WindowedLagStat
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
        "flow", "gen", "max_s", "window_s", "num_samples", "rate_half_s", "points", "warn_s",
        "log_start_half_s", "mean_bytes",
    )

    def __init__(self, flow: FlowId) -> None:
        self.flow = flow
        self.gen = -1  # the update that last fetched params; -1: never
        self.max_s = 0.0
        self.window_s = 0.0
        self.num_samples = 0
        self.rate_half_s = 0.0
        self.points = 2
        self.warn_s = 0.0
        self.log_start_half_s = 0.0
        self.mean_bytes: float | None = None

    def refresh(self, params: Callable[[FlowId], EngineParams], gen: int, sizes: Mapping[FlowId, float]) -> None:
        p = params(self.flow)
        self.max_s = p.lag_time_max_s
        self.window_s = p.sample_window_s
        self.num_samples = p.num_samples
        # Rates cover about the span of the window stats, metrics.num.samples x sample.window.ms:
        # the base checkpoint moves every half of it (rates.WindowRate).
        self.rate_half_s = p.sample_window_s * p.num_samples * 0.5
        self.points = max(2, p.freshness_points)  # interpolation needs two points
        self.warn_s = p.retention_warn_s
        # Retention deletes whole segments, so the log start jumps: average its rate over a span
        # at least as long as the horizon AT_RISK forecasts, or one deletion would make it flap.
        self.log_start_half_s = max(p.sample_window_s * p.num_samples, p.retention_warn_s) * 0.5
        self.mean_bytes = sizes.get(self.flow)
        self.gen = gen


class _Partition(WindowedLagStat):
    """What the engine remembers of one partition between polls: its record-lag window (it *is*
    the WindowedLagStat, which saves an object and a pointer hop per partition) plus the time-lag
    state of DESIGN §3."""

    __slots__ = (
        "fl", "prev_leo", "prev_t", "last_caught_up", "first_seen_t", "last_lro", "lro_seen", "rewind_mark",
        "table", "la_x", "la_t", "lb_x", "lb_t", "ca_x", "ca_t", "cb_x", "cb_t", "log_start",
    )

    def __init__(self, fl: _Flow) -> None:
        WindowedLagStat.__init__(self, fl.window_s, fl.num_samples)
        self.fl = fl  # shared by the flow's partitions: no per-row FlowId build or dict lookup
        self.prev_leo: int | None = None
        self.prev_t: float = 0.0  # meaningful only while prev_leo is not None
        self.last_caught_up: float | None = None
        self.first_seen_t: float | None = None
        self.last_lro: LroReading | None = None
        self.lro_seen: int | None = None  # the last LRO seen on this log (a RESET starts a new log)
        self.rewind_mark: int | None = None  # the LRO before a step back, until it is regained
        self.table = FreshnessTable()  # (LEO, time) points: freshness lag
        # Two checkpoints each of the LEO (at leo_at) and the LRO (at now): the append and copy
        # rates, as rates.WindowRate computes them (inlined: no object, no call per partition).
        # lb_t / cb_t None: no sample on this log yet.
        self.la_x = self.lb_x = self.ca_x = self.cb_x = 0
        self.la_t = self.ca_t = 0.0
        self.lb_t: float | None = None
        self.cb_t: float | None = None
        self.log_start: LogStart | None = None  # None until ListOffsets earliest was read

    def new_log(self, key: PartitionKey, log_starts: Mapping[PartitionKey, int]) -> None:
        """The LEO went backwards or an old LRO lies beyond it: forget what belonged to the old log
        (its LEO history, copy progress, log start and lost count) but not a log start read now."""
        self.table.clear()
        self.lb_t = self.cb_t = None
        ls = self.log_start
        if ls is not None:
            if key in log_starts:
                ls.lost_through = 0
            else:
                self.log_start = None


def _track_leo(part: _Partition, leo: int, t: float, half_s: float) -> None:
    """The append-rate checkpoints of the main loop, for the rare rows that show no rate."""
    b_t = part.lb_t
    if b_t is None:
        part.la_x = part.lb_x = leo
        part.la_t = part.lb_t = t
    elif t - b_t >= half_s:
        part.la_x = part.lb_x
        part.la_t = b_t
        part.lb_x = leo
        part.lb_t = t


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
        # Records the source deleted before the mirror copied them, per flow, each counted once.
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

        # Log starts come for a subset of partitions (read less often): walk only those.
        parts_get = parts.get
        for key, value in log_starts.items():
            part = parts_get(key)
            if part is None:
                continue  # not in the flows
            ls = part.log_start
            if ls is None:
                part.log_start = LogStart(value, t)
            elif value == ls.value:
                # Unchanged (retention deletes whole segments, rarely): LogStart.observe inlined.
                fl = part.fl
                if fl.gen != gen:
                    fl.refresh(params, gen, sizes)
                if t - ls.b_t >= fl.log_start_half_s:
                    ls.a_x = ls.b_x
                    ls.a_t = ls.b_t
                    ls.b_x = value
                    ls.b_t = t
                span = t - ls.a_t
                ls.rate = (value - ls.a_x) / span if span > 0.0 else None
            else:
                fl = part.fl
                if fl.gen != gen:
                    fl.refresh(params, gen, sizes)
                ls.observe(value, t, fl.log_start_half_s * 2.0)

        rows: list[PartitionRow] = []
        append = rows.append
        # Rows are built with tuple.__new__, as PartitionRow(...) itself does, minus its Python-level
        # argument handling: that halves the cost of a 21-field row. Every row names every field.
        new_row = tuple.__new__
        for key, part in zip(self._order_keys, self._order_parts):
            leo = leos[key]
            r = lros_get(key)
            if r is not None:
                part.last_lro = r

            if leo is None:
                # LEO unreadable: unknown, and the time-lag state must not learn from a gap.
                mn, mx, av = part.measure(now)
                ls = part.log_start
                log_start = None if ls is None else ls.value
                if r is None:
                    append(Row(key, UNKNOWN, None, None, None, None, None, mn, mx, av, None,
                               None, False, None, None, None, None, log_start))
                else:
                    append(
                        Row(key, UNKNOWN, None, r.offset, r.feed, now - r.changed_at,
                            None, mn, mx, av, None, None, False, None, None, None, None, log_start)
                    )
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
                    part.new_log(key, log_starts)
                part.prev_leo = leo
                part.prev_t = t
                # The LEO history still grows: freshness and the append rate need it once an
                # LRO arrives.
                part.table.add(leo, t, fl.points)
                _track_leo(part, leo, t, fl.rate_half_s)
                mn, mx, av = part.measure(now)
                ls = part.log_start
                append(Row(key, UNKNOWN, leo, None, None, None, None, mn, mx, av, None,
                           None, False, None, None, None, None, None if ls is None else ls.value))
                continue

            off = r.offset
            nxt = off + 1
            changed_at = r.changed_at
            age = now - changed_at
            lag = leo - nxt
            if lag < 0:
                lag = 0

            if went_back or (nxt > leo and changed_at < t):
                # RESET: the log went backwards, or an LRO known before this LEO snapshot lies
                # beyond it (impossible on one log). Time lag restarts from this poll.
                part.last_caught_up = None
                part.first_seen_t = t
                part.prev_leo = leo
                part.prev_t = t
                part.lro_seen = part.rewind_mark = None  # stepping back onto a new log is no rewind
                part.new_log(key, log_starts)
                part.table.add(leo, t, fl.points)
                _track_leo(part, leo, t, fl.rate_half_s)
                mn, mx, av = part.measure(now)
                ls = part.log_start
                append(Row(key, RESET, leo, off, r.feed, age, lag, mn, mx, av, None,
                           None, False, None, None, None, None, None if ls is None else ls.value))
                continue

            max_s = fl.max_s
            # Until this point is added, the table's newest point is (prev_leo, prev_t).
            table = part.table
            if leo != prev_leo:
                # FreshnessTable.add's common case, inlined: a new point, the oldest dropped.
                offsets = table.offsets
                offsets.append(leo)
                times = table.times
                times.append(t)
                drop = len(offsets) - fl.points
                if drop > 0:
                    del offsets[:drop]
                    del times[:drop]
            else:
                table.add(leo, t, fl.points)  # idle: extends the flat segment

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
                    # Record nxt was appended in (pt, t], where the LEO went from prev_leo to leo:
                    # FreshnessTable.lag between its two newest points, without touching it.
                    fresh = now - (pt + (nxt + 1 - prev_leo) * (t - pt) / (leo - prev_leo))
                    if fresh < 0.0:
                        fresh = 0.0
                    lower = False
                else:
                    fresh, lower = table.lag(nxt, now)
                if lcu is not None:
                    time_lag = now - lcu
                else:
                    # Never seen caught up: the time since the first poll that had both an LEO
                    # and an LRO is a lower bound. Set lazily, which is the same poll: any
                    # earlier one with both would have been caught up and set last_caught_up.
                    fs = part.first_seen_t
                    if fs is None:
                        fs = part.first_seen_t = t
                    time_lag = now - fs
            part.prev_leo = leo
            part.prev_t = t

            seen = part.lro_seen
            mark = part.rewind_mark
            if seen is not None and off < seen:
                # MM2 resumed from an older commit and copies those records again (Burrow's REWIND).
                mark = part.rewind_mark = seen if mark is None or mark < seen else mark
                rewinds[key.flow] = rewinds.get(key.flow, 0) + 1
                part.cb_t = None  # progress restarts from the older offset: so does the copy rate
            elif mark is not None and off >= mark:
                mark = part.rewind_mark = None  # everything copied before the rewind is copied again
            part.lro_seen = off
            # WindowRate.update, inlined twice: the copy rate (LRO at now) ...
            half = fl.rate_half_s
            b_t = part.cb_t
            if b_t is None:
                part.ca_x = part.cb_x = off
                part.ca_t = part.cb_t = now
                copy_rate = None
            else:
                if now - b_t >= half:
                    part.ca_x = part.cb_x
                    part.ca_t = b_t
                    part.cb_x = off
                    part.cb_t = now
                span = now - part.ca_t
                copy_rate = (off - part.ca_x) / span if span > 0.0 else None
            # ... and the append rate (LEO at leo_at).
            b_t = part.lb_t
            if b_t is None:
                part.la_x = part.lb_x = leo
                part.la_t = part.lb_t = t
                append_rate = None
            else:
                if t - b_t >= half:
                    part.la_x = part.lb_x
                    part.la_t = b_t
                    part.lb_x = leo
                    part.lb_t = t
                span = t - part.la_t
                append_rate = (leo - part.la_x) / span if span > 0.0 else None

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
                byte_lag = None if mean_bytes is None else round(lag * mean_bytes)

            ls = part.log_start
            if ls is None:
                log_start = room = room_s = lost = None
                at_risk = False
            else:
                log_start = ls.value
                lost = log_start - nxt
                if lost > 0:
                    # Records already lost are counted, never hidden. (A log start read beyond
                    # the LEO read just before it loses no more than the record lag.)
                    if log_start > leo:
                        lost = lag
                    room = 0
                    room_s = 0.0
                    at_risk = True
                    newly = ls.count_lost(nxt)
                    if newly:
                        lost_total[fl.flow] = lost_total.get(fl.flow, 0) + newly
                else:
                    room = -lost
                    lost = 0
                    # retention.headroom_s, inlined.
                    ls_rate = ls.rate
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

            if part._window_s != fl.window_s or part._num_samples != fl.num_samples:
                # The flow's window config changed: restart the window with the new shape.
                WindowedLagStat.__init__(part, fl.window_s, fl.num_samples)
            mn, mx, av = part.record_and_measure(lag, now)
            append(new_row(Row, (
                key, state, leo, off, r.feed, age, lag, mn, mx, av, time_lag,
                fresh, lower, byte_lag, append_rate, copy_rate, catch_up,
                log_start, room, room_s, lost,
            )))

        GONE = State.GONE
        for key, part in gone:
            r = lros_get(key) or part.last_lro
            ls = part.log_start
            log_start = None if ls is None else ls.value
            if r is None:
                append(Row(key, GONE, None, None, None, None, None, None, None, None, None,
                           None, False, None, None, None, None, log_start))
            else:
                append(Row(key, GONE, None, r.offset, r.feed, None, None, None, None, None, None,
                           None, False, None, None, None, None, log_start))

        return Snapshot(now, tuple(rows))
