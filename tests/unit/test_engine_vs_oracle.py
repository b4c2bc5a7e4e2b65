"""The lag engine gives exactly the oracle's snapshots and counters, poll after poll."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mirrorlag.engine import LagEngine
from tests.oracle.lag_engine import LagEngine as Oracle
from mirrorlag.model import FlowId, LroReading, LroTable, PartitionKey, PollObservation
from tests.unit.test_engine import AB, CB, ORACLE_PARAMS, polls

KEYS = [PartitionKey("A", "B", "orders", p) for p in range(4)] + [PartitionKey("C", "B", "orders", 0)]


@st.composite
def steady_polls(draw):
    """Long runs of what a live estate mostly looks like, so that most rows take the array
    code: polls 5-20 s apart, LEOs that mostly grow (or idle), a mirror a little behind that
    sometimes catches up, stalls, steps back or falls far behind (beyond the table), LEOs or
    LROs now and then unreadable, log starts creeping up (sometimes past the mirror), partitions
    that leave and come back, and offsets that now and then jump past 32 bits; and issue 23's inputs."""
    out = []
    t = 1_000.0
    leo = {k: draw(st.integers(0, 50)) for k in KEYS}
    off = {k: leo[k] - 1 for k in KEYS}
    changed = {k: t for k in KEYS}
    start = {k: 0 for k in KEYS}
    for _ in range(draw(st.integers(10, 60))):
        t += draw(st.sampled_from([5.0, 10.0, 15.0, 15.0, 15.0, 20.0]))
        now = t + draw(st.sampled_from([0.01, 0.2, 0.5, 1.5]))
        leos, lros, starts = {}, {}, {}
        for k in KEYS:
            kind = draw(st.integers(0, 39))
            if kind == 0:
                continue  # not in the flow this poll
            leo[k] += draw(st.sampled_from([0, 0, 1, 3, 10, 100])) if kind != 1 else 0
            if kind == 4 and draw(st.integers(0, 9)) == 0:
                leo[k] += 1 << 33  # the table's offsets outgrow 32 bits
            leos[k] = None if kind == 2 else leo[k]
            move = draw(st.sampled_from(["keep", "near", "near", "near", "caught", "back", "far"]))
            if move == "near":
                off[k] = max(off[k], leo[k] - 1 - draw(st.integers(0, 12)))
            elif move == "caught":
                off[k] = leo[k] - 1
            elif move == "back":
                off[k] = max(-1, off[k] - draw(st.integers(1, 20)))
            if move != "keep":
                changed[k] = now - draw(st.sampled_from([0.0, 0.1, 3.0]))
            if kind != 3:
                lros[k] = LroReading(off[k], "callback", changed[k], draw(st.booleans()) and move == "keep")
            if draw(st.integers(0, 3)) == 0:
                start[k] += draw(st.sampled_from([0, 1, 5, 40]))
                starts[k] = start[k]
        sizes = {flow: 100.0 for flow in (AB, CB) if draw(st.booleans())}
        # Issue 23's inputs: a topic recreated now and then, a feed of once-per-flush resolution,
        # and the source probe's answers (no data left to copy, or the oldest uncopied record's time).
        new_logs = frozenset(k for k in leos if draw(st.integers(0, 59)) == 0)
        # Its resolution for every flow, or per flow (each target's own offset flush; issue 30).
        resolution = {"callback": draw(st.sampled_from([0.0, 0.0, 60.0, {AB: 60.0}, {AB: 0.0, CB: 5.0}]))}
        probed = {k: draw(st.sampled_from([None, t - 3_600.0, t - 5.0, now])) for k in lros
                  if draw(st.integers(0, 4)) == 0}
        # Issue 30: where a probe found data, the first data record's offset (markers before it),
        # and the partitions whose probe did not answer (refused, deferred, timed out).
        first = {k: off[k] + 1 + draw(st.sampled_from([0, 0, 1, 3, 40])) for k in probed
                 if probed[k] is not None and draw(st.booleans())}
        unprobed = frozenset(k for k in lros if k not in probed and draw(st.integers(0, 3)) == 0)
        # The run of data records the probe received from the first (a gap: a marker after it).
        runs = {k: f + draw(st.sampled_from([1, 2, 5, 30, 400])) for k, f in first.items() if draw(st.booleans())}
        out.append(PollObservation(t, now, leos, lros, starts, sizes, new_logs, resolution, probed, first, unprobed,
                                   runs))
        t = now
    return out


def same_rows(a, b) -> None:
    assert len(a.rows) == len(b.rows)
    for x, y in zip(a.rows, b.rows):
        assert x == y, (x, y)
        assert [type(v) for v in x] == [type(v) for v in y], (x, y)
    assert a.taken_at == b.taken_at


