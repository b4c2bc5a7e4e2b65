"""Freshness table: interpolation, idle flat segments, the bound and its lower-bound flag (docs/design.md §3)."""

from __future__ import annotations

import math
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.oracle import freshness
from tests.oracle.freshness import FITS, Table, add, appended_at, lag, new_table, points, slack

CAP = 60


def table(*pts: tuple[int, float], cap: int = CAP) -> Table:
    tab = new_table()
    for leo, t in pts:
        add(tab, leo, t, cap)
    return tab


# --- interpolation ---


def test_record_appended_when_the_leo_passed_it() -> None:
    # LEO 100 at t=10, 200 at t=20: records 100..199 were appended in (10, 20], evenly.
    tab = table((100, 10.0), (200, 20.0))
    assert appended_at(tab, 100, CAP) == (10.1, False)  # the LEO passed 101 a tenth of a second in
    assert appended_at(tab, 149, CAP) == (15.0, False)
    assert appended_at(tab, 199, CAP) == (20.0, False)  # the last one: by the second point


def test_steady_appends_are_exact() -> None:
    # One record a second, record k appended at t = k + 1; polls at 10, 20, 30 see LEO 10, 20, 30.
    tab = table((10, 10.0), (20, 20.0), (30, 30.0))
    for k in range(10, 30):
        assert appended_at(tab, k, CAP) == (k + 1.0, False)


def test_lag_is_now_minus_the_append_time_of_the_next_record_to_copy() -> None:
    tab = table((100, 10.0), (200, 20.0), (400, 30.0))
    assert lag(tab, 300, 35.0, CAP) == (35.0 - 25.05, False)
    assert lag(tab, 150, 35.0, CAP) == (35.0 - 15.1, False)


def test_bracketing_picks_the_right_segment() -> None:
    tab = table((0, 0.0), (8, 2.0), (16, 4.0), (24, 8.0))
    assert appended_at(tab, 7, CAP) == (2.0, False)
    assert appended_at(tab, 8, CAP) == (2.25, False)  # the next segment starts just after 2
    assert appended_at(tab, 19, CAP) == (6.0, False)


def test_caught_up_or_not_yet_appended_is_zero() -> None:
    tab = table((100, 10.0), (200, 20.0))
    assert appended_at(tab, 200, CAP) is None
    assert lag(tab, 200, 99.0, CAP) == (0.0, False)
    assert lag(tab, 10_000, 99.0, CAP) == (0.0, False)
    assert lag(new_table(), 0, 99.0, CAP) == (0.0, False)


def test_a_clock_that_stepped_back_never_gives_a_negative_lag() -> None:
    tab = table((100, 10.0), (200, 20.0))
    assert lag(tab, 150, 5.0, CAP) == (0.0, False)


# --- idle partitions: one flat segment ---


def test_an_idle_stretch_is_one_flat_segment_of_first_and_last_time() -> None:
    tab = table((100, 10.0), (200, 20.0), (200, 30.0), (200, 40.0), (200, 50.0))
    assert points(tab, CAP) == [(100, 10.0), (200, 20.0), (200, 50.0)]


def test_an_idle_uncopied_partition_ages_from_when_its_records_came() -> None:
    # Nothing appended since 20, the mirror stopped at 150: record 150 came at 15.1, however long
    # the partition has been idle since (not "now - last sample").
    tab = table((100, 10.0), (200, 20.0))
    for t in (30.0, 1_000.0, 86_400.0):
        add(tab, 200, t, CAP)
        assert lag(tab, 150, t + 0.5, CAP) == (t + 0.5 - 15.1, False)
    assert lag(tab, 199, 100.0, CAP) == (80.0, False)  # the newest record came by 20


def test_records_after_an_idle_stretch_are_placed_after_it() -> None:
    tab = table((100, 10.0), (200, 20.0), (200, 90.0), (300, 100.0))
    # Records 200..299 came in (90, 100], not spread back over the idle stretch from 20.
    assert appended_at(tab, 200, CAP) == (90.1, False)
    assert appended_at(tab, 249, CAP) == (95.0, False)


