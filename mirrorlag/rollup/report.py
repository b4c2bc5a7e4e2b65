"""The daily report: one self-contained HTML file (CSS inline, charts as base64 PNG data URIs)."""

from __future__ import annotations

import base64
import math
import re
from dataclasses import dataclass
from datetime import date
from html import escape
from typing import Any, Callable, Sequence

from mirrorlag.rollup import trend_figures, trend_rule as rule
from mirrorlag.rollup.writers import GAP_POLLS, HANDOFF_MS
from mirrorlag.rollup.report_model import GROWING_FLAGS, ReportData, TrendViews, growing_on, out_of_sync_share, partition_label

CSS = """
body { font: 15px/1.45 -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; color: #222;
       margin: 0 auto; max-width: 1320px; padding: 24px 28px 60px; background: #fff; }
h1 { font-size: 26px; margin: 0 0 4px; } h2 { font-size: 20px; margin: 34px 0 6px; border-bottom: 2px solid #e4e4e4; padding-bottom: 4px; }
.sub, .note { color: #666; font-size: 13.5px; } .note { margin: 4px 0 10px; }
.cards { display: flex; flex-wrap: wrap; gap: 12px; margin: 18px 0 6px; }
.card { border: 1px solid #ddd; border-radius: 8px; padding: 10px 16px; min-width: 150px; }
.card .v { font-size: 22px; font-weight: 600; } .card .k { color: #666; font-size: 12.5px; }
.card.bad .v { color: #c0392b; } .card.ok .v { color: #2e7d32; }
table { border-collapse: collapse; width: 100%; font-size: 13px; margin: 8px 0 14px; }
th, td { padding: 5px 6px; border-bottom: 1px solid #eee; text-align: right; white-space: nowrap; }
th { background: #f6f6f6; font-weight: 600; white-space: normal; vertical-align: bottom; }
th.l, td.l { text-align: left; } tr:hover td { background: #fafafa; }
td.worst { font-weight: 700; color: #b03a2e; } .tag { display: inline-block; padding: 1px 7px; border-radius: 10px;
  font-size: 12px; font-weight: 600; } .tag.grow { background: #fde2e1; color: #b03a2e; } .tag.flat { background: #eef5ee; color: #2e7d32; }
.provisional { background: #fff4e0; border: 1px solid #f0b429; border-left: 6px solid #e8890c; border-radius: 6px;
  padding: 10px 16px; margin: 16px 0 6px; font-size: 14.5px; }
img { max-width: 100%; display: block; margin: 6px 0; }
dl { font-size: 13.5px; color: #444; } dt { font-weight: 600; margin-top: 6px; } dd { margin-left: 18px; }
"""


# --- formatting -------------------------------------------------------------------------------

