"""LagEngine: record lag, time lag (KIP-16 transposed), freshness, rates, byte lag, retention,
states and window stats (docs/design.md §3)."""

from __future__ import annotations

import dataclasses
import math
from types import MappingProxyType
from typing import Mapping

from hypothesis import given, settings
from hypothesis import strategies as st

from mirrorlag.config.settings import EngineParams
from mirrorlag.engine import LagEngine
from tests.oracle import freshness
from tests.oracle.rates import RatePair, WindowRate, catch_up_s
from tests.oracle.retention import (
    headroom_records,
    headroom_s,
    log_start_window_s,
    newly_lost,
    records_lost,
)
from mirrorlag.model import (
    FlowId,
    LroReading,
    PartitionKey,
    PartitionRow,
    PollObservation,
    Snapshot,
    State,
)

AB = FlowId("A", "B")
CB = FlowId("C", "B")
K0 = PartitionKey("A", "B", "orders", 0)
K1 = PartitionKey("A", "B", "orders", 1)
K2 = PartitionKey("A", "B", "payments", 0)
C0 = PartitionKey("C", "B", "orders", 0)
NONE3 = (None, None, None)
READ = 0.5  # LROs are read this long after the LEO snapshot


def lro(offset: int, changed_at: float, *, stale: bool = False, feed: str = "callback") -> LroReading:
    return LroReading(offset=offset, feed=feed, changed_at=changed_at, stale=stale)


def engine(**params: float) -> LagEngine:
    p = EngineParams(**params)  # type: ignore[arg-type]
    return LagEngine(lambda flow: p)


def poll(
    eng: LagEngine,
    t: float,
    leos: Mapping[PartitionKey, int | None],
    lros: Mapping[PartitionKey, LroReading] | None = None,
    now: float | None = None,
) -> Snapshot:
    return eng.update(PollObservation(t, t + READ if now is None else now, leos, lros or {}))


def row(snap: Snapshot, key: PartitionKey = K0) -> PartitionRow:
    (found,) = [r for r in snap.rows if r.key == key]
    return found


def window(r: PartitionRow) -> tuple[float | None, float | None, float | None]:
    return (r.record_lag_min, r.record_lag_max, r.record_lag_avg)


def fresh(offset: int, t: float) -> LroReading:
    """An LRO that moved just before the LEO snapshot at t."""
    return lro(offset, t - 0.1)


# --- record lag and UNKNOWN ---


def test_no_lro_is_unknown_never_zero() -> None:
    r = row(poll(engine(), 100.0, {K0: 50}))
    assert r == PartitionRow(K0, State.UNKNOWN, 50, None, None, None, None, None, None, None, None)


def test_an_empty_partition_is_caught_up_with_no_lro() -> None:
    # MM2 writes no sync or commit for a partition it never copied: nothing to copy is IN_SYNC.
    eng = engine()
    r = row(poll(eng, 100.0, {K0: 0}))
    assert (r.state, r.lro, r.record_lag, r.time_lag_s, r.freshness_lag_s) == (State.IN_SYNC, None, 0, 0.0, 0.0)
    assert window(r) == (0.0, 0.0, 0.0)
    # Retention emptied it (log start = LEO): still nothing to copy.
    r = row(eng.update(PollObservation(115.0, 115.5, {K0: 40}, {}, {K0: 40})))
    assert (r.state, r.record_lag, r.records_lost, r.retention_headroom_records) == (State.IN_SYNC, 0, 0, 0)
    # A record arrives: no LRO, records to copy, so UNKNOWN here (the poller owes them from the log
    # start once the feeds are read); caught up at 115, the last poll it was empty.
    r = row(poll(eng, 130.0, {K0: 41}))
    assert (r.state, r.record_lag) == (State.UNKNOWN, None)
    r = row(poll(eng, 145.0, {K0: 41}, {K0: lro(39, 144.0, feed="log-start")}))
    assert (r.state, r.record_lag, r.time_lag_s) == (State.LAGGING, 1, 30.5)  # 30.5 s > max


def test_an_emptied_log_is_caught_up_whatever_the_lro_says() -> None:
    # The LRO of an idle transactional partition (100), its commit marker (101), all expired.
    r = row(engine().update(PollObservation(100.0, 100.5, {K0: 102}, {K0: lro(100, 50.0)}, {K0: 102})))
    assert (r.state, r.lro, r.record_lag, r.time_lag_s, r.time_lag_lower_bound) == (State.IN_SYNC, 100, 0, 0.0, False)
    assert (r.records_lost, r.records_lost_unverified) == (0, 1)  # the marker: deleted uncopied, kind unproved


def test_an_empty_new_log_is_reset_then_caught_up() -> None:
    eng = engine()
    poll(eng, 0.0, {K0: 100}, {K0: fresh(99, 0.0)})
    r = row(poll(eng, 15.0, {K0: 0}))  # recreated: the LEO went back
    assert (r.state, r.record_lag) == (State.RESET, None)
    r = row(poll(eng, 30.0, {K0: 0}))
    assert (r.state, r.record_lag, r.time_lag_s) == (State.IN_SYNC, 0, 0.0)


def test_caught_up_is_zero() -> None:
    r = row(poll(engine(), 100.0, {K0: 50}, {K0: lro(49, 99.0)}))
    assert r == PartitionRow(K0, State.IN_SYNC, 50, 49, "callback", 1.5, 0, 0.0, 0.0, 0.0, 0.0,
                             freshness_lag_s=0.0, catch_up_s=0.0)


def test_record_lag_is_leo_minus_lro_plus_one() -> None:
    r = row(poll(engine(), 100.0, {K0: 50}, {K0: lro(39, 99.0, feed="offset-syncs")}))
    assert r.record_lag == 10
    assert r.lro == 39 and r.lro_feed == "offset-syncs"
    assert r.state is State.IN_SYNC
    assert window(r) == (10.0, 10.0, 10.0)


def test_lro_beyond_leo_read_after_snapshot_is_caught_up_not_reset() -> None:
    # Records appended and copied between the LEO snapshot (t=100) and the LRO read.
    for changed_at in (100.0, 100.2):
        r = row(poll(engine(), 100.0, {K0: 50}, {K0: lro(55, changed_at)}))
        assert (r.state, r.record_lag, r.time_lag_s) == (State.IN_SYNC, 0, 0.0)


def test_empty_poll() -> None:
    snap = poll(engine(), 5.0, {})
    assert snap == Snapshot(5.0 + READ, ())


def test_snapshot_time_is_now() -> None:
    snap = poll(engine(), 100.0, {K0: 1}, now=103.0)
    assert snap.taken_at == 103.0


# --- time lag ---


def test_burst_copied_within_the_window_stays_in_sync() -> None:
    eng = engine()
    states = []
    for t, leo, off in [(0, 100, 99), (15, 10_000, 5_000), (30, 10_000, 9_999), (45, 10_050, 10_049)]:
        r = row(poll(eng, t, {K0: leo}, {K0: fresh(off, t)}))
        states.append((r.state, r.time_lag_s))
    # At 15 everything that existed at 0 is copied: caught up as of 0, time lag 15.5.
    assert states == [
        (State.IN_SYNC, 0.0),
        (State.IN_SYNC, 15.5),
        (State.IN_SYNC, 0.0),
        (State.IN_SYNC, 0.0),
    ]


