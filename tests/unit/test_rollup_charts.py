"""Pure pieces of the rollup report: shares of watched time and the line charts' x range."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from mirrorlag.rollup.charts import hour_span
from mirrorlag.rollup.report_model import Series, out_of_sync_share
from tests.rollup.pixels import LAG_LINE, STALLED_SHADE, TIME_LINE, pixels


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


def _trend(level: str, topic: str, partition: int | None, **measures) -> dict:
    from mirrorlag.rollup.trends import RANKED

    row = {"level": level, "flow": "A->B", "source": "A", "target": "B", "topic": topic, "partition": partition,
           "growing": False, "out_of_sync_growing": False, **{m: None for m in RANKED}}
    return {**row, **measures}


def test_worst_trends_rank_each_measure_and_keep_a_row_once():
    from mirrorlag.rollup.report_data import trend_views

    rows = [
        _trend("partition", "t", 0, slope_28d=5.0, record_lag_p95_dod=3, growing=True),
        _trend("partition", "t", 1, slope_28d=5.0, record_lag_p95_dod=9),  # tie on slope: dod decides
        _trend("partition", "t", 2, slope_28d=-1.0, out_of_sync_seconds_dod=60.0),  # worst by another measure only
        _trend("partition", "t", 3, slope_28d=0.0, record_lag_p95_dod=0,  # nothing positive: never worst
               out_of_sync_growing=True),
        _trend("topic", "t", None, slope_28d=1.0, slope_7d=2.0, growing=True, out_of_sync_growing=True),
        _trend("partition", "u", 0, slope_7d=2.0),  # ties with the topic on slope_7d: the key decides
        _trend("flow", "", None, slope_28d=9.0, growing=True),  # flows are not ranked
    ]
    rows[-1]["topic"] = None
    views = trend_views(rows, n=2)
    got = [(r["topic"], r["partition"], r["worst_by"]) for r in views.rows]
    assert got == [
        ("t", 1, ["record_lag_p95_dod", "slope_28d"]),
        ("t", 0, ["record_lag_p95_dod", "slope_28d"]),
        ("t", None, ["slope_7d"]),  # slope 1.0 is the third largest slope_28d: not in the 2 worst
        ("t", 2, ["out_of_sync_seconds_dod"]),  # ordered by slope_28d: -1.0, then a null last
        ("u", 0, ["slope_7d"]),
    ]
    assert views.growing == {"partition": 2, "topic": 1, "flow": 1}  # on either measure, each once
    assert views.growing_by == {"p95 lag": {"partition": 1, "topic": 1, "flow": 1},
                                "time out of sync": {"partition": 1, "topic": 1}}
    assert list(views.flows) == ["A->B"]


def _report_data():
    from datetime import date

    from mirrorlag.rollup.report_model import ReportData

    flows = [{"flow": "A->B", "out_of_sync_seconds": 60.0, "covered_seconds": 600.0,
              "record_lag_p50": 1, "record_lag_p95": 50, "record_lag_p99": 900}]
    return ReportData(day=date(2024, 5, 6), history="h", out="o", max_gap_seconds=60.0, worst_n=10, flows=flows,
                      worst_partitions=[], series=[_series(0.0, 5 / 60, 10 / 60)], heat_labels=["t"],
                      heat_share=[[0.5] * 24], heat_topics_total=1, trend_rows=[], flow_trends={}, growing={})


@pytest.mark.parametrize("empty", [(), ("series",), ("heat_labels", "heat_share"), ("series", "heat_labels", "heat_share")])
def test_the_drawing_process_draws_what_the_driver_would(empty):
    from mirrorlag.rollup.drawer import Drawer
    from mirrorlag.rollup.report import draw

    data = dataclasses.replace(_report_data(), **{name: [] for name in empty})
    drawer = Drawer()
    try:
        drawer.send_series(data.series)
        drawer.send_rest(data)
        got = drawer.charts()
    finally:
        drawer.close()
    assert got == draw(data)
    assert (got.series is None, got.heat is None) == ("series" in empty, "heat_labels" in empty)


def test_a_drawing_process_that_died_leaves_the_charts_to_the_driver():
    from mirrorlag.rollup.drawer import Drawer

    data = _report_data()
    drawer = Drawer()
    drawer.close()  # killed
    drawer.send_series(data.series)
    drawer.send_rest(data)
    assert drawer.charts() is None


def test_a_drawing_process_that_dies_while_drawing_leaves_the_charts_to_the_driver():
    from mirrorlag.rollup.drawer import Drawer

    data = _report_data()
    drawer = Drawer()
    try:
        drawer.send_series(data.series)
        drawer._curves.proc.kill()  # dies with the curves sent, before the flows
        drawer.send_rest(data)
        assert drawer.charts() is None
    finally:
        drawer.close()


def test_the_drawing_processes_never_import_spark():
    """What the drawing processes import (drawer.py's child runs charts.py; both read the report's
    model) loads neither PySpark nor py4j: a chart costs no Spark import, and a process without
    Spark could draw it."""
    code = ("import sys\n"
            "import mirrorlag.rollup.charts, mirrorlag.rollup.drawer, mirrorlag.rollup.report, mirrorlag.rollup.report_model\n"
            "spark = sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'py4j'))\n"
            "assert not spark, spark")
    proc = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[2],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def _counted(ms: list[int], states: list[str], cap_ms: int,
             time_lag_ms: list[int] | None = None) -> tuple[list[int], list[int]]:
    """The time the tables count for each sample of one partition of day 0, (after it, before
    it): `held_ms`, what the chart shades from the sample, and the rest of its `accounted_ms`,
    a stall's look-back (rows without a writer or an interval: `cap_ms`, --max-gap-seconds,
    caps them)."""
    import pyarrow as pa

    from mirrorlag.rollup.partials import counted_samples

    n = len(ms)
    table = pa.table({"source": ["A"] * n, "target": ["B"] * n, "topic": ["t"] * n, "partition": pa.array([0] * n, pa.int32()),
                      "ts": pa.array(ms, pa.timestamp("ms", tz="UTC")), "state": states,
                      "time_lag_ms": pa.array(time_lag_ms or [None] * n, pa.int64())})
    got = counted_samples(table, 86_400_000, cap_ms)
    assert got.column("ms").to_pylist() == ms
    held = got.column("held_ms").to_pylist()
    return held, [a - h for a, h in zip(got.column("accounted_ms").to_pylist(), held)]


def _accounted(ms: list[int], states: list[str], cap_ms: int) -> list[int]:
    """`held_ms` of _counted."""
    return _counted(ms, states, cap_ms)[0]


def test_a_short_historys_samples_hold_their_state_as_the_tables_count_it():
    from mirrorlag.rollup.charts import _spans
    from mirrorlag.rollup.report_model import sample_series

    start, s = 36_000_000, 1000  # 10:00 UTC on day 0, a second
    ms = [start + 60 * s, start + 62 * s, start + 64 * s, start + 200 * s, start + 202 * s]
    states = ["IN_SYNC", "STALLED", "STALLED", "STALLED", "GONE"]
    got = sample_series("p", ms, states, [0, 5, 9, 20, None], [0, 9000, 11000, 150000, None],
                        _accounted(ms, states, 60_000), 0)
    h = 3_600_000
    assert got.ends == pytest.approx([(t - 0) / h for t in (ms[1], ms[2], ms[2] + 60 * s, ms[4], ms[4])])
    assert got.time_lag_s == [0.0, 9.0, 11.0, 150.0, None]
    # STALLED from its first sample to the next sample after its last (the gap capped at 60 s):
    # not a whole 5-minute slot.
    assert _spans(got) == [pytest.approx((ms[1] / h, (ms[2] + 60 * s) / h, "#d62728")),
                           pytest.approx((ms[3] / h, ms[4] / h, "#d62728"))]


def test_a_few_minutes_of_history_draw_their_lines_and_shade_only_the_stall():
    """Three minutes of samples every 2 s, STALLED for 40 s of them: the lines are drawn, and the
    shading is 40 s wide, not the 5-minute slot (the chart spans 10 minutes, 1,110 px)."""
    from mirrorlag.rollup.charts import series_chart
    from mirrorlag.rollup.report_model import sample_series

    start = 10 * 3_600_000
    ms = list(range(start + 60_000, start + 240_000, 2000))
    states = ["STALLED" if start + 120_000 <= t < start + 160_000 else "IN_SYNC" for t in ms]
    lag = [100 + (t - start) // 1000 if s == "STALLED" else 3 for t, s in zip(ms, states)]
    png = series_chart([sample_series("p", ms, states, lag, [(t - ms[0]) // 10 for t in ms], _accounted(ms, states, 60_000), 0)])
    shaded = pixels(png, STALLED_SHADE, 3).any(axis=0).sum()  # columns: STALLED's 18 % red on white
    assert 60 <= shaded <= 90, shaded  # 40 s at 1.85 px/s; the whole slot would be 555
    assert pixels(png, LAG_LINE, 12).sum() > 300  # the record lag's line (LAG_COLOR)


def test_a_lone_slot_still_shows():
    from mirrorlag.rollup.charts import series_chart

    png = series_chart([Series("p", [10.0], [40], [12.0], ["STALLED"])])
    assert pixels(png, LAG_LINE, 12).sum() > 5  # its marker


def _flow(name: str, p95: float) -> dict:
    return {"flow": name, "out_of_sync_seconds": 10.0, "covered_seconds": 1000.0,
            "record_lag_p50": 1, "record_lag_p95": p95, "record_lag_p99": p95 * 20}


def _titles(ax) -> list:
    return [t for t in (ax.title, ax._left_title, ax._right_title) if t.get_text()]


@pytest.mark.parametrize("n", [1, 2, 4, 12])
def test_the_flows_charts_legend_covers_no_title_and_no_bar(n):
    """Measured on the drawn figure: the record-lag percentiles' legend beside its panel's title,
    above its bars, inside the figure, at every height (one flow made the figure short enough
    for the legend, placed in axes fractions, to sit on the title)."""
    import matplotlib.pyplot as plt

    from mirrorlag.rollup.charts import flows_figure

    fig = flows_figure([_flow(f"S{i}->T", 10 ** (i % 6)) for i in range(n)])
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    try:
        legends = [(ax, ax.get_legend()) for ax in fig.axes if ax.get_legend() is not None]
        assert legends
        for ax, legend in legends:
            box = legend.get_window_extent(r)
            for other in fig.axes:
                for title in _titles(other):
                    assert not box.overlaps(title.get_window_extent(r)), (title.get_text(), box, title.get_window_extent(r))
            assert box.y0 >= ax.get_window_extent(r).y1 - 1  # above the panel: no bar hidden
            assert box.x1 <= fig.bbox.x1 and box.y1 <= fig.bbox.y1
    finally:
        plt.close(fig)


@pytest.mark.parametrize("n", [1, 2, 5])
def test_the_line_charts_legend_covers_no_panel_title(n):
    import matplotlib.pyplot as plt

    import mirrorlag.rollup.charts as charts

    drawn = []
    png = charts._png
    charts._png = lambda fig, tight=True: drawn.append(fig) or b""
    try:
        charts.series_chart([Series(f"A->B topic-{i}[0]", [1.0, 2.0], [5, 9], [1.0, 2.0], ["IN_SYNC", "STALLED"])
                             for i in range(n)])
    finally:
        charts._png = png
    [fig] = drawn
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    try:
        box = fig.legends[0].get_window_extent(r)
        titles = [t.get_window_extent(r) for ax in fig.axes if ax.get_visible() for t in _titles(ax)]
        assert titles and not any(box.overlaps(t) for t in titles)
        assert box.y1 <= fig.bbox.y1
    finally:
        plt.close(fig)


def _x_tick_labels(ax) -> list:
    """The x tick labels drawn (major, then minor) within the axis's view."""
    lo, hi = ax.get_xlim()
    return [t for t in (*ax.get_xticklabels(), *ax.get_xticklabels(minor=True))
            if t.get_text() and t.get_visible() and lo <= t.get_position()[0] <= hi]


