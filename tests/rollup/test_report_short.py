"""A few minutes of history, as `mirrorlag demo` leaves: the report draws each sample's line and
shades only the time observed STALLED, not the whole 5-minute slot it falls in. And a day with
the sidecar stopped for a while: the lines break over the gap, drawn sample by sample or by slot."""

from __future__ import annotations

import base64
import re
from datetime import date
from pathlib import Path

from mirrorlag.rollup.job import run_days
from mirrorlag.rollup.options import RollupOptions
from tests.rollup.history import H, M, day_ms, every, series, write
from tests.rollup.pixels import LAG_LINE, STALLED_SHADE, TIME_LINE, pixels

DAY = date(2024, 3, 11)
T0 = day_ms(DAY)


def _lag_chart(spark, root: Path, rows: list) -> bytes:
    """The day's report's line chart (one partition: one panel)."""
    write(root / "history", DAY, rows)
    [result] = run_days(spark, RollupOptions(str(root / "history"), str(root / "out"), [DAY]))
    html = Path(result.report).read_text(encoding="utf-8")
    [png] = [base64.b64decode(m) for m in
             re.findall(r'alt="record lag and time lag over the day[^"]*" src="data:image/png;base64,([^"]+)"', html)]
    return png


def _columns(png: bytes, rgb: tuple[int, int, int], view: tuple[float, float], hours: tuple[float, float]) -> int:
    """Pixel columns of a one-panel line chart between two hours (its x axis spanning `view`)
    that hold the colour: the panel lies 85-1200 px across, 85-255 px down (charts.series_figure's
    margins in inches at 100 dpi); a tolerance for a thin line's antialiased rows."""
    x0, x1 = (85 + (h - view[0]) / (view[1] - view[0]) * 1115 for h in hours)
    return int(pixels(png, rgb, 60)[85:255, int(x0) + 1:int(x1)].any(axis=0).sum())


def _runs(spans: list[tuple[int, int]], step_ms: int, lags: list[tuple[int, int]]) -> list:
    """A partition sampled every step_ms over each span, at steady (record lag, time lag ms) in each."""
    rows = []
    for (start, end), (lag, time_lag) in zip(spans, lags):
        ts = every(start, end, step_ms)
        rows += series("A->B", "orders", 0, ts, ["IN_SYNC"] * len(ts), [lag] * len(ts), [time_lag] * len(ts))
    return rows


def test_a_short_historys_lines_break_where_the_sidecar_stopped(spark, tmp_path):
    """10:01-10:04 and 10:20-10:23, every 2 s (cap: 60 s): drawn sample by sample over 10:00-10:25,
    no line from 10:06 to 10:19 (both crossed it before)."""
    t = T0 + 10 * H
    png = _lag_chart(spark, tmp_path, _runs([(t + 1 * M, t + 4 * M), (t + 20 * M, t + 23 * M)], 2000,
                                           [(5, 2000), (10, 1000)]))
    view = (10.0, 10 + 25 / 60)
    for color in (LAG_LINE, TIME_LINE):
        assert _columns(png, color, view, (10 + 6 / 60, 10 + 19 / 60)) == 0
        assert _columns(png, color, view, (10 + 1.5 / 60, 10 + 3.5 / 60)) >= 50  # of 89
        assert _columns(png, color, view, (10 + 20.5 / 60, 10 + 22.5 / 60)) >= 50


def test_a_days_slot_lines_break_where_the_sidecar_stopped(spark, tmp_path):
    """00:00-08:00 and 14:00-22:00, every 30 s (cap: 60 s): drawn by 5-minute slot over the whole
    day, no line from 08:30 to 13:30 (both crossed it before)."""
    png = _lag_chart(spark, tmp_path, _runs([(T0, T0 + 8 * H), (T0 + 14 * H, T0 + 22 * H)], 30_000,
                                           [(5, 2000), (10, 1000)]))
    for color in (LAG_LINE, TIME_LINE):
        assert _columns(png, color, (0.0, 24.0), (8.5, 13.5)) == 0
        assert _columns(png, color, (0.0, 24.0), (1.0, 7.0)) >= 150  # of 278
        assert _columns(png, color, (0.0, 24.0), (15.0, 21.0)) >= 150


def test_a_few_minutes_of_history_draw_their_samples(spark, tmp_path):
    ts = every(T0 + 10 * H + 1 * M, T0 + 10 * H + 4 * M, 2000)  # 10:01-10:04, every 2 s: one 5-minute slot
    stalled = [T0 + 10 * H + 2 * M <= t < T0 + 10 * H + 2 * M + 40_000 for t in ts]  # 40 s
    rows = series("A->B", "orders", 0, ts, ["STALLED" if s else "IN_SYNC" for s in stalled],
                  [300 if s else 2 for s in stalled], [(t - ts[0]) // 10 for t in ts])
    rows += series("A->B", "orders", 1, ts, ["IN_SYNC"] * len(ts), [1] * len(ts))
    write(tmp_path / "history", DAY, rows)
    [result] = run_days(spark, RollupOptions(str(tmp_path / "history"), str(tmp_path / "out"), [DAY]))
    html = Path(result.report).read_text(encoding="utf-8")
    assert "drawn sample by sample" in html
    [png] = [base64.b64decode(m) for m in
             re.findall(r'alt="record lag and time lag over the day[^"]*" src="data:image/png;base64,([^"]+)"', html)]
    # Two panels side by side, 10 minutes each (10:00-10:10): 40 s is about 36 px of a panel's 540;
    # the whole slot, as before, was 270.
    shaded = pixels(png, STALLED_SHADE, 3).any(axis=0).sum()
    assert 25 <= shaded <= 50, shaded
    assert pixels(png, LAG_LINE, 12).sum() > 300  # both partitions' record lag lines