def test_burst_not_copied_within_the_window_lags_then_recovers() -> None:
    eng = engine()
    got = []
    for t, leo, off in [(0, 100, 99), (15, 10_000, 5_000), (30, 10_000, 8_000), (45, 10_000, 9_999)]:
        r = row(poll(eng, t, {K0: leo}, {K0: fresh(off, t)}))
        got.append((r.state, r.time_lag_s, r.record_lag))
    assert got == [
        (State.IN_SYNC, 0.0, 0),
        (State.IN_SYNC, 15.5, 4_999),
        (State.LAGGING, 30.5, 1_999),  # 8001 < 10000 = LEO at 15: still caught up only as of 0
        (State.IN_SYNC, 0.0, 0),
    ]


def test_small_lag_that_never_catches_up_goes_lagging() -> None:
    # The mirror stays 14 records behind while the LEO grows 10 per poll: it never reaches even
    # the previous poll's LEO, so its time lag grows although its record lag is small.
    eng = engine()
    got = []
    for i in range(5):
        t = 15.0 * i
        leo = 100 + 10 * i
        r = row(poll(eng, t, {K0: leo}, {K0: fresh(leo - 15, t)}))
        got.append((r.state, r.record_lag, r.time_lag_s))
    assert got == [
        (State.IN_SYNC, 14, 0.5),  # never seen caught up: lower bound since the first poll
        (State.IN_SYNC, 14, 15.5),
        (State.LAGGING, 14, 30.5),
        (State.LAGGING, 14, 45.5),
        (State.LAGGING, 14, 60.5),
    ]


def test_small_lag_within_one_poll_of_growth_stays_in_sync() -> None:
    # 4 records behind while the LEO grows 10 per poll: everything that existed at the previous
    # poll is copied, so the time lag is about one poll interval.
    eng = engine()
    got = []
    for i in range(5):
        t = 15.0 * i
        leo = 100 + 10 * i
        r = row(poll(eng, t, {K0: leo}, {K0: fresh(leo - 5, t)}))
        got.append((r.state, r.time_lag_s))
    assert got == [(State.IN_SYNC, 0.5)] + [(State.IN_SYNC, 15.5)] * 4


def test_last_caught_up_is_the_newest_poll_the_lro_reached() -> None:
    eng = engine()
    poll(eng, 0.0, {K0: 100}, {K0: fresh(99, 0.0)})  # caught up at 0
    poll(eng, 15.0, {K0: 200}, {K0: fresh(120, 15.0)})  # reached LEO@0: last caught up 0
    r = row(poll(eng, 30.0, {K0: 300}, {K0: fresh(250, 30.0)}))  # reached LEO@15
    assert r.time_lag_s == 30.5 - 15.0
    r = row(poll(eng, 45.0, {K0: 400}, {K0: fresh(260, 45.0)}))  # not LEO@30: stays 15
    assert r.time_lag_s == 45.5 - 15.0
    assert r.state is State.LAGGING


def test_never_caught_up_uses_first_poll_with_both_as_lower_bound() -> None:
    eng = engine()
    poll(eng, 0.0, {K0: 1_000})  # no LRO yet: not a start for the lower bound
    r = row(poll(eng, 15.0, {K0: 2_000}, {K0: fresh(10, 15.0)}))
    assert r.time_lag_s == 0.5  # 11 < 1000 (LEO@0), first poll with both is 15
    r = row(poll(eng, 30.0, {K0: 3_000}, {K0: fresh(20, 30.0)}))
    assert r.time_lag_s == 15.5
    r = row(poll(eng, 45.0, {K0: 4_000}, {K0: fresh(30, 45.0)}))
    assert (r.state, r.time_lag_s) == (State.LAGGING, 30.5)


def test_missing_lro_still_records_the_leo_snapshot() -> None:
    eng = engine()
    r = row(poll(eng, 0.0, {K0: 100}))
    assert r.state is State.UNKNOWN
    # Everything that existed at 0 is copied by 15: caught up as of 0.
    r = row(poll(eng, 15.0, {K0: 200}, {K0: fresh(99, 15.0)}))
    assert (r.state, r.time_lag_s) == (State.IN_SYNC, 15.5)


def test_unreadable_leo_is_unknown_and_leaves_time_lag_state_alone() -> None:
    eng = engine()
    poll(eng, 0.0, {K0: 100}, {K0: fresh(49, 0.0)})
    r = row(poll(eng, 15.0, {K0: None}, {K0: lro(60, 14.0)}))
    assert r == PartitionRow(K0, State.UNKNOWN, None, 60, "callback", 1.5, None, 50.0, 50.0, 50.0, None)
    # The previous snapshot is still (100, 0): the LRO reached it, so caught up as of 0, not 15.
    r = row(poll(eng, 30.0, {K0: 120}, {K0: fresh(99, 30.0)}))
    assert (r.state, r.time_lag_s, r.record_lag) == (State.LAGGING, 30.5, 20)


def test_unreadable_leo_without_lro() -> None:
    r = row(poll(engine(), 0.0, {K0: None}))
    assert r == PartitionRow(K0, State.UNKNOWN, None, None, None, None, None, None, None, None, None)


# --- RESET ---


def test_leo_going_backwards_is_reset_and_restarts_time_lag() -> None:
    eng = engine()
    poll(eng, 0.0, {K0: 1_000}, {K0: fresh(500, 0.0)})
    r = row(poll(eng, 15.0, {K0: 800}, {K0: fresh(600, 15.0)}))
    # The LRO is the old log's: no record lag until evidence about the new log (issue 23).
    assert (r.state, r.record_lag, r.time_lag_s) == (State.RESET, None, None)
    assert window(r) == (499.0, 499.0, 499.0)  # the earlier sample; nothing recorded now
    # Restarted from the RESET poll: 701 < 800 (LEO@15), never caught up since 15.
    r = row(poll(eng, 30.0, {K0: 900}, {K0: fresh(700, 30.0)}))
    assert (r.state, r.time_lag_s) == (State.IN_SYNC, 15.5)
    assert window(r) == (199.0, 499.0, 349.0)


def test_recreated_topic_with_old_lro_stays_reset_until_the_mirror_moves() -> None:
    eng = engine()
    poll(eng, 0.0, {K0: 1_000}, {K0: lro(999, -1.0)})
    r = row(poll(eng, 15.0, {K0: 10}, {K0: lro(999, -1.0)}))  # log went backwards
    assert (r.state, r.record_lag, r.time_lag_s, r.lro) == (State.RESET, None, None, 999)
    r = row(poll(eng, 30.0, {K0: 12}, {K0: lro(999, -1.0)}))  # LRO known before t, beyond LEO
    assert (r.state, r.record_lag, r.time_lag_s) == (State.RESET, None, None)
    r = row(poll(eng, 45.0, {K0: 15}, {K0: lro(14, 44.0)}))
    assert (r.state, r.record_lag, r.time_lag_s) == (State.IN_SYNC, 0, 0.0)


def test_old_lro_beyond_leo_is_reset_even_on_first_sight() -> None:
    r = row(poll(engine(), 100.0, {K0: 50}, {K0: lro(55, 99.9)}))
    assert (r.state, r.record_lag, r.time_lag_s) == (State.RESET, None, None)
    assert window(r) == NONE3


def test_leo_going_backwards_without_lro_forgets_old_catch_up() -> None:
    eng = engine()
    poll(eng, 0.0, {K0: 100}, {K0: fresh(99, 0.0)})  # caught up at 0
    r = row(poll(eng, 15.0, {K0: 10}))  # new log, no LRO
    assert (r.state, r.record_lag) == (State.RESET, None)
    r = row(poll(eng, 30.0, {K0: 20}, {K0: fresh(5, 30.0)}))
    # 6 < 10 (LEO@15) and the catch-up at 0 was on the old log: lower bound from 30.
    assert (r.state, r.time_lag_s) == (State.IN_SYNC, 0.5)


