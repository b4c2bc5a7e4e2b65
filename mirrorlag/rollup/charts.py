"""The report's charts: matplotlib (Agg, no display) to PNG bytes."""

from __future__ import annotations

import io
import math
from typing import Any, Callable, Sequence

import matplotlib

matplotlib.use("Agg")  # headless: no display, no GUI toolkit

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.axis import Axis  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import FuncFormatter, MultipleLocator  # noqa: E402

from mirrorlag.rollup.report_model import Series, out_of_sync_share  # noqa: E402
from mirrorlag.rollup.slots import SLOT_MS  # noqa: E402

DPI = 100
WIDTH_IN = 12.8  # 1280 px: fills a laptop-width page without scaling
plt.rcParams.update({
    "font.size": 11, "axes.titlesize": 12, "axes.labelsize": 11, "xtick.labelsize": 10, "ytick.labelsize": 10,
    "axes.spines.top": False, "axes.spines.right": False, "figure.dpi": DPI,
})
LAG_COLOR = "#1f5fa8"
TIME_COLOR = "#d9822b"
STATE_COLORS = {"STALLED": "#d62728", "AT_RISK": "#9467bd"}  # any other state not IN_SYNC: OTHER
OTHER_COLOR = "#f2b134"
SLOT_HOURS = SLOT_MS / 3_600_000
MARKED_POINTS = 150  # a curve of at most this many points marks each: a lone sample or slot still shows