@pytest.mark.parametrize("p50, p95, p99, expected", [
    (120, 250, 380, ["200", "300", "400"]),  # under a decade: each minor tick, as a number
    (100, 900, 1100, ["100", "1k", "200", "500"]),  # under two: the decades, the 2s and 5s
    (1, 5000, 2_000_000, ["1", "10", "100", "1k", "10k", "100k", "1M"]),  # wider: the decades alone
])
def test_the_record_lag_log_axis_reads_plain_numbers(p50, p95, p99, expected):
    """Read on the drawn axis: matplotlib's own minor labels read 2×10², 3×10² on an axis
    spanning under a decade or two (issue 42)."""
    import matplotlib.pyplot as plt

    from mirrorlag.rollup.charts import flows_figure

    fig = flows_figure([{**_flow("A->B", p95), "record_lag_p50": p50, "record_lag_p99": p99}])
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    try:
        ax = fig.axes[1]
        assert ax.get_xscale() == "log"
        labels = _x_tick_labels(ax)
        assert [t.get_text() for t in labels] == expected
        boxes = sorted((t.get_window_extent(r) for t in labels), key=lambda b: b.x0)
        assert all(a.x1 < b.x0 for a, b in zip(boxes, boxes[1:]))  # no label on another
    finally:
        plt.close(fig)


