"""What a "growing" flag is worth, in the measured figures: trend_figures.json, written by
tests/bench/bench_trend_rule.py --write (never by hand), and the words the report and the docs
build from it, so no percentage about the rule is typed anywhere.

Each row of the file is one simulated family of one generator ("own": the rule author's,
tests/sim/trend_series.py; "independent": written without sight of the rule,
tests/sim/trend_series_independent.py): steady families give the share of judged days flagged,
growing ones the share flagged within 14 days of the onset and the median delay, "sustained"
ones the share flagged on the last day of growth over the whole window.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

NOISES = (0.05, 0.10, 0.20)  # the daily noise levels the growing families are measured at
_GROWTH = re.compile(r"\+(\d+)%/week, sd (\d+)%$")


@dataclass(frozen=True)
class Summary:
    steady_max: float  # the most any steady family was flagged (correlation up to AR(1) 0.5)
    wandering_max: float  # the same for AR(1) 0.8: a level that wanders from day to day
    within: dict[tuple[int, float], float]  # (growth % a week, noise) -> least share flagged in 14 days
    median: dict[tuple[int, float], float]  # the same -> the largest median delay (days; inf: most never)
    sustained: float  # least share flagged on the last day of growth over the whole window
    series: int  # series of each family
    generators: int


@lru_cache(maxsize=1)
def figures() -> dict[str, Any]:
    return json.loads(resources.files("mirrorlag.rollup").joinpath("trend_figures.json").read_text())


def summary(data: dict[str, Any] | None = None) -> Summary:
    data = data if data is not None else figures()
    rows = data["rows"]
    steady = [r for r in rows if r["kind"] == "steady"]
    within: dict[tuple[int, float], float] = {}
    median: dict[tuple[int, float], float] = {}
    for r in rows:
        m = _GROWTH.search(r["family"])
        if r["kind"] != "growing" or not m or "AR(1)" in r["family"]:
            continue
        key = (int(m.group(1)), int(m.group(2)) / 100)
        within[key] = min(within.get(key, 1.0), r["within_14"])
        median[key] = max(median.get(key, 0.0), _days(r["median_days"]))
    return Summary(
        steady_max=max(r["false_alarms"] for r in steady if "0.8" not in r["family"]),
        wandering_max=max(r["false_alarms"] for r in steady if "0.8" in r["family"]),
        within=within, median=median,
        sustained=min(r["last_day"] for r in rows if r["kind"] == "sustained"),
        series=data["series"], generators=len({r["generator"] for r in rows}))


def _days(v: float | None) -> float:
    return math.inf if v is None else float(v)


def _pct(v: float) -> str:
    return f"{v:.1%}" if v < 0.1 and v != 0 else f"{v:.0%}"


def at_noise(noise: float | None, s: Summary | None = None) -> str:
    """For a flagged series' daily noise: how soon +10 %/week is flagged at that noise (the
    nearest measured level at or above it)."""
    s = s or summary()
    if noise is None or math.isnan(noise):
        return ""
    level = next((n for n in NOISES if noise <= n + 1e-9), None)
    if level is None:
        return f"its daily noise ({noise:.0%}) is above the {NOISES[-1]:.0%} measured: growth is flagged late, if at all"
    share, days = s.within.get((10, level)), s.median.get((10, level))
    if share is None or days is None:
        return ""
    when = "usually" if share >= 0.5 else "in a minority of series"
    soon = f"median {days:.0f} days" if math.isfinite(days) else "most never within 5 weeks"
    return (f"at its daily noise ({noise:.0%}), +10 %/week is {when} flagged within 2 weeks "
            f"({_pct(share)} of simulated series at {level:.0%} noise, {soon})")


def words(s: Summary | None = None) -> str:
    """One paragraph, plain text: how often the flag is wrong and how soon it sees growth."""
    s = s or summary()
    det = ", ".join(f"{_pct(s.within[(10, n)])}{' of series' if i == 0 else ''} at {n:.0%}"
                    + (" daily noise" if i == 0 else "") for i, n in enumerate(k for k in NOISES if (10, k) in s.within))
    twenty = s.within.get((20, 0.10))
    return (
        f"Measured on {s.series:,} simulated series of each kind from {s.generators} generators, one written "
        f"without sight of the rule: steady series (weekly shapes, 5-20 % daily noise, monthly holidays, "
        f"outage days, level shifts down, one extreme day, day-to-day correlation up to AR(1) 0.5) are "
        f"flagged on at most {_pct(s.steady_max)} of the days judged, and {_pct(s.wandering_max)} where the "
        f"level wanders from day to day (AR(1) 0.8). +10 %/week is flagged within 14 days in {det}"
        + (f"; +20 %/week in {_pct(twenty)} at 10 %" if twenty is not None else "")
        + f"; growth over the whole 8 weeks on its last day in {_pct(s.sustained)}. Under 4 weeks of "
        "history: no flag."
    )


def table(data: dict[str, Any] | None = None) -> str:
    """The measured rows as a markdown table (docs, RESULTS.md)."""
    data = data if data is not None else figures()
    out = ["| generator | family | metric | flagged days (steady) | within 14 days (growing) | median delay |",
           "|---|---|---|---|---|---|"]
    for r in data["rows"]:
        if r["kind"] == "steady":
            cells = [f"{r['false_alarms']:.2%}", "", ""]
        elif r["kind"] == "sustained":
            cells = ["", f"{r['last_day']:.1%} on the last day", ""]
        else:
            d = r["median_days"]
            cells = ["", f"{r['within_14']:.1%}", "never" if d is None else f"{d:g} days"]
        out.append(f"| {r['generator']} | {r['family']} | {r['metric']} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def doc_block(data: dict[str, Any] | None = None) -> str:
    """What docs/history-and-rollup.md holds between its trend-figures markers."""
    data = data if data is not None else figures()
    return (f"{words(summary(data))}\n\nMeasured {data['measured']} by `{data['command']}`:\n\n{table(data)}\n")


START, END = "<!-- trend-figures:start -->", "<!-- trend-figures:end -->"


def replace_block(text: str, block: str) -> str:
    """`text` with what lies between START and END replaced by `block`."""
    a, b = text.index(START) + len(START), text.index(END)
    return text[:a] + "\n" + block + text[b:]


def block_of(text: str) -> str:
    return text[text.index(START) + len(START):text.index(END)].lstrip("\n")
