"""The report's charts, drawn in two processes of their own.

matplotlib takes ~2 s a day for the three charts, holding the GIL, and their data is ready only
near the end of the day's queries: drawn in the driver, they were the last ~2 s of the run (10k
day). Two processes draw them side by side (the worst partitions' curves and the flows in one,
the heat map in the other: about equal), started before the day's pass so that they import
matplotlib while it runs. Each reads its pickled calls on stdin and writes the pickled PNGs on stdout. Plain
child processes, not multiprocessing's spawn, which would import the caller's main module again
(a script without a main guard would run twice).
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import mirrorlag
from mirrorlag.rollup.report import Charts
from mirrorlag.rollup.report_data import ReportData

Calls = list[tuple[str, tuple[Any, ...]]]  # (a function of charts.py, its arguments)


class _Process:
    def __init__(self) -> None:
        package_root = os.path.dirname(os.path.dirname(mirrorlag.__file__))
        path = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)
        self.proc = subprocess.Popen([sys.executable, "-m", "mirrorlag.rollup.drawer"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     env={**os.environ, "PYTHONPATH": path})

    def run(self, calls: Calls) -> list[bytes] | None:
        try:
            out, _ = self.proc.communicate(pickle.dumps(calls), timeout=300)
            return pickle.loads(out) if self.proc.returncode == 0 else None
        except (OSError, ValueError, EOFError, pickle.UnpicklingError, subprocess.TimeoutExpired):
            return None

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


class Drawer:
    """One day's charts. `charts` gives None when a process failed: the caller draws in-process
    (report.render does), so a failure here never loses the report."""

    def __init__(self) -> None:
        self._processes = [_Process(), _Process()]

    def charts(self, d: ReportData) -> Charts | None:
        # The curves (~1.9 s on the 2-core VM) with the flows (~0.4 s), the heat map (~1.9 s:
        # a label per cell) alone.
        first: Calls = [("flows_chart", (d.flows,))]
        if d.series:
            first.append(("series_chart", (d.series,)))
        heat: Calls = [("heatmap_chart", (d.heat_labels, d.heat_share))] if d.heat_labels else []
        with ThreadPoolExecutor(2) as pool:
            flows_series, heat_png = pool.map(lambda pc: pc[0].run(pc[1]), zip(self._processes, (first, heat)))
        if flows_series is None or heat_png is None:
            return None
        return Charts(flows_series[0], flows_series[1] if d.series else None, heat_png[0] if heat_png else None)

    def close(self) -> None:
        for p in self._processes:
            p.close()


def main() -> None:
    from mirrorlag.rollup import charts  # matplotlib, while the caller waits for the data

    calls: Calls = pickle.load(sys.stdin.buffer)
    sys.stdout.buffer.write(pickle.dumps([getattr(charts, name)(*args) for name, args in calls]))


if __name__ == "__main__":
    main()