def test_reset_beats_stalled() -> None:
    eng = engine()
    poll(eng, 0.0, {K0: 1_000}, {K0: lro(10, -100.0, stale=True)})
    r = row(poll(eng, 15.0, {K0: 500}, {K0: lro(10, -100.0, stale=True)}))
    assert (r.state, r.record_lag) == (State.RESET, None)


# --- STALLED and LAGGING ---


def test_out_of_sync_with_an_lro_not_moving_is_stalled() -> None:
    e = engine()
    poll(e, 60.0, {K0: 40}, {K0: lro(39, 59.0)})  # caught up at 60
    r = row(poll(e, 100.0, {K0: 50}, {K0: lro(39, 59.0)}))  # time lag 40.5, LRO unmoved for 41.5
    assert (r.state, r.record_lag, r.lro_age_s, r.time_lag_s) == (State.STALLED, 10, 41.5, 40.5)


def test_lro_age_exactly_max_is_not_stalled() -> None:
    r = row(poll(engine(), 100.0, {K0: 50}, {K0: lro(39, 70.5)}))
    assert r.state is State.IN_SYNC


def test_stale_lro_out_of_sync_is_stalled_and_a_moving_one_lagging() -> None:
    # docs/design.md §4: an evicted (stale) LRO stays; STALLED once out of sync, even if its age is
    # under the max (the TTL, 20 s, is shorter than replication.lag.time.max.ms, 30 s).
    for stale, expected in ((True, State.STALLED), (False, State.LAGGING)):
        e = engine()
        poll(e, 60.0, {K0: 31}, {K0: lro(30, 59.0)})  # caught up at 60
        r = row(poll(e, 95.0, {K0: 50}, {K0: lro(39, 70.0, stale=stale)}))
        assert (r.state, r.record_lag, r.time_lag_s, r.lro_age_s) == (expected, 10, 35.5, 25.5)


def test_a_stale_idle_partition_does_not_flap_on_a_single_new_record() -> None:
    # Caught up and idle for long (stale LRO); one record arrives just before a poll.
    e = engine()
    poll(e, 100.0, {K0: 50}, {K0: lro(49, 0.0, stale=True)})
    r = row(poll(e, 115.0, {K0: 51}, {K0: lro(49, 0.0, stale=True)}))
    assert (r.state, r.record_lag, r.time_lag_s) == (State.IN_SYNC, 1, 15.5)


def test_stale_or_old_lro_of_caught_up_partition_is_in_sync() -> None:
    # An idle partition must not look stalled just because nothing was copied lately.
    for reading in (lro(49, 0.0, stale=True), lro(49, -1_000.0)):
        r = row(poll(engine(), 100.0, {K0: 50}, {K0: reading}))
        assert (r.state, r.record_lag, r.time_lag_s) == (State.IN_SYNC, 0, 0.0)


def test_stalled_beats_lagging() -> None:
    eng = engine()
    poll(eng, 0.0, {K0: 100}, {K0: lro(99, -1.0)})
    r = row(poll(eng, 15.0, {K0: 200}, {K0: lro(99, -1.0)}))  # lag, LRO not moved for 16.5 s
    assert (r.state, r.time_lag_s) == (State.IN_SYNC, 15.5)
    r = row(poll(eng, 30.0, {K0: 300}, {K0: lro(99, -1.0)}))
    assert (r.state, r.time_lag_s) == (State.STALLED, 30.5)  # LRO age 31.5 > 30


def test_lagging_needs_time_lag_strictly_above_max() -> None:
    eng = engine(lag_time_max_s=15.5)
    poll(eng, 0.0, {K0: 100}, {K0: fresh(99, 0.0)})
    r = row(poll(eng, 15.0, {K0: 200}, {K0: fresh(150, 15.0)}))
    assert (r.state, r.time_lag_s) == (State.IN_SYNC, 15.5)
    r = row(poll(eng, 30.0, {K0: 300}, {K0: fresh(160, 30.0)}))
    assert (r.state, r.time_lag_s) == (State.LAGGING, 30.5)


# --- window stats ---


def test_window_stats_follow_sampled_stat() -> None:
    eng = engine(sample_window_s=30.0, num_samples=2)
    got = []
    for t, lag in [(0, 10), (15, 30), (30, 20), (45, 0), (60, 5)]:
        leo = 1_000 + t
        got.append(window(row(poll(eng, t, {K0: leo}, {K0: fresh(leo - 1 - lag, t)}))))
    assert got == [
        (10.0, 10.0, 10.0),
        (10.0, 30.0, 20.0),  # same sample (started at 0.5)
        (10.0, 30.0, 20.0),  # second sample starts at 30.5
        (0.0, 30.0, 15.0),
        (0.0, 20.0, 25.0 / 3),  # first sample recycled at 60.5: {20, 0} + {5}
    ]


def test_window_expires_while_unknown() -> None:
    eng = engine()
    poll(eng, 0.0, {K0: 100}, {K0: fresh(89, 0.0)})
    assert window(row(poll(eng, 15.0, {K0: 110}))) == (10.0, 10.0, 10.0)  # no LRO: not recorded
    assert window(row(poll(eng, 59.0, {K0: 120}))) == (10.0, 10.0, 10.0)
    assert window(row(poll(eng, 60.0, {K0: 130}))) == NONE3  # sample started at 0.5 purged


def test_window_config_change_restarts_the_window() -> None:
    current = {"p": EngineParams(sample_window_s=30.0, num_samples=2)}
    eng = LagEngine(lambda flow: current["p"])
    poll(eng, 0.0, {K0: 100}, {K0: fresh(89, 0.0)})
    current["p"] = EngineParams(sample_window_s=60.0, num_samples=3)
    r = row(poll(eng, 15.0, {K0: 120}, {K0: fresh(99, 15.0)}))
    assert window(r) == (20.0, 20.0, 20.0)


# --- params ---


def test_params_are_per_flow_and_asked_once_per_flow_per_update() -> None:
    calls: list[FlowId] = []
    by_flow = {AB: EngineParams(lag_time_max_s=30.0), CB: EngineParams(lag_time_max_s=100.0)}

    def params(flow: FlowId) -> EngineParams:
        calls.append(flow)
        return by_flow[flow]

    eng = LagEngine(params)
    keys = [K0, K1, K2, C0]
    poll(eng, 0.0, {k: 100 for k in keys}, {k: fresh(99, 0.0) for k in keys})
    assert sorted(calls) == [AB, CB]
    calls.clear()
    poll(eng, 15.0, {k: 200 for k in keys}, {k: fresh(150, 15.0) for k in keys})
    assert sorted(calls) == [AB, CB]
    snap = poll(eng, 30.0, {k: 300 for k in keys}, {k: fresh(160, 30.0) for k in keys})
    assert {r.key: r.state for r in snap.rows} == {
        K0: State.LAGGING,
        K1: State.LAGGING,
        K2: State.LAGGING,
        C0: State.IN_SYNC,  # 30.5 <= 100
    }


