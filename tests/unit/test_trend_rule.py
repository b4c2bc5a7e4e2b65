"""trend_rule.judge on hand-made 28-day series: what "growing" means, case by case."""

from __future__ import annotations

import numpy as np
import pytest

from mirrorlag.rollup import trend_rule
from mirrorlag.rollup.trend_rule import judge

WEEK = np.array([1.0, 1.05, 1.1, 1.15, 1.2, 0.6, 0.6])


def _weekly(level: float = 10_000.0, end: int = 4) -> np.ndarray:
    """28 days of a flat weekly shape, the last day weekday `end` (4: a Friday)."""
    return level * WEEK[(np.arange(28) - 27 + end) % 7]


def _old_rule(y: np.ndarray) -> bool:
    """The rule before issue 32: least-squares slope over 7 or 28 days with t > 2."""
    for n in (7, 28):
        v = y[-n:]
        x = np.arange(n, dtype=float)
        slope, intercept = np.polyfit(x, v, 1)
        sse = float(np.sum((v - slope * x - intercept) ** 2))
        se = np.sqrt(sse / (n - 2) / np.sum((x - x.mean()) ** 2))
        if (slope / se if se > 0 else np.inf * np.sign(slope)) > 2:
            return True
    return False


@pytest.mark.parametrize("end", range(7))
def test_a_flat_weekly_shape_is_not_growing_on_any_weekday(end):
    y = _weekly(end=end)
    assert not judge(y).growing
    assert judge(y).change == 0.0


def test_the_busy_friday_the_old_rule_flagged():
    y = _weekly(end=4) * (1 + np.random.default_rng(5).normal(0, 0.05, 28))
    assert _old_rule(y) and not judge(y).growing


def test_zeros_then_one_record_is_not_growth():
    y = np.array([0.0] * 21 + [0, 0, 0, 0, 0, 1, 1])
    assert _old_rule(y)  # t = 2.89 on the last 7 days
    g = judge(y)
    assert g.ratio == np.inf and g.change == pytest.approx(0.2) and not g.growing  # under MIN_CHANGE records


def test_a_step_past_both_minimums_is_growing():
    y = np.r_[np.full(21, 5000.0), np.full(7, 5600.0)]  # +600 records, +12 %
    g = judge(y)
    assert (g.change, g.ratio, g.days, g.up) == (600.0, pytest.approx(0.12), 7, 7) and g.growing


@pytest.mark.parametrize("last, why", [(5400.0, "+8 %: under MIN_RATIO"), (50.0 * 1.5, "+25 records: under MIN_CHANGE")])
def test_a_step_short_of_one_minimum_is_not(last, why):
    base = 5000.0 if last > 1000 else 50.0
    assert not judge(np.r_[np.full(21, base), np.full(7, last)]).growing, why


def test_one_incident_day_is_not_growth():
    y = np.r_[np.full(27, 5000.0), 50_000.0]
    g = judge(y)
    assert g.up == 1 and g.change == 0.0 and not g.growing


def test_a_change_within_the_series_own_wobble_is_not_growth():
    wobble = np.tile([8000.0, 12000.0], 14)  # +-20 % week to week on each weekday
    y = wobble * np.r_[np.ones(21), np.full(7, 1.15)]
    g = judge(y)
    assert g.ratio > trend_rule.MIN_RATIO and g.noise == 4000.0 and not g.growing
    g = judge(y, noise=trend_rule.RMS)  # every week-to-week change 4,000: the root mean square too
    assert g.noise == 4000.0 and not g.growing


def test_seconds_count_the_few_large_week_to_week_changes_of_incidents():
    """A topic's out-of-sync seconds: 3 weeks of incidents on 6 days (2,000-15,000 s), then
    6,000 s on 6 of the 7 days. Half the week-to-week changes are between quiet days, so their
    median (1,000 s) calls +3,400 s growth; their root mean square (7,031 s, NOISE_SECONDS) does not."""
    y = np.zeros(28)
    y[[1, 4, 9, 12, 15, 19]] = [12_000.0, 3_000.0, 15_000.0, 2_000.0, 9_000.0, 4_000.0]
    y[21:] = [6_000.0, 6_000.0, 6_000.0, 6_000.0, 6_000.0, 0.0, 6_000.0]
    median = judge(y, trend_rule.MIN_CHANGE_SECONDS, trend_rule.MEDIAN)
    assert (median.change, median.up, median.noise) == (3_400.0, 5, 1_000.0) and median.growing
    g = judge(y, trend_rule.MIN_CHANGE_SECONDS, trend_rule.NOISE_SECONDS)
    steps = np.abs(y[7:21] - y[0:14])
    assert g.noise == pytest.approx(np.sqrt(np.mean(steps ** 2))) and g.noise == pytest.approx(7_030.5, abs=0.1)
    assert g.change == 3_400.0 and not g.growing


def test_an_unknown_noise_is_refused():
    with pytest.raises(ValueError, match="noise"):
        judge(_weekly(), noise="mean")


def test_missing_days_and_short_histories():
    y = np.r_[np.full(21, 1000.0), np.full(7, 1500.0)]
    y[[0, 8, 15, 22]] = np.nan  # one day of each week
    g = judge(y)
    assert g.days == 6 and g.growing  # 6 days with 2 or 3 baseline weeks
    young = np.r_[np.full(14, np.nan), np.full(7, 1000.0), np.full(7, 2000.0)]
    g = judge(young)
    assert g.days == 0 and np.isnan(g.change) and not g.growing  # one earlier week is no baseline


def test_many_series_at_once():
    y = np.stack([_weekly(), np.r_[np.full(21, 5000.0), np.full(7, 6000.0)]])
    assert judge(y).growing.tolist() == [False, True]


def test_a_window_of_another_length_is_refused():
    with pytest.raises(ValueError, match="28 days"):
        judge(np.zeros(27))


def test_the_report_says_what_growing_means():
    import dataclasses

    from mirrorlag.rollup.report import Charts, render
    from tests.unit.test_rollup_charts import _report_data

    page = render(dataclasses.replace(_report_data(), flows=[], series=[]), Charts(flows=b"", series=None, heat=None))
    trends = page[page.index('<section id="trends">'):]
    assert "same weekdays of the 3 weeks before" in trends and "at least 5 of the 7 days" in trends
    assert "100 records, 10% and 1.5×" in trends and "t &gt; 2" not in page
    assert "growing (last 7 days vs the 3 weeks before, see Trends): none" in page


def test_min_change_is_the_measures_own():
    """Out-of-sync seconds: +500 s a day on 1,800 s (+28 %) is growth past 100 but not past
    MIN_CHANGE_SECONDS; +900 s is."""
    base = _weekly(level=1_800.0)
    for extra, seconds in ((500.0, False), (900.0, True)):
        y = base.copy()
        y[-7:] += extra
        assert judge(y, min_change=100.0).growing
        assert bool(judge(y, trend_rule.MIN_CHANGE_SECONDS, trend_rule.NOISE_SECONDS).growing) is seconds
