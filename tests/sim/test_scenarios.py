"""Named scenarios an SRE would recognise, with the exact states and numbers they must produce.

All use the defaults unless said: refresh interval Δ = 15 s, the LRO read 0.5 s after the LEO
snapshot, replication.lag.time.max = 30 s, LRO TTL 20 s, 2 samples of 30 s. Steady streams put
record i of a stretch at (i + 0.5) / rate s, so at 10 records/s the LEO at a poll time t (a
multiple of 15) is exactly n0 + 10 t. The expected numbers are derived in the comments from the
model, not read off the engine.
"""

from __future__ import annotations

import math

import pytest

from mirrorlag.config.settings import EngineParams
from mirrorlag.model import State

from tests.sim.model import (
    FILLED,
    FLOW,
    Appends,
    Burst,
    Mirror,
    Phase,
    Retention,
    Run,
    SimPartition,
    SourceLog,
    key,
    run,
)

K = key(0)
IN_SYNC, LAGGING, STALLED, REWIND, AT_RISK = State.IN_SYNC, State.LAGGING, State.STALLED, State.REWIND, State.AT_RISK


def needs(*fields: str) -> pytest.MarkDecorator:
    missing = [f for f in fields if not FILLED.get(f)]
    return pytest.mark.xfail(bool(missing), reason=f"engine does not fill {', '.join(missing)} yet", strict=False)


def require(*fields: str) -> None:
    missing = [f for f in fields if not FILLED.get(f)]
    if missing:
        pytest.xfail(f"engine does not fill {', '.join(missing)} yet")


def simulate(log: SourceLog, mirror: Mirror, end: float, **kw) -> Run:
    return run([SimPartition(K, log, mirror)], interval=kw.pop("interval", 15.0), end=end, **kw)


def at(res: Run, t: float):
    (found,) = [(p, p.rows[K], p.truth[K]) for p in res.polls if p.t == t]
    return found


def states(res: Run, t0: float = 0.0, t1: float = math.inf) -> list[tuple[float, State, int, float]]:
    return [(p.t, r.state, r.record_lag, r.time_lag_s) for p, r, _ in res.series(K) if t0 <= p.t <= t1]


def finite_or_none(row) -> bool:
    return all(v is None or (isinstance(v, (int, float)) and math.isfinite(v)) for v in row[2:] if not isinstance(v, str))


# --- steady mirror ---------------------------------------------------------------------------


def steady() -> Run:
    # 1000 records already mirrored; 10 records/s; MM2 acknowledges each record 2 s after it was
    # appended (pipeline latency; copying itself takes 1 ms).
    log = SourceLog([Appends(400, 10.0)], initial=1000, initial_rate=10.0)
    return simulate(log, Mirror(log, [Phase(400, 1000.0)], latency=2.0), 300.0)


def test_steady_mirror_with_two_seconds_latency() -> None:
    # At a poll t >= 15 the LRO (read at t + 0.5) covers records appended by t - 1.501:
    # LRO + 1 = 1000 + 10 t - 15, LEO = 1000 + 10 t: record lag 15, always.
    # Time lag: LRO + 1 >= the previous snapshot (1000 + 10 (t - 15)), so last_caught_up = t - 15
    # and the time lag is 15.5 at every poll: the KIP-16 granularity (one interval + read delay),
    # not the 2 s the data is really behind. That is what freshness is for.
    res = steady()
    assert states(res, 0, 0) == [(0.0, IN_SYNC, 0, 0.0)]
    assert states(res, 15) == [(t, IN_SYNC, 15, 15.5) for t in range(15, 301, 15)]


@needs("freshness_lag_s")
def test_steady_mirror_freshness_is_the_two_seconds() -> None:
    require("freshness_lag_s")
    # Offset LRO + 1 = 1000 + 10 t - 15 was appended at t - 1.45: true freshness 1.95 s. A steady
    # stream is interpolated exactly up to one record's spacing (0.1 s).
    for p, row, tr in steady().series(K):
        if p.t >= 15:
            assert tr.freshness == pytest.approx(1.95)
            assert not row.freshness_lower_bound
            assert abs(row.freshness_lag_s - 1.95) <= 0.1 + 1e-9, row


