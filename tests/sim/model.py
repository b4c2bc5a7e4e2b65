"""A plain-Python reference model of what mirrorlag watches, with an explicit clock.

- `SourceLog`: one source partition. Every offset has an append time (the ground truth behind
  freshness and time lag) and, with retention, a deletion time; the log start at time t is the
  number of offsets deleted by t, the LEO at t the number appended by t. With transactions
  (`Txn`) an offset is a plain record, a committed or aborted transaction's record, or a marker
  (one offset per commit or abort); at the log's isolation level a consumer sees data records
  only (read_committed: no aborted ones, nothing at or past the LSO) and the LEO is the high
  watermark or the LSO.
- `Mirror`: copies the log in offset order at a schedule of speeds (0 = stalled), optionally with
  a pipeline latency, restarts that step the LRO back (MM2 resuming from an older commit), and
  retention skips: a record the source deletes before the target acknowledged it is never copied
  (lost), and the mirror resets to the log start, as MM2's consumer does on OffsetOutOfRange with
  auto.offset.reset=earliest. "Copied" thus always means acknowledged while the source still had
  the record, so lost = never copied, and every offset in [LRO + 1, log start) is lost. (When the
  log start advances faster than one record per copy time, every copy is overtaken and the
  mirror makes no progress: to the engine that is a stall, which is a fair input.)
  The mirror copies data records only: a marker (or an aborted record at read_committed) is
  passed over and the LRO stays the last copied data record.
- `run()`: the poller. Every refresh interval, at t: LEO snapshot L_t (and, on its own cadence,
  the log start), THEN at now = t + eps the LRO is read, fed through a real `LroCache`, and the
  real `LagEngine.update(PollObservation(leo_at=t, now=t+eps, ...))` is called. Each poll keeps
  the engine's rows beside the ground truth (`Truth`) computed from the model. Optionally the
  poller's source probe (`probe=True`) and, instead of the exact callback feed, an unpatched
  MM2's evidence: offset syncs and target progress (`mm2=MM2Config(...)`, tests/sim/mm2.py).

Times are float seconds. Conventions (used identically by the model and the truth):
  LEO(t)  = #{o : append_time[o] <= t}      (a record appended at exactly t is in the snapshot)
  S(t)    = #{o : delete_time[o] <= t}      (log start)
  LRO(t)  = value of the last LRO change at or before t (None before the first copy)
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Callable, Mapping, Sequence

import numpy as np

from mirrorlag.config.settings import EngineParams
from mirrorlag.engine import LagEngine
from mirrorlag.config.writers import RemoteWriters
from mirrorlag.feeds.offset_syncs import FEED_NAME as OFFSET_SYNCS
from mirrorlag.feeds.offset_syncs import _TopicSyncs
from mirrorlag.feeds.target_progress import FEED_NAME as TARGET_PROGRESS
from mirrorlag.feeds.target_progress import NONE as TP_NONE
from mirrorlag.feeds.target_progress import progress_lros
from mirrorlag.kafka.probe import SourceProbe
from mirrorlag.poll.lro_cache import LroCache
from mirrorlag.model import FlowId, LroTable, PartitionKey, PartitionRow, PollObservation
from mirrorlag.poll.poller import Poller
from tests.sim.mm2 import MM2Config, MM2Model, Sync

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


READ_UNCOMMITTED, READ_COMMITTED = "read_uncommitted", "read_committed"
DATA, COMMITTED, ABORTED, MARKER = 0, 1, 2, 3  # a record's kind: plain, in a committed / aborted transaction, control


@dataclass(frozen=True)
class Txn:
    """A producer transaction: `count` data records from `at`, spread over `duration` s (all at
    `at` when 0), then its control record (commit or abort marker), which takes an offset, at
    `at + duration`. Kafka keeps an aborted transaction's records (they take offsets); a
    read_committed consumer skips them, a read_uncommitted one (MM2's default: its source
    consumer sets no isolation.level) reads them as data. No consumer ever sees a marker."""

    at: float
    count: int
    commit: bool = True
    duration: float = 0.0


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
        txns: Sequence[Txn] = (),
        isolation: str = READ_UNCOMMITTED,
    ) -> None:
        assert isolation in (READ_UNCOMMITTED, READ_COMMITTED)
        self.initial = initial
        self.isolation = isolation
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
        # (time, rank, kind, txn): at one instant plain records, then transactional ones, then
        # markers, so a transaction's marker always follows its records.
        entries = [(a, 0, DATA, -1) for a in times]
        for i, tx in enumerate(txns):
            step = tx.duration / tx.count if tx.count else 0.0
            kind = COMMITTED if tx.commit else ABORTED
            entries += [(tx.at + j * step, 1, kind, i) for j in range(tx.count)]
            entries.append((tx.at + tx.duration, 2, MARKER, i))
        entries.sort(key=lambda e: (e[0], e[1]))
        times = [e[0] for e in entries]
        self.append_times: list[float] = times
        self.kinds: list[int] = [e[2] for e in entries]
        n = len(times)
        # What a consumer at the isolation level sees. read_uncommitted: every record but markers,
        # as soon as it is appended. read_committed: committed and plain records only, and none
        # at or after the first offset of a transaction still open (the LSO), so offset o becomes
        # visible once every transaction that began at or before o has ended.
        if isolation == READ_UNCOMMITTED:
            self.is_data = [k != MARKER for k in self.kinds]
            self.visible_times = times
        else:
            self.is_data = [k in (DATA, COMMITTED) for k in self.kinds]
            first: dict[int, int] = {}
            for o, e in enumerate(entries):
                first.setdefault(e[3], o)
            ends_at = {first[i]: tx.at + tx.duration for i, tx in enumerate(txns) if i in first}
            vis, blocked = [], -INF
            for o in range(n):
                blocked = max(blocked, ends_at.get(o, -INF))
                vis.append(max(times[o], blocked))
            self.visible_times = vis  # non-decreasing: the LSO only moves forward
        # next_data[o]: the first data record at or after o (n: none); data_before[o]: how many below o;
        # data_until[o]: the first offset at or after o that is no data record (n: none).
        nxt, before, until = [n] * (n + 1), [0] * (n + 1), [n] * (n + 1)
        for o in range(n - 1, -1, -1):
            nxt[o] = o if self.is_data[o] else nxt[o + 1]
            until[o] = until[o + 1] if self.is_data[o] else o
        for o in range(n):
            before[o + 1] = before[o] + self.is_data[o]
        self.next_data, self.data_before, self.data_until = nxt, before, until
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
        """The LEO at the isolation level: the high watermark, or at read_committed the LSO."""
        return bisect_right(self.visible_times, t)

    def data_lag(self, lro: int | None, leo: int) -> int:
        """Data records (at the isolation level) in [LRO + 1, LEO): what the mirror still has to copy."""
        lo = 0 if lro is None else lro + 1
        return max(0, self.data_before[max(leo, lo)] - self.data_before[lo])

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
    done while a record is available (visible at the log's isolation level `latency` s ago and
    not deleted). Records the consumer never hands over (markers; aborted records at
    read_committed) are passed over without work and without moving the LRO, which is thus
    always the last copied data record. After the last phase the mirror is stalled.

    Also kept, for the MM2 model (tests/sim/mm2.py): every acknowledged copy in time order
    (`copies_t`, `copies_u`: the target's records, re-copies after a restart included) and the
    restarts (`restarts`: the times of the phases with a rewind, each a new task lifetime)."""

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
        vis, data = log.visible_times, log.is_data
        n = len(a)
        copied = log.initial if copied is None else copied
        self.copy_time = [INF] * n  # first time each offset was copied (INF: never)
        self.passed = [INF] * n  # first time the LRO was >= the offset (copied or skipped past)
        self.event_t: list[float] = []  # LRO changes, in time order
        self.event_v: list[int] = []
        self.rewinds = 0
        self.copies_t: list[float] = []
        self.copies_u: list[int] = []
        self.restarts: list[float] = []
        for o in range(copied):  # the initial records were copied the moment they arrived
            self.copy_time[o] = self.passed[o] = a[o]
            self.copies_t.append(a[o])
            self.copies_u.append(o)
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
                self.restarts.append(s)
                lro, p, work = k, k + 1, 0.0
            v = phase.speed
            while v > 0:
                if p >= n:
                    break
                ready = max(t, vis[p] + latency)
                if ready >= e:
                    break
                if d[p] <= ready:
                    # Deleted before it was fetched: OffsetOutOfRange, reset to the log start.
                    p = bisect_right(d, ready)
                    work = 0.0
                    t = ready
                    continue
                if not data[p]:
                    # Never handed over by the consumer: passed at once, the LRO stays.
                    if self.passed[p] == INF:
                        self.passed[p] = ready
                    p, t = p + 1, ready
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
                self.copies_t.append(done)
                self.copies_u.append(p)
                for o in range(lro + 1, p + 1):
                    if self.passed[o] == INF:
                        self.passed[o] = done
                self.event_t.append(done)
                self.event_v.append(p)
                lro, p, work, t = p, p + 1, 0.0, done
            s = e
        # Busy-period starts (valid while the LRO never steps back): the mirror lacks some data
        # record at time x iff vis[o] <= x < passed[o] for some data record o. Both sequences are
        # non-decreasing over the data records, so the stretch of "lacking" containing data record
        # o began at busy_start[o] (defined at data records only; every record is data without
        # transactions, and vis is the append time at read_uncommitted).
        busy = [INF] * n
        prev = -1
        for o in range(n):
            if data[o]:
                busy[o] = vis[o] if prev < 0 or self.passed[prev] < vis[o] else busy[prev]
                prev = o
        self.busy_start = busy
        # never_copied_prefix[o] = data records below o that were never copied (markers never are).
        prefix = [0] * (n + 1)
        for o in range(n):
            prefix[o + 1] = prefix[o] + (1 if self.copy_time[o] == INF and data[o] else 0)
        self.never_copied_prefix = prefix

    def lro(self, t: float) -> tuple[int, float] | None:
        """(LRO, when it took that value) at time t; None before the first copy."""
        i = bisect_right(self.event_t, t) - 1
        if i < 0:
            return None
        return self.event_v[i], self.event_t[i]

    def acked(self, t: float) -> tuple[int, float] | None:
        """(source offset of the last record the target acknowledged, when) at time t: unlike
        `lro`, a restart does not step it back until the first record copied again is acked."""
        i = bisect_right(self.copies_t, t) - 1
        return None if i < 0 else (self.copies_u[i], self.copies_t[i])

    def target_end(self, t: float) -> int:
        """The target partition's end offset at t: one record per acknowledged copy."""
        return bisect_right(self.copies_t, t)


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
    # (both: or a poll that found the log emptied, every record that existed then copied or deleted)
    freshness: float  # now - append time of offset LRO + 1 (0 when it does not exist yet)
    lost: int  # offsets deleted by t that were never copied (cumulative)
    lost_certain: int  # of those, the ones a poller could prove so far: union of [LRO_j + 1, S_j)
    lost_visible: int  # max(0, S_known - (LRO + 1)): deleted and not copied, as the engine knows
    rewinds_seen: int  # polls so far whose LRO is below the previous poll's
    polls: int  # polls of this partition so far, this one included
    emptied_at: float = -math.inf  # the LEO snapshot time of the last poll that found the log emptied
    # Transactions (every record is data without them):
    data_lag: int | None = None  # data records (at the isolation level) in [LRO + 1, L_t): 0 = nothing left to copy
    first_uncopied: int | None = None  # the oldest of them (None: none)
    probed: bool = False  # the poller probed the source from LRO + 1 this poll
    probe_answer: float | None = None  # its answer: the oldest uncopied data record's timestamp, None: none
    # What the sidecar was given, and MM2's evidence behind it (run(mm2=...)):
    reported: int | None = None  # the LRO the cache handed the engine
    feeds: dict[str, int] = field(default_factory=dict)  # each feed's LRO this poll
    sync: Sync | None = None  # the newest readable offset sync
    target_end: int = 0  # the target partition's end offset at now
    duplicated: bool = False  # the feed's flag: the newest sync showed duplicates
    duplicates_counted: int = 0  # the feed's count of target records written twice, through the newest sync


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
    mm2: dict[PartitionKey, MM2Model] = field(default_factory=dict)

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
    probe: bool = False,
    mm2: MM2Config | None = None,
    writers: RemoteWriters | None = None,
) -> Run:
    """Poll every `interval` s from `start` to `end` (inclusive). Log starts are read at every
    `log_start_every`-th poll (None: never, like the poller before issue 4).

    `probe`: the poller's source probe at LRO + 1 (PollObservation.oldest_uncopied), with the
    poller's own choice of partitions (`Poller._probe`: those behind whose LRO did not change
    since the previous poll, all those behind at the first) and the real `SourceProbe`, reading
    the model's log at `now`.
    `mm2`: the evidence of an unpatched MM2 (tests/sim/mm2.py) instead of the exact callback
    feed: "offset-syncs" (the newest readable sync's upstream offset) and, when
    `mm2.target_progress`, "target-progress" (the production `progress_lros` over the newest sync,
    the target's end offset and the LEO snapshot), both read at `now`, listed in that order as
    the poller lists them (the cache takes the highest; the first listed wins a tie; the syncs
    taken `mm2.target_read_delay` before the target is read, as the feed does), with the
    poller's resolution for offset-syncs (the offset flush) and the syncs' timestamps dating the
    first read. The truth's `lro` is then the last acknowledged copy (`Mirror.acked`).
    The target-progress feed as production runs it: the syncs applied in order to the offset-syncs
    feed's own per-topic arrays (`_TopicSyncs.store`: its duplicate flag), and off for a partition
    whose remote topic `writers` (the production reading of the configuration, config/writers.py;
    None: one writer) says more than one writer can feed."""
    assert 0 < eps < interval
    assert mm2 is None or 0.0 <= mm2.target_read_delay <= eps
    engine = LagEngine(lambda flow: params)
    cache = LroCache(ttl)
    polls: list[Poll] = []
    known_start: dict[PartitionKey, int] = {}
    last_emptied: dict[PartitionKey, float] = {}  # per partition, the last poll whose log start read was at its LEO
    lro_max: dict[PartitionKey, int] = {}
    prev_lro: dict[PartitionKey, int] = {}
    rewinds_seen: dict[PartitionKey, int] = {}
    certain: dict[PartitionKey, list[int]] = {sp.key: [0, 0] for sp in partitions}  # [total, covered_upto]
    models = {sp.key: MM2Model(sp.mirror, mm2, start) for sp in partitions} if mm2 is not None else {}
    # The feed's arrays, one topic per partition (slot 0), and how many of the model's syncs each took.
    # The simulated MM2 writes its target without transactions: duplicates count as MM2's do there.
    plain_target = SimpleNamespace(target_transactional=False)
    fed = {kk: [_TopicSyncs(plain_target, kk.topic), 0] for kk in models}  # type: ignore[arg-type]
    shared = set()
    if writers is not None:
        policy_of = {flow.id: flow.policy for flow in writers.flows}
        shared = {kk for kk in models if writers.of(policy_of[kk.flow].remote_topic(kk.source, kk.topic)).shared}
    resolution = {OFFSET_SYNCS: mm2.flush_interval} if mm2 is not None else {}
    fetcher = _LogFetcher({(sp.key.topic, sp.key.partition): sp.log for sp in partitions})
    # Poller._probe reads only these of the poller: the previous poll's `now`, each flow's isolation
    # level (none named: read_uncommitted) and its probes per (source, level). The stand-in fetcher
    # reads each log at the log's own level, MM2's and the sidecar's alike.
    poller = SimpleNamespace(_previous_poll=None, _isolation={}, _had_lro=(None, None),
                             _probes={(FLOW.source, READ_UNCOMMITTED): SourceProbe(None, fetcher=fetcher)})
    k = 0
    while True:
        t = start + k * interval
        if t > end + 1e-9:
            break
        now = t + eps
        read_starts = log_start_every is not None and k % log_start_every == 0
        leos = {sp.key: sp.log.leo(t) for sp in partitions}
        starts = {sp.key: sp.log.log_start(t) for sp in partitions}
        syncs: dict[PartitionKey, Sync | None] = {}
        if mm2 is None:
            lro_now = {sp.key: sp.mirror.lro(now) for sp in partitions}
            by_feed: dict[str, dict[PartitionKey, int]] = {FEED: {kk: v[0] for kk, v in lro_now.items() if v is not None}}
            written_at: dict[str, dict[PartitionKey, float]] = {}
        else:
            lro_now = {sp.key: sp.mirror.acked(now) for sp in partitions}
            syncs = {kk: m.newest_sync(now - mm2.target_read_delay) for kk, m in models.items()}
            by_feed = {OFFSET_SYNCS: {kk: s.upstream for kk, s in syncs.items() if s is not None}}
            # The feed's first read dates its syncs by their timestamps (an old sync is old evidence).
            written_at = {OFFSET_SYNCS: {kk: s.sent_at for kk, s in syncs.items() if s is not None}} if k == 0 else {}
            for kk, model in models.items():  # the syncs readable by now, in the topic's order
                arrays, taken = fed[kk]
                for sync in model.syncs[taken:bisect_right(model._visible, now - mm2.target_read_delay)]:
                    arrays.duplicate_records += arrays.store(0, sync.upstream, sync.downstream)
                    taken += 1
                fed[kk][1] = taken
            if mm2.target_progress:
                ks = [kk for kk in models if kk not in shared]  # the feed asks no shared topic
                u = np.array([syncs[kk].upstream if syncs[kk] else -1 for kk in ks], np.int64)
                d = np.array([syncs[kk].downstream if syncs[kk] else -1 for kk in ks], np.int64)
                te = np.array([models[kk].target_end(now) for kk in ks], np.int64)
                lt = np.array([leos[kk] for kk in ks], np.int64)
                dup = np.array([fed[kk][0].duplicated[0] if syncs[kk] else 0 for kk in ks], np.int8)
                tp = progress_lros(u, d, te, lt, dup)
                by_feed[TARGET_PROGRESS] = {kk: int(v) for kk, v in zip(ks, tp.tolist()) if v != TP_NONE}
                # As the poller hands them to the cache: the finest resolution first, so it wins a tie.
                by_feed = {TARGET_PROGRESS: by_feed[TARGET_PROGRESS], OFFSET_SYNCS: by_feed[OFFSET_SYNCS]}
        readings: LroTable = cache.update(by_feed, now, None, written_at)
        probed: dict[PartitionKey, float | None] = {}
        first_data: dict[PartitionKey, int] = {}
        data_to: dict[PartitionKey, int] = {}
        unprobed: set[PartitionKey] = set()
        if probe:
            fetcher.now = now
            probed = Poller._probe(poller, leos, list(leos), readings, first_data, unprobed,  # type: ignore[arg-type]
                                   data_to)
            poller._previous_poll = now
        obs = PollObservation(
            leo_at=t,
            now=now,
            leos=leos,
            lros=readings,
            log_starts=dict(starts) if read_starts else {},
            resolution_s=resolution,
            oldest_uncopied=probed,
            first_data=first_data,
            unprobed=unprobed,
            data_to=data_to,
        )
        snap = engine.update(obs)
        rows = snap.by_key()
        if read_starts:
            known_start.update(starts)
        truth: dict[PartitionKey, Truth] = {}
        for sp in partitions:
            kk = sp.key
            log, mirror = sp.log, sp.mirror
            a, vis = log.append_times, log.visible_times
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
            leo_now = log.leo(now)
            exists_now = nxt < leo_now
            oldest = a[nxt] if exists_now else None
            first_data = log.next_data[min(nxt, len(log))]  # the oldest data record not copied
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
            hi_data = log.next_data[min(hi_next, len(log))]
            # Nothing left to copy, as the sidecar can know it: a log start read at or past the LEO
            # (retention emptied the log behind the LRO). Caught up; what it deleted is lost.
            # Caught up at t in the sense the LRO gives (every record that existed at t copied, or
            # here deleted, by now): the time-lag truths below count from the last such poll too.
            emptied = R is not None and S_known is not None and S_known >= L
            if emptied:
                oldest = None
                last_emptied[kk] = t
            emptied_at = last_emptied.get(kk, -math.inf)
            truth[kk] = Truth(
                leo=L,
                log_start=starts[kk],
                log_start_known=S_known,
                lro=R,
                lro_max=Rmax,
                lro_since=since,
                lro_seen_at=None if reading is None else reading.changed_at,
                stale=False if reading is None else reading.stale,
                record_lag=None if R is None else 0 if emptied else max(0, L - nxt),
                caught_up=R is not None and (nxt >= L or emptied),
                oldest_uncopied_at=oldest,
                copied_through=None if hi_data >= L or emptied else max(vis[hi_data], emptied_at),
                busy_since=max(mirror.busy_start[first_data], emptied_at) if first_data < leo_now and not emptied
                else None,
                emptied_at=emptied_at,
                freshness=(now - oldest) if oldest is not None else 0.0,
                lost=mirror.never_copied_prefix[starts[kk]],
                lost_certain=c[0],
                lost_visible=0 if S_known is None or R is None else max(0, S_known - nxt),
                rewinds_seen=rewinds_seen.get(kk, 0),
                polls=k + 1,
                data_lag=None if R is None else log.data_lag(R, L),
                first_uncopied=first_data if first_data < L else None,
                probed=kk in probed,
                probe_answer=probed.get(kk),
                reported=None if reading is None else reading.offset,
                feeds={name: offsets[kk] for name, offsets in by_feed.items() if kk in offsets},
                sync=syncs.get(kk),
                target_end=models[kk].target_end(now) if kk in models else mirror.target_end(now),
                duplicated=bool(kk in fed and fed[kk][0].duplicated and fed[kk][0].duplicated[0]),
                duplicates_counted=fed[kk][0].duplicate_records if kk in fed else 0,
            )
        poll = Poll(k, t, now, read_starts, rows, truth)
        polls.append(poll)
        if on_poll is not None:
            on_poll(poll)
        k += 1
    return Run(polls, engine, list(partitions), interval, eps, params, ttl, start, models)


