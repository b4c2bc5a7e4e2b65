"""A plain-Python reference model of what mirrorlag watches, with an explicit clock.

- `SourceLog`: one source partition. Every offset has an append time (the ground truth behind
  freshness and time lag) and, with retention, a deletion time; the log start at time t is the
  number of offsets deleted by t, the LEO at t the number appended by t.
- `Mirror`: copies the log in offset order at a schedule of speeds (0 = stalled), optionally with
  a pipeline latency, restarts that step the LRO back (MM2 resuming from an older commit), and
  retention skips: a record the source deletes before the target acknowledged it is never copied
  (lost), and the mirror resets to the log start, as MM2's consumer does on OffsetOutOfRange with
  auto.offset.reset=earliest. "Copied" thus always means acknowledged while the source still had
  the record, so lost = never copied, and every offset in [LRO + 1, log start) is lost. (When the
  log start advances faster than one record per copy time, every copy is overtaken and the
  mirror makes no progress: to the engine that is a stall, which is a fair input.)
- `run()`: the poller. Every refresh interval, at t: LEO snapshot L_t (and, on its own cadence,
  the log start), THEN at now = t + eps the LRO is read, fed through a real `LroCache`, and the
  real `LagEngine.update(PollObservation(leo_at=t, now=t+eps, ...))` is called. Each poll keeps
  the engine's rows beside the ground truth (`Truth`) computed from the model.

Times are float seconds. Conventions (used identically by the model and the truth):
  LEO(t)  = #{o : append_time[o] <= t}      (a record appended at exactly t is in the snapshot)
  S(t)    = #{o : delete_time[o] <= t}      (log start)
  LRO(t)  = value of the last LRO change at or before t (None before the first copy)
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass
from typing import Callable, Sequence

from mirrorlag.config.settings import EngineParams
from mirrorlag.engine import LagEngine
from mirrorlag.lro_cache import LroCache
from mirrorlag.model import FlowId, LroReading, PartitionKey, PartitionRow, PollObservation

INF = math.inf
FLOW = FlowId("A", "B")
FEED = "callback"


def key(partition: int, topic: str = "orders") -> PartitionKey:
    return PartitionKey(FLOW.source, FLOW.target, topic, partition)


# --------------------------------------------------------------------------------------------
# The source log
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Appends:
    """One stretch of the append schedule: `rate` records/s for `duration` s (0 = idle)."""

    duration: float
    rate: float


@dataclass(frozen=True)
class Burst:
    """`count` records appended at the same instant `at`."""

    at: float
    count: int


@dataclass(frozen=True)
class Retention:
    """Source retention. A record is deleted when the newest `keep_records` records no longer
    include it (retention.bytes, in records) or when it is `keep_seconds` old (retention.ms),
    whichever comes first; with `check_interval` deletions happen only at multiples of it
    (log.retention.check.interval.ms), so the log start moves in jumps."""

    keep_records: int | None = None
    keep_seconds: float | None = None
    check_interval: float | None = None


class SourceLog:
    def __init__(
        self,
        appends: Sequence[Appends] = (),
        bursts: Sequence[Burst] = (),
        *,
        initial: int = 0,
        initial_rate: float = 1.0,
        retention: Retention | None = None,
        start: float = 0.0,
    ) -> None:
        self.initial = initial
        # `initial` records appended steadily before `start` (the last one 1/initial_rate before it).
        times = [start - (initial - o) / initial_rate for o in range(initial)]
        t = start
        for stretch in appends:
            end = t + stretch.duration
            if stretch.rate > 0:
                step = 1.0 / stretch.rate
                i = 0
                while True:
                    a = t + (i + 0.5) * step  # mid-slot: a steady stream, rate records/s
                    if a >= end:
                        break
                    times.append(a)
                    i += 1
            t = end
        for burst in bursts:
            times.extend([burst.at] * burst.count)
        times.sort()
        self.append_times: list[float] = times
        n = len(times)
        deletes = [INF] * n
        if retention is not None:
            keep_n, keep_s, every = retention.keep_records, retention.keep_seconds, retention.check_interval
            for o in range(n):
                d = INF
                if keep_n is not None and o + keep_n < n:
                    d = times[o + keep_n]
                if keep_s is not None:
                    d = min(d, times[o] + keep_s)
                if every is not None and d < INF:
                    # Later, never earlier (ceil of a denormal quotient can underflow to 0).
                    d = max(d, math.ceil(d / every) * every)
                deletes[o] = d
        self.delete_times: list[float] = deletes  # non-decreasing: the log start only moves forward

    def __len__(self) -> int:
        return len(self.append_times)

    def leo(self, t: float) -> int:
        return bisect_right(self.append_times, t)

    def log_start(self, t: float) -> int:
        return bisect_right(self.delete_times, t)


# --------------------------------------------------------------------------------------------
# The mirror
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Phase:
    """`duration` s copying at `speed` records/s (0 = stalled). `rewind` > 0: the phase begins
    with a restart from a commit `rewind` records back, so the LRO steps back and those records
    are copied again."""

    duration: float
    speed: float
    rewind: int = 0


class Mirror:
    """Copies `log` in offset order. Copying one record takes 1/speed s of work; work is only
    done while a record is available (appended `latency` s ago and not deleted). After the last
    phase the mirror is stalled."""

    def __init__(
        self,
        log: SourceLog,
        phases: Sequence[Phase],
        *,
        latency: float = 0.0,
        start: float = 0.0,
        copied: int | None = None,
        horizon: float = INF,
    ) -> None:
        a, d = log.append_times, log.delete_times
        n = len(a)
        copied = log.initial if copied is None else copied
        self.copy_time = [INF] * n  # first time each offset was copied (INF: never)
        self.passed = [INF] * n  # first time the LRO was >= the offset (copied or skipped past)
        self.event_t: list[float] = []  # LRO changes, in time order
        self.event_v: list[int] = []
        self.rewinds = 0
        for o in range(copied):  # the initial records were copied the moment they arrived
            self.copy_time[o] = self.passed[o] = a[o]
        lro = copied - 1
        if lro >= 0:
            self.event_t.append(a[lro])
            self.event_v.append(lro)
        p = copied  # next offset to copy
        work = 0.0  # fraction of record p already copied
        t = start
        s = start
        for phase in phases:
            e = min(s + phase.duration, horizon)
            if s >= horizon:
                break
            t = s
            if phase.rewind > 0 and lro > 0:
                k = max(0, lro - phase.rewind)
                self.event_t.append(s)
                self.event_v.append(k)
                self.rewinds += 1
                lro, p, work = k, k + 1, 0.0
            v = phase.speed
            while v > 0:
                if p >= n:
                    break
                ready = max(t, a[p] + latency)
                if ready >= e:
                    break
                if d[p] <= ready:
                    # Deleted before it was fetched: OffsetOutOfRange, reset to the log start.
                    p = bisect_right(d, ready)
                    work = 0.0
                    t = ready
                    continue
                done = ready + (1.0 - work) / v
                if done > e:
                    work += (e - ready) * v
                    break
                if d[p] <= done:
                    # Deleted while in flight: never acknowledged by the target.
                    p = bisect_right(d, done)
                    work = 0.0
                    t = done
                    continue
                if self.copy_time[p] == INF:
                    self.copy_time[p] = done
                for o in range(lro + 1, p + 1):
                    if self.passed[o] == INF:
                        self.passed[o] = done
                self.event_t.append(done)
                self.event_v.append(p)
                lro, p, work, t = p, p + 1, 0.0, done
            s = e
        # Busy-period starts (valid while the LRO never steps back): the mirror lacks some record
        # at time x iff a[o] <= x < passed[o] for some o. Both sequences are non-decreasing, so the
        # stretch of "lacking" containing record o began at busy_start[o].
        busy = [0.0] * n
        for o in range(n):
            busy[o] = a[o] if o == 0 or self.passed[o - 1] < a[o] else busy[o - 1]
        self.busy_start = busy
        # never_copied_prefix[o] = offsets below o that were never copied.
        prefix = [0] * (n + 1)
        for o in range(n):
            prefix[o + 1] = prefix[o] + (1 if self.copy_time[o] == INF else 0)
        self.never_copied_prefix = prefix

    def lro(self, t: float) -> tuple[int, float] | None:
        """(LRO, when it took that value) at time t; None before the first copy."""
        i = bisect_right(self.event_t, t) - 1
        if i < 0:
            return None
        return self.event_v[i], self.event_t[i]


# --------------------------------------------------------------------------------------------
# The poller and the ground truth
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SimPartition:
    key: PartitionKey
    log: SourceLog
    mirror: Mirror


@dataclass(frozen=True)
class Truth:
    """Ground truth for one partition at one poll (snapshot at t, LRO read at now)."""

    leo: int  # L_t, the LEO snapshot
    log_start: int  # S(t), the true log start at the snapshot
    log_start_known: int | None  # the last log start the engine was given (None: never)
    lro: int | None  # LRO(now): what the feed reports
    lro_max: int | None  # the highest LRO so far (differs from lro only after a rewind)
    lro_since: float | None  # when the LRO took its current value
    lro_seen_at: float | None  # when the sidecar first read it (the LroCache's changed_at)
    stale: bool  # the LroCache marked it stale
    record_lag: int | None  # max(0, L_t - (LRO + 1))
    caught_up: bool  # LRO + 1 >= L_t
    oldest_uncopied_at: float | None  # append time of offset LRO + 1, if it exists at now
    # Time lag truths (see test_invariants: the engine's time lag lies between them):
    copied_through: float | None  # sup{x <= t : every record that existed at x is copied}; None: caught up
    busy_since: float | None  # last moment the mirror lacked no record (KIP-16 literal); None: caught up at now
    freshness: float  # now - append time of offset LRO + 1 (0 when it does not exist yet)
    lost: int  # offsets deleted by t that were never copied (cumulative)
    lost_certain: int  # of those, the ones a poller could prove so far: union of [LRO_j + 1, S_j)
    lost_visible: int  # max(0, S_known - (LRO + 1)): deleted and not copied, as the engine knows
    rewinds_seen: int  # polls so far whose LRO is below the previous poll's
    polls: int  # polls of this partition so far, this one included


@dataclass(frozen=True)
class Poll:
    k: int
    t: float  # leo_at
    now: float
    log_starts_read: bool
    rows: dict[PartitionKey, PartitionRow]
    truth: dict[PartitionKey, Truth]


@dataclass
class Run:
    polls: list[Poll]
    engine: LagEngine
    partitions: list[SimPartition]
    interval: float
    eps: float
    params: EngineParams
    ttl: float
    start: float

    def series(self, k: PartitionKey) -> list[tuple[Poll, PartitionRow, Truth]]:
        return [(p, p.rows[k], p.truth[k]) for p in self.polls]

    def table(self, k: PartitionKey, fields: Sequence[str] = ("state", "leo", "lro", "record_lag", "time_lag_s")) -> str:
        """A printable poll-by-poll table of one partition: for assertion messages."""
        lines = []
        for p in self.polls:
            r, tr = p.rows[k], p.truth[k]
            vals = " ".join(f"{f}={getattr(r, f)!r}" for f in fields)
            lines.append(f"t={p.t:.3f} now={p.now:.3f} {vals} | truth lag={tr.record_lag} "
                         f"fresh={tr.freshness:.3f} copied_through={tr.copied_through} busy={tr.busy_since} "
                         f"S={tr.log_start} lost={tr.lost}")
        return "\n".join(lines)


def run(
    partitions: Sequence[SimPartition],
    *,
    interval: float,
    end: float,
    start: float = 0.0,
    eps: float = 0.5,
    params: EngineParams = EngineParams(),
    ttl: float = 20.0,
    log_start_every: int | None = 1,
    on_poll: Callable[[Poll], None] | None = None,
) -> Run:
    """Poll every `interval` s from `start` to `end` (inclusive). Log starts are read at every
    `log_start_every`-th poll (None: never, like the poller before issue 4)."""
    assert 0 < eps < interval
    engine = LagEngine(lambda flow: params)
    cache = LroCache(ttl)
    polls: list[Poll] = []
    known_start: dict[PartitionKey, int] = {}
    lro_max: dict[PartitionKey, int] = {}
    prev_lro: dict[PartitionKey, int] = {}
    rewinds_seen: dict[PartitionKey, int] = {}
    certain: dict[PartitionKey, list[int]] = {sp.key: [0, 0] for sp in partitions}  # [total, covered_upto]
    k = 0
    while True:
        t = start + k * interval
        if t > end + 1e-9:
            break
        now = t + eps
        read_starts = log_start_every is not None and k % log_start_every == 0
        leos = {sp.key: sp.log.leo(t) for sp in partitions}
        starts = {sp.key: sp.log.log_start(t) for sp in partitions}
        lro_now = {sp.key: sp.mirror.lro(now) for sp in partitions}
        feed = {key_: v[0] for key_, v in lro_now.items() if v is not None}
        readings: dict[PartitionKey, LroReading] = cache.update({FEED: feed}, now)
        obs = PollObservation(
            leo_at=t,
            now=now,
            leos=leos,
            lros=readings,
            log_starts=dict(starts) if read_starts else {},
        )
        snap = engine.update(obs)
        rows = snap.by_key()
        if read_starts:
            known_start.update(starts)
        truth: dict[PartitionKey, Truth] = {}
        for sp in partitions:
            kk = sp.key
            log, mirror = sp.log, sp.mirror
            a = log.append_times
            L = leos[kk]
            cur = lro_now[kk]
            reading = readings.get(kk)
            if cur is None:
                R = None
                since = None
            else:
                R, since = cur
                if kk in prev_lro and R < prev_lro[kk]:
                    rewinds_seen[kk] = rewinds_seen.get(kk, 0) + 1
                prev_lro[kk] = R
                lro_max[kk] = max(lro_max.get(kk, R), R)
            Rmax = lro_max.get(kk)
            nxt = -1 if R is None else R
            nxt += 1
            exists_now = nxt < log.leo(now)
            oldest = a[nxt] if exists_now else None
            S_known = known_start.get(kk)
            # Proven losses: [LRO_j + 1, S_j) at each poll j that read the log start (both ends
            # non-decreasing without rewinds, so a running "covered up to" suffices).
            c = certain[kk]
            if read_starts and R is not None and starts[kk] > nxt:
                lo = max(nxt, c[1])
                if starts[kk] > lo:
                    c[0] += starts[kk] - lo
                c[1] = max(c[1], starts[kk])
            hi_next = (Rmax + 1) if Rmax is not None else 0
            truth[kk] = Truth(
                leo=L,
                log_start=starts[kk],
                log_start_known=S_known,
                lro=R,
                lro_max=Rmax,
                lro_since=since,
                lro_seen_at=None if reading is None else reading.changed_at,
                stale=False if reading is None else reading.stale,
                record_lag=None if R is None else max(0, L - nxt),
                caught_up=R is not None and nxt >= L,
                oldest_uncopied_at=oldest,
                copied_through=None if hi_next >= L else a[hi_next],
                busy_since=mirror.busy_start[nxt] if exists_now else None,
                freshness=(now - oldest) if oldest is not None else 0.0,
                lost=mirror.never_copied_prefix[starts[kk]],
                lost_certain=c[0],
                lost_visible=0 if S_known is None or R is None else max(0, S_known - nxt),
                rewinds_seen=rewinds_seen.get(kk, 0),
                polls=k + 1,
            )
        poll = Poll(k, t, now, read_starts, rows, truth)
        polls.append(poll)
        if on_poll is not None:
            on_poll(poll)
        k += 1
    return Run(polls, engine, list(partitions), interval, eps, params, ttl, start)


# --------------------------------------------------------------------------------------------
# Which of issue 4's fields does the engine under test fill yet?
# --------------------------------------------------------------------------------------------

NEW_FIELDS = (
    "freshness_lag_s",
    "append_rate",
    "copy_rate",
    "catch_up_s",
    "log_start",
    "retention_headroom_records",
    "retention_headroom_s",
    "records_lost",
)


def _probe() -> dict[str, bool]:
    """Run one scenario in which every new field has a defined value at some poll (a backlog,
    a mirror that gains, a log start that advances and overtakes a stalled mirror) and report
    which fields the engine filled at least once. Also `records_lost_total` (the per-flow
    counter on the engine) and AT_RISK."""
    log = SourceLog([Appends(200, 10.0)], initial=300, initial_rate=10.0, retention=Retention(keep_records=150))
    mirror = Mirror(log, [Phase(20, 50.0), Phase(60, 0.0), Phase(200, 50.0)])
    result = run([SimPartition(key(0), log, mirror)], interval=5.0, end=150.0, eps=0.1,
                 params=EngineParams(retention_warn_s=60.0))
    rows = [p.rows[key(0)] for p in result.polls]
    filled = {f: any(getattr(r, f) is not None for r in rows) for f in NEW_FIELDS}
    filled["records_lost_total"] = isinstance(getattr(result.engine, "records_lost_total", None), dict)
    return filled


FILLED: dict[str, bool] = _probe()
