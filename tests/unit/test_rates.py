"""Rates over the sample windows (WindowRate, RatePair) and the catch-up estimate."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.oracle.rates import RatePair, WindowRate, catch_up_s

W = 60.0  # metrics.num.samples (2) x metrics.sample.window.ms (30 s)


# --- WindowRate ---


def test_none_until_two_samples_span_a_positive_time() -> None:
    rate = WindowRate(100, 0.0)
    assert rate.update(100, 0.0, W) is None
    assert rate.update(250, 15.0, W) == 10.0


def test_a_young_history_is_measured_over_all_of_it() -> None:
    rate = WindowRate(0, 0.0)
    assert [rate.update(x, t, W) for x, t in [(150, 15.0), (300, 30.0)]] == [10.0, 10.0]


def test_the_base_moves_every_half_window() -> None:
    # Polls every 15 s, 10 records/s until 60, then nothing.
    rate = WindowRate(0, 0.0)
    got = []
    for t in range(15, 181, 15):
        x = 10 * min(t, 60)
        got.append((t, rate.update(x, float(t), W), (rate.a_t, rate.b_t)))
    assert got[:4] == [
        (15, 10.0, (0.0, 0.0)),
        (30, 10.0, (0.0, 30.0)),  # the first sample was half a window old: checkpoint b = 30
        (45, 10.0, (0.0, 30.0)),
        (60, 10.0, (30.0, 60.0)),  # b became the base
    ]
    # After the counter stops, the rate decays as the base passes the stop, then is exactly 0.
    assert [r for _, r, _ in got[4:]] == [
        300 / 45,  # 75: since 30 (x was 300 then)
        0.0,  # 90: since 60
        0.0,
        0.0,
        0.0,
        0.0,
        0.0,
        0.0,
    ]


def test_reset_forgets_the_history() -> None:
    rate = WindowRate(0, 0.0)
    rate.update(600, 60.0, W)
    rate.reset(10, 60.0)
    assert rate.update(10, 60.0, W) is None
    assert rate.update(40, 75.0, W) == 2.0
    assert "WindowRate(" in repr(rate)


def test_time_standing_still_or_going_back_gives_none_not_a_negative_rate() -> None:
    rate = WindowRate(0, 10.0)
    assert rate.update(50, 10.0, W) is None
    assert rate.update(60, 5.0, W) is None


@settings(max_examples=300, deadline=None)
@given(
    st.floats(min_value=1.0, max_value=300.0),
    st.lists(st.tuples(st.floats(min_value=0.01, max_value=100.0), st.integers(0, 10**6)), min_size=1, max_size=60),
)
def test_span_runs_from_half_a_window_to_a_window_and_a_gap(window: float, steps) -> None:
    """Like Kafka's Rate over its samples: once the history is half a window long, the rate is
    taken over at least half a window and at most a window plus one gap between polls."""
    rate = WindowRate(0, 0.0)
    history = [(0, 0.0)]
    t, x, gap = 0.0, 0, 0.0
    for dt, dx in steps:
        t += dt
        x += dx
        gap = max(gap, dt)
        got = rate.update(x, t, window)
        history.append((x, t))
        base_x, base_t = rate.a_x, rate.a_t
        assert (base_x, base_t) in history  # a real sample, not an interpolation
        assert got == (x - base_x) / (t - base_t)
        assert got >= 0.0 and math.isfinite(got)
        if t >= window / 2:
            assert t - base_t >= window / 2
        assert t - base_t < window + gap or base_t == 0.0


# --- RatePair ---


def test_pair_shares_one_schedule_set_by_the_leo_times() -> None:
    pair = RatePair(1_000, 0.0, 900, 0.5)
    assert pair.update(1_000, 0.0, 900, 0.5, W) == (None, None)
    assert pair.update(1_150, 15.0, 960, 15.5, W) == (10.0, 4.0)
    assert pair.update(1_300, 30.0, 1_140, 30.5, W) == (10.0, 8.0)
    # Moved together at 30 (LEO's time, the LRO's checkpoint is its own read time).
    assert (pair.la_t, pair.lb_t, pair.ca_t, pair.cb_t) == (0.0, 30.0, 0.5, 30.5)
    assert pair.update(1_600, 60.0, 1_290, 61.0, W) == (10.0, 150 / 30.5)


def test_pair_restart_copy_keeps_the_append_rate() -> None:
    pair = RatePair(1_000, 0.0, 999, 0.5)
    pair.update(1_150, 15.0, 1_149, 15.5, W)
    pair.restart_copy(900, 30.5)
    assert pair.update(1_300, 30.0, 900, 30.5, W) == (10.0, None)
    assert pair.update(1_450, 45.0, 1_050, 45.5, W) == (10.0, 10.0)


# --- catch-up ---


def test_catch_up_estimate() -> None:
    assert catch_up_s(0, None, None) == 0.0  # caught up, whatever the rates
    assert catch_up_s(0, 1.0, 5.0) == 0.0
    assert catch_up_s(600, 30.0, 10.0) == 30.0  # gains 20 records/s
    assert catch_up_s(600, 10.0, 10.0) is None  # not gaining
    assert catch_up_s(600, 5.0, 10.0) is None  # falling behind
    assert catch_up_s(600, None, 10.0) is None  # unknown rates: no estimate
    assert catch_up_s(600, 30.0, None) is None