@pytest.mark.parametrize("n", [1, 2, 5, 25])  # 25: report_data.HEAT_TOPICS, the most the report draws
def test_the_heat_maps_colour_bar_label_fits_beside_its_bar(n):
    """Measured on the drawn figure: the colour bar's label runs no further than the bar and
    stays inside the figure (the full sentence was 395 px along a bar of 167)."""
    import matplotlib.pyplot as plt

    from mirrorlag.rollup.charts import heatmap_figure

    fig = heatmap_figure([f"topic-{i}" for i in range(n)], [[0.02 * (i % 3)] * 24 for i in range(n)])
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    try:
        bar = fig.axes[-1]  # the colour bar's axes
        assert bar.yaxis.label.get_text()
        label, along = bar.yaxis.label.get_window_extent(r), bar.get_window_extent(r)
        assert along.y0 <= label.y0 and label.y1 <= along.y1
        assert fig.bbox.x0 <= label.x0 and label.x1 <= fig.bbox.x1 and fig.bbox.y0 <= label.y0 and label.y1 <= fig.bbox.y1
    finally:
        plt.close(fig)


def _two_runs(cap_ms: int = 60_000) -> Series:
    """Samples every 2 s, 10:00-10:20 and 11:00-11:20 (the sidecar stopped between), lags steady
    in each run, the two lines apart (each at the top of its axis in one run, halfway in the other)."""
    from mirrorlag.rollup.report_model import sample_series

    start, n = 10 * 3_600_000, 600
    ms = [*range(start, start + 20 * 60_000, 2000), *range(start + 60 * 60_000, start + 80 * 60_000, 2000)]
    states = ["IN_SYNC"] * len(ms)
    held, back = _counted(ms, states, cap_ms)
    return sample_series("p", ms, states, [50] * n + [100] * n, [5000] * n + [2500] * n, held, 0, back)