def _png(fig: plt.Figure, tight: bool = True) -> bytes:
    """`tight`: cropped to what was drawn, which draws the figure once more to measure it."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight" if tight else None)
    plt.close(fig)
    return buf.getvalue()


def _count(x: float, _pos: object = None) -> str:
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= size:
            return f"{x / size:.3g}{unit}"
    return f"{x:.0f}" if x == int(x) else f"{x:.2g}"


def _leading_digit(x: float) -> int:
    return round(x / 10 ** math.floor(math.log10(x) + 1e-9)) if x > 0 else 0


def _log_axis(axis: Axis, fmt: Callable[[float, Any], str]) -> None:
    """A log axis read as plain numbers: `fmt` at the decades (100, 1k, 10k), minor ticks
    unlabelled; but an axis spanning under two decades holds one decade tick or none, so there
    `fmt` labels the 2s and 5s too, and under one decade every minor tick (matplotlib's own
    minor labels read 2×10², 3×10²)."""
    def minor(x: float, pos: Any = None) -> str:
        lo, hi = axis.get_view_interval()
        decades = math.log10(hi / lo) if lo > 0 else math.inf
        labelled = decades < 1 or (decades < 2 and _leading_digit(x) in (2, 5))
        return fmt(x, pos) if labelled else ""

    axis.set_major_formatter(FuncFormatter(fmt))
    axis.set_minor_formatter(FuncFormatter(minor))


def flows_chart(flows: Sequence[dict[str, Any]]) -> bytes:
    """Per flow: share of partition-time out of sync, and record-lag percentiles."""
    return _png(flows_figure(flows))


def flows_figure(flows: Sequence[dict[str, Any]]) -> plt.Figure:
    """flows_chart's figure. Titles on the left above each panel, the legend on the right above
    its panel, level with the title: side by side, never over the title or the bars, whatever
    the figure's height (the legend placed in axes fractions above the panel reached the title
    of a short figure)."""
    names = [f["flow"] for f in flows][::-1]
    height = max(2.2, 0.55 * len(flows) + 1.3)
    fig, (left, right) = plt.subplots(1, 2, figsize=(WIDTH_IN, height), sharey=True)
    share = [100.0 * (out_of_sync_share(f["out_of_sync_seconds"], f["covered_seconds"]) or 0.0) for f in flows][::-1]
    bars = left.barh(names, share, color="#d62728", alpha=0.8)
    left.bar_label(bars, labels=[f"{s:.2f} %" for s in share], padding=3, fontsize=10)
    left.set_xlabel("out of sync (% of the watched partition-time)")
    left.set_xlim(0, max(1.0, max(share, default=0) * 1.25))
    left.set_title("Time out of sync", loc="left")
    y = range(len(names))
    for q, color, offset in (("record_lag_p50", "#9ecae1", -0.25), ("record_lag_p95", "#3182bd", 0.0), ("record_lag_p99", "#08519c", 0.25)):
        vals = [max(0.5, f[q] or 0) for f in flows][::-1]
        right.barh([i + offset for i in y], vals, height=0.25, color=color, label=q.split("_")[-1])
    right.set_xscale("log")
    _log_axis(right.xaxis, _count)
    right.set_xlabel("record lag (records, log scale)")
    right.set_title("Record lag percentiles", loc="left")
    right.legend(loc="lower right", bbox_to_anchor=(1.0, 1.0), borderaxespad=0.2, ncol=3, fontsize=9, frameon=False)
    fig.tight_layout()
    return fig


def _spans(series: Series) -> list[tuple[float, float, str]]:
    """Runs of points not IN_SYNC as (start hour, end hour, color): each point to the end of the
    time its samples count for (Series.ends), else a slot to the end of its 5 minutes."""
    spans: list[tuple[float, float, str]] = []
    hours, states = series.hours, series.states
    for i, state in enumerate(states):
        if state == "IN_SYNC" or state == "GONE":
            continue
        color = STATE_COLORS.get(state or "", OTHER_COLOR)
        end = series.ends[i] if series.ends else min(24.0, hours[i] + SLOT_HOURS)
        if spans and spans[-1][2] == color and abs(spans[-1][1] - hours[i]) < 1e-9:
            spans[-1] = (spans[-1][0], end, color)
        else:
            spans.append((hours[i], end, color))
    return spans


def hour_span(series: Sequence[Series]) -> tuple[float, float, float]:
    """The x range of the line charts, (first hour, last hour, tick step): the whole day when the
    history covers most of it, else the whole hours it covers, so a partial day is not a sliver."""
    hours = [h for s in series for h in (*s.hours, *s.ends)]
    if not hours:
        return (0.0, 24.0, 3.0)
    first, last = min(hours), max(hours)
    if last - first >= 12:
        return (0.0, 24.0, 3.0)
    if last - first >= 1:
        lo, hi = math.floor(first), math.ceil(last)
        return (float(lo), float(hi), 1.0 if hi - lo > 3 else 0.25)
    # Under an hour: whole 5-minute steps, at least 10 minutes.
    lo, hi = math.floor(first * 12) / 12, math.ceil(last * 12) / 12
    hi = max(hi, lo + 1 / 6)
    return (lo, hi, 1 / 12 if hi - lo <= 0.5 else 1 / 6)


def _clock(x: float, _pos: Any = None) -> str:
    minutes = round(x * 60)
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def _breaks(series: Series) -> list[int]:
    """The points after which the line breaks: where the time the rollup counts for a point
    ends before the next point's begins (a gap past the cap is no data, docs/history-and-rollup.md;
    a GONE sample counts none): a line across would draw that time as watched."""
    ends = series.ends or [h + SLOT_HOURS for h in series.hours]
    starts = series.starts or series.hours
    return [i for i in range(len(series.hours) - 1) if ends[i] < starts[i + 1] - 1e-9]


def _broken(series: Series, values: Sequence[float | None]) -> tuple[list[float], list[float]]:
    """A line's x and y, NaN for a missing value and after each of _breaks: matplotlib draws no
    segment to or from a NaN."""
    cut = set(_breaks(series))
    xs: list[float] = []
    ys: list[float] = []
    for i, (h, v) in enumerate(zip(series.hours, values)):
        xs.append(h)
        ys.append(math.nan if v is None else float(v))
        if i in cut:
            xs.append(h)
            ys.append(math.nan)
    return xs, ys


def _lone(ys: Sequence[float]) -> list[int]:
    """The points no segment reaches (NaN on both sides): a marker must show them."""
    def blank(j: int) -> bool:
        return j < 0 or j >= len(ys) or math.isnan(ys[j])

    return [j for j, y in enumerate(ys) if not math.isnan(y) and blank(j - 1) and blank(j + 1)]


def _line(ax: plt.Axes, series: Series, values: Sequence[float | None], **style: Any) -> None:
    """One measure of a series as a line broken at its gaps, each point marked when there are
    few, else its lone points (a slot between two gaps)."""
    xs, ys = _broken(series, values)
    marked = None if len(series.hours) <= MARKED_POINTS else _lone(ys)
    ax.plot(xs, ys, marker="o", markersize=2.5, markevery=marked, **style)


def series_chart(series: Sequence[Series]) -> bytes:
    """Small multiples: each worst partition's record lag (left axis) and time lag (right axis)
    over the day, with its time out of sync shaded."""
    return _png(series_figure(series), tight=False)


def series_figure(series: Sequence[Series]) -> plt.Figure:
    """series_chart's figure."""
    cols = 2 if len(series) > 1 else 1
    rows = math.ceil(len(series) / cols)
    height = 2.6 * rows + 0.6
    fig, axes = plt.subplots(rows, cols, figsize=(WIDTH_IN, height), squeeze=False)
    for ax in axes.flat[len(series):]:
        ax.set_visible(False)
    lo, hi, step = hour_span(series)
    for ax, s in zip(axes.flat, series):
        for start, end, color in _spans(s):
            ax.axvspan(start, end, color=color, alpha=0.18, linewidth=0)
        _line(ax, s, s.record_lag, color=LAG_COLOR, linewidth=1.2)
        ax.set_ylim(bottom=0)
        ax.yaxis.set_major_formatter(FuncFormatter(_count))
        ax.set_ylabel("records", color=LAG_COLOR)
        ax.set_xlim(lo, hi)
        ax.xaxis.set_major_locator(MultipleLocator(step))
        ax.xaxis.set_major_formatter(FuncFormatter(_clock))
        ax.set_title(s.label, loc="left", fontsize=11)
        ax.grid(axis="y", alpha=0.3)
        twin = ax.twinx()
        twin.spines["right"].set_visible(True)
        _line(twin, s, s.time_lag_s, color=TIME_COLOR, linewidth=1.0, linestyle="--")
        twin.set_ylim(bottom=0)
        twin.set_ylabel("time lag (s)", color=TIME_COLOR)
    fig.legend(handles=[
        plt.Line2D([], [], color=LAG_COLOR, label="record lag (records)"),
        plt.Line2D([], [], color=TIME_COLOR, linestyle="--", label="time lag (s)"),
        Patch(color=STATE_COLORS["STALLED"], alpha=0.3, label="STALLED"),
        Patch(color=STATE_COLORS["AT_RISK"], alpha=0.3, label="AT_RISK"),
        Patch(color=OTHER_COLOR, alpha=0.3, label="other out of sync (LAGGING, REWIND, RESET, UNKNOWN)"),
    ], loc="upper center", ncol=5, fontsize=9.5, frameon=False, bbox_to_anchor=(0.5, 1.0))
    for ax in axes[-1]:
        ax.set_xlabel("hour of the day (UTC)")
    # Margins fixed in inches, not measured: tight_layout and a tight crop each lay out every
    # tick label again, which costs more than drawing the chart. The tick
    # labels stay short: records and hours by construction (_count, _clock), the seconds at
    # most six digits (matplotlib's default formatter moves larger ones to an offset).
    left, right, top, bottom, gap_w, gap_h = 0.85, 0.8, 0.85, 0.65, 1.5, 0.75
    panel_w = (WIDTH_IN - left - right - (cols - 1) * gap_w) / cols
    panel_h = (height - top - bottom - (rows - 1) * gap_h) / rows
    fig.subplots_adjust(left=left / WIDTH_IN, right=1 - right / WIDTH_IN, top=1 - top / height,
                        bottom=bottom / height, wspace=gap_w / panel_w, hspace=gap_h / panel_h)
    return fig


