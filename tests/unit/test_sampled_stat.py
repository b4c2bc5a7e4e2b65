"""WindowedLagStat: Kafka SampledStat semantics for min, max and avg over shared samples."""

from __future__ import annotations

import math
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.oracle.sampled_stat import WindowedLagStat

NONE3 = (None, None, None)


# --- a straight port of Kafka's classic SampledStat, one stat per statistic, as the oracle ---


class _KafkaSample:
    def __init__(self, initial: float, now: float) -> None:
        self.initial = initial
        self.count = 0
        self.start = now
        self.value = initial

    def reset(self, now: float) -> None:
        self.count = 0
        self.start = now
        self.value = self.initial


class _KafkaSampledStat:
    """org.apache.kafka.common.metrics.stats.SampledStat (time window only), NaN when empty."""

    def __init__(self, initial: float, update, combine, window: float, samples: int) -> None:
        self.initial = initial
        self.update = update
        self.combine = combine
        self.window = window
        self.n = samples
        self.current = 0
        self.samples: list[_KafkaSample] = []

    def _current(self, now: float) -> _KafkaSample:
        if not self.samples:
            self.samples.append(_KafkaSample(self.initial, now))
        return self.samples[self.current]

    def record(self, value: float, now: float) -> None:
        sample = self._current(now)
        if now - sample.start >= self.window:  # isComplete
            self.current = (self.current + 1) % self.n
            if self.current >= len(self.samples):
                sample = _KafkaSample(self.initial, now)
                self.samples.append(sample)
            else:
                sample = self._current(now)
                sample.reset(now)
        sample.value = self.update(sample.value, value)
        sample.count += 1

    def measure(self, now: float) -> float:
        for sample in self.samples:  # purgeObsoleteSamples
            if now - sample.start >= self.n * self.window:
                sample.reset(now)
        return self.combine(self.samples)


def _min_combine(samples: list[_KafkaSample]) -> float:
    count = sum(s.count for s in samples)
    return math.nan if count == 0 else min([sys.float_info.max] + [s.value for s in samples])


def _max_combine(samples: list[_KafkaSample]) -> float:
    count = sum(s.count for s in samples)
    return math.nan if count == 0 else max([-math.inf] + [s.value for s in samples])


def _avg_combine(samples: list[_KafkaSample]) -> float:
    count = sum(s.count for s in samples)
    total = 0.0
    for s in samples:
        total += s.value
    return math.nan if count == 0 else total / count


class _KafkaTrio:
    """What Kafka would register for -min, -max and -avg: three independent SampledStats."""

    def __init__(self, window: float, samples: int) -> None:
        self.min = _KafkaSampledStat(sys.float_info.max, min, _min_combine, window, samples)
        self.max = _KafkaSampledStat(-math.inf, max, _max_combine, window, samples)
        self.avg = _KafkaSampledStat(0.0, lambda a, b: a + b, _avg_combine, window, samples)

    def record(self, value: float, now: float) -> None:
        for stat in (self.min, self.max, self.avg):
            stat.record(value, now)

    def measure(self, now: float) -> tuple[float | None, float | None, float | None]:
        out = tuple(stat.measure(now) for stat in (self.min, self.max, self.avg))
        return NONE3 if any(math.isnan(v) for v in out) else out  # type: ignore[return-value]


# --- examples ---


def test_empty_stat_measures_none() -> None:
    stat = WindowedLagStat(30.0, 2)
    assert stat.measure(0.0) == NONE3
    assert stat.measure(1e9) == NONE3


def test_one_value() -> None:
    stat = WindowedLagStat(30.0, 2)
    stat.record(7, 100.0)
    assert stat.measure(100.0) == (7.0, 7.0, 7.0)


def test_measure_returns_floats() -> None:
    stat = WindowedLagStat(30.0, 2)
    stat.record(3, 0.0)
    stat.record(4, 1.0)
    mn, mx, avg = stat.measure(1.0)
    assert (mn, mx, avg) == (3.0, 4.0, 3.5)
    assert all(type(v) is float for v in (mn, mx, avg))