def test_params_change_takes_effect_at_the_next_update() -> None:
    current = {"p": EngineParams(lag_time_max_s=30.0)}
    eng = LagEngine(lambda flow: current["p"])
    poll(eng, 0.0, {K0: 100}, {K0: fresh(99, 0.0)})
    poll(eng, 15.0, {K0: 200}, {K0: fresh(150, 15.0)})
    current["p"] = EngineParams(lag_time_max_s=10.0)
    r = row(poll(eng, 20.0, {K0: 250}, {K0: fresh(160, 20.0)}))
    assert (r.state, r.time_lag_s) == (State.LAGGING, 20.5)


def test_flow_that_left_the_config_is_not_asked_for_params() -> None:
    by_flow = {AB: EngineParams(), CB: EngineParams()}
    eng = LagEngine(lambda flow: by_flow[flow])
    poll(eng, 0.0, {K0: 10, C0: 10}, {K0: fresh(9, 0.0), C0: fresh(9, 0.0)})
    del by_flow[CB]
    snap = poll(eng, 15.0, {K0: 10}, {K0: fresh(9, 15.0)})
    assert [(r.key, r.state) for r in snap.rows] == [(K0, State.IN_SYNC), (C0, State.GONE)]
    poll(eng, 30.0, {K0: 10}, {K0: fresh(9, 30.0)})


# --- GONE and row order ---


def test_gone_is_reported_once_with_the_last_lro_then_dropped() -> None:
    eng = engine()
    poll(eng, 0.0, {K0: 100, K1: 100}, {K0: fresh(99, 0.0), K1: lro(80, -5.0, feed="offset-syncs")})
    assert len(eng) == 2
    snap = poll(eng, 15.0, {K0: 110}, {K0: fresh(109, 15.0)})
    assert snap.rows[-1] == PartitionRow(
        K1, State.GONE, None, 80, "offset-syncs", None, None, None, None, None, None
    )
    assert len(eng) == 1
    snap = poll(eng, 30.0, {K0: 120}, {K0: fresh(119, 30.0)})
    assert [r.key for r in snap.rows] == [K0]


def test_gone_prefers_an_lro_still_in_this_poll() -> None:
    eng = engine()
    poll(eng, 0.0, {K0: 100}, {K0: fresh(90, 0.0)})
    r = row(poll(eng, 15.0, {}, {K0: fresh(95, 15.0)}))
    assert (r.state, r.lro) == (State.GONE, 95)


def test_gone_without_any_lro() -> None:
    eng = engine()
    poll(eng, 0.0, {K0: None})
    r = row(poll(eng, 15.0, {}))
    assert r == PartitionRow(K0, State.GONE, None, None, None, None, None, None, None, None, None)


def test_partition_that_comes_back_starts_fresh() -> None:
    eng = engine()
    poll(eng, 0.0, {K0: 1_000}, {K0: fresh(900, 0.0)})
    poll(eng, 15.0, {}, {})
    # A lower LEO than before is not a RESET: the old state was dropped with the GONE row.
    r = row(poll(eng, 30.0, {K0: 50}, {K0: fresh(39, 30.0)}))
    assert (r.state, r.record_lag, r.time_lag_s) == (State.IN_SYNC, 10, 0.5)
    assert window(r) == (10.0, 10.0, 10.0)


def test_rows_are_sorted_with_gone_rows_last() -> None:
    eng = engine()
    k = [PartitionKey("A", "B", topic, p) for topic in ("b", "a", "c") for p in (2, 10, 1)]
    poll(eng, 0.0, {key: 1 for key in k})
    snap = poll(eng, 15.0, {key: 1 for key in reversed(k[3:])} | {PartitionKey("A", "B", "z", 0): 1})
    keys = [r.key for r in snap.rows]
    live = sorted(k[3:] + [PartitionKey("A", "B", "z", 0)])
    assert keys == live + sorted(k[:3])
    assert [r.state for r in snap.rows[len(live):]] == [State.GONE] * 3


def test_order_is_rebuilt_when_the_partition_set_changes_at_the_same_size() -> None:
    eng = engine()
    poll(eng, 0.0, {K0: 1, K1: 1})
    snap = poll(eng, 15.0, {K1: 1, K2: 1})
    assert [(r.key, r.state) for r in snap.rows] == [
        (K1, State.UNKNOWN),
        (K2, State.UNKNOWN),
        (K0, State.GONE),
    ]
    snap = poll(eng, 30.0, {K2: 1, K1: 1})
    assert [r.key for r in snap.rows] == [K1, K2]


def test_equal_keys_and_read_only_mappings_work() -> None:
    eng = engine()
    for i in range(3):
        t = 15.0 * i
        key = PartitionKey("A", "B", "".join(["ord", "ers"]), 0)  # equal, not identical
        snap = poll(
            eng,
            t,
            MappingProxyType({key: 100 + i}),
            MappingProxyType({PartitionKey(*key): fresh(99 + i, t)}),
        )
        assert [(r.key, r.state, r.record_lag) for r in snap.rows] == [(K0, State.IN_SYNC, 0)]


def test_update_does_not_touch_its_input() -> None:
    leos = {K0: 100, K1: None}
    lros = {K0: fresh(50, 0.0)}
    obs = PollObservation(0.0, 0.5, leos, lros)
    engine().update(obs)
    assert leos == {K0: 100, K1: None} and lros == {K0: fresh(50, 0.0)}


# --- freshness lag ---


def test_freshness_is_how_long_ago_the_next_record_to_copy_was_appended() -> None:
    eng = engine()
    r = row(poll(eng, 0.0, {K0: 1_000}, {K0: lro(999, -1.0)}))
    assert (r.freshness_lag_s, r.freshness_lower_bound) == (0.0, False)  # caught up
    # 10 records/s. At 15 the mirror needs 1_100 next, appended when the LEO passed 1_101: 10.1.
    r = row(poll(eng, 15.0, {K0: 1_150}, {K0: lro(1_099, 14.0)}))
    assert (r.freshness_lag_s, r.freshness_lower_bound) == (15.5 - 10.1, False)
    assert r.time_lag_s == 15.5  # caught up as of 0: time lag says "since", freshness "how old"
    # Stuck there: the same record, now older (bracketed by older points of the table).
    r = row(poll(eng, 30.0, {K0: 1_300}, {K0: lro(1_099, 14.0)}))
    assert (r.freshness_lag_s, r.freshness_lower_bound) == (30.5 - 10.1, False)
    assert (r.state, r.time_lag_s) == (State.LAGGING, 30.5)


def test_a_clock_that_stepped_back_never_gives_a_negative_freshness() -> None:
    eng = engine()
    poll(eng, 0.0, {K0: 1_000}, {K0: lro(999, -1.0)})
    r = row(poll(eng, 15.0, {K0: 1_150}, {K0: lro(1_099, 3.0)}, now=5.0))  # read "before" 10.1
    assert (r.freshness_lag_s, r.freshness_lower_bound) == (0.0, False)


def test_an_idle_partition_the_mirror_has_not_finished_keeps_aging() -> None:
    eng = engine()
    poll(eng, 0.0, {K0: 1_000}, {K0: lro(999, -1.0)})
    got = []
    for t in (15.0, 30.0, 600.0, 86_400.0):
        # 100 records came by 15, then nothing; the mirror stopped at 999.
        r = row(poll(eng, t, {K0: 1_100}, {K0: lro(999, -1.0)}))
        got.append((r.freshness_lag_s, r.freshness_lower_bound))
    # Record 1_000 was appended at 0.15 (not "now - last sample", never NaN or years).
    assert got == [(t + 0.5 - 0.15, False) for t in (15.0, 30.0, 600.0, 86_400.0)]