@needs("append_rate", "copy_rate", "catch_up_s")
def test_steady_mirror_rates() -> None:
    require("append_rate", "copy_rate", "catch_up_s")
    # The LEO grows by exactly 150 per 15 s from the start, the LRO from the poll at 15 on (the
    # first 2 s only the latency passes). Two windows (120 s) later any estimator over "the
    # sample windows" sees nothing but the steady stream: exactly 10/s.
    for p, row, _ in steady().series(K):
        if p.t >= 15:
            assert row.append_rate == pytest.approx(10.0, abs=1e-9), row
        if p.t >= 120:
            assert row.copy_rate == pytest.approx(10.0, abs=1e-9), row
        if p.t >= 15:
            assert row.catch_up_s is None, row  # lag 15 and not gaining: no estimate


def test_steady_mirror_copy_rate_is_over_the_last_window() -> None:
    require("copy_rate")
    # From 75 on, (t - 60, t] lies inside the steady stream: exactly 600 copies per 60 s.
    for p, row, _ in steady().series(K):
        if p.t >= 75:
            assert row.copy_rate == pytest.approx(10.0, abs=1e-9), (p.t, row.copy_rate)


def test_copy_rate_forgets_a_backlog_after_one_window() -> None:
    require("copy_rate")
    # A 3000-record backlog copied in the first 10 s (300/s), then the mirror has nothing to do:
    # the LRO last moved at 10.0 (first read at 15.5). Any 60 s window ending after 75.5 holds no
    # copy: the copy rate over the sample windows is 0 there.
    log = SourceLog([], [Burst(0.0, 3000)], initial=10)
    res = simulate(log, Mirror(log, [Phase(100, 300.0)], copied=10), 150.0)
    for p, row, tr in res.series(K):
        if p.now - tr.lro_since >= 60.0 + 15.0:
            assert row.copy_rate == 0.0, (p.t, row.copy_rate)


# --- a burst ---------------------------------------------------------------------------------


def burst(count: int) -> Run:
    # An idle partition; `count` records arrive at once just before t = 100 (at 99.999, 10 s after
    # the poll at 90; the 1 ms keeps copy instants off the LRO read instants); the mirror copies
    # 200 records/s.
    log = SourceLog([], [Burst(99.999, count)], initial=50)
    return simulate(log, Mirror(log, [Phase(400, 200.0)]), 180.0)


def test_burst_copied_within_the_window_stays_in_sync() -> None:
    # 3000 records, copied by 115 s. At 105 (LRO read at 105.5): 1100 copied, record lag 1900;
    # everything of the snapshot at 90 is copied, so last_caught_up = 90: time lag 15.5, IN_SYNC.
    # At 120 everything is copied: 0.
    res = burst(3000)
    assert states(res, 90, 135) == [
        (90.0, IN_SYNC, 0, 0.0),
        (105.0, IN_SYNC, 1900, 15.5),
        (120.0, IN_SYNC, 0, 0.0),
        (135.0, IN_SYNC, 0, 0.0),
    ]
    assert all(r.state is IN_SYNC for _, r, _ in res.series(K))


def test_burst_copied_in_21s_time_lag_overstates_by_less_than_one_interval() -> None:
    # 4200 records copied in 21 s (done at 121). At 120 (read at 120.5) 4100 are copied; the
    # snapshot at 105 already had the whole burst, so the engine still holds last_caught_up = 90:
    # time lag 30.5. The truth: the mirror last had every record just before 100 (20.5 s before),
    # so the engine overstates by 10 s = (100 - 90), less than one interval (TL2).
    res = burst(4200)
    p, row, tr = at(res, 120.0)
    assert (row.record_lag, row.time_lag_s) == (100, 30.5)
    assert p.now - tr.busy_since == pytest.approx(20.5, abs=0.01)
    assert 0 <= row.time_lag_s - (p.now - tr.busy_since) <= 15.0


