"""The lag engine: one PollObservation in, one Snapshot out (DESIGN §3).

Pure: no I/O, no clock, no threads. Every time comes from the observation, so the whole state
machine is testable without a broker. It is not thread-safe; one poller calls `update`.

Per partition it remembers only what §3 needs across polls: the previous LEO snapshot
(L_prev, t_prev), the last time it was seen caught up, the first poll that had both an LEO and
an LRO (the lower bound for a partition never seen caught up), the last LRO reading (for the
GONE row) and the windowed record-lag stat.
"""

from __future__ import annotations

from typing import Callable

from mirrorlag.config.settings import EngineParams
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

    __slots__ = ("flow", "gen", "max_s", "window_s", "num_samples")

    def __init__(self, flow: FlowId) -> None:
        self.flow = flow
        self.gen = -1  # the update that last fetched params; -1: never
        self.max_s = 0.0
        self.window_s = 0.0
        self.num_samples = 0

    def refresh(self, params: Callable[[FlowId], EngineParams], gen: int) -> None:
        p = params(self.flow)
        self.max_s = p.lag_time_max_s
        self.window_s = p.sample_window_s
        self.num_samples = p.num_samples
        self.gen = gen


class _Partition(WindowedLagStat):
    """What the engine remembers of one partition between polls: its record-lag window (it *is*
    the WindowedLagStat, which saves an object and a pointer hop per partition) plus the time-lag
    state of DESIGN §3."""

    __slots__ = ("fl", "prev_leo", "prev_t", "last_caught_up", "first_seen_t", "last_lro", "lro_seen", "rewind_mark")

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


class LagEngine:
    """Turns each poll's LEOs and LROs into per-partition lag rows and states."""

    __slots__ = ("_params", "_parts", "_flows", "_order_keys", "_order_parts", "_gen", "rewinds_total")

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

    def __len__(self) -> int:
        """Partitions currently tracked (those in the previous update's `leos`)."""
        return len(self._parts)

    def update(self, obs: PollObservation) -> Snapshot:
        t = obs.leo_at
        now = obs.now
        leos = obs.leos
        lros_get = obs.lros.get
        parts = self._parts
        params = self._params
        gen = self._gen = self._gen + 1

        UNKNOWN = State.UNKNOWN
        IN_SYNC = State.IN_SYNC
        LAGGING = State.LAGGING
        STALLED = State.STALLED
        RESET = State.RESET
        REWIND = State.REWIND
        rewinds = self.rewinds_total
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
                        fl.refresh(params, gen)
                    parts[key] = _Partition(fl)
            order_keys = self._order_keys = sorted(parts)
            self._order_parts = [parts[key] for key in order_keys]

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
                    append(Row(key, UNKNOWN, None, None, None, None, None, mn, mx, av, None))
                else:
                    append(
                        Row(key, UNKNOWN, None, r.offset, r.feed, now - r.changed_at,
                            None, mn, mx, av, None)
                    )
                continue

            prev_leo = part.prev_leo
            went_back = prev_leo is not None and leo < prev_leo

            if r is None:
                if went_back:
                    # A new log: catch-up times and LROs of the old one say nothing about it.
                    part.last_caught_up = None
                    part.first_seen_t = None
                    part.lro_seen = part.rewind_mark = None
                part.prev_leo = leo
                part.prev_t = t
                mn, mx, av = part.measure(now)
                append(Row(key, UNKNOWN, leo, None, None, None, None, mn, mx, av, None))
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
                mn, mx, av = part.measure(now)
                append(Row(key, RESET, leo, off, r.feed, age, lag, mn, mx, av, None))
                continue

            fl = part.fl
            if fl.gen != gen:
                fl.refresh(params, gen)
            max_s = fl.max_s

            if nxt >= leo:
                # Caught up with the LEO as of t. (nxt > leo with a fresh LRO: records were
                # appended and copied between the LEO snapshot and the LRO read.)
                part.last_caught_up = t
                time_lag = 0.0
            else:
                lcu = part.last_caught_up
                if prev_leo is not None and nxt >= prev_leo:
                    # Everything that existed at t_prev has been copied by now.
                    pt = part.prev_t
                    if lcu is None or lcu < pt:
                        lcu = part.last_caught_up = pt
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
            elif mark is not None and off >= mark:
                mark = part.rewind_mark = None  # everything copied before the rewind is copied again
            part.lro_seen = off
            if time_lag > max_s:
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
            append(Row(key, state, leo, off, r.feed, age, lag, mn, mx, av, time_lag))

        GONE = State.GONE
        for key, part in gone:
            r = lros_get(key) or part.last_lro
            if r is None:
                append(Row(key, GONE, None, None, None, None, None, None, None, None, None))
            else:
                append(Row(key, GONE, None, r.offset, r.feed, None, None, None, None, None, None))

        return Snapshot(now, tuple(rows))
