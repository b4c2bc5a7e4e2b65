"""Retention headroom, records already lost and AT_RISK (docs/design.md §3): the arithmetic, then the engine."""

from __future__ import annotations

from typing import Mapping

import pytest

from mirrorlag.engine import LagEngine
from tests.oracle.retention import (
    headroom_records,
    headroom_s,
    log_start_window_s,
    newly_lost,
    records_lost,
)
from mirrorlag.model import FlowId, LroReading, PartitionKey, PartitionRow, PollObservation, State
from tests.unit.test_engine import K0, READ, engine, lro

K1 = PartitionKey("A", "B", "orders", 1)
C0 = PartitionKey("C", "B", "orders", 0)


# --- arithmetic ---


def test_records_lost_and_headroom_records() -> None:
    assert records_lost(100, 90) == 10  # offsets 90..99 deleted, the mirror needed 90 next
    assert records_lost(100, 100) == 0
    assert records_lost(100, 150) == 0
    assert headroom_records(100, 150) == 50
    assert headroom_records(100, 100) == 0
    assert headroom_records(100, 90) == 0


def test_headroom_seconds() -> None:
    assert headroom_s(0, 10, 5.0, 1.0) == 0.0  # already lost: no time left
    assert headroom_s(600, 0, 30.0, 10.0) == 30.0  # the log start gains 20 records/s on the mirror
    assert headroom_s(600, 0, 30.0, None) == 20.0  # unknown copy rate counts as 0: warn, not hide
    assert headroom_s(600, 0, 10.0, 10.0) is None  # the mirror keeps pace: not in sight
    assert headroom_s(600, 0, 10.0, 50.0) is None
    assert headroom_s(600, 0, 0.0, 0.0) is None  # the log start is not moving
    assert headroom_s(600, 0, None, 0.0) is None  # its rate is not known yet


def test_each_lost_offset_counts_once() -> None:
    counted = 0
    total = 0
    # (LRO + 1, log start) at successive polls: [10, 20) lost, seen twice; then [20, 25); then
    # the mirror jumps to the log start; later [40, 50) is lost.
    for nxt, start in [(10, 20), (10, 20), (10, 25), (25, 25), (40, 50)]:
        through = max(nxt, start)
        new = newly_lost(counted, nxt, through)
        if new:
            counted = through
        total += new
    assert total == 10 + 5 + 10


def test_log_start_window_covers_the_warn_horizon() -> None:
    assert log_start_window_s(60.0, 3600.0) == 3600.0
    assert log_start_window_s(600.0, 300.0) == 600.0


# --- the engine ---


def poll(
    eng: LagEngine,
    t: float,
    leos: Mapping[PartitionKey, int | None],
    lros: Mapping[PartitionKey, LroReading] | None = None,
    log_starts: Mapping[PartitionKey, int] | None = None,
    first_data: Mapping[PartitionKey, int] | None = None,
    data_to: Mapping[PartitionKey, int] | None = None,
) -> dict[PartitionKey, PartitionRow]:
    """One poll; by default the source probe proved every record in [LRO + 1, LEO) a data record
    (a topic without transactions, every record received), so deleted uncopied offsets are lost
    records. A `first_data` given alone proves that one record only."""
    if first_data is None:
        first_data = {k: r.offset + 1 for k, r in (lros or {}).items()}
        data_to = {k: leo for k, leo in leos.items() if leo is not None and k in first_data}
    snap = eng.update(PollObservation(t, t + READ, leos, lros or {}, log_starts or {}, first_data=first_data,
                                      data_to=data_to or {}))
    return snap.by_key()


def test_log_start_is_kept_between_reads() -> None:
    e = engine()
    r = poll(e, 0.0, {K0: 1_000}, {K0: lro(999, -1.0)})[K0]
    assert (r.log_start, r.retention_headroom_records, r.records_lost) == (None, None, None)
    r = poll(e, 15.0, {K0: 1_100}, {K0: lro(1_099, 14.0)}, {K0: 400})[K0]
    assert (r.log_start, r.retention_headroom_records, r.records_lost) == (400, 700, 0)
    assert r.retention_headroom_s is None  # one reading: no rate, nothing in sight
    assert r.state is State.IN_SYNC
    r = poll(e, 30.0, {K0: 1_200}, {K0: lro(1_199, 29.0)})[K0]
    assert (r.log_start, r.retention_headroom_records) == (400, 800)


