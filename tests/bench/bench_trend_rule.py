"""The trend rule's false alarms and detection on the simulation suite (tests/sim/trend_series.py),
beside the rule it replaced (least-squares slope of 7 or 28 days, t > 2, at least 4 days), on
p95 record lag and on out-of-sync seconds (its own minimum change). Run by hand; numpy only,
~1-2 min for 3,000 series of each kind:

    .venv/bin/python -m tests.bench.bench_trend_rule --series 3000 --seed 7

Prints markdown tables for tests/bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from mirrorlag.rollup.trend_rule import MIN_CHANGE, MIN_CHANGE_SECONDS
from tests.sim import trend_series as ts


def old_rule(windows: np.ndarray) -> np.ndarray:
    """Before issue 32: days >= 4 and t > 2 on the 7- or 28-day slope (missing days left out)."""
    out = np.zeros(windows.shape[:-1], dtype=bool)
    for n in (7, 28):
        y = windows[..., -n:]
        ok = ~np.isnan(y)
        days = ok.sum(axis=-1)
        x = np.broadcast_to(np.arange(n, dtype=float), y.shape)
        with np.errstate(invalid="ignore", divide="ignore"):
            mx = np.where(ok, x, 0).sum(-1) / days
            my = np.where(ok, y, 0).sum(-1) / days
            dx = np.where(ok, x - mx[..., None], 0)
            dy = np.where(ok, y - my[..., None], 0)
            sxx, sxy, syy = (dx * dx).sum(-1), (dx * dy).sum(-1), (dy * dy).sum(-1)
            slope = sxy / sxx
            se = np.sqrt(np.maximum(syy - slope * sxy, 0) / (days - 2) / sxx)
            t = np.where(se > 0, slope / se, np.where(slope > 0, np.inf, -np.inf))
        out |= (days >= 4) & (t > 2)
    return out


def tables(fa: dict[str, float], det: dict[str, ts.Detection], old_fa: dict[str, float],
           old_det: dict[str, ts.Detection]) -> None:
    print("| steady series | partition-days flagged | old rule |\n|---|---|---|")
    for kind in fa:
        print(f"| {kind} | {fa[kind]:.2%} | {old_fa[kind]:.1%} |")
    print(f"| all kinds pooled | {np.mean(list(fa.values())):.2%} | {np.mean(list(old_fa.values())):.1%} |")
    print("\n| growing series | flagged within 14 days | delay median / p90 (days) | flagged before the onset | old rule: within 14 days / before |\n"
          "|---|---|---|---|---|")
    for kind, d in det.items():
        o = old_det[kind]
        print(f"| {kind} | {d.within:.1%} | {d.median_delay:g} / {d.p90_delay:g} | {d.before:.1%} | {o.within:.1%} / {o.before:.1%} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--series", type=int, default=3000, help="series of each kind")
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    start = time.monotonic()
    fa, det = ts.run(a.series, a.seed)
    old_fa, old_det = ts.run(a.series, a.seed, old_rule)  # the same series (same seed)
    print(f"{a.series} series of each kind, seed {a.seed}, {time.monotonic() - start:.0f} s, "
          f"load {os.getloadavg()[0]:.1f}\n\nDaily p95 record lag (MIN_CHANGE {MIN_CHANGE:g} records)\n")
    tables(fa, det, old_fa, old_det)
    start = time.monotonic()
    fa, det = ts.run_seconds(a.series, a.seed)
    old_fa, old_det = ts.run_seconds(a.series, a.seed, old_rule)
    print(f"\nDaily out-of-sync seconds (MIN_CHANGE_SECONDS {MIN_CHANGE_SECONDS:g} s), {time.monotonic() - start:.0f} s, "
          f"load {os.getloadavg()[0]:.1f}\n")
    tables(fa, det, old_fa, old_det)


if __name__ == "__main__":
    main()