class _LogFetcher:
    """The source as the probe's consumer reads it (SourceProbe's Fetcher), at `now`: from each
    start, the first record the isolation level hands over (offset, its timestamp: the append
    time, and the end of the run of data records received after it: at most `received` offsets
    from the start, as a fetch's bytes bound it, up to the end and the first offset that is no
    data record), else (where the end was reached, None). A start below the log start is
    OFFSET_OUT_OF_RANGE (auto.offset.reset=error): unanswered."""

    def __init__(self, logs: dict[tuple[str, int], SourceLog], received: int = 16) -> None:
        self.logs = logs
        self.now = 0.0
        self.received = received

    def fetch(self, starts: Mapping[tuple[str, int], int], timeout_s: float
              ) -> dict[tuple[str, int], tuple[int, float | None] | tuple[int, float, int]]:
        out: dict[tuple[str, int], tuple[int, float | None] | tuple[int, float, int]] = {}
        for tp, s in starts.items():
            log = self.logs[tp]
            if s < log.log_start(self.now):
                continue
            end = log.leo(self.now)
            f = log.next_data[min(s, len(log))]
            if f < end:
                out[tp] = (f, log.append_times[f], min(log.data_until[f], end, max(s + self.received, f + 1)))
            else:
                out[tp] = (max(end, s), None)
        return out

    def close(self) -> None:
        pass


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