def test_idle_and_caught_up_is_zero_never_nan_or_huge() -> None:
    # kafka-lag-exporter #32 (NaN for an idle, caught-up partition) and #496 (3 years).
    tab = table((500, 0.0))
    for t in (15.0, 3_600.0, 10 * 365 * 86_400.0):
        add(tab, 500, t, CAP)
        assert lag(tab, 500, t + 1.0, CAP) == (0.0, False)
    assert tab.f_count == 2


def test_a_single_point_table() -> None:
    tab = table((500, 100.0))
    assert lag(tab, 500, 200.0, CAP) == (0.0, False)
    assert lag(tab, 499, 200.0, CAP) == (100.0, True)  # appended by 100: at least 100 s old


# --- the bound ---


def test_the_table_answers_from_its_newest_cap_points() -> None:
    cap = 8
    tab = new_table()
    for i in range(100):
        add(tab, 10 * i, float(i), cap)
        assert tab.f_count <= cap + slack(cap)
    assert points(tab, cap) == [(10 * i, float(i)) for i in range(92, 100)]


def test_older_than_the_table_is_a_flagged_lower_bound() -> None:
    cap = 4
    tab = table(*[(10 * i, float(i)) for i in range(10)], cap=cap)  # answers from 60@6 .. 90@9
    assert lag(tab, 55, 20.0, cap) == (14.0, True)  # appended by 6: at least 14 s old
    assert lag(tab, 0, 20.0, cap) == (14.0, True)
    assert lag(tab, 60, 20.0, cap) == (20.0 - 6.1, False)  # inside: interpolated


def test_a_flat_segment_cut_by_the_bound_keeps_a_sound_lower_bound() -> None:
    cap = 3
    tab = table((100, 0.0), (200, 10.0), (200, 50.0), (300, 60.0), (400, 70.0), cap=cap)
    assert points(tab, cap) == [(200, 50.0), (300, 60.0), (400, 70.0)]
    # Record 150 came by 10; the table only knows "by 50": a lower bound, still true.
    assert lag(tab, 150, 80.0, cap) == (30.0, True)


def test_a_smaller_cap_applies_at_once() -> None:
    tab = table(*[(10 * i, float(i)) for i in range(20)])
    assert lag(tab, 105, 30.0, 4) == (14.0, True)  # answers from 160@16
    assert lag(tab, 105, 30.0, CAP) == (30.0 - 10.6, False)


def test_bytes_per_point() -> None:
    tab = new_table()
    for i in range(CAP + slack(CAP)):
        add(tab, 10**12 + 1_000 * i, 1.7e9 + 15.0 * i, CAP)
    # One array of 4-byte LEO and time offsets: 8 bytes a point, allocated exactly (no slack
    # beyond the table's own), plus one array header; 16 bytes a point before, 48 as lists.
    assert tab.f_table.itemsize == 4
    assert sys.getsizeof(tab.f_table) == sys.getsizeof(new_table().f_table) + 8 * (CAP + slack(CAP))


def test_a_full_table_moves_its_points_in_place() -> None:
    tab = table(*[(10 * i, float(i)) for i in range(CAP + slack(CAP))])
    array_before = tab.f_table
    add(tab, 10_000, 1_000.0, CAP)  # over the limit: the oldest are dropped, the array is kept
    assert tab.f_table is array_before and tab.f_count == CAP
    assert points(tab, CAP)[-1] == (10_000, 1_000.0)


def test_times_are_kept_in_ticks_of_1_1024_s_rounded_up() -> None:
    tab = table((100, 10.0001), (200, 20.5), (300, 30.1))
    # Never earlier, by less than a tick; a whole number of ticks (20.5) exactly.
    assert points(tab, CAP) == [(100, 10241 / 1024), (200, 20.5), (300, 30823 / 1024)]
    assert 10.0001 < 10241 / 1024 < 10.0001 + 1 / 1024 and 30.1 < 30823 / 1024 < 30.1 + 1 / 1024
    # So the lower bound stays one: record 50 came by 10.0001, "at least now - 10241/1024" is true.
    lag_s, lower = lag(tab, 50, 40.0, CAP)
    assert lower and lag_s == 40.0 - 10241 / 1024 <= 40.0 - 10.0001