def test_an_idle_caught_up_partition_is_zero_forever() -> None:
    eng = engine()
    for t in (0.0, 15.0, 3_600.0, 30 * 86_400.0):
        r = row(poll(eng, t, {K0: 500}, {K0: lro(499, -1.0, stale=True)}))
        assert (r.freshness_lag_s, r.freshness_lower_bound, r.state) == (0.0, False, State.IN_SYNC)


def test_a_record_older_than_the_table_is_a_flagged_lower_bound() -> None:
    eng = engine(freshness_points=3)
    got = []
    for k in range(5):
        t = 15.0 * k
        r = row(poll(eng, t, {K0: 1_000 + 100 * k}, {K0: lro(999, -1.0)}))
        got.append((r.freshness_lag_s, r.freshness_lower_bound))
    assert got == [
        (0.0, False),
        (15.5 - 0.15, False),
        (30.5 - 0.15, False),  # the table (3 points) still starts at 0
        (45.5 - 15.0, True),  # it starts at 15 now: at least 30.5 s old
        (60.5 - 30.0, True),
    ]


def test_older_than_the_first_poll_is_a_lower_bound_from_the_first_poll() -> None:
    eng = engine()
    r = row(poll(eng, 100.0, {K0: 5_000}, {K0: lro(999, 50.0)}))
    assert (r.freshness_lag_s, r.freshness_lower_bound) == (0.5, True)
    r = row(poll(eng, 115.0, {K0: 5_000}, {K0: lro(1_999, 110.0)}))
    assert (r.freshness_lag_s, r.freshness_lower_bound) == (15.5, True)


def test_polls_without_an_lro_still_feed_the_table() -> None:
    eng = engine()
    poll(eng, 0.0, {K0: 1_000})
    poll(eng, 15.0, {K0: 1_150})
    r = row(poll(eng, 30.0, {K0: 1_300}, {K0: lro(1_099, 29.0)}))
    assert (r.freshness_lag_s, r.freshness_lower_bound) == (30.5 - 10.1, False)


def test_a_reset_starts_a_new_table() -> None:
    eng = engine()
    poll(eng, 0.0, {K0: 1_000}, {K0: lro(999, -1.0)})
    r = row(poll(eng, 15.0, {K0: 1_100}, {K0: lro(1_199, 10.0)}))  # an old LRO beyond the LEO
    assert (r.state, r.freshness_lag_s, r.freshness_lower_bound) == (State.RESET, None, False)
    r = row(poll(eng, 30.0, {K0: 1_200}, {K0: lro(1_049, 29.0)}))
    # The old log's (1_000, 0) is gone: record 1_050 is older than the new table.
    assert (r.freshness_lag_s, r.freshness_lower_bound) == (30.5 - 15.0, True)


def test_the_table_stays_bounded_in_memory() -> None:
    """A table keeps the points still needed: from the one below the oldest uncopied record."""
    eng = engine(freshness_points=4)
    for k in range(50):
        poll(eng, 15.0 * k, {K0: 100 * k, K1: 7, K2: 10 * k + 10},
             {K0: lro(100 * k - 50, 15.0 * k), K1: lro(6, 0.0), K2: lro(4, 0.0)})
    tables = dict(zip(eng._keys, eng._c.f_count.tolist()))
    assert tables[K0] == 2  # a mirror a little behind: the point below LRO + 1 and the newest
    assert tables[K1] == 1  # caught up (and idle): the newest point only
    assert 4 <= tables[K2] <= 4 + freshness.slack(4)  # stalled: as many as the table holds, no more
    assert eng._c.t_leo.shape[1] == 4 + freshness.slack(4)  # every row's table is that wide, no wider


def test_table_planes_past_the_longest_table_are_given_back() -> None:
    """After an outage the tables shrink (pruned) and the pages of the planes past the longest go
    back to the system: they read as zeros again, which only the release makes them do."""
    from mirrorlag.engine.columns import PartitionColumns

    c = PartitionColumns(8192, 2, 61)  # a plane is 32 KiB: whole pages
    c.t_leo[:, :40] = 7  # an outage filled 40 points of every table
    c.f_count[:] = 40
    c.release_table_planes()
    assert int(c.t_leo[:, 39].min()) == 7  # still in use: kept
    c.f_count[:] = 2  # it ended: every table pruned to two points
    c.f_count[5] = 3
    c.release_table_planes()
    assert int(c.t_leo[:, :4].min()) == 7  # the points in use and the next point's slot stay
    assert int(c.t_leo[:, 5:].max()) == 0  # the rest went back (the page holding plane 4's end may stay)


# --- rates, catch-up and byte lag ---


def test_rates_over_the_sample_windows() -> None:
    eng = engine()  # 2 samples of 30 s: the base checkpoint moves every 30 s
    got = []
    for t, leo, off in [(0, 1_000, 999), (15, 1_150, 1_099), (30, 1_300, 1_249), (45, 1_600, 1_399),
                        (60, 1_600, 1_549), (75, 1_900, 1_699)]:
        r = row(poll(eng, float(t), {K0: leo}, {K0: lro(off, t - 0.1)}))
        got.append((r.append_rate, r.copy_rate))
    assert got == [
        (None, None),  # one poll: no span yet
        (150 / 15.0, 100 / 15.0),
        (300 / 30.0, 250 / 30.0),  # the base is still the first poll (0; 0.5 for the LRO)
        (600 / 45.0, 400 / 45.0),
        (300 / 30.0, 300 / 30.0),  # base moved to the poll at 30
        (600 / 45.0, 450 / 45.0),
    ]


def test_catch_up_when_the_mirror_gains() -> None:
    eng = engine()
    r = row(poll(eng, 0.0, {K0: 1_000}, {K0: lro(499, -1.0)}))
    assert r.catch_up_s is None  # no rates yet
    r = row(poll(eng, 15.0, {K0: 1_075}, {K0: lro(649, 15.0)}))
    assert (r.record_lag, r.append_rate, r.copy_rate) == (425, 5.0, 10.0)
    assert r.catch_up_s == 425 / 5.0
    r = row(poll(eng, 30.0, {K0: 1_300}, {K0: lro(799, 30.0)}))
    assert r.catch_up_s is None  # 10/s appended, 10/s copied: not gaining


def test_caught_up_needs_no_catch_up() -> None:
    r = row(poll(engine(), 0.0, {K0: 100}, {K0: lro(99, -1.0)}))
    assert (r.catch_up_s, r.append_rate, r.copy_rate) == (0.0, None, None)


def test_a_rewind_restarts_the_copy_rate_not_the_append_rate() -> None:
    eng = engine()
    poll(eng, 0.0, {K0: 1_000}, {K0: lro(999, -1.0)})
    r = row(poll(eng, 15.0, {K0: 1_150}, {K0: lro(1_149, 14.0)}))
    assert (r.append_rate, r.copy_rate) == (10.0, 10.0)
    r = row(poll(eng, 30.0, {K0: 1_300}, {K0: lro(1_000, 29.0)}))  # MM2 resumed from 1_000
    assert (r.state, r.append_rate, r.copy_rate) == (State.REWIND, 10.0, None)  # never negative
    r = row(poll(eng, 45.0, {K0: 1_450}, {K0: lro(1_150, 44.0)}))
    assert (r.append_rate, r.copy_rate) == (10.0, 10.0)


