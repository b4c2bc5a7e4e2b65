"""The upload quota's arithmetic (KIP-956: Kafka's SimpleRate over SampledStat, QuotaUtils.throttleTime).

Pure: every call gets `now`; nothing sleeps.
"""

from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings as hsettings, strategies as st

from mirrorlag.history.quota import CopyQuota


def throttle_time(q: CopyQuota, now: float) -> float:
    """QuotaUtils.throttleTime in seconds: 0 unless the rate is over the quota."""
    window = q.window(now)
    rate = q.total(now) / window
    if rate <= q.bytes_per_second:
        return 0.0
    return (rate - q.bytes_per_second) / q.bytes_per_second * window


def test_the_first_window_counts_as_full() -> None:
    q = CopyQuota(100, window_num=11, window_s=1.0)
    assert q.window(0.0) == 1.0 and q.rate(0.0) == 0.0
    q.record(100, 0.0)
    assert q.rate(0.0) == 100.0  # not 100 / 0: SimpleRate's minimum window
    assert q.rate(0.5) == 100.0
    assert q.rate(2.0) == 50.0  # afterwards, elapsed time since the oldest sample started


def test_throttle_time_is_kafkas_formula() -> None:
    q = CopyQuota(100, window_num=11, window_s=1.0)
    q.record(300, 0.0)
    # (O - T) / T * W = (300 - 100) / 100 * 1
    assert throttle_time(q, 0.0) == pytest.approx(2.0)
    assert throttle_time(q, 2.0) == pytest.approx(1.0)  # 300 / 2 = 150: (150 - 100) / 100 * 2
    assert throttle_time(q, 3.0) == 0.0


def test_delay_before_sending() -> None:
    q = CopyQuota(100, window_num=11, window_s=1.0)
    assert q.delay(0.0, 100) == 0.0  # fits the first window
    q.record(100, 0.0)
    assert q.delay(0.0, 100) == pytest.approx(2.0)  # 200 bytes need a 2 s window
    assert q.delay(1.5, 50) == pytest.approx(0.0)  # 150 over 1.5 s
    assert q.delay(1.0, 50) == pytest.approx(0.5)


def test_samples_go_obsolete_after_num_windows_without_events() -> None:
    q = CopyQuota(100, window_num=2, window_s=1.0)
    q.record(100, 0.0)
    assert q.total(1.99) == 100
    assert q.total(2.0) == 0  # last event at 0, 2 windows of 1 s
    assert q.window(2.0) == 1.0  # reset samples start now: back to the minimum window


def test_a_sample_with_a_late_event_is_kept_until_its_last_event_expires() -> None:
    # Current Kafka purges by last event, not by start.
    q = CopyQuota(1000, window_num=2, window_s=1.0)
    q.record(10, 0.0)
    q.record(10, 0.9)  # same sample (started at 0)
    assert q.total(2.5) == 20  # 2.5 - 0.9 < 2
    assert q.total(2.9) == 0


def test_keeps_num_plus_one_samples() -> None:
    q = CopyQuota(1e9, window_num=2, window_s=1.0)
    for t in range(6):
        q.record(1, float(t))
    assert len(q._samples) == 3


def test_delay_accounts_for_samples_expiring_while_waiting() -> None:
    # A sample expiring shrinks the window as well as the total: here it makes the wait longer than
    # the throttle formula's (which assumes nothing expires).
    q = CopyQuota(100, window_num=2, window_s=1.0)
    q.record(100, 0.0)
    q.record(50, 1.5)  # a new sample
    naive = (100 + 50 + 100) / 100 - q.window(1.5)  # 1.0
    assert naive == pytest.approx(1.0)
    assert q.delay(1.5, 100) == pytest.approx(1.5)  # at 2.0 the first sample goes; then 150 over 1.5 s


def test_max_chunk_is_one_window() -> None:
    q = CopyQuota(1000, window_num=11, window_s=2.0)
    assert q.max_chunk == 2000
    q.delay(0.0, 2000)
    with pytest.raises(ValueError):
        q.delay(0.0, 2001)


@pytest.mark.parametrize("args", [(0, 11, 1.0), (100, 0, 1.0), (100, 11, 0.0)])
def test_rejects_nonsense(args: tuple) -> None:
    with pytest.raises(ValueError):
        CopyQuota(*args)


def _send(q: CopyQuota, total: int, chunk: int, start: float = 0.0) -> tuple[float, float]:
    """Send `total` bytes in chunks at the earliest allowed times; (last send time, max rate seen)."""
    now, sent, worst = start, 0, 0.0
    while sent < total:
        n = min(chunk, total - sent)
        now += q.delay(now, n)
        q.record(n, now)
        worst = max(worst, q.rate(now))
        sent += n
    return now, worst


def test_n_bytes_at_q_per_second_take_n_over_q() -> None:
    q = CopyQuota(1_000_000, window_num=11, window_s=1.0)
    end, worst = _send(q, 3_000_000, 65536)
    assert end == pytest.approx(3.0, rel=0.01)
    assert worst <= 1_000_000 * (1 + 1e-9)


@pytest.mark.parametrize(("window_num", "window_s", "low"), [(11, 1.0, 0.99), (3, 0.5, 0.95)])
def test_long_run_rate_is_the_quota_across_many_expiries(window_num: int, window_s: float, low: float) -> None:
    # Never over; slightly under with few samples, as Kafka's own: when the oldest sample expires
    # (by its last event) the window loses that sample's whole span at once.
    q = CopyQuota(50_000, window_num=window_num, window_s=window_s)
    end, worst = _send(q, 5_000_000, 4096)  # ~100 s: hundreds of samples recycled
    assert low * 50_000 <= 5_000_000 / end <= 50_000 * (1 + 1e-9)
    assert worst <= 50_000 * (1 + 1e-9)


@hsettings(max_examples=200, deadline=None)
@given(
    window_num=st.integers(1, 5),
    window_s=st.sampled_from([0.1, 0.5, 1.0, 2.0]),
    events=st.lists(st.tuples(st.floats(0, 3), st.floats(0, 1)), min_size=0, max_size=12),
    ask=st.floats(0.01, 1.0),
    gap=st.floats(0, 5),
)
def test_delay_is_exactly_the_first_moment_the_rate_fits(
    window_num: int, window_s: float, events: list[tuple[float, float]], ask: float, gap: float
) -> None:
    quota = 100.0
    q = CopyQuota(quota, window_num, window_s)
    now = 0.0
    for step, fraction in events:  # records at increasing times, each at most one window's worth
        now += step
        q.record(fraction * q.max_chunk, now)
    now += gap
    n = ask * q.max_chunk
    d = q.delay(now, n)
    assert d >= 0

    def rate_if_sent(t: float) -> float:
        probe = copy.deepcopy(q)  # measuring purges: probe a copy
        probe.record(n, t)
        return probe.rate(t)

    assert rate_if_sent(now + d) <= quota * (1 + 1e-9)
    if d > 1e-5:  # and not a moment earlier
        for k in range(0, 41):
            t = now + d * k / 40 - 2e-6
            if t >= now:
                assert rate_if_sent(t) > quota * (1 - 1e-9), (k, t)