def test_burst_copied_within_max_minus_one_interval_never_leaves_in_sync() -> None:
    # docs/design.md §3 promises what the rule keeps: time lag high by at most one refresh interval, so a
    # burst copied within max - interval never flaps. The 21 s burst reads 30.5 s at its worst
    # poll: LAGGING with the default max of 30 s (one poll), IN_SYNC throughout with 21 + 15 s.
    assert LAGGING in [s for _, s, _, _ in states(burst(4200))]
    log = SourceLog([], [Burst(99.999, 4200)], initial=50)
    res = simulate(log, Mirror(log, [Phase(400, 200.0)]), 180.0, params=EngineParams(lag_time_max_s=36.0))
    assert [s for _, s, _, _ in states(res)] == [IN_SYNC] * len(res.polls), states(res, 90, 150)


# --- a stall ---------------------------------------------------------------------------------


def stall() -> Run:
    # 10 records/s; the mirror (100/s) stops at 100 s and resumes at 220 s (219.997: copy instants
    # stay off the LRO read instants).
    log = SourceLog([Appends(400, 10.0)], initial=100, initial_rate=10.0)
    return simulate(log, Mirror(log, [Phase(100, 100.0), Phase(119.997, 0.0), Phase(400, 100.0)]), 270.0)


def test_stall_goes_lagging_stalled_and_recovers() -> None:
    # The last copy before the stall is offset 1099 (appended 99.95). LEO at t is 100 + 10 t.
    #  105: lag 50; LRO + 1 = 1100 >= LEO(90) = 1000: last_caught_up 90, time lag 15.5, IN_SYNC.
    #  120: 1100 < LEO(105): time lag 30.5 > 30; the LRO changed at 105.5 (15 s ago, not stale): LAGGING.
    #  135: time lag 45.5, the LRO unchanged for 30 s >= TTL 20 (stale): STALLED ... until
    #  225: the mirror resumed at 220 (LRO 1649, moving): LAGGING, time lag 135.5.
    #  240: caught up at 233.3: IN_SYNC.
    res = stall()
    assert states(res, 90, 255) == [
        (90.0, IN_SYNC, 0, 0.0),
        (105.0, IN_SYNC, 50, 15.5),
        (120.0, LAGGING, 200, 30.5),
        (135.0, STALLED, 350, 45.5),
        (150.0, STALLED, 500, 60.5),
        (165.0, STALLED, 650, 75.5),
        (180.0, STALLED, 800, 90.5),
        (195.0, STALLED, 950, 105.5),
        (210.0, STALLED, 1100, 120.5),
        (225.0, LAGGING, 700, 135.5),
        (240.0, IN_SYNC, 0, 0.0),
        (255.0, IN_SYNC, 0, 0.0),
    ]
    assert all(s is IN_SYNC for _, s, _, _ in states(res, 0, 90))


@needs("freshness_lag_s")
def test_stall_freshness_tracks_the_oldest_uncopied_record() -> None:
    require("freshness_lag_s")
    # Offset 1100 was appended at 100.05: at 135 (read 135.5) it is 35.45 s old; the table brackets
    # it between (1000, 90) and (1150, 105): interpolated 100.1, freshness 35.4.
    for t in (135.0, 180.0, 210.0):
        p, row, tr = at(stall(), t)
        assert tr.freshness == pytest.approx(p.now - 100.05)
        assert row.freshness_lag_s == pytest.approx(p.now - 100.1)
        assert not row.freshness_lower_bound


# --- an idle, caught-up partition for an hour ------------------------------------------------


def idle_hour() -> Run:
    # A minute of traffic (10/s, ending with offset 1099 at 59.95), then nothing for an hour; one
    # record (offset 1100) arrives at 3700.2. The mirror is up but happens to be stalled from
    # 3700 to 3710, so that record waits until 3710.01.
    log = SourceLog([Appends(60, 10.0)], [Burst(3700.2, 1)], initial=500, initial_rate=10.0)
    mirror = Mirror(log, [Phase(3700, 100.0), Phase(10, 0.0), Phase(1000, 100.0)])
    return simulate(log, mirror, 3750.0)


