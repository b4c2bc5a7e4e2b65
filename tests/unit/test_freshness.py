"""Freshness table: interpolation, idle flat segments, the bound and its lower-bound flag (DESIGN §3)."""

from __future__ import annotations

import math
import sys
from array import array

from hypothesis import given, settings
from hypothesis import strategies as st

from mirrorlag.engine import freshness
from mirrorlag.engine.freshness import add, appended_at, lag, new_table, points, slack

CAP = 60


def table(*pts: tuple[int, float], cap: int = CAP) -> tuple[array, array]:
    offsets, times = new_table()
    for leo, t in pts:
        add(offsets, times, leo, t, cap)
    return offsets, times


# --- interpolation ---


def test_record_appended_when_the_leo_passed_it() -> None:
    # LEO 100 at t=10, 200 at t=20: records 100..199 were appended in (10, 20], evenly.
    tab = table((100, 10.0), (200, 20.0))
    assert appended_at(*tab, 100, CAP) == (10.1, False)  # the LEO passed 101 a tenth of a second in
    assert appended_at(*tab, 149, CAP) == (15.0, False)
    assert appended_at(*tab, 199, CAP) == (20.0, False)  # the last one: by the second point


def test_steady_appends_are_exact() -> None:
    # One record a second, record k appended at t = k + 1; polls at 10, 20, 30 see LEO 10, 20, 30.
    tab = table((10, 10.0), (20, 20.0), (30, 30.0))
    for k in range(10, 30):
        assert appended_at(*tab, k, CAP) == (k + 1.0, False)


def test_lag_is_now_minus_the_append_time_of_the_next_record_to_copy() -> None:
    tab = table((100, 10.0), (200, 20.0), (400, 30.0))
    assert lag(*tab, 300, 35.0, CAP) == (35.0 - 25.05, False)
    assert lag(*tab, 150, 35.0, CAP) == (35.0 - 15.1, False)


def test_bracketing_picks_the_right_segment() -> None:
    tab = table((0, 0.0), (8, 2.0), (16, 4.0), (24, 8.0))
    assert appended_at(*tab, 7, CAP) == (2.0, False)
    assert appended_at(*tab, 8, CAP) == (2.25, False)  # the next segment starts just after 2
    assert appended_at(*tab, 19, CAP) == (6.0, False)


def test_caught_up_or_not_yet_appended_is_zero() -> None:
    tab = table((100, 10.0), (200, 20.0))
    assert appended_at(*tab, 200, CAP) is None
    assert lag(*tab, 200, 99.0, CAP) == (0.0, False)
    assert lag(*tab, 10_000, 99.0, CAP) == (0.0, False)
    assert lag(*new_table(), 0, 99.0, CAP) == (0.0, False)


def test_a_clock_that_stepped_back_never_gives_a_negative_lag() -> None:
    tab = table((100, 10.0), (200, 20.0))
    assert lag(*tab, 150, 5.0, CAP) == (0.0, False)


# --- idle partitions: one flat segment ---


def test_an_idle_stretch_is_one_flat_segment_of_first_and_last_time() -> None:
    tab = table((100, 10.0), (200, 20.0), (200, 30.0), (200, 40.0), (200, 50.0))
    assert points(*tab, CAP) == [(100, 10.0), (200, 20.0), (200, 50.0)]


def test_an_idle_uncopied_partition_ages_from_when_its_records_came() -> None:
    # Nothing appended since 20, the mirror stopped at 150: record 150 came at 15.1, however long
    # the partition has been idle since (not "now - last sample").
    tab = table((100, 10.0), (200, 20.0))
    for t in (30.0, 1_000.0, 86_400.0):
        add(*tab, 200, t, CAP)
        assert lag(*tab, 150, t + 0.5, CAP) == (t + 0.5 - 15.1, False)
    assert lag(*tab, 199, 100.0, CAP) == (80.0, False)  # the newest record came by 20


def test_records_after_an_idle_stretch_are_placed_after_it() -> None:
    tab = table((100, 10.0), (200, 20.0), (200, 90.0), (300, 100.0))
    # Records 200..299 came in (90, 100], not spread back over the idle stretch from 20.
    assert appended_at(*tab, 200, CAP) == (90.1, False)
    assert appended_at(*tab, 249, CAP) == (95.0, False)


