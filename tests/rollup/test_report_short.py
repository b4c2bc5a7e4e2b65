"""A few minutes of history, as `mirrorlag demo` leaves: the report draws each sample's line and
shades only the time observed STALLED, not the whole 5-minute slot it falls in."""

from __future__ import annotations

import base64
import re
from datetime import date
from pathlib import Path

from mirrorlag.rollup.job import run_days
from mirrorlag.rollup.options import RollupOptions
from tests.rollup.history import H, M, day_ms, every, series, write
from tests.rollup.pixels import LAG_LINE, STALLED_SHADE, pixels

DAY = date(2024, 3, 11)
T0 = day_ms(DAY)


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