def test_leo_offsets_beyond_32_bits_move_the_base_then_widen() -> None:
    # A fast partition: 3e9 offsets between polls. After a trim the base moves up to the oldest
    # point and the offsets fit 32 bits again; a table spanning more than 2**32 offsets widens.
    cap = 2
    tab = table((0, 0.0), (3_000_000_000, 15.0), cap=cap)
    assert tab.f_table.itemsize == 4
    add(tab, 6_000_000_000, 30.0, cap)  # the table holds 0 .. 6e9: wider than 32 bits
    assert tab.f_table.itemsize == 8
    assert points(tab, cap) == [(3_000_000_000, 15.0), (6_000_000_000, 30.0)]
    assert lag(tab, 4_499_999_999, 40.0, cap) == (40.0 - 22.5, False)
    tab = table((10**15, 0.0), (10**15 + FITS - 1, 15.0))  # just fits
    assert tab.f_table.itemsize == 4 and points(tab, CAP)[-1] == (10**15 + FITS - 1, 15.0)


def test_a_table_spanning_more_than_49_days_widens() -> None:
    day = 86_400.0
    tab = table((100, 1.7e9), (200, 1.7e9 + 15.0), (200, 1.7e9 + 30.0))
    add(tab, 200, 1.7e9 + 60 * day, CAP)  # the idle stretch's end, 60 days after the base
    assert tab.f_table.itemsize == 8
    assert points(tab, CAP) == [(100, 1.7e9), (200, 1.7e9 + 15.0), (200, 1.7e9 + 60 * day)]
    assert appended_at(tab, 150, CAP) == (1.7e9 + 7.65, False)  # (150 + 1 - 100) / 100 of 15 s
    assert appended_at(tab, 99, CAP) == (1.7e9, True)


def test_a_clock_that_stepped_back_moves_the_time_base() -> None:
    tab = table((100, 1_000.0), (200, 900.0), (300, 1_100.0))
    assert tab.f_table.itemsize == 4
    assert points(tab, CAP) == [(100, 1_000.0), (200, 900.0), (300, 1_100.0)]


def test_a_smaller_cap_shrinks_the_array() -> None:
    tab = table(*[(10 * i, float(i)) for i in range(CAP + slack(CAP))])
    add(tab, 10_000, 1_000.0, 4)
    assert tab.f_count == 4 and len(tab.f_table) == 2 * (4 + slack(4))
    held = CAP + slack(CAP)
    assert points(tab, 4) == [(10 * i, float(i)) for i in range(held - 3, held)] + [(10_000, 1_000.0)]


# --- a new log ---


def test_leo_going_backwards_clears_the_table() -> None:
    tab = table((100, 10.0), (200, 20.0), (200, 30.0))
    add(tab, 50, 40.0, CAP)
    assert points(tab, CAP) == [(50, 40.0)]
    assert lag(tab, 10, 45.0, CAP) == (5.0, True)


def test_clear() -> None:
    tab = table((100, 10.0), (200, 20.0))
    freshness.clear(tab)
    assert points(tab, CAP) == []


# --- against a literal reading of the definition ---


class _Literal:
    """The table as the definition reads: every point kept, idle runs collapsed to their first
    and last point, the newest `cap` used; a linear scan for the first point beyond the record."""

    def __init__(self) -> None:
        self.pts: list[tuple[int, float]] = []

    def add(self, leo: int, t: float) -> None:
        if self.pts and leo < self.pts[-1][0]:
            self.pts = []
        if len(self.pts) >= 2 and self.pts[-1][0] == leo and self.pts[-2][0] == leo:
            self.pts[-1] = (leo, t)
        else:
            self.pts.append((leo, t))

    def lag(self, offset: int, now: float, cap: int) -> tuple[float, bool]:
        pts = self.pts[-cap:]
        for i, (leo, t) in enumerate(pts):
            if leo > offset:
                if i == 0:
                    return (max(0.0, now - t), True)
                l0, t0 = pts[i - 1]
                return (max(0.0, now - (t0 + (offset + 1 - l0) * (t - t0) / (leo - l0))), False)
        return (0.0, False)