def test_idle_and_caught_up_is_zero_never_nan_or_huge() -> None:
    # kafka-lag-exporter #32 (NaN for an idle, caught-up partition) and #496 (3 years).
    tab = table((500, 0.0))
    for t in (15.0, 3_600.0, 10 * 365 * 86_400.0):
        add(*tab, 500, t, CAP)
        assert lag(*tab, 500, t + 1.0, CAP) == (0.0, False)
    assert len(tab[0]) == 2


def test_a_single_point_table() -> None:
    tab = table((500, 100.0))
    assert lag(*tab, 500, 200.0, CAP) == (0.0, False)
    assert lag(*tab, 499, 200.0, CAP) == (100.0, True)  # appended by 100: at least 100 s old


# --- the bound ---


def test_the_table_answers_from_its_newest_cap_points() -> None:
    cap = 8
    offsets, times = new_table()
    for i in range(100):
        add(offsets, times, 10 * i, float(i), cap)
        assert len(offsets) <= cap + slack(cap)
    assert points(offsets, times, cap) == [(10 * i, float(i)) for i in range(92, 100)]


def test_older_than_the_table_is_a_flagged_lower_bound() -> None:
    cap = 4
    tab = table(*[(10 * i, float(i)) for i in range(10)], cap=cap)  # answers from 60@6 .. 90@9
    assert lag(*tab, 55, 20.0, cap) == (14.0, True)  # appended by 6: at least 14 s old
    assert lag(*tab, 0, 20.0, cap) == (14.0, True)
    assert lag(*tab, 60, 20.0, cap) == (20.0 - 6.1, False)  # inside: interpolated


def test_a_flat_segment_cut_by_the_bound_keeps_a_sound_lower_bound() -> None:
    cap = 3
    tab = table((100, 0.0), (200, 10.0), (200, 50.0), (300, 60.0), (400, 70.0), cap=cap)
    assert points(*tab, cap) == [(200, 50.0), (300, 60.0), (400, 70.0)]
    # Record 150 came by 10; the table only knows "by 50": a lower bound, still true.
    assert lag(*tab, 150, 80.0, cap) == (30.0, True)


def test_a_smaller_cap_applies_at_once() -> None:
    tab = table(*[(10 * i, float(i)) for i in range(20)])
    assert lag(*tab, 105, 30.0, 4) == (14.0, True)  # answers from 160@16
    assert lag(*tab, 105, 30.0, CAP) == (30.0 - 10.6, False)


def test_bytes_per_point() -> None:
    offsets, times = new_table()
    for i in range(CAP + slack(CAP)):
        add(offsets, times, 10**12 + i, 1.7e9 + i, CAP)
    size = sys.getsizeof(offsets) + sys.getsizeof(times)
    # Two arrays of 8-byte items: 16 bytes a point (plus what an array over-allocates, 1/16 and
    # a few items) and two array headers; two lists of boxed ints and floats would take ~48.
    assert size <= 20 * (CAP + slack(CAP)) + 2 * 64, size


# --- a new log ---


def test_leo_going_backwards_clears_the_table() -> None:
    tab = table((100, 10.0), (200, 20.0), (200, 30.0))
    add(*tab, 50, 40.0, CAP)
    assert points(*tab, CAP) == [(50, 40.0)]
    assert lag(*tab, 10, 45.0, CAP) == (5.0, True)


def test_clear() -> None:
    tab = table((100, 10.0), (200, 20.0))
    freshness.clear(*tab)
    assert points(*tab, CAP) == []


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


@settings(max_examples=300, deadline=None)
@given(
    st.integers(2, 12),
    st.lists(
        st.tuples(
            st.one_of(st.just(0), st.integers(1, 50), st.integers(-30, -1)),  # idle, grow, back
            st.floats(min_value=0.01, max_value=100.0),
            st.integers(-60, 5),
            st.floats(min_value=0.0, max_value=10.0),
        ),
        min_size=1,
        max_size=80,
    ),
)
def test_matches_the_literal_definition(cap: int, steps) -> None:
    offsets, times = new_table()
    literal = _Literal()
    leo, t = 100, 0.0
    for dleo, dt, behind, read in steps:
        leo = max(0, leo + dleo)
        t += dt
        add(offsets, times, leo, t, cap)
        literal.add(leo, t)
        assert points(offsets, times, cap) == literal.pts[-cap:]
        assert len(offsets) <= cap + slack(cap)
        offset = max(0, leo + behind)
        now = t + read
        got = lag(offsets, times, offset, now, cap)
        assert got == literal.lag(offset, now, cap)
        assert math.isfinite(got[0]) and got[0] >= 0.0