def heatmap_chart(labels: Sequence[str], share: Sequence[Sequence[float]]) -> bytes:
    """Topics x hours: the share of each topic's partition-time out of sync."""
    return _png(heatmap_figure(labels, share))


# The colour bar's label, in lines short enough to fit the bar of the shortest heat map (one
# topic: 167 px; the label runs along it); the note under the chart says it in full.
HEAT_BAR_LABEL = "% of watched\npartition-time\nout of sync"


def heatmap_figure(labels: Sequence[str], share: Sequence[Sequence[float]]) -> plt.Figure:
    """heatmap_chart's figure."""
    height = max(2.5, 0.36 * len(labels) + 1.6)
    fig, ax = plt.subplots(figsize=(WIDTH_IN, height))
    data = [[math.nan if v is None else 100.0 * v for v in row] for row in share]
    # Scale to the worst cell (at least 5 %): a good day's 1 % must still show.
    top = max(5.0, math.ceil(max((v for row in data for v in row if not math.isnan(v)), default=0.0) / 5.0) * 5.0)
    cmap = matplotlib.colormaps["YlOrRd"].with_extremes(bad="#e0e0e0")  # hours without samples
    image = ax.imshow(data, aspect="auto", cmap=cmap, vmin=0, vmax=top, interpolation="nearest")
    ax.set_xticks(range(24), [f"{h:02d}" for h in range(24)])
    ax.set_yticks(range(len(labels)), labels)
    ax.set_xlabel("hour of the day (UTC)")
    for i, row in enumerate(data):
        for j, v in enumerate(row):
            if v >= 0.5:
                ax.text(j, i, f"{v:.0f}", ha="center", va="center", fontsize=8, color="white" if v > 0.6 * top else "#333333")
    bar = fig.colorbar(image, ax=ax, fraction=0.025, pad=0.01)
    bar.set_label(HEAT_BAR_LABEL)
    ax.spines[:].set_visible(False)
    fig.tight_layout()
    return fig