def test_records_already_lost_are_counted_never_hidden() -> None:
    e = engine()
    poll(e, 0.0, {K0: 1_000}, {K0: lro(499, -50.0)})
    # Retention deleted up to 600 while the mirror needed 500 next: 100 records lost.
    r = poll(e, 15.0, {K0: 1_000}, {K0: lro(499, -50.0)}, {K0: 600})[K0]
    assert r.state is State.AT_RISK
    assert (r.records_lost, r.retention_headroom_records, r.retention_headroom_s) == (100, 0, 0.0)
    assert e.records_lost_total == {FlowId("A", "B"): 100}
    # Seen again at the next poll: the same 100, counted once.
    r = poll(e, 30.0, {K0: 1_000}, {K0: lro(499, -50.0)})[K0]
    assert (r.state, r.records_lost) == (State.AT_RISK, 100)
    assert e.records_lost_total == {FlowId("A", "B"): 100}
    # More deleted: 50 more.
    r = poll(e, 45.0, {K0: 1_000}, {K0: lro(499, -50.0)}, {K0: 650})[K0]
    assert r.records_lost == 150
    assert e.records_lost_total == {FlowId("A", "B"): 150}
    # MM2 jumps to the log start (auto.offset.reset): nothing lost any more, the total stays.
    r = poll(e, 60.0, {K0: 1_000}, {K0: lro(999, 59.0)})[K0]
    assert (r.state, r.records_lost, r.retention_headroom_records) == (State.IN_SYNC, 0, 350)
    assert e.records_lost_total == {FlowId("A", "B"): 150}


def test_a_rewind_below_counted_losses_does_not_count_them_again() -> None:
    e = engine()
    poll(e, 0.0, {K0: 1_000}, {K0: lro(499, -1.0)}, {K0: 600})
    assert e.records_lost_total == {FlowId("A", "B"): 100}
    poll(e, 15.0, {K0: 1_000}, {K0: lro(899, 14.0)})
    r = poll(e, 30.0, {K0: 1_000}, {K0: lro(449, 29.0)})[K0]  # rewound below the log start
    assert (r.state, r.records_lost) == (State.AT_RISK, 150)  # the row's figure: 450..599
    # 450..499 were copied before the rewind and 500..599 are counted already: nothing new.
    assert e.records_lost_total == {FlowId("A", "B"): 100}


def test_lost_totals_are_per_flow() -> None:
    e = engine()
    poll(e, 0.0, {K0: 100, K1: 100, C0: 100},
         {K0: lro(9, -1.0), K1: lro(19, -1.0), C0: lro(29, -1.0)},
         {K0: 20, K1: 20, C0: 50})
    assert e.records_lost_total == {FlowId("A", "B"): 10, FlowId("C", "B"): 20}


def test_records_appended_and_deleted_after_the_leo_snapshot_are_lost_too() -> None:
    # The log start is read after the LEO: retention may already have deleted past that LEO.
    # Everything from LRO + 1 to the log start is gone uncopied, more than the LEO showed: the
    # probe proved [50, 100) data (lost); no one read [100, 120) (unverified). Nothing the LEO
    # showed is left to copy (record lag 0); what was lost keeps it AT_RISK.
    e = engine()
    r = poll(e, 0.0, {K0: 100}, {K0: lro(49, -1.0)}, {K0: 120})[K0]
    assert (r.record_lag, r.records_lost, r.records_lost_unverified, r.state) == (0, 50, 20, State.AT_RISK)
    assert e.records_lost_total == {FlowId("A", "B"): 50}
    assert e.records_lost_unverified_total == {FlowId("A", "B"): 20}


def test_at_risk_before_the_loss_when_retention_closes_in() -> None:
    # The log start advances 100 records/s; the mirror is stuck at 2_999 (next: 3_000).
    e = engine(retention_warn_s=60.0)
    got = []
    for i, t in enumerate([0.0, 15.0, 30.0, 45.0]):
        start = 1_000 + int(100 * t)
        r = poll(e, t, {K0: 10_000 + 100 * i}, {K0: lro(2_999, -100.0)}, {K0: start})[K0]
        got.append((r.retention_headroom_records, r.retention_headroom_s, r.records_lost, r.state))
    assert got == [
        (2_000, None, 0, State.IN_SYNC),  # one reading: the log start's rate is not known yet
        (500, 5.0, 0, State.AT_RISK),  # 500 records at 100/s (copy rate 0): 5 s < 60 s
        (0, 0.0, 1_000, State.AT_RISK),  # lost
        (0, 0.0, 2_500, State.AT_RISK),
    ]
    assert e.records_lost_total == {FlowId("A", "B"): 2_500}


