"""trend_rule.judge on hand-made 8-week series: what "growing" means, case by case."""

from __future__ import annotations

import numpy as np
import pytest

from mirrorlag.rollup import trend_rule
from mirrorlag.rollup.trend_rule import WINDOW, judge

WEEK = np.array([1.0, 1.05, 1.1, 1.15, 1.2, 0.6, 0.6])


def _weekly(level: float = 10_000.0, end: int = 4, days: int = WINDOW) -> np.ndarray:
    """`days` days of a flat weekly shape, the last day weekday `end` (4: a Friday)."""
    return level * WEEK[(np.arange(days) - days + 1 + end) % 7]


def _noisy(seed: int = 5, sd: float = 0.05, level: float = 10_000.0) -> np.ndarray:
    return _weekly(level) * (1 + np.random.default_rng(seed).normal(0, sd, WINDOW))


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
    g = judge(_weekly(end=end))
    assert not g.growing and g.change == pytest.approx(0.0, abs=1e-6)


def test_the_busy_friday_the_old_rule_flagged():
    y = _noisy()
    assert _old_rule(y) and not judge(y).growing


def test_zeros_then_one_record_is_not_growth():
    y = np.r_[np.zeros(WINDOW - 2), 1.0, 1.0]
    assert _old_rule(y)
    g = judge(y)
    assert g.change < 1 and not g.growing  # a log step of 1 record on the 100-record floor


def test_a_step_past_both_minimums_is_growing():
    y = np.r_[np.full(WINDOW - 7, 5000.0), np.full(7, 5600.0)]  # +600 records, +12 %
    g = judge(y)
    assert (g.days, g.up, g.weeks) == (7, 7, 7)
    assert g.change == pytest.approx(600.0) and g.ratio == pytest.approx(0.12) and g.growing


@pytest.mark.parametrize("last, why", [(5400.0, "+8 %: under MIN_RATIO"), (50.0 * 1.5, "+25 records: under MIN_CHANGE")])
def test_a_step_short_of_one_minimum_is_not(last, why):
    base = 5000.0 if last > 1000 else 50.0
    assert not judge(np.r_[np.full(WINDOW - 7, base), np.full(7, last)]).growing, why


@pytest.mark.parametrize("factor", [5.0, 50.0])
@pytest.mark.parametrize("where", [WINDOW - 1, WINDOW - 4, 30, 3])
def test_one_extreme_day_anywhere_is_not_growth(factor, where):
    """Issue 41: one 5x or 50x day, in the last week or the baseline, flags nothing; in the last
    week it counts as at most twice the daily noise above the week's median."""
    y = _noisy(seed=9)
    y[where] *= factor
    g = judge(y)
    assert not g.growing, (factor, where, g)
    if where >= WINDOW - 7:
        assert g.change < 0.05 * 10_000


def test_a_change_within_the_series_own_noise_is_not_growth():
    """+15 % on a series whose days wander by ±20 %: past MIN_RATIO, not past its noise."""
    y = _weekly() * (1 + np.random.default_rng(3).normal(0, 0.2, WINDOW)) * np.r_[np.ones(WINDOW - 7), np.full(7, 1.15)]
    g = judge(y)
    assert g.ratio > trend_rule.MIN_RATIO and g.daily_noise > 0.1 and g.score < g.needed and not g.growing


def test_growth_over_the_whole_window_is_not_taken_for_noise():
    """+10 %/week for 8 weeks: the straight line through the baseline's residuals is taken out
    before the noise is measured, so the growth itself does not hide it (issue 41: 69 % before)."""
    y = _noisy(seed=4) * 1.1 ** (np.arange(WINDOW) / 7)
    g = judge(y)
    assert g.daily_noise < 0.08 and g.growing


@pytest.mark.parametrize("weeks", [4, 6, 8])
def test_a_steady_number_of_records_more_a_day_is_growth(weeks):
    """A mirror slower than its producer by a steady rate: the lag grows by the same number of
    records each day, a curve on the log scale. The quadratic taken out of the baseline keeps the
    curve from reading as a wandering level (with a straight line, 4 weeks of it were no flag)."""
    days = 7 * weeks
    y = np.r_[np.full(WINDOW - days, np.nan), (1000 + 500 * np.arange(days)) * (1 + np.random.default_rng(weeks).normal(0, 0.02, days))]
    g = judge(y)
    assert g.weeks == weeks - 1 and g.growing, g


def test_correlated_noise_needs_more():
    """The same change on a series whose level wanders (AR(1) 0.8) counts for less: its
    correlation is measured, and the score it needs grows with it."""
    rng = np.random.default_rng(12)
    e = np.zeros(WINDOW)
    for t in range(1, WINDOW):
        e[t] = 0.8 * e[t - 1] + np.sqrt(1 - 0.64) * rng.normal(0, 0.1)
    wandering, plain = judge(_weekly() * np.exp(e)), judge(_noisy(seed=12, sd=0.1))
    assert wandering.needed > plain.needed
    assert wandering.noise / wandering.daily_noise > plain.noise / plain.daily_noise


def test_missing_days_and_short_histories():
    y = np.r_[np.full(WINDOW - 7, 1000.0), np.full(7, 1500.0)]
    y[[0, 8, 15, 22, 50]] = np.nan
    g = judge(y)
    assert g.days == 6 and g.growing
    three_weeks = np.r_[np.full(WINDOW - 21, np.nan), np.full(14, 1000.0), np.full(7, 2000.0)]
    g = judge(three_weeks)
    assert g.days == 0 and np.isnan(g.change) and not g.growing  # under 4 weeks: not judged
    four_weeks = np.r_[np.full(WINDOW - 28, np.nan), np.full(21, 1000.0), np.full(7, 2000.0)]
    g = judge(four_weeks)
    assert (g.days, g.weeks) == (7, 3) and g.needed == trend_rule.THRESHOLD[3] and g.growing


def test_many_series_at_once():
    y = np.stack([_weekly(), np.r_[np.full(WINDOW - 7, 5000.0), np.full(7, 6000.0)]])
    assert judge(y).growing.tolist() == [False, True]
    assert judge(y.reshape(2, 1, WINDOW)).growing.shape == (2, 1)


def test_a_window_of_another_length_is_refused():
    with pytest.raises(ValueError, match="56 days"):
        judge(np.zeros(28))


def test_the_report_says_what_growing_means():
    import dataclasses

    from mirrorlag.rollup import trend_figures
    from mirrorlag.rollup.report import Charts, render
    from tests.unit.test_rollup_charts import _report_data

    page = render(dataclasses.replace(_report_data(), flows=[], series=[]), Charts(flows=b"", series=None, heat=None))
    trends = page[page.index('<section id="trends">'):]
    assert "same weekdays of up to 7 weeks before" in trends and "at least 5 of the 7 days" in trends
    assert "100 records and 10%" in trends and "t &gt; 2" not in page
    words = trend_figures.words()
    assert words.replace("'", "&#x27;") in trends  # the measured figures, from trend_figures.json
    assert "growing (last 7 days vs the weeks before, see Trends): none" in page


def test_min_change_is_the_measures_own():
    """Out-of-sync seconds: +500 s a day on 1,800 s (+28 %) is growth past 100 but not past
    MIN_CHANGE_SECONDS; +900 s is."""
    base = _weekly(level=1_800.0)
    for extra, seconds in ((500.0, False), (900.0, True)):
        y = base.copy()
        y[-7:] += extra
        assert judge(y, min_change=100.0).growing
        assert bool(judge(y, trend_rule.MIN_CHANGE_SECONDS).growing) is seconds
