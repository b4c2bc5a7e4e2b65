"""The report's charts, drawn in two processes of their own.

matplotlib holds the GIL for seconds to draw the three charts, and their data is ready only near
the end of the day's queries: drawn in the driver, they would add their whole time to the end of
the run. Two processes draw them side by side (the worst partitions' curves and the flows in one,
the heat map in the other: about equal work), started before the day's pass so that they import
matplotlib while it runs, and each chart is sent as soon as its data is ready (the curves before
the flows). Each reads its pickled calls on stdin and writes the pickled PNGs on stdout. Plain
child processes, not multiprocessing's spawn, which would import the caller's main module again
(a script without a main guard would run twice). They import the report's model, never PySpark
(report_model.py).
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import mirrorlag
from mirrorlag.rollup.report import Charts
from mirrorlag.rollup.report_model import ReportData, Series

Call = tuple[str, tuple[Any, ...]]  # (a function of charts.py, its arguments)


class _Process:
    """A child that draws each call as it arrives (pickled on its stdin, one after the other)
    and, at the end of its input, writes the pickled PNGs in the order of the calls."""

    def __init__(self) -> None:
        package_root = os.path.dirname(os.path.dirname(mirrorlag.__file__))
        path = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)
        self.proc = subprocess.Popen([sys.executable, "-m", "mirrorlag.rollup.drawer"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     env={**os.environ, "PYTHONPATH": path})
        self.names: list[str] = []  # of the calls sent
        self.failed = False
        self._lock = threading.Lock()  # calls may come from several threads

    def send(self, call: Call) -> None:
        with self._lock:
            try:
                assert self.proc.stdin is not None
                pickle.dump(call, self.proc.stdin)
                self.proc.stdin.flush()
                self.names.append(call[0])
            except (OSError, ValueError):
                self.failed = True

    def results(self) -> dict[str, bytes] | None:
        with self._lock:
            if self.failed:
                return None
            try:
                out, _ = self.proc.communicate(timeout=300)
                pngs = pickle.loads(out) if self.proc.returncode == 0 else None
            except (OSError, ValueError, EOFError, pickle.UnpicklingError, subprocess.TimeoutExpired):
                return None
            return dict(zip(self.names, pngs)) if isinstance(pngs, list) and len(pngs) == len(self.names) else None

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


class Drawer:
    """One day's charts, each sent as soon as its data is there: the worst partitions' curves
    once they are known, then the flows (the quickest chart) to the same process; the heat map
    (slow: a label per cell) to the other. `charts` gives None when a process failed: the
    caller draws in-process (report.render does), so a failure here never loses the report."""

    def __init__(self) -> None:
        self._curves, self._heat = _Process(), _Process()

    def send_series(self, series: list[Series]) -> None:
        if series:
            self._curves.send(("series_chart", (series,)))

    def send_rest(self, d: ReportData) -> None:
        """The flows and the heat map (its labels name flows only when there are several)."""
        self._curves.send(("flows_chart", (d.flows,)))
        if d.heat_labels:
            self._heat.send(("heatmap_chart", (d.heat_labels, d.heat_share)))

    def charts(self) -> Charts | None:
        with ThreadPoolExecutor(2) as pool:
            curves, heat = pool.map(_Process.results, (self._curves, self._heat))
        if curves is None or heat is None or "flows_chart" not in curves:
            return None
        return Charts(curves["flows_chart"], curves.get("series_chart"), heat.get("heatmap_chart"))

    def close(self) -> None:
        for p in (self._curves, self._heat):
            p.close()


def main() -> None:
    from mirrorlag.rollup import charts  # matplotlib, while the caller waits for the data

    pngs = []
    while True:
        try:
            name, args = pickle.load(sys.stdin.buffer)
        except EOFError:
            break
        pngs.append(getattr(charts, name)(*args))
    sys.stdout.buffer.write(pickle.dumps(pngs))


if __name__ == "__main__":
    main()
