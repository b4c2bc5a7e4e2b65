"""The trend rule's false alarms and detection, per simulated family, on two generators: the
rule author's (tests/sim/trend_series.py) and one written without sight of the rule
(tests/sim/trend_series_independent.py). Only the days the rule can judge count (4 weeks of
history). Run by hand; numpy only, a few minutes at 2,000 series a family:

    PYTHONPATH=. .venv/bin/python -m tests.bench.bench_trend_rule --series 2000 --seed 7 [--write]

Prints the markdown table for tests/bench/RESULTS.md. --write also writes
mirrorlag/rollup/trend_figures.json (what the report's words are built from) and the generated
block of docs/history-and-rollup.md and README.md.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from mirrorlag.rollup import trend_figures
from mirrorlag.rollup.trend_rule import MIN_CHANGE, MIN_CHANGE_SECONDS, WINDOW, judge
from tests.sim import trend_series as own
from tests.sim import trend_series_independent as ind

ROOT = Path(__file__).resolve().parents[2]
UNITS = {"records": MIN_CHANGE, "seconds": MIN_CHANGE_SECONDS}


def _row(generator: str, family: str, metric: str, kind: str, **figures: float | None) -> dict:
    return {"generator": generator, "family": family, "metric": metric, "kind": kind, **figures}


def _detection(d: own.Detection) -> dict:
    return {"within_14": d.within, "median_days": None if math.isinf(d.median_delay) else d.median_delay}


def own_rows(n: int, seed: int) -> list[dict]:
    rows = []
    for metric, (fa, det) in (("records", own.run(n, seed)), ("seconds", own.run_seconds(n, seed))):
        rows += [_row("own", k, metric, "steady", false_alarms=v) for k, v in fa.items()]
        rows += [_row("own", k, metric, "growing", **_detection(d)) for k, d in det.items()]
    rows += [_row("own", k, "records", "sustained", last_day=v) for k, v in own.sustained(n, seed).items()]
    return rows


def independent_rows(n: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    rows = []
    for family, make in ind.STEADY.items():
        metric = ind.KIND[family]
        rule = (lambda m: lambda w: judge(w, UNITS[m]))(metric)
        rows.append(_row("independent", family, metric, "steady", false_alarms=own.false_alarms(make(rng, n, own.DAYS), rule)))
    for family, (make, onset) in ind.GROWING.items():
        metric = ind.KIND[family]
        if onset == 0:
            g = judge(make(rng, n, max(WINDOW, ind.MIN_DAYS))[:, :WINDOW], UNITS[metric])
            rows.append(_row("independent", family, metric, "sustained", last_day=float(g.growing.mean())))
            continue
        rule = (lambda m: lambda w: judge(w, UNITS[m]))(metric)
        d = own.detection(make(rng, n, onset + own.AFTER), rule, onset)
        rows.append(_row("independent", family, metric, "growing", **_detection(d)))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--series", type=int, default=2000, help="series of each family")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--write", action="store_true", help="write trend_figures.json and the docs' blocks")
    a = ap.parse_args()
    start = time.monotonic()
    rows = own_rows(a.series, a.seed) + independent_rows(a.series, a.seed + 1)
    data = {"measured": datetime.now(timezone.utc).strftime("%Y-%m-%d"), "series": a.series, "seed": a.seed,
            "command": f"python -m tests.bench.bench_trend_rule --series {a.series} --seed {a.seed} --write",
            "rows": rows}
    print(f"{a.series} series a family, seed {a.seed}, {time.monotonic() - start:.0f} s, load {os.getloadavg()[0]:.1f}\n")
    print(trend_figures.words(trend_figures.summary(data)) + "\n")
    print(trend_figures.table(data))
    if a.write:
        (ROOT / "mirrorlag/rollup/trend_figures.json").write_text(json.dumps(data, indent=1) + "\n")
        for doc in ("docs/history-and-rollup.md", "README.md"):
            path = ROOT / doc
            block = trend_figures.doc_block(data) if doc.startswith("docs") else trend_figures.words(trend_figures.summary(data)) + "\n"
            path.write_text(trend_figures.replace_block(path.read_text(), block))


if __name__ == "__main__":
    main()