def test_the_log_start_rate_is_measured_over_its_own_window() -> None:
    # warn 60 s: the log-start window is max(60, 60) = 60 s, its base moving every 30 s. The
    # mirror is stuck at 9_999 (copy rate 0), so the forecast is headroom / log-start rate.
    e = engine(retention_warn_s=60.0)
    got = []
    for t, start in [(0, 0), (15, 1_500), (30, 1_500), (45, 4_500), (60, 4_500), (75, 6_000)]:
        r = poll(e, float(t), {K0: 20_000}, {K0: lro(9_999, -100.0)}, {K0: start})[K0]
        got.append((r.retention_headroom_s, r.state))
    assert got == [
        (None, State.IN_SYNC),  # one reading: no rate
        (8_500 / 100.0, State.IN_SYNC),  # 1_500 in 15 s; 85 s is beyond the warn time
        (8_500 / 50.0, State.STALLED),  # 1_500 in 30 s (the base is still the first reading)
        (5_500 / 100.0, State.AT_RISK),  # 4_500 in 45 s: 55 s < 60 s
        (5_500 / 100.0, State.AT_RISK),  # base moved to the reading at 30: 3_000 in 30 s
        (4_000 / 100.0, State.AT_RISK),
    ]


def test_headroom_far_away_is_not_at_risk() -> None:
    e = engine(retention_warn_s=60.0)
    poll(e, 0.0, {K0: 100_000}, {K0: lro(99_999, -1.0)}, {K0: 0})
    r = poll(e, 15.0, {K0: 100_150}, {K0: lro(100_149, 14.0)}, {K0: 15})[K0]
    # The log start moves 1 record/s, the mirror copies 10/s: retention never catches it up.
    assert (r.retention_headroom_records, r.retention_headroom_s, r.state) == (100_135, None, State.IN_SYNC)


def test_slow_forecast_beyond_the_warn_time_is_not_at_risk() -> None:
    e = engine(retention_warn_s=100.0)
    poll(e, 0.0, {K0: 10_001}, {K0: lro(9_999, -100.0)}, {K0: 0})
    r = poll(e, 15.0, {K0: 10_001}, {K0: lro(9_999, -100.0)}, {K0: 150})[K0]
    # One record behind (a caught-up partition is never at risk, so has no forecast): 9_850
    # records of headroom at 10 records/s, 985 s, beyond the 100 s warn time.
    assert (r.retention_headroom_s, r.state) == (985.0, State.IN_SYNC)


@pytest.mark.parametrize("stale", [True, False])
def test_at_risk_beats_stalled_and_lagging(stale: bool) -> None:
    e = engine()
    poll(e, 0.0, {K0: 1_000}, {K0: lro(999, -1.0)})
    poll(e, 15.0, {K0: 2_000}, {K0: lro(999, -1.0, stale=stale)})
    r = poll(e, 45.0, {K0: 3_000}, {K0: lro(999, -1.0, stale=stale)}, {K0: 1_500})[K0]
    assert (r.state, r.records_lost) == (State.AT_RISK, 500)


def test_reset_beats_at_risk() -> None:
    e = engine()
    poll(e, 0.0, {K0: 1_000}, {K0: lro(499, -1.0)}, {K0: 600})
    r = poll(e, 15.0, {K0: 800}, {K0: lro(499, -1.0)}, {K0: 700})[K0]  # the LEO went back
    assert r.state is State.RESET
    assert r.log_start == 700  # read now: kept for the new log
    assert (r.records_lost, r.retention_headroom_records, r.retention_headroom_s) == (None, None, None)


def test_a_new_log_forgets_the_old_log_start() -> None:
    e = engine()
    poll(e, 0.0, {K0: 1_000}, {K0: lro(999, -1.0)}, {K0: 600})
    r = poll(e, 15.0, {K0: 10}, {K0: lro(999, -1.0)})[K0]
    assert (r.state, r.log_start) == (State.RESET, None)
    r = poll(e, 30.0, {K0: 20}, {K0: lro(19, 29.0)})[K0]
    assert (r.state, r.log_start, r.records_lost) == (State.IN_SYNC, None, None)