def _columns(ax, png: bytes, rgb: tuple[int, int, int], first_hour: float, last_hour: float) -> int:
    """How many pixel columns of `ax`'s panel between two hours hold the colour (the PNG
    uncropped; a tolerance for a thin line's antialiased rows, still far from any other colour
    drawn there)."""
    x0, x1 = (ax.transData.transform((h, 0))[0] for h in (first_hour, last_hour))
    image = pixels(png, rgb, 60)
    top, bottom = (image.shape[0] - y for y in (ax.bbox.y1, ax.bbox.y0))  # image rows run downwards
    return int(image[int(top):int(bottom), int(x0) + 1:int(x1)].any(axis=0).sum())


def test_the_lag_lines_break_where_the_sidecar_did_not_run():
    """Measured by pixels: no record lag or time lag line across the 40 minutes without samples
    (a gap past the 60 s cap: no data); both lines over each run (they crossed the gap before)."""
    import mirrorlag.rollup.charts as charts

    fig = charts.series_figure([_two_runs()])
    ax, twin = fig.axes[0], fig.axes[-1]
    png = charts._png(fig, tight=False)  # closes the figure; its transforms still map hours to pixels
    for a, color, drawn in ((ax, LAG_LINE, 160), (twin, TIME_LINE, 80)):  # of 167 px (18 minutes); dashed: about 60 %
        assert _columns(a, png, color, 10 + 21 / 60, 10 + 59 / 60) == 0
        assert _columns(a, png, color, 10 + 1 / 60, 10 + 19 / 60) >= drawn
        assert _columns(a, png, color, 11 + 1 / 60, 11 + 19 / 60) >= drawn


def test_the_lines_break_only_where_the_tables_count_no_time():
    """A gap past the cap breaks the line after its last sample; a stall's first sample, whose
    look-back takes the time before it from the sample before, does not (that sample counts
    no time of its own after it)."""
    from mirrorlag.rollup.charts import _breaks
    from mirrorlag.rollup.report_model import sample_series

    assert _breaks(_two_runs()) == [599]  # 10:19:58, the last sample before the gap
    ms = [36_000_000 + 10_000 * i for i in range(6)]
    states = ["IN_SYNC", "IN_SYNC", "STALLED", "STALLED", "IN_SYNC", "IN_SYNC"]
    lags = [0, 0, 30_000, 40_000, 0, 0]
    held, back = _counted(ms, states, 60_000, lags)
    assert back[2] == 10_000 and held[1] == 0  # the stall reaches back over the sample before
    assert _breaks(sample_series("p", ms, states, [1] * 6, lags, held, 0, back)) == []


def test_a_slot_between_two_gaps_is_marked_on_a_long_day():
    """Over MARKED_POINTS points no point is marked, but a slot alone between two gaps, which no
    segment reaches, is: it would not show at all."""
    import mirrorlag.rollup.charts as charts

    hours = [i / 12 for i in range(12 * 12)] + [15.0] + [16 + i / 12 for i in range(48)]  # 00-12, 15:00, 16-20
    n = len(hours)
    assert n > charts.MARKED_POINTS
    fig = charts.series_figure([Series("p", hours, [50] * n, [None] * n, ["IN_SYNC"] * n)])
    ax = fig.axes[0]
    png = charts._png(fig, tight=False)
    assert _columns(ax, png, LAG_LINE, 14.5, 15.5) >= 3  # its marker
    assert _columns(ax, png, LAG_LINE, 12.5, 14.5) == 0
