"""Pure pieces of the rollup report: shares of watched time and the line charts' x range."""

from __future__ import annotations

import pytest

from mirrorlag.rollup.charts import hour_span
from mirrorlag.rollup.report_data import Series, out_of_sync_share


def _series(*hours: float) -> Series:
    return Series("p", list(hours), [0] * len(hours), [0.0] * len(hours), ["IN_SYNC"] * len(hours))


def test_share_is_of_the_watched_time_not_the_day():
    assert out_of_sync_share(1800.0, 3600.0) == 0.5  # watched one hour, out of sync half of it
    assert out_of_sync_share(0.0, 0.0) is None  # nothing watched: no share, not 0 %
    assert out_of_sync_share(10.0, 5.0) == 1.0


@pytest.mark.parametrize("hours, expected", [
    ((), (0.0, 24.0, 3.0)),
    ((0.5, 23.9), (0.0, 24.0, 3.0)),  # most of the day: the whole day
    ((9.2, 15.1), (9.0, 16.0, 1.0)),
    ((9.2, 10.5), (9.0, 11.0, 0.25)),
    ((3.30, 3.34), (3.25, 3.25 + 1 / 6, 1 / 12)),  # two minutes: ten, in 5-minute steps
])
def test_hour_span_zooms_to_a_partial_day(hours, expected):
    got = hour_span([_series(*hours)])
    assert got == pytest.approx(expected)