def test_rates_restart_on_a_new_log() -> None:
    eng = engine()
    poll(eng, 0.0, {K0: 1_000}, {K0: lro(999, -1.0)})
    poll(eng, 15.0, {K0: 1_150}, {K0: lro(1_149, 14.0)})
    r = row(poll(eng, 30.0, {K0: 100}, {K0: lro(99, 29.0)}))  # recreated
    assert (r.state, r.append_rate, r.copy_rate) == (State.RESET, None, None)
    r = row(poll(eng, 45.0, {K0: 250}, {K0: lro(249, 44.0)}))
    assert (r.append_rate, r.copy_rate) == (None, None)  # the first poll with both on the new log
    r = row(poll(eng, 60.0, {K0: 400}, {K0: lro(399, 59.0)}))
    assert (r.append_rate, r.copy_rate) == (10.0, 10.0)


def test_byte_lag_is_an_estimate_only_where_sizes_are_known() -> None:
    eng = engine()
    keys = {K0: 100, C0: 100}
    lros = {K0: lro(96, -1.0), C0: lro(96, -1.0)}
    snap = eng.update(PollObservation(0.0, 0.5, keys, lros, {}, {AB: 100.5}))
    assert row(snap, K0).byte_lag_estimate == 302  # 3 x 100.5, rounded
    assert row(snap, C0).byte_lag_estimate is None  # no feed knows C->B's sizes: absent, not 0
    snap = eng.update(PollObservation(15.0, 15.5, keys, {K0: lro(99, 15.0), C0: lro(96, -1.0)}, {},
                                      {AB: 100.5, CB: 2.0}))
    assert (row(snap, K0).byte_lag_estimate, row(snap, C0).byte_lag_estimate) == (0, 6)
    snap = eng.update(PollObservation(30.0, 30.5, keys, lros, {}, {}))
    assert (row(snap, K0).byte_lag_estimate, row(snap, C0).byte_lag_estimate) == (None, None)


def test_rows_of_every_kind_name_every_field() -> None:
    eng = engine()
    poll(eng, 0.0, {K0: 100, K1: 100}, {K0: lro(50, -1.0)})
    snap = eng.update(PollObservation(15.0, 15.5, {K0: 10, K2: None}, {K0: lro(50, -1.0), K2: lro(3, 1.0)},
                                      {K0: 5}, {AB: 10.0}))
    assert {r.state for r in snap.rows} == {State.RESET, State.UNKNOWN, State.GONE}
    for r in snap.rows:
        assert type(r) is PartitionRow and len(r) == len(PartitionRow._fields)
        assert r == PartitionRow(*r)


# --- properties ---

KEYS = [K0, K1, C0]
MAX = 30.0


@st.composite
def polls(draw):
    """Random polls over a few partitions: LEOs that jump around (also backwards) or are
    unreadable, LROs that are missing, behind, caught up or beyond, fresh, old or stale,
    partitions that leave and come back; log starts read now and then (behind, at or beyond the
    LRO, sometimes going back) and flows whose record sizes are known or not."""
    out = []
    t = 1_000.0
    starts: dict[PartitionKey, int] = {}  # log starts mostly advance, as retention moves them
    for _ in range(draw(st.integers(min_value=1, max_value=20))):
        t += draw(st.floats(min_value=0.5, max_value=40.0))
        now = t + draw(st.floats(min_value=0.01, max_value=3.0))
        leos: dict[PartitionKey, int | None] = {}
        lros: dict[PartitionKey, LroReading] = {}
        log_starts: dict[PartitionKey, int] = {}
        for key in KEYS:
            if draw(st.integers(0, 9)) == 0:
                continue  # not in the flow this poll
            leo = draw(st.one_of(st.none(), st.integers(0, 300)))
            leos[key] = leo
            if draw(st.booleans()):
                base = leo if leo is not None else 150
                off = max(-1, base - 1 + draw(st.integers(-60, 5)))
                age = draw(st.sampled_from([0.0, 0.2, 5.0, 29.0, 31.0, 100.0]))
                lros[key] = lro(off, now - age, stale=draw(st.booleans()))
            if draw(st.integers(0, 2)) == 0:
                if draw(st.integers(0, 4)) == 0:
                    start = draw(st.integers(0, 300))  # anywhere, also back: a new log
                else:
                    start = starts.get(key, 0) + draw(st.integers(0, 60))
                log_starts[key] = starts[key] = start
        if draw(st.integers(0, 4)) == 0:
            log_starts[PartitionKey("A", "B", "elsewhere", 0)] = 5  # not in the flows: ignored
        sizes = {flow: draw(st.sampled_from([1.0, 100.5, 1024.0])) for flow in (AB, CB) if draw(st.booleans())}
        # Every record is data (no transactions): what the probe would prove of LRO + 1, so that
        # deleted uncopied offsets are lost records (issue 30: "Lost means data").
        first_data = {k: r.offset + 1 for k, r in lros.items()}
        # Every offset is one (as if the probe had received them all: the model counts every
        # deleted uncopied offset lost; test_retention holds the engine to what a probe proves).
        data_to = dict.fromkeys(first_data, 2 ** 62)
        out.append(PollObservation(t, now, leos, lros, log_starts, sizes, first_data=first_data, data_to=data_to))
        t = now
    return out


POINTS = 4  # a small freshness table, so that the properties reach its bound
WARN = 200.0
ORACLE_PARAMS = EngineParams(lag_time_max_s=MAX, freshness_points=POINTS, retention_warn_s=WARN)
NEW_FIELDS = (
    "freshness_lag_s", "freshness_lower_bound", "byte_lag_estimate", "append_rate", "copy_rate",
    "catch_up_s", "log_start", "retention_headroom_records", "retention_headroom_s", "records_lost",
)