def test_values_within_one_sample() -> None:
    stat = WindowedLagStat(30.0, 2)
    for i, v in enumerate([5, 1, 9, 5]):
        stat.record(v, 10.0 + i)
    assert stat.measure(14.0) == (1.0, 9.0, 5.0)


def test_sample_is_complete_at_exactly_one_window() -> None:
    stat = WindowedLagStat(30.0, 2)
    stat.record(10, 0.0)
    stat.record(20, 29.999)  # still the first sample
    stat.record(30, 59.999)  # 59.999 - 0 >= 30: a second sample, starting at 59.999
    # Both samples are live at 59.999; the first (started at 0) expires at 0 + 2 * 30.
    assert stat.measure(59.999) == (10.0, 30.0, 20.0)
    assert stat.measure(60.0) == (30.0, 30.0, 30.0)


def test_samples_combine_across_windows() -> None:
    stat = WindowedLagStat(30.0, 2)
    stat.record(100, 0.0)
    stat.record(50, 30.0)  # complete: a second sample starts at 30
    assert stat.measure(30.0) == (50.0, 100.0, 75.0)


def test_oldest_sample_is_recycled() -> None:
    stat = WindowedLagStat(30.0, 2)
    stat.record(100, 0.0)
    stat.record(50, 30.0)
    stat.record(10, 60.0)  # third window: sample 0 (the 100) is reset and reused
    assert stat.measure(60.0) == (10.0, 50.0, 30.0)


def test_purge_uses_sample_start_not_last_event() -> None:
    stat = WindowedLagStat(30.0, 2)
    stat.record(1, 0.0)
    stat.record(2, 29.0)  # same sample (started at 0)
    assert stat.measure(59.9) == (1.0, 2.0, 1.5)
    assert stat.measure(60.0) == NONE3  # 60 - 0 >= 2 * 30, although the last event was at 29


def test_purge_keeps_the_recent_sample() -> None:
    stat = WindowedLagStat(30.0, 2)
    stat.record(1000, 0.0)
    stat.record(1, 45.0)  # new sample at 45
    assert stat.measure(60.0) == (1.0, 1.0, 1.0)  # the 1000 sample started 60 s ago: purged
    assert stat.measure(104.9) == (1.0, 1.0, 1.0)
    assert stat.measure(105.0) == NONE3


def test_record_after_purge_starts_clean() -> None:
    stat = WindowedLagStat(30.0, 2)
    stat.record(1000, 0.0)
    assert stat.measure(500.0) == NONE3
    stat.record(3, 501.0)
    assert stat.measure(501.0) == (3.0, 3.0, 3.0)


def test_single_sample() -> None:
    stat = WindowedLagStat(10.0, 1)
    stat.record(5, 0.0)
    stat.record(7, 9.0)
    assert stat.measure(9.0) == (5.0, 7.0, 6.0)
    stat.record(1, 10.0)  # complete: the only sample is reset
    assert stat.measure(10.0) == (1.0, 1.0, 1.0)
    assert stat.measure(20.0) == NONE3


def test_many_samples() -> None:
    stat = WindowedLagStat(1.0, 5)
    for i in range(10):
        stat.record(i, float(i))
    # Samples started at 5..9 are within 5 s of 9.5; 0..4 were recycled.
    assert stat.measure(9.5) == (5.0, 9.0, 7.0)


def test_gap_longer_than_all_samples_without_measure() -> None:
    # record() does not purge (Kafka neither): it only advances one sample per call.
    stat = WindowedLagStat(30.0, 2)
    stat.record(100, 0.0)
    stat.record(200, 30.0)
    stat.record(1, 1000.0)  # recycles sample 0; sample 1 (start 30) is stale but still there
    assert stat.measure(1000.0) == (1.0, 1.0, 1.0)  # measure purges it


def test_record_and_measure_matches_the_pair() -> None:
    a = WindowedLagStat(30.0, 2)
    b = WindowedLagStat(30.0, 2)
    for now, v in [(0.0, 5), (15.0, 3), (30.0, 8), (45.0, 1), (200.0, 4)]:
        a.record(v, now)
        assert b.record_and_measure(v, now) == a.measure(now)