def as_table(obs: PollObservation) -> PollObservation:
    """The same poll with its LROs in an LroTable, as the LRO cache hands them over (read column-wise)."""
    return dataclasses.replace(obs, lros=LroTable.of(obs.lros))


def run_both(observations, params=lambda flow: ORACLE_PARAMS) -> None:
    """Every other poll hands the columnar engine its LROs as the cache's table, the others as a dict."""
    ref, col = Oracle(params), LagEngine(params)
    for i, obs in enumerate(observations):
        same_rows(col.update(as_table(obs) if i % 2 else obs), ref.update(obs))
        assert col.rewinds_total == ref.rewinds_total
        assert col.records_lost_total == ref.records_lost_total
        assert col.records_lost_unverified_total == ref.records_lost_unverified_total
        assert len(col) == len(ref)


@settings(max_examples=500, deadline=None)
@given(polls())
def test_same_snapshots_as_lag_engine(observations: list[PollObservation]) -> None:
    run_both(observations)


@settings(max_examples=200, deadline=None)
@given(polls(), st.sampled_from([1, 2, 3]), st.sampled_from([2, 4, 60]))
def test_same_snapshots_with_other_window_and_table_shapes(observations, samples: int, points: int) -> None:
    params = dataclasses.replace(ORACLE_PARAMS, num_samples=samples, freshness_points=points)
    run_both(observations, lambda flow: params)


@settings(max_examples=300, deadline=None)
@given(steady_polls(), st.sampled_from([1, 2, 3]), st.sampled_from([2, 4, 8]))
def test_same_snapshots_on_steady_estates(observations, samples: int, points: int) -> None:
    params = dataclasses.replace(ORACLE_PARAMS, num_samples=samples, sample_window_s=20.0, freshness_points=points)
    run_both(observations, lambda flow: params)


@settings(max_examples=150, deadline=None)
@given(steady_polls(), st.lists(st.tuples(st.sampled_from([1, 2, 3]), st.sampled_from([2, 4, 8]),
                                          st.sampled_from([10.0, 20.0])), min_size=1, max_size=4), st.data())
def test_same_snapshots_when_the_config_changes_between_polls(observations, configs, data) -> None:
    """A reloaded config restarts windows in the new shape and grows or cuts the tables."""
    current = [ORACLE_PARAMS]

    def params(flow):
        return current[0]

    ref, col = Oracle(params), LagEngine(params)
    for obs in observations:
        if data.draw(st.integers(0, 5)) == 0:
            samples, points, window = data.draw(st.sampled_from(configs))
            current[0] = dataclasses.replace(ORACLE_PARAMS, num_samples=samples, freshness_points=points,
                                             sample_window_s=window)
        same_rows(col.update(as_table(obs) if data.draw(st.booleans()) else obs), ref.update(obs))
        assert col.rewinds_total == ref.rewinds_total
        assert col.records_lost_total == ref.records_lost_total
        assert col.records_lost_unverified_total == ref.records_lost_unverified_total


def test_a_big_estate_in_one_poll_matches_row_for_row() -> None:
    """Many partitions of two flows over enough polls to fill windows and tables (the bench's shape)."""
    params = dataclasses.replace(ORACLE_PARAMS, freshness_points=8, sample_window_s=30.0)
    keys = [PartitionKey("A", "B", f"t{i // 10}", i % 10) for i in range(300)] + \
           [PartitionKey("C", "B", "t", i) for i in range(50)]
    ref, col = Oracle(lambda f: params), LagEngine(lambda f: params)
    now = 1_700_000_000.0
    for n in range(1, 40):
        now += 15.0
        leos = {k: (1 << 30) + n * (3 + i % 5) for i, k in enumerate(keys)}
        lros = {k: LroReading((1 << 30) + (n - 1 - i % 3) * (3 + i % 5) - 1, "callback", now - 1.0, False)
                for i, k in enumerate(keys) if i % 17}
        starts = {k: (1 << 30) + n * (i % 3) for i, k in enumerate(keys)} if n % 4 == 0 else {}
        obs = PollObservation(now - 0.5, now, leos, lros, starts, {AB: 120.0})
        same_rows(col.update(as_table(obs)), ref.update(obs))