def n(v: Any) -> str:
    """A count or record lag: thousands separators; '–' for none."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    return f"{v:,.0f}" if abs(v) >= 100 or float(v).is_integer() else f"{v:,.1f}"


def dur(seconds: Any) -> str:
    """A duration for people: 0 s, 42 s, 12.5 min, 3.2 h, 2.1 d."""
    if seconds is None or (isinstance(seconds, float) and math.isnan(seconds)):
        return "–"
    s = float(seconds)
    sign = "−" if s < 0 else ""
    s = abs(s)
    if s < 0.05:
        return "0 s"
    if s < 60:
        return f"{sign}{s:.1f} s" if s < 10 else f"{sign}{s:.0f} s"
    if s < 3600:
        return f"{sign}{s / 60:.1f} min"
    if s < 86_400 * 2:
        return f"{sign}{s / 3600:.1f} h"
    return f"{sign}{s / 86_400:.1f} d"


def pct(v: Any, digits: int = 1) -> str:
    return "–" if v is None else f"{100.0 * v:.{digits}f} %"


def signed(v: Any, fmt: Callable[[Any], str] = n) -> str:
    if v is None:
        return "–"
    return ("+" if v > 0 else "") + fmt(v) if v >= 0 else "−" + fmt(-v)


def tstat(v: Any) -> str:
    if v is None:
        return ""
    return " (t=∞)" if math.isinf(v) and v > 0 else f" (t={v:.1f})"


def _img(png: bytes, alt: str) -> str:
    data = base64.b64encode(png).decode("ascii")
    return f'<img alt="{escape(alt)}" src="data:image/png;base64,{data}">'


def _table(headers: Sequence[tuple[str, bool]], rows: Sequence[Sequence[tuple[str, str]]]) -> str:
    """headers: (title, left-aligned); rows: cells of (html, css class)."""
    head = "".join(f'<th class="{"l" if left else ""}">{title}</th>' for title, left in headers)
    body = "".join("<tr>" + "".join(f'<td class="{cls}">{html}</td>' for html, cls in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _card(value: str, key: str, tone: str = "") -> str:
    return f'<div class="card {tone}"><div class="v">{value}</div><div class="k">{escape(key)}</div></div>'


# How the tables account a sample (partition_day.py, writers.py), in words.
ACCOUNTING = (f"at most {GAP_POLLS} poll intervals of the sidecar that wrote it (its rows' refresh interval; "
              "{gap:g} s, --max-gap-seconds, for rows written before rows said it)")
WRITERS = ("where several sidecars wrote the history, per partition the one with the most samples, and any other "
           f"whose samples overlap it by at most {HANDOFF_MS // 60_000} min, one writer for each moment of the overlap: "
           "one sidecar's view, not two interleaved")
# How the tables count the edges of a day and of a stall (partition_day.py).
EDGES = ("the day's first sample also stands for the time since midnight before it (as far as that cap), and a "
         "stall starts where its first STALLED sample's time lag says the partition fell behind (no earlier than "
         "the sample before)")


# --- sections ---------------------------------------------------------------------------------

def _provisional(d: ReportData) -> str:
    """A banner on a provisional day: its figures are not final, and say why."""
    if d.provisional is None:
        return ""
    return (
        '<div class="provisional" id="provisional" role="status"><b>Provisional day: these figures are not final.</b> '
        f'Why: {escape(d.provisional)}. The next rollup after the day is over and its history has settled rolls it '
        "up again and replaces this report. Until then its rows say <code>final = false</code>, and its figures stay "
        "out of other days' trends (day-over-day and week-over-week changes, slopes, growing).</div>"
    )


def _summary(d: ReportData) -> str:
    f = d.flows
    partitions = sum(x["partitions"] for x in f)
    oos = sum(x["out_of_sync_seconds"] for x in f)
    share = out_of_sync_share(oos, sum(x["covered_seconds"] for x in f))
    episodes = sum(x["stall_episodes"] for x in f)
    longest = max((x["longest_stall_seconds"] for x in f), default=0.0)
    growing = d.growing
    return "<div class='cards'>" + "".join([
        _card(n(len(f)), "flows"),
        _card(n(sum(x["topics"] for x in f)), "topics"),
        _card(n(partitions), "partitions"),
        _card(n(sum(x["samples"] for x in f)), "samples"),
        _card(dur(oos), "out of sync (partition-time)", "bad" if oos > 0 else "ok"),
        _card(pct(share, 2), "of the watched partition-time out of sync", "bad" if (share or 0) > 0.01 else "ok"),
        _card(n(episodes), "stall episodes", "bad" if episodes else "ok"),
        _card(dur(longest), "longest stall", "bad" if longest else "ok"),
        _card(n(sum(growing.values())), "growing (last 7 days vs the weeks before, see Trends): " + _growing_counts(d),
              "bad" if growing else "ok"),
    ]) + "</div>"


def _growing_counts(d: ReportData) -> str:
    """E.g. "3 partitions (p95 lag), 1 topic (time out of sync)": an entity growing on both
    measures is named under each (the card's number counts it once)."""
    parts = [f"{v} {level}{'' if v == 1 else 's'} ({label})"
             for label, levels in d.growing_by.items() for level, v in sorted(levels.items())]
    return ", ".join(parts) or "none"


def _grow_tags(t: dict[str, Any]) -> str:
    """A trend row's growth tags, one per measure growing; "no" when none, "–" without a row."""
    labels = growing_on(t)
    if labels:
        return " ".join(f'<span class="tag grow">growing: {label}</span>' for label in labels)
    return '<span class="tag flat">no</span>' if t else "–"


def _flows(d: ReportData, c: Charts) -> str:
    rows = []
    for f in d.flows:
        t = d.flow_trends.get(f["flow"], {})
        rows.append([
            (escape(f["flow"]), "l"), (n(f["topics"]), ""), (n(f["partitions"]), ""), (pct(f["coverage"]), ""),
            (n(f["record_lag_p50"]), ""), (n(f["record_lag_p95"]), ""), (n(f["record_lag_p99"]), ""), (n(f["record_lag_max"]), ""),
            (dur(f["time_lag_p95_s"]), ""), (dur(f["time_lag_max_s"]), ""),
            (dur(f["out_of_sync_seconds"]), ""), (pct(out_of_sync_share(f["out_of_sync_seconds"], f["covered_seconds"]), 2), ""),
            (dur(f["at_risk_seconds"]), ""), (n(f["stall_episodes"]), ""), (dur(f["longest_stall_seconds"]), ""),
            (signed(t.get("record_lag_p95_dod")), ""), (signed(t.get("record_lag_p95_wow")), ""),
            (signed(t.get("slope_28d")) + tstat(t.get("slope_28d_t")), ""),
            (_grow_tags(t), ""),
        ])
    headers = [("flow", True), ("topics", False), ("partitions", False), ("coverage", False),
               ("lag p50", False), ("lag p95", False), ("lag p99", False), ("lag max", False),
               ("time lag p95", False), ("time lag max", False), ("out of sync", False), ("share", False),
               ("at risk", False), ("stalls", False), ("longest stall", False),
               ("p95 Δ day", False), ("p95 Δ week", False), ("p95 slope 28 d /day", False), ("growing", False)]
    return (
        '<section id="flows"><h2>Flows at a glance</h2>'
        '<p class="note">Record lag in records (percentiles over all samples of the flow\'s partitions), time lag '
        'and out-of-sync time as durations; out of sync and at risk are partition-time (a flow of 100 partitions '
        'has 100 partition-days a day); share is of the partition-time the history covers. Δ compares this day\'s p95 record lag with the day before and a week before; '
        'growing: on p95 lag, time out of sync or both (see Trends).</p>'
        + _table(headers, rows) + _img(c.flows, "out-of-sync share and record-lag percentiles per flow")
        + "</section>"
    )


def _worst(d: ReportData, c: Charts) -> str:
    if not d.worst_partitions:
        return '<section id="worst-partitions"><h2>Worst partitions</h2><p>No partitions.</p></section>'
    rows = []
    for i, p in enumerate(d.worst_partitions, 1):
        rows.append([
            (str(i), ""), (escape(partition_label(p)), "l"),
            (dur(p["out_of_sync_seconds"]), ""), (pct(out_of_sync_share(p["out_of_sync_seconds"], p["covered_seconds"])), ""),
            (dur(p["stalled_seconds"]), ""), (n(p["stall_episodes"]), ""), (dur(p["longest_stall_seconds"]), ""),
            (dur(p["at_risk_seconds"]), ""),
            (n(p["record_lag_p95"]), ""), (n(p["record_lag_p99"]), ""), (n(p["record_lag_max"]), ""),
            (dur(p["time_lag_p95_s"]), ""), (dur(p["time_lag_max_s"]), ""), (pct(p["coverage"]), ""),
        ])
    headers = [("#", False), ("partition", True), ("out of sync", False), ("share", False), ("stalled", False),
               ("stalls", False), ("longest", False), ("at risk", False), ("lag p95", False), ("lag p99", False),
               ("lag max", False), ("time lag p95", False), ("time lag max", False), ("coverage", False)]
    chart = _img(c.series, "record lag and time lag over the day of the worst partitions") if c.series else ""
    if d.series and all(s.every_sample for s in d.series):
        how = ('each sample (a history this short is drawn sample by sample), with the time it was not in sync '
               f'shaded: each sample\'s state to the next sample, {ACCOUNTING.format(gap=d.max_gap_seconds)}, '
               'as the tables count it (without the edges the note under Data quality names)')
    else:
        how = ('the largest of each 5 minutes, with the time it was not in sync shaded (a 5-minute slot takes its '
               'worst state, held to the next slot with samples for as long as the tables count its last sample), '
               f'of the samples the tables count ({WRITERS})')
    return (
        '<section id="worst-partitions"><h2>Worst partitions</h2>'
        f'<p class="note">The {len(d.worst_partitions)} partitions with the most time out of sync (ties: highest p95 '
        'record lag). Below, each one\'s record lag (solid, left axis) and time lag (dashed, right axis) over the day '
        f'from the history, {how}.</p>'
        + _table(headers, rows) + chart + "</section>"
    )


def _heatmap(d: ReportData, c: Charts) -> str:
    head = '<section id="heatmap"><h2>Out-of-sync time by hour and topic</h2>'
    if c.heat is None:
        return head + "<p>No topics.</p></section>"
    shown = len(d.heat_labels)
    which = f"all {shown} topics" if shown == d.heat_topics_total else f"the {shown} of {d.heat_topics_total} topics with the most"
    return (
        head + f'<p class="note">Rows: {which} out-of-sync time. Cells: the share of the topic\'s partition-time in '
        'that hour (UTC) that was out of sync, in percent, of the time the history covers (a sample\'s interval '
        'counts in the hour it starts; grey: no samples); the colour scale ends at the worst cell.</p>'
        + _img(c.heat, "heat map of out-of-sync time by hour and topic")
        + "</section>"
    )


# What "growing" means, in words: the rule's constants (trend_rule.py) and the measured figures
# (trend_figures.json, written by tests/bench/bench_trend_rule.py).
GROWING = (
    f'<b>growing</b> means the p95 record lag of the last 7 days stands above the same weekdays of up to '
    f'{rule.WEEKS - 1} weeks before by more than the series\' own noise allows (learnt from its history, '
    f'day-to-day correlation included: the score needed is {rule.THRESHOLD[rule.WEEKS - 1]:g} noise '
    'standard deviations with 7 weeks of history, more with fewer or with a level that wanders), by at least '
    f'{rule.MIN_CHANGE:,.0f} records and {rule.MIN_RATIO:.0%}, on at least {rule.MIN_UP} of the 7 days (or, past those '
    f'minimums, each of the last {rule.RISING_WEEKS} weeks at least {rule.MIN_RATIO:.0%} above the one before): a quiet '
    'weekend, a busy Friday or one bad day is not growth. <b>growing: time out of sync</b> is the same rule on '
    f'the daily seconds out of sync, with a minimum of {rule.MIN_CHANGE_SECONDS:,.0f} s '
    f'({rule.MIN_CHANGE_SECONDS / 60:g} minutes) a day instead of records. Each flag shows its evidence. '
    + escape(trend_figures.words())
)


def _evidence(t: dict[str, Any]) -> str:
    """Each growing flag's evidence: the change, its noise and the score needed, days up, the
    series' daily noise and history, and how soon growth is seen at that noise."""
    lines = []
    for flag, label in GROWING_FLAGS.items():
        if not t.get(flag):
            continue
        p = "" if flag == "growing" else "out_of_sync_"
        unit = dur if p else n
        change, noise, score, needed = (t.get(f"{p}{k}") for k in ("change_7d", "noise_7d", "score_7d", "needed_7d"))
        daily, weeks, up, compared = (t.get(f"{p}{k}") for k in ("daily_noise_7d", "weeks_7d", "up_7d", "compared_7d"))
        if change is None or noise is None or score is None:
            continue
        ratio = t.get(f"{p}change_7d_ratio")
        parts = [f"{label}: +{unit(change)}" + (f" ({ratio:+.0%})" if ratio is not None and ratio != float("inf") else ""),
                 f"{score:.1f}× its noise of {unit(noise)} (needs {needed:.1f})",
                 f"{up} of {compared} days up", f"daily noise {daily:.0%}, {weeks} weeks of history"]
        if t.get(f"{p}rising_7d"):
            parts.insert(2, f"each of the last {rule.RISING_WEEKS} weeks {rule.MIN_RATIO:.0%} or more above the one before")
        soon = trend_figures.at_noise(daily)
        lines.append(escape("; ".join(parts) + (f"; {soon}" if soon else "")))
    return "<br>".join(f'<span class="note">{x}</span>' for x in lines)


def _trends(d: ReportData) -> str:
    head = '<section id="trends"><h2>Trends</h2>'
    note = (
        f'<p class="note">Topics and partitions among the {d.worst_n} worst by at least one measure (largest increase; '
        'bold: the measures that put the row here). Slopes are least-squares fits of the daily p95 record lag over '
        'the last 7 and 28 days, in records per day, with their t-statistic (shown, not what growing means). '
        + GROWING + '</p>'
    )
    if not d.trend_rows:
        return head + note + "<p>Nothing grew: no positive change or slope on this day.</p></section>"
    rows = []
    for r in d.trend_rows:
        worst = set(r["worst_by"])

        def cell(measure: str, html: str) -> tuple[str, str]:
            return html, "worst" if measure in worst else ""

        name = partition_label(r) if r["level"] == "partition" else f"{r['flow']} {r['topic']}"
        rows.append([
            (r["level"], "l"), (escape(name), "l"),
            (n(r["record_lag_p95"]), ""),
            cell("record_lag_p95_dod", signed(r["record_lag_p95_dod"])),
            cell("record_lag_p95_wow", signed(r["record_lag_p95_wow"])),
            (dur(r["out_of_sync_seconds"]), ""),
            cell("out_of_sync_seconds_dod", signed(r["out_of_sync_seconds_dod"], dur)),
            cell("out_of_sync_seconds_wow", signed(r["out_of_sync_seconds_wow"], dur)),
            cell("slope_7d", signed(r["slope_7d"]) + tstat(r["slope_7d_t"])),
            cell("slope_28d", signed(r["slope_28d"]) + tstat(r["slope_28d_t"])),
            (f'{r["days_7d"]} / {r["days_28d"]}', ""),
            ((_grow_tags(r) + "<br>" + _evidence(r)) if growing_on(r) else "", "l"),
        ])
    headers = [("level", True), ("name", True), ("lag p95", False), ("Δ day", False), ("Δ week", False),
               ("out of sync", False), ("Δ day", False), ("Δ week", False), ("slope 7 d", False),
               ("slope 28 d", False), ("days 7/28", False), ("", False)]
    return head + note + _table(headers, rows) + "</section>"


def _groups(d: ReportData) -> str:
    """The consumer groups' day (group_daily): only where the sidecar read groups."""
    if not d.groups:
        return ""
    rows = [[
        (escape(f'{g["source"]}->{g["target"]}'), "l"), (escape(g["group"]), "l"),
        (pct(g["ready_ratio"]), "" if g["ready_ratio"] is None or g["ready_ratio"] >= 0.99 else "worst"),
        (pct(g["coverage"]), ""), (n(g["reread_p50"]), ""), (n(g["reread_p99"]), ""), (n(g["reread_max"]), ""),
        (escape(g["worst_state"] or "-"), "" if g["worst_state"] == "READY" else "worst"),
        (dur(g["checkpoint_age_max_seconds"]), ""),
    ] for g in sorted(d.groups, key=lambda g: (g["ready_ratio"] if g["ready_ratio"] is not None else -1, g["group"]))]
    headers = [("flow", True), ("group", True), ("READY", False), ("coverage", False), ("re-read (sum) p50", False),
               ("p99", False), ("max", False), ("worst state", True), ("oldest checkpoint", False)]
    return (
        '<section id="groups"><h2>Failover readiness of the consumer groups</h2>'
        '<p class="note">Per group, from the sidecar\'s groups runs (each a sample: its re-read is the sum over '
        'the group\'s partitions of the records a failover at that moment would deliver again, its state its '
        'worst partition\'s). READY: the share of the covered time every partition was checkpointed, within the '
        're-read and checkpoint-age limits. Least ready first.</p>'
        + _table(headers, rows) + "</section>"
    )


def _quality(d: ReportData) -> str:
    rows = [[
        (escape(f["flow"]), "l"), (n(f["samples"]), ""), (pct(f["coverage"], 2), ""),
        (n(f["unknown_state_samples"]), "worst" if f["unknown_state_samples"] else ""),
        (n(f["null_record_lag_samples"]), ""), (n(f["null_time_lag_samples"]), ""),
        (str(f["first_ts"])[:19], ""), (str(f["last_ts"])[:19], ""),
    ] for f in d.flows]
    headers = [("flow", True), ("samples", False), ("coverage", False), ("unrecognized states", False),
               ("no record lag", False), ("no time lag", False), ("first sample (UTC)", False), ("last sample (UTC)", False)]
    return (
        '<section id="data-quality"><h2>Data quality</h2>'
        f'<p class="note">Coverage: the share of partition-time with samples; a sample accounts for the time to the '
        f'partition\'s next sample, {ACCOUNTING.format(gap=d.max_gap_seconds)}, so gaps in the history lower the '
        f'coverage and are not counted as out of sync; {EDGES}. Samples: of the writers that count ({WRITERS}). '
        'Unrecognized states (not one the sidecar knows) count as out of sync; '
        'samples without a lag (UNKNOWN, GONE) count in every sample total but not in the percentiles.</p>'
        + _table(headers, rows) + "</section>"
    )


def _definitions(d: ReportData) -> str:
    return (
        "<dl><dt>record lag</dt><dd>records the mirror still has to copy (LEO − LRO − 1), an upper bound when the LRO comes "
        "from MM2's own topics.</dd><dt>time lag</dt><dd>seconds since the mirror last had every record.</dd>"
        "<dt>out of sync</dt><dd>time in any state but IN_SYNC (LAGGING, STALLED, REWIND, AT_RISK, RESET, UNKNOWN).</dd>"
        "<dt>stall</dt><dd>a run of consecutive STALLED samples; its length is the sum of its samples' intervals.</dd>"
        "<dt>percentiles</dt><dd>nearest-rank percentiles over the samples, from 1 % log buckets: the value shown is a "
        "real sample at most 1 % above the exact percentile, exact below 100.</dd></dl>"
    )


@dataclass(frozen=True)
class Charts:
    """The report's PNGs."""

    flows: bytes
    series: bytes | None  # None: no partitions
    heat: bytes | None  # None: no topics


def draw(d: ReportData) -> Charts:
    """The charts need the day's own rows, not its trends: the job draws them (drawer.py) while
    Spark works the trends out."""
    from mirrorlag.rollup import charts  # matplotlib: imported where the charts are drawn

    return Charts(charts.flows_chart(d.flows), charts.series_chart(d.series) if d.series else None,
                  charts.heatmap_chart(d.heat_labels, d.heat_share) if d.heat_labels else None)


_CARDS_AND_FLOWS = re.compile(r"<div class='cards'>.*?<section id=\"flows\">.*?</section>", re.S)
_TRENDS = re.compile(r'<section id="trends">.*?</section>', re.S)
_FLOWS_PNG = re.compile(r'<img alt="out-of-sync share and record-lag percentiles per flow" src="data:image/png;base64,([^"]+)">')


def with_trends(html: str, flows: list[dict[str, Any]], trend: TrendViews, worst_n: int) -> str | None:
    """A report `render` made, with the figures of the day's trends replaced by `trend`'s (its
    trends recomputed after an earlier day changed): the summary cards, the flows table and the
    Trends section. Everything else shows the day's own rows, which did not change. None: not a
    page this version renders (then the caller keeps it as it is)."""
    png = _FLOWS_PNG.search(html)
    if png is None or len(_CARDS_AND_FLOWS.findall(html)) != 1 or len(_TRENDS.findall(html)) != 1:
        return None
    d = ReportData(day=date.min, history="", out="", max_gap_seconds=0.0, worst_n=worst_n, flows=flows,
                   worst_partitions=[], series=[], heat_labels=[], heat_share=[], heat_topics_total=0,
                   trend_rows=trend.rows, flow_trends=trend.flows, growing=trend.growing, growing_by=trend.growing_by)
    c = Charts(base64.b64decode(png[1]), None, None)
    html = _CARDS_AND_FLOWS.sub(lambda _: _summary(d) + _flows(d, c), html)
    return _TRENDS.sub(lambda _: _trends(d), html)


def render(d: ReportData, drawn: Charts | None = None) -> str:
    """The page; `drawn`: draw(d) done already (draw needs none of d's trend fields)."""
    c = drawn or draw(d)
    title = f"mirrorlag — replication lag on {d.day.isoformat()}" + (" (provisional)" if d.provisional else "")
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
        f'<meta name="viewport" content="width=device-width, initial-scale=1"><style>{CSS}</style></head><body>'
        f"<header><h1>{escape(title)}</h1>"
        f'<div class="sub">UTC day {d.day.isoformat()} · history {escape(d.history)} · generated '
        f'{d.generated_at.strftime("%Y-%m-%d %H:%M UTC")} by mirrorlag rollup</div></header>'
        + _provisional(d) + _summary(d) + _flows(d, c) + _worst(d, c) + _heatmap(d, c) + _trends(d) + _groups(d) + _quality(d)
        + "<footer><h2>How to read this</h2>" + _definitions(d) + "</footer></body></html>"
    )