def _steps(leo_steps: st.SearchStrategy[int], time_steps: st.SearchStrategy) -> st.SearchStrategy:
    """Polls as (LEO step, time step, how far the mirror is behind, how long after the poll)."""
    return st.lists(
        st.tuples(leo_steps, time_steps, st.integers(-60, 5), st.floats(min_value=0.0, max_value=10.0)),
        min_size=1,
        max_size=80,
    )


@settings(max_examples=300, deadline=None)
@given(
    st.integers(2, 12),
    _steps(
        # idle, grow, go back, grow by more than 32 bits of offsets
        st.one_of(st.just(0), st.integers(1, 50), st.integers(-30, -1), st.integers(2**31, 2**34)),
        # ticks: a poll gap, up to 97 days (more than 32 bits of ticks), a clock stepping back
        st.one_of(st.integers(10, 100_000), st.integers(2**31, 2**33), st.integers(-100_000, -1)),
    ),
)
def test_matches_the_literal_definition(cap: int, steps) -> None:
    # Times on the 1/1024 s grid the table keeps, so it must agree exactly.
    tab = new_table()
    literal = _Literal()
    leo, ticks = 100, 1_700_000_000 * 1024
    for dleo, dticks, behind, read in steps:
        leo = max(0, leo + dleo)
        ticks += dticks
        t = ticks / 1024
        add(tab, leo, t, cap)
        literal.add(leo, t)
        assert points(tab, cap) == literal.pts[-cap:]
        assert tab.f_count <= cap + slack(cap)
        offset = max(0, leo + behind)
        now = t + read
        got = lag(tab, offset, now, cap)
        assert got == literal.lag(offset, now, cap)
        assert math.isfinite(got[0]) and got[0] >= 0.0


@settings(max_examples=200, deadline=None)
@given(
    st.integers(2, 12),
    _steps(st.one_of(st.just(0), st.integers(1, 50)), st.floats(min_value=0.01, max_value=100.0)),
)
def test_any_time_is_within_a_tick_and_lower_bounds_stay_sound(cap: int, steps) -> None:
    tab = new_table()
    literal = _Literal()
    leo, t = 100, 1.7e9
    for dleo, dt, behind, read in steps:
        leo += dleo
        t += dt
        add(tab, leo, t, cap)
        literal.add(leo, t)
        offset = max(0, leo + behind)
        now = t + read
        got, lower = lag(tab, offset, now, cap)
        want, want_lower = literal.lag(offset, now, cap)
        assert lower == want_lower
        assert want - 1 / 1024 <= got <= want + 1e-9  # times only move later, by under a tick


@settings(max_examples=300, deadline=None)
@given(
    st.integers(2, 12),
    st.lists(st.tuples(st.one_of(st.just(0), st.integers(1, 50)), st.integers(10, 100_000), st.integers(0, 40),
                       st.integers(0, 10)), min_size=1, max_size=80),
)
def test_a_pruned_table_answers_every_later_offset_as_the_whole_table(cap: int, steps) -> None:
    """Pruning at the oldest uncopied record drops only points no later answer reads (the LRO
    only moves forward), while the table keeps two or three points where the mirror keeps up."""
    whole, pruned = new_table(), new_table()
    leo, ticks, offset = 100, 1_700_000_000 * 1024, 100
    for dleo, dticks, copied, read in steps:
        leo += dleo
        ticks += dticks
        t = ticks / 1024
        add(whole, leo, t, cap)
        add(pruned, leo, t, cap)
        offset = min(leo, offset + copied)  # the next record to copy: only moves forward
        now = t + read
        assert lag(pruned, offset, now, cap) == lag(whole, offset, now, cap)
        freshness.prune(pruned, offset)
        assert pruned.f_count <= cap + slack(cap)
        if offset >= leo:
            assert pruned.f_count == 1  # caught up: the newest point only
        for later in range(offset, leo + 2):
            assert lag(pruned, later, now, cap) == lag(whole, later, now, cap)