def test_a_byte_lag_past_int64_is_clipped_by_both_engines() -> None:
    """lag x mean size past int64 (only an estimate can get there): int64's top, as the snapshot
    clips LagEngine's exact int, never a wrapped negative from the array code's cast."""
    key = PartitionKey("A", "B", "orders", 0)
    ref, col = Oracle(lambda f: ORACLE_PARAMS), LagEngine(lambda f: ORACLE_PARAMS)
    for n, leo in enumerate((2 ** 62, 2 ** 62 + 5, 2 ** 62 + 9)):
        now = 1_000.0 + 15 * n
        obs = PollObservation(now - 0.5, now, {key: leo}, {key: LroReading(n, "callback", now, False)}, {}, {AB: 1e6})
        ours, theirs = col.update(obs), ref.update(obs)
        same_rows(ours, theirs)
        assert ours.rows[0].byte_lag_estimate == 2 ** 63 - 1


def test_codes_and_counts_past_their_narrow_types_match() -> None:
    """The small columns start narrow (int8 mostly) and widen when their bound outgrows them:
    140 flows, a new window shape every poll, a new feed name every poll (reported again by the
    GONE rows at the end), 200 samples and 150 points, and more polls than int32 counts."""
    flows = [FlowId(f"S{i}", "B") for i in range(140)]
    keys = [PartitionKey(f.source, "B", "t", p) for f in flows for p in range(2)]
    window = [20.0]
    wide = dataclasses.replace(ORACLE_PARAMS, num_samples=200, freshness_points=150, sample_window_s=1000.0)

    def params(flow):
        return dataclasses.replace(ORACLE_PARAMS, sample_window_s=window[0]) if flow == flows[0] else wide

    ref, col = Oracle(params), LagEngine(params)
    col._gen = 2 ** 31 - 5  # as after that many polls: sample counts must outgrow int32
    now = 1_000.0
    for n in range(1, 160):
        now += 15.0
        window[0] = 20.0 + n
        leos = {k: 1_000 + 5 * n + i for i, k in enumerate(keys)}
        lros = {k: LroReading(1_000 + 5 * n - 3 - i % 4, f"feed{n}" if i % 2 else "callback", now - 1.0, False)
                for i, k in enumerate(keys)}
        obs = PollObservation(now - 0.5, now, leos, lros, {}, {})
        same_rows(col.update(as_table(obs) if n % 2 else obs), ref.update(obs))
    c = col._c
    assert [c.a[name].dtype for name in ("flow", "shape", "last_lro_feed", "w_cur", "w_created", "f_count")] == \
        [np.dtype(np.int16)] * 6
    assert c.w_count.dtype == np.int64
    obs = PollObservation(now + 15.0, now + 15.0, {}, {}, {}, {})
    same_rows(col.update(obs), ref.update(obs))


@pytest.mark.soak
@settings(max_examples=5000, deadline=None)
@given(steady_polls(), st.sampled_from([1, 2, 3]), st.sampled_from([2, 4, 8, 60]))
def test_soak_same_snapshots_on_steady_estates(observations, samples: int, points: int) -> None:
    params = dataclasses.replace(ORACLE_PARAMS, num_samples=samples, sample_window_s=20.0, freshness_points=points)
    run_both(observations, lambda flow: params)


@pytest.mark.soak
@settings(max_examples=5000, deadline=None)
@given(polls())
def test_soak_same_snapshots_as_lag_engine(observations: list[PollObservation]) -> None:
    run_both(observations)


def test_tables_past_32_bits_widen_and_answer_as_the_oracle() -> None:
    """A table whose LEOs span more than 32 bits (offsets that jump by 2**33) or whose times span
    more than 48.5 days (an idle partition the mirror has not finished) moves to the wide tables,
    answers exactly as the oracle's, and returns to the columns on a new log."""
    busy, idle = PartitionKey("A", "B", "busy", 0), PartitionKey("A", "B", "idle", 0)
    params = dataclasses.replace(ORACLE_PARAMS, freshness_points=4)
    ref, col = Oracle(lambda f: params), LagEngine(lambda f: params)
    day = 86_400.0
    t = 1_000.0
    for n in range(12):
        t += 15.0 if n < 6 else 10 * day
        leos = {busy: 10 + n * (1 << 33), idle: 50}
        lros = {busy: LroReading(n * (1 << 33), "callback", t - 1.0, False),
                idle: LroReading(40, "callback", 1_000.0, True)}
        obs = PollObservation(t - 0.5, t, leos, lros, {}, {})
        same_rows(col.update(obs), ref.update(obs))
    assert set(col._tables.wide) == {busy, idle}
    t += 15.0
    obs = PollObservation(t - 0.5, t, {busy: 5, idle: 3}, {}, {}, {})  # both logs start again
    same_rows(col.update(obs), ref.update(obs))
    assert not col._tables.wide