class _Model:
    """docs/design.md §3 read literally, slowly: the oracle for the engine's optimised loop.

    Freshness uses a plain list of points, scanned; the rate estimators are the reference
    classes of `rates` (their schedule is a choice, not part of §3), fed what the engine feeds
    its inlined copies; retention uses the `retention` functions.
    """

    def __init__(self, params: EngineParams = ORACLE_PARAMS) -> None:
        self.p = params
        self.window = params.sample_window_s * params.num_samples
        self.prev: dict[PartitionKey, tuple[int, float]] = {}
        self.lcu: dict[PartitionKey, float] = {}
        self.first: dict[PartitionKey, float] = {}
        self.seen: set[PartitionKey] = set()
        self.lro_seen: dict[PartitionKey, int] = {}  # last LRO on the current log
        self.mark: dict[PartitionKey, int] = {}  # LRO before a rewind, until regained
        self.points: dict[PartitionKey, list[tuple[int, float]]] = {}  # (LEO, time), idle runs collapsed
        self.rates: dict[PartitionKey, RatePair] = {}
        self.log_start: dict[PartitionKey, int] = {}
        self.log_start_rate: dict[PartitionKey, WindowRate] = {}
        self.log_start_rate_now: dict[PartitionKey, float | None] = {}
        self.lost_through: dict[PartitionKey, int] = {}
        self.lost_total: dict[FlowId, int] = {}

    def _forget(self, key: PartitionKey, *stores: dict) -> None:
        for d in stores:
            d.pop(key, None)

    def _add_point(self, key: PartitionKey, leo: int, t: float) -> None:
        pts = self.points.setdefault(key, [])
        if len(pts) >= 2 and pts[-1][0] == leo and pts[-2][0] == leo:
            pts[-1] = (leo, t)
        else:
            pts.append((leo, t))

    def _freshness(self, key: PartitionKey, nxt: int, now: float) -> tuple[float, bool]:
        pts = self.points[key][-max(2, self.p.freshness_points):]
        for i, (leo, t) in enumerate(pts):
            if leo > nxt:  # record nxt was appended by t
                if i == 0:
                    return (max(0.0, now - t), True)
                l0, t0 = pts[i - 1]
                return (max(0.0, now - (t0 + (nxt + 1 - l0) * (t - t0) / (leo - l0))), False)
        return (0.0, False)

    def _new_log(self, key: PartitionKey, t: float, read_now: bool) -> None:
        self._forget(key, self.points, self.rates, self.lost_through)
        self.log_start_rate_now[key] = None
        if read_now:
            self.log_start_rate[key] = WindowRate(self.log_start[key], t)
        else:
            self._forget(key, self.log_start, self.log_start_rate)

    def _read_log_start(self, key: PartitionKey, value: int, t: float) -> None:
        known = self.log_start.get(key)
        self.log_start[key] = value
        if known is None or value < known:  # first reading on this log, or a new log
            if known is not None:
                self.lost_through.pop(key, None)
            self.log_start_rate[key] = WindowRate(value, t)
            self.log_start_rate_now[key] = None
        else:
            window = log_start_window_s(self.window, self.p.retention_warn_s)
            self.log_start_rate_now[key] = self.log_start_rate[key].update(value, t, window)

    def empty(self, key: PartitionKey, leo: int) -> bool:
        start = self.log_start.get(key)
        return leo == 0 or (start is not None and start >= leo)

    def rows(self, obs: PollObservation) -> list[tuple]:
        out = []
        t, now = obs.leo_at, obs.now
        for key, value in obs.log_starts.items():
            if key in obs.leos:
                self._read_log_start(key, value, t)
        unknown_tail = (None, False, None, None, None, None)
        for key in sorted(obs.leos):
            leo, r = obs.leos[key], obs.lros.get(key)
            self.seen.add(key)
            if leo is None:
                out.append((key, State.UNKNOWN, None, None, *unknown_tail, self.log_start.get(key), None, None, None))
                continue
            prev = self.prev.get(key)
            went_back = prev is not None and leo < prev[0]
            empty = self.empty(key, leo)  # nothing to copy: caught up, with or without an LRO
            if r is None:
                if went_back:
                    self._forget(key, self.lcu, self.first, self.lro_seen, self.mark)
                    self._new_log(key, t, key in obs.log_starts)
                self.prev[key] = (leo, t)
                self._add_point(key, leo, t)
                if went_back or not empty:
                    state = State.RESET if went_back else State.UNKNOWN
                    out.append((key, state, None, None, *unknown_tail, self.log_start.get(key), None, None, None))
                    continue
                self.lcu[key] = t
                pts = self.points[key]
                del pts[:max(0, sum(p <= leo for p, _ in pts) - 1)]
                byte_lag = None if key.flow not in obs.mean_record_bytes else 0
                start = self.log_start.get(key)
                out.append((key, State.IN_SYNC, 0, 0.0, 0.0, False, byte_lag, None, None, 0.0,
                            start, None if start is None else 0, None, None if start is None else 0))
                continue
            nxt = max(r.offset + 1, leo) if empty else r.offset + 1
            first = r.offset + 1  # retention judges what it deleted from LRO + 1
            lag = max(0, leo - nxt)
            if went_back or (nxt > leo and r.changed_at < t):
                self._forget(key, self.lcu, self.lro_seen, self.mark)
                self.first[key] = t
                self.prev[key] = (leo, t)
                self._new_log(key, t, key in obs.log_starts)
                self._add_point(key, leo, t)
                out.append((key, State.RESET, None, None, *unknown_tail, self.log_start.get(key), None, None, None))
                continue
            self._add_point(key, leo, t)
            self.first.setdefault(key, t)
            if nxt >= leo:
                self.lcu[key] = t
                time_lag = 0.0
                freshness = (0.0, False)
            else:
                if prev is not None and nxt >= prev[0]:
                    self.lcu[key] = max(self.lcu.get(key, prev[1]), prev[1])
                time_lag = now - self.lcu.get(key, self.first[key])
                freshness = self._freshness(key, nxt, now)
            # No later answer reads the points before the one below record nxt (a rewind below
            # them reads a lower bound).
            pts = self.points[key]
            del pts[:max(0, sum(leo <= nxt for leo, _ in pts) - 1)]
            self.prev[key] = (leo, t)
            rates = self.rates.get(key)
            if key in self.lro_seen and r.offset < self.lro_seen[key]:
                self.mark[key] = max(self.mark.get(key, -1), self.lro_seen[key])
                assert rates is not None
                rates.restart_copy(r.offset, now)
            elif key in self.mark and r.offset >= self.mark[key]:
                del self.mark[key]
            self.lro_seen[key] = r.offset
            if rates is None:
                self.rates[key] = RatePair(leo, t, r.offset, now)
                append_rate = copy_rate = None
            else:
                append_rate, copy_rate = rates.update(leo, t, r.offset, now, self.window)
            mean = obs.mean_record_bytes.get(key.flow)
            byte_lag = None if mean is None else round(lag * mean)
            start = self.log_start.get(key)
            if start is None:
                retention: tuple = (None, None, None, None)
                at_risk = False
            else:
                # Offsets from LRO + 1 below the log start were deleted uncopied, also where the
                # rest holds nothing to copy.
                lost = records_lost(start, first)
                room = headroom_records(start, first)
                room_s = headroom_s(room, lost, self.log_start_rate_now[key], copy_rate) if lag or lost else None
                newly = newly_lost(self.lost_through.get(key, 0), first, start)
                if newly:
                    self.lost_through[key] = start
                    self.lost_total[key.flow] = self.lost_total.get(key.flow, 0) + newly
                retention = (start, room, room_s, lost)
                at_risk = lost > 0 or (room_s is not None and room_s < self.p.retention_warn_s)
            if at_risk:
                state = State.AT_RISK
            elif time_lag > self.p.lag_time_max_s:
                stalled = lag > 0 and (r.stale or now - r.changed_at > self.p.lag_time_max_s)
                state = State.STALLED if stalled else State.LAGGING
            elif key in self.mark:
                state = State.REWIND
            else:
                state = State.IN_SYNC
            out.append((key, state, lag, time_lag, *freshness, byte_lag, append_rate, copy_rate,
                        catch_up_s(lag, copy_rate, append_rate), *retention))
        for key in sorted(self.seen - set(obs.leos)):
            self.seen.discard(key)
            self._forget(key, self.prev, self.lcu, self.first, self.lro_seen, self.mark, self.points,
                         self.rates, self.log_start, self.log_start_rate, self.log_start_rate_now,
                         self.lost_through)
            out.append((key, State.GONE, None, None, None, False, None, None, None, None, None, None, None, None))
        return out