def test_fused_purge_boundary() -> None:
    for stat_measure in ("pair", "fused"):
        stat = WindowedLagStat(30.0, 3)
        stat.record(1, 0.0)  # sample 0 starts at 0
        stat.record(2, 40.0)  # sample 1 starts at 40
        if stat_measure == "pair":
            stat.record(3, 90.0)
            got = stat.measure(90.0)
        else:
            got = stat.record_and_measure(3, 90.0)  # sample 2 starts at 90
        assert got == (2.0, 3.0, 2.5)  # sample 0 is exactly 3 * 30 old: purged


def test_float_values() -> None:
    stat = WindowedLagStat(30.0, 2)
    stat.record(0.5, 0.0)
    stat.record(1.5, 1.0)
    assert stat.measure(1.0) == (0.5, 1.5, 1.0)


def test_properties_and_repr() -> None:
    stat = WindowedLagStat(30, 3)
    assert stat.window_s == 30.0 and stat.num_samples == 3
    stat.record(1, 0.0)
    assert "WindowedLagStat(window_s=30.0, num_samples=3" in repr(stat)


@pytest.mark.parametrize("window, samples", [(0, 2), (-1.0, 2), (float("nan"), 2), (30.0, 0)])
def test_rejects_bad_config(window: float, samples: int) -> None:
    with pytest.raises(ValueError):
        WindowedLagStat(window, samples)


def test_is_small() -> None:
    stat = WindowedLagStat(30.0, 2)
    assert not hasattr(stat, "__dict__")
    stat.record(5, 0.0)
    stat.record(6, 30.0)
    # The object plus its one flat list of samples; no per-sample objects.
    size = sys.getsizeof(stat) + sys.getsizeof(stat._d)
    assert size < 250, size


# --- properties ---

_values = st.integers(min_value=0, max_value=10**9)
# Whole seconds hit the window and expiry boundaries exactly; fractions cover the rest.
_steps = st.one_of(
    st.integers(min_value=0, max_value=100).map(float),
    st.floats(min_value=0.0, max_value=100.0, allow_nan=False),
)
_ops = st.lists(
    st.tuples(st.sampled_from(["record", "measure", "both"]), _steps, _values),
    min_size=1,
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(
    window=st.sampled_from([0.5, 1.0, 15.0, 30.0]),
    samples=st.integers(min_value=1, max_value=4),
    ops=_ops,
)
def test_matches_kafka_sampled_stats(window: float, samples: int, ops) -> None:
    """One shared set of samples gives exactly what Kafka's Min, Max and Avg stats give."""
    ours = WindowedLagStat(window, samples)
    fused = WindowedLagStat(window, samples)
    kafka = _KafkaTrio(window, samples)
    now = 1_000.0
    # measure() mutates (it purges), in Kafka too, so all three see the same call sequence;
    # `fused` takes record_and_measure wherever the others take record then measure.
    for op, step, value in ops:
        now += step
        if op == "record":
            ours.record(value, now)
            fused.record(value, now)
            kafka.record(value, now)
        elif op == "measure":
            expected = kafka.measure(now)
            assert ours.measure(now) == expected
            assert fused.measure(now) == expected
        else:
            kafka.record(value, now)
            expected = kafka.measure(now)
            ours.record(value, now)
            assert ours.measure(now) == expected
            assert fused.record_and_measure(value, now) == expected


@settings(max_examples=200, deadline=None)
@given(ops=st.lists(st.tuples(_steps, _values), min_size=1, max_size=40))
def test_measure_is_ordered_and_bounded(ops) -> None:
    stat = WindowedLagStat(30.0, 2)
    now = 0.0
    for step, value in ops:
        now += step
        mn, mx, avg = stat.record_and_measure(value, now)
        assert mn is not None and mx is not None and avg is not None
        assert mn <= value <= mx
        assert mn <= avg <= mx