def test_idle_hour_is_in_sync_not_stalled() -> None:
    # All hour the LRO is stale (TTL 20 s long passed) but the partition is caught up: IN_SYNC, 0.
    # At 3705 one record waits; the mirror had everything of the snapshot at 3690: time lag 15.5,
    # IN_SYNC (a stale LRO alone is no stall). At 3720 it is copied.
    res = idle_hour()
    assert all(s == IN_SYNC and lag == 0 and tl == 0.0 for t, s, lag, tl in states(res, 0, 3690))
    assert states(res, 3690, 3735) == [
        (3690.0, IN_SYNC, 0, 0.0),
        (3705.0, IN_SYNC, 1, 15.5),
        (3720.0, IN_SYNC, 0, 0.0),
        (3735.0, IN_SYNC, 0, 0.0),
    ]
    assert at(res, 3690.0)[2].stale


@needs("freshness_lag_s", "append_rate", "copy_rate")
def test_idle_hour_freshness_no_nan_no_hour() -> None:
    require("freshness_lag_s", "append_rate", "copy_rate")
    res = idle_hour()
    for p, row, _ in res.series(K):
        assert finite_or_none(row), row
        if p.t != 3705.0:
            assert row.freshness_lag_s == 0.0, row
    # The record of 3700.2 is 5.3 s old at 3705.5. Freshness must place it after the idle hour
    # (between the polls at 3690 and 3705: at most 15.5 s), not spread it back over the hour.
    p, row, tr = at(res, 3705.0)
    assert tr.freshness == pytest.approx(5.3)
    assert 0.5 - 1e-9 <= row.freshness_lag_s <= 15.5 + 1e-9 and not row.freshness_lower_bound, row
    # Rates: nothing moved for an hour: 0. At 3705, one record in the sample windows. Like Kafka's
    # Rate, the engine divides by the span its samples cover: between half the windows (60 s x 1/2
    # for metrics.num.samples = 2) and all of them plus one poll gap (60 + 15 s).
    _, row_3690, _ = at(res, 3690.0)
    assert (row_3690.append_rate, row_3690.copy_rate) == (0.0, 0.0)
    assert 1 / 75 <= row.append_rate <= 1 / 30


# --- MM2 restarts from an older commit --------------------------------------------------------


def test_restart_rewinds_then_recopies() -> None:
    # 10 records/s (record i of the stream at 0.05 + 0.1 i), mirror 25/s (copied 0.04 s after it
    # arrives). At 100 MM2 restarts 600 records back (LRO n0+999 -> n0+399) and copies them again
    # at 25/s, gaining 15/s: the k-th re-copy lands at 100 + 0.04 k. The LRO seen at 90 (read
    # 90.5) is n0 + 904: the rewind mark.
    #  105: k = 137, LRO + 1 = n0 + 537 < LEO(90) = n0 + 900: time lag stays 15.5; below the
    #       mark: REWIND, record lag 1050 - 537.
    #  120: k = 512, LRO n0 + 911 regained the mark; LRO + 1 = n0 + 912 < LEO(105): 30.5 > 30:
    #       LAGGING (the LRO moves).
    #  135: k = 887, LRO + 1 = n0 + 1287 >= LEO(120): last_caught_up 120, 15.5, IN_SYNC.
    #  150: caught up at 140: 0.
    n0 = 100
    log = SourceLog([Appends(400, 10.0)], initial=n0, initial_rate=10.0)
    mirror = Mirror(log, [Phase(100, 25.0), Phase(300, 25.0, rewind=600)])
    res = simulate(log, mirror, 165.0)
    assert states(res, 90, 165) == [
        (90.0, IN_SYNC, 0, 0.0),
        (105.0, REWIND, 1050 - 537, 15.5),
        (120.0, LAGGING, 1200 - 912, 30.5),
        (135.0, IN_SYNC, 1350 - 1287, 15.5),
        (150.0, IN_SYNC, 0, 0.0),
        (165.0, IN_SYNC, 0, 0.0),
    ]
    assert res.engine.rewinds_total == {FLOW: 1}


# --- retention deletes a range the mirror never copied ---------------------------------------