def test_a_log_start_going_back_is_a_new_log_for_the_lost_count() -> None:
    e = engine()
    poll(e, 0.0, {K0: 1_000}, {K0: lro(499, -1.0)}, {K0: 600})
    assert e.records_lost_total == {FlowId("A", "B"): 100}
    # Recreated behind our back (the LEO still ahead of the old one): offsets restart.
    r = poll(e, 15.0, {K0: 1_200}, {K0: lro(49, 14.0)}, {K0: 100})[K0]
    assert (r.records_lost, r.state) == (50, State.AT_RISK)
    assert e.records_lost_total == {FlowId("A", "B"): 150}


def test_unknown_rows_show_the_log_start_and_nothing_else_new() -> None:
    e = engine()
    rows = poll(e, 0.0, {K0: None, K1: 100}, {}, {K0: 10, K1: 20})
    for key, start in ((K0, 10), (K1, 20)):
        r = rows[key]
        assert r.state is State.UNKNOWN and r.log_start == start
        assert r[r._fields.index("log_start") + 1:] == (None, None, None, None)
        assert (r.freshness_lag_s, r.freshness_lower_bound, r.byte_lag_estimate, r.append_rate,
                r.copy_rate, r.catch_up_s) == (None, False, None, None, None, None)
    rows = poll(e, 15.0, {K0: None}, {K0: lro(5, 14.0)})
    assert rows[K0].log_start == 10 and rows[K1].state is State.GONE and rows[K1].log_start == 20


# --- lost means data (issue 30) ---


def test_deleted_offsets_no_probe_proved_are_unverified_not_lost() -> None:
    # After a restart the probe's memory is gone and a fetch below the log start fails: nothing
    # says whether [500, 600) held data. Counted apart; no AT_RISK, no records_lost.
    e = engine()
    r = poll(e, 0.0, {K0: 1_000}, {K0: lro(499, -50.0)}, {K0: 600}, first_data={})[K0]
    assert (r.records_lost, r.records_lost_unverified, r.retention_headroom_records) == (0, 100, 0)
    assert r.state is not State.AT_RISK and r.retention_headroom_s is None
    assert e.records_lost_total == {} and e.records_lost_unverified_total == {FlowId("A", "B"): 100}
    # Seen again: counted once.
    r = poll(e, 15.0, {K0: 1_000}, {K0: lro(499, -50.0)}, {K0: 650}, first_data={})[K0]
    assert (r.records_lost, r.records_lost_unverified) == (0, 150)
    assert e.records_lost_unverified_total == {FlowId("A", "B"): 150}


def test_a_marker_is_never_lost() -> None:
    # Idle transactional partition: data through 100 (copied), the commit marker at 101, then data
    # from 102. The probe proved the first data record after LRO + 1 = 101 is 102; retention then
    # deleted 101 (the marker) only: nothing lost, nothing unverified.
    e = engine()
    poll(e, 0.0, {K0: 110}, {K0: lro(100, -50.0)}, {}, first_data={K0: 102}, data_to={K0: 110})
    r = poll(e, 15.0, {K0: 110}, {K0: lro(100, -50.0)}, {K0: 102}, first_data={})[K0]  # the proof is kept
    assert (r.records_lost, r.records_lost_unverified) == (0, 0)
    assert r.state is not State.AT_RISK
    assert e.records_lost_total == {} and e.records_lost_unverified_total == {}
    # Retention goes on past 102: from the first data record on, records are lost.
    r = poll(e, 30.0, {K0: 110}, {K0: lro(100, -50.0)}, {K0: 105}, first_data={})[K0]
    assert (r.records_lost, r.records_lost_unverified, r.state) == (3, 0, State.AT_RISK)
    assert e.records_lost_total == {FlowId("A", "B"): 3} and e.records_lost_unverified_total == {}


def test_a_proof_ends_when_the_lro_passes_it() -> None:
    e = engine()
    poll(e, 0.0, {K0: 110}, {K0: lro(100, -50.0)}, {}, first_data={K0: 102})
    # The mirror copied 102..104 (LRO 104): the record at 102 says nothing of [105, ...).
    r = poll(e, 15.0, {K0: 110}, {K0: lro(104, 14.0)}, {K0: 107}, first_data={})[K0]
    assert (r.records_lost, r.records_lost_unverified) == (0, 2)