@settings(max_examples=400, deadline=None)
@given(polls())
def test_engine_invariants(observations: list[PollObservation]) -> None:
    eng = LagEngine(lambda flow: ORACLE_PARAMS)
    model = _Model()
    previous_keys: set[PartitionKey] = set()
    for obs in observations:
        snap = eng.update(obs)
        assert snap.taken_at == obs.now
        expected = model.rows(obs)
        got = [(r.key, r.state, r.record_lag, r.time_lag_s, *(getattr(r, f) for f in NEW_FIELDS)) for r in snap.rows]
        # GONE rows carry the last known log start; the model forgot it.
        got = [g[:10] + (None,) + g[11:] if g[1] is State.GONE else g for g in got]
        # Freshness from the table's older points comes from times kept in whole ticks of
        # 1/1024 s, rounded up (freshness.to_ticks): up to a tick less than the model's, never more.
        for g, e in zip(got, expected):
            if g[4] is not None and e[4] is not None:
                assert e[4] - 1 / 1024 <= g[4] <= e[4] + 1e-9, (g, e)
        assert [g[:4] + g[5:] for g in got] == [e[:4] + e[5:] for e in expected]
        assert [g[4] is None for g in got] == [e[4] is None for e in expected]
        assert eng.records_lost_total == model.lost_total

        gone = sorted(previous_keys - set(obs.leos))
        assert [r.key for r in snap.rows] == sorted(obs.leos) + gone
        for r in snap.rows:
            assert type(r) is PartitionRow and len(r) == len(PartitionRow._fields)
            if r.state in (State.GONE, State.UNKNOWN, State.RESET):
                # Nothing new is made up where the lag itself is unknown (the log start may show).
                assert r[r._fields.index("freshness_lag_s"):r._fields.index("log_start")] == (
                    None, False, False, None, None, None, None)
                assert (r.retention_headroom_records, r.retention_headroom_s, r.records_lost) == NONE3
            if r.state is State.GONE:
                assert r.key in gone
                assert (r.leo, r.record_lag, r.time_lag_s, r.lro_age_s) == (None,) * 4
                assert window(r) == NONE3
                continue
            leo, reading = obs.leos[r.key], obs.lros.get(r.key)
            assert r.leo == leo
            # UNKNOWN iff no LEO, or no LRO with records to copy (unless the log went back:
            # RESET); never a 0 made up for it.
            empty = leo is not None and model.empty(r.key, leo)
            if r.state is not State.RESET:
                assert (r.state is State.UNKNOWN) == (leo is None or (reading is None and not empty))
            if reading is None:
                assert (r.lro, r.lro_feed, r.lro_age_s) == (None, None, None)
            else:
                assert (r.lro, r.lro_feed) == (reading.offset, reading.feed)
                assert r.lro_age_s == obs.now - reading.changed_at
            if r.state in (State.UNKNOWN, State.RESET):
                # RESET: the LRO is the old log's, so no lag is exported for the new one.
                assert r.record_lag is None and r.time_lag_s is None
                continue
            assert leo is not None and (reading is not None or empty)
            # Never negative; 0 exactly when caught up.
            caught_up = reading is None or reading.offset + 1 >= leo or empty
            assert r.record_lag is not None and r.record_lag >= 0
            assert (r.record_lag == 0) == caught_up
            assert r.time_lag_s is not None and r.time_lag_s >= 0
            assert (r.time_lag_s == 0) == caught_up
            mn, mx, avg = window(r)
            assert mn is not None and mx is not None and avg is not None
            assert mn <= r.record_lag <= mx and mn <= avg <= mx
            # Freshness: finite, never negative, 0 when caught up (and only then, since the
            # LROs are read after the LEO snapshot), never flagged when caught up.
            f = r.freshness_lag_s
            assert f is not None and math.isfinite(f) and f >= 0.0
            assert (f == 0.0) == caught_up and not (caught_up and r.freshness_lower_bound)
            for rate in (r.append_rate, r.copy_rate):
                assert rate is None or (math.isfinite(rate) and rate >= 0.0)
            if caught_up:
                assert r.catch_up_s == 0.0
            assert (r.byte_lag_estimate is None) == (r.key.flow not in obs.mean_record_bytes)
            if r.log_start is not None:
                assert r.records_lost is not None and r.retention_headroom_records is not None
                assert min(r.records_lost, r.retention_headroom_records) == 0
                if r.records_lost:
                    assert r.state is State.AT_RISK and r.retention_headroom_s == 0.0
            # Caught up with nothing deleted from LRO + 1 uncopied: never at risk, nothing lost (a log
            # retention emptied behind the LRO is caught up, and what it deleted still counts).
            behind_start = reading is not None and r.log_start is not None and reading.offset + 1 < r.log_start
            if caught_up and not behind_start:
                assert r.state is not State.AT_RISK and not r.records_lost and r.retention_headroom_s is None
        previous_keys = set(obs.leos)
    assert len(eng) == len(previous_keys)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_busy_partition_bursts_copied_within_the_window_never_flap(data) -> None:
    """Bursts of any size, polls at most 15 s apart, LROs read up to 5 s after the LEO; by each
    poll the mirror has copied everything that existed at the previous one (and, when new
    records came, at least one of them). Time lag then stays within 15 + 5 s < 30 s: IN_SYNC
    at every poll, whatever the record lag."""
    eng = engine(lag_time_max_s=30.0)
    t = 0.0
    leo = data.draw(st.integers(0, 1_000))
    off, changed_at = leo - 1, t - 1.0  # starts caught up
    prev_leo = leo
    for _ in range(data.draw(st.integers(1, 30))):
        now = t + data.draw(st.floats(min_value=0.01, max_value=5.0))
        new_off = data.draw(st.integers(prev_leo - 1 + (1 if leo > prev_leo else 0), leo - 1))
        if new_off != off:
            off, changed_at = new_off, data.draw(st.floats(min_value=t - 0.5, max_value=now))
        r = row(eng.update(PollObservation(t, now, {K0: leo}, {K0: lro(off, changed_at)})))
        assert r.state is State.IN_SYNC, (r, t, now)
        assert r.time_lag_s is not None and r.time_lag_s <= 20.0
        prev_leo = leo
        t = now + data.draw(st.floats(min_value=0.0, max_value=10.0))
        leo += data.draw(st.one_of(st.just(0), st.integers(1, 10), st.integers(1, 10**6)))


@settings(max_examples=100, deadline=None)
@given(polls())
def test_engine_is_deterministic(observations: list[PollObservation]) -> None:
    a, b = engine(), engine()
    for obs in observations:
        # Same input, same output, also when the mappings are rebuilt in another order.
        shuffled = dataclasses.replace(
            obs,
            leos=dict(reversed(list(obs.leos.items()))),
            lros=dict(reversed(list(obs.lros.items()))),
            log_starts=dict(reversed(list(obs.log_starts.items()))),
        )
        assert a.update(obs) == b.update(shuffled)
        assert a.records_lost_total == b.records_lost_total


def test_a_step_back_is_a_rewind_until_the_old_lro_is_regained() -> None:
    e = engine()
    poll(e, 10.0, {K0: 100}, {K0: lro(99, 9.0)})
    r = row(poll(e, 20.0, {K0: 100}, {K0: lro(80, 19.0)}))  # MM2 restarted from offset 80
    assert (r.state, r.record_lag) == (State.REWIND, 19)  # the lag grows honestly
    assert e.rewinds_total == {K0.flow: 1}
    r = row(poll(e, 30.0, {K0: 100}, {K0: lro(90, 29.0)}))
    assert r.state is State.REWIND
    r = row(poll(e, 40.0, {K0: 100}, {K0: lro(99, 39.0)}))
    assert (r.state, r.record_lag) == (State.IN_SYNC, 0)
    assert e.rewinds_total == {K0.flow: 1}


def test_a_rewind_that_takes_too_long_is_lagging() -> None:
    e = engine()
    poll(e, 10.0, {K0: 100}, {K0: lro(99, 9.0)})
    poll(e, 20.0, {K0: 200}, {K0: lro(50, 19.0)})
    r = row(poll(e, 50.0, {K0: 200}, {K0: lro(60, 49.0)}))
    assert (r.state, r.time_lag_s) == (State.LAGGING, 40.5)