def retention() -> Run:
    # 2400 records exist (10/s history), retention keeps the newest 1800, so the log start is
    # 600 + 10 t and advances 10 records/s from the first poll on. 10 records/s are appended until
    # 250 s (LEO 4900), then nothing. The mirror (100/s) stalls at 60 s with LRO 2999 (offset
    # 3000 appended at 60.05) and resumes at 285 s. Warn at 90 s of headroom. The poller's probe
    # reads the stalled partition from LRO + 1 and finds a data record there: what retention
    # deletes from it on is lost data (docs/design.md §3, "Lost means data").
    log = SourceLog([Appends(250, 10.0)], initial=2400, initial_rate=10.0, retention=Retention(keep_records=1800))
    mirror = Mirror(log, [Phase(60, 100.0), Phase(225, 0.0), Phase(400, 100.0)])
    return simulate(log, mirror, 330.0, params=EngineParams(retention_warn_s=90.0), probe=True)


@needs("log_start", "retention_headroom_records", "retention_headroom_s", "records_lost", "records_lost_total")
def test_retention_deleted_range() -> None:
    require("log_start", "retention_headroom_records", "retention_headroom_s", "records_lost", "records_lost_total")
    res = retention()
    # The log start passes LRO + 1 = 3000 when offset 4800 arrives (240.05): loss begins there and
    # ends when appends stop (log start 3100): offsets 3000..3099, exactly 100, are never copied.
    assert res.partitions[0].log.delete_times[3000] == pytest.approx(240.05)
    assert res.polls[-1].truth[K].lost == 100
    for p, row, tr in res.series(K):
        assert row.log_start == tr.log_start, row
        if 60 <= p.t <= 270:  # stalled at LRO 2999
            assert row.lro == 2999
            assert row.retention_headroom_records == max(0, 3000 - (600 + 10 * min(p.t, 250))), row
    # Headroom in seconds at the known closing rate (10/s, the mirror copying nothing):
    # (3000 - (600 + 10 t)) / 10 = 240 - t. Below 90 s from 165 on: AT_RISK at 165 ... 240, all
    # before the loss at 240.05, with the forecast exact once the copy rate has decayed to 0.
    for t in (165.0, 180.0, 195.0, 210.0, 225.0, 240.0):
        p, row, tr = at(res, t)
        assert row.state is AT_RISK, (t, row)
        assert tr.lost == 0 and row.records_lost == 0
        assert row.retention_headroom_s < 90.0
    for t in (225.0,):  # stalled 165 s: no copy left in any window
        _, row, _ = at(res, t)
        assert row.copy_rate == 0.0 and row.retention_headroom_s == pytest.approx(240.0 - t, abs=0.5)
    # After the loss, while the mirror is still stalled: the deleted range is visible and counted,
    # lost as far as the probe proved data (its fetch from 3000 received 16 records: the sim's
    # `_LogFetcher.received`), the rest unverified (nothing proved their kind: docs/design.md §3).
    for t in (255.0, 270.0):
        _, row, tr = at(res, t)
        assert row.state is AT_RISK and (row.records_lost, row.records_lost_unverified) == (16, 84), row
        assert row.records_lost + row.records_lost_unverified == 100 == tr.lost, row
        assert row.retention_headroom_records == 0 and row.retention_headroom_s == 0.0
    # The mirror resumed at 285 (skipping to the log start, 3100) and caught up by 303.
    _, row, tr = at(res, 315.0)
    assert row.record_lag == 0 and row.lro == 4899
    assert res.engine.records_lost_total == {FLOW: 16}
    assert res.engine.records_lost_unverified_total == {FLOW: 84}


@needs("retention_headroom_s")
def test_retention_far_behind_a_healthy_mirror_is_never_at_risk() -> None:
    require("retention_headroom_s")
    # retention.ms = 10 min, 10 records/s, a mirror 2 s behind, warn 5 min: retention would need
    # 10 minutes to reach uncopied data even if the mirror stopped now... but the mirror does not
    # stop, so no forecast may say AT_RISK.
    log = SourceLog([Appends(1900, 10.0)], initial=6000, initial_rate=10.0, retention=Retention(keep_seconds=600.0))
    res = simulate(log, Mirror(log, [Phase(2000, 1000.0)], latency=2.0), 1800.0,
                   params=EngineParams(retention_warn_s=300.0))
    assert all(r.state is IN_SYNC for _, r, _ in res.series(K))
    assert all(r.records_lost == 0 for _, r, _ in res.series(K))