def test_a_proved_run_holds_past_an_lro_inside_it() -> None:
    # The probe received 102..105 consecutive: data. The mirror copies 102..103 (LRO 103) and
    # retention deletes through 106: 104 and 105 are proved data, 106 is of unknown kind.
    e = engine()
    poll(e, 0.0, {K0: 110}, {K0: lro(100, -50.0)}, {}, first_data={K0: 102}, data_to={K0: 106})
    r = poll(e, 15.0, {K0: 110}, {K0: lro(103, 14.0)}, {K0: 107}, first_data={})[K0]
    assert (r.records_lost, r.records_lost_unverified, r.state) == (2, 1, State.AT_RISK)
    assert e.records_lost_total == {FlowId("A", "B"): 2} and e.records_lost_unverified_total == {FlowId("A", "B"): 1}


def test_a_marker_inside_the_deleted_range_is_never_lost() -> None:
    # Found on the real Kafka (tests/apache/test_mm2_lifecycle.py): LRO 4, data 5..17 (10 plain
    # records, then a transaction's 3), its commit marker at 18, data 19..23. The probe from 5
    # received 5..17 and then 19: the gap at 18 ends the proof. Retention deletes through 23:
    # 13 proved lost, the marker and what follows it unverified, 18 data records really gone.
    e = engine()
    poll(e, 0.0, {K0: 24}, {K0: lro(4, -50.0)}, {}, first_data={K0: 5}, data_to={K0: 18})
    r = poll(e, 15.0, {K0: 26}, {K0: lro(4, -50.0)}, {K0: 24}, first_data={})[K0]
    assert (r.records_lost, r.records_lost_unverified, r.state) == (13, 6, State.AT_RISK)
    assert e.records_lost_total == {FlowId("A", "B"): 13} and e.records_lost_unverified_total == {FlowId("A", "B"): 6}


def test_deletion_in_steps_counts_each_offset_once_as_lost_or_unverified() -> None:
    e = engine()
    poll(e, 0.0, {K0: 40}, {K0: lro(9, -50.0)}, {}, first_data={K0: 12}, data_to={K0: 20})
    steps = [(11, 0, 0), (15, 3, 0), (20, 8, 0), (25, 8, 5)]  # log start: lost, unverified (10, 11: no data)
    for i, (start, lost, unverified) in enumerate(steps):
        r = poll(e, 15.0 * (i + 1), {K0: 40}, {K0: lro(9, -50.0)}, {K0: start}, first_data={})[K0]
        assert (r.records_lost, r.records_lost_unverified) == (lost, unverified), start
        assert e.records_lost_total.get(FlowId("A", "B"), 0) == lost
        assert e.records_lost_unverified_total.get(FlowId("A", "B"), 0) == unverified


# --- the probe's proof: the run of data records its fetch received ---


class RunFetcher:
    """A source fetch that received, from each start, the records at `data` (offsets of data
    records, in order) up to `received`: (first, its time, the end of the run from it)."""

    def __init__(self, data: list[int], received: int) -> None:
        self.data, self.received, self.calls = data, received, 0

    def fetch(self, starts, timeout_s):
        self.calls += 1
        out = {}
        for tp, start in starts.items():
            got = [o for o in self.data if start <= o < self.received]
            run = got[0] + 1
            for o in got[1:]:
                if o != run:
                    break  # a gap: a marker (or an aborted record, or compaction)
                run += 1
            out[tp] = (got[0], 1_000.0 + got[0], run)
        return out

    def close(self) -> None:
        pass


def test_the_probe_hands_out_the_run_it_proved_and_remembers_it() -> None:
    from mirrorlag.kafka.probe import SourceProbe

    k = PartitionKey("A", "B", "orders", 0)
    # LRO 4: data 5..17, the commit marker at 18, data 19..23 (the real Kafka's log).
    fetcher = RunFetcher([*range(5, 18), *range(19, 24)], received=24)
    probe = SourceProbe(None, fetcher=fetcher)
    for leo in (24, 30):  # the second from the cache: a later LEO changes nothing proved
        first, runs = {}, {}
        assert probe.probe([(k, 5, leo)], first, runs) == {k: 1_005.0}
        assert (first, runs, fetcher.calls) == ({k: 5}, {k: 18}, 1)
    # A fetcher that says only where data starts proves that one record.
    legacy = SourceProbe(None, fetcher=type("Legacy", (), {"fetch": lambda self, s, t: {tp: (7, 1.0) for tp in s},
                                                           "close": lambda self: None})())
    first, runs = {}, {}
    legacy.probe([(k, 5, 24)], first, runs)
    assert (first, runs) == ({k: 7}, {k: 8})
