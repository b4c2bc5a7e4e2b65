"""A real Prometheus scraping a 100k-partition sidecar (issue 25). Run by hand, never in the suite:

    .venv/bin/python -m tests.bench.bench_prometheus --out /tmp/bench_prometheus.json
    .venv/bin/python -m tests.bench.bench_prometheus --partitions 2000 --minutes 1 --out /tmp/smoke.json   # smoke

Each run (estate x detail, one at a time) starts two processes:
  - the sidecar, in a child of this one: a real Sidecar over tests.bench.bench_memory's stand-in
    source (no broker) and an in-process ReplicationTracker, with `mirrorlag run`'s process
    settings (tune_process, run_pacing). It polls WARMUP_POLLS times on the simulated clock (so
    the windows, rates and freshness tables are full and every partition has reached its state),
    checks the states from its snapshot and exits non-zero if the estate does not read as
    intended, then starts its real ExpositionServer (as Sidecar.start does) and polls every
    POLL_S of wall time, the simulated clock advancing POLL_S per poll: each poll renders a new
    /metrics, as in production. It checks the states again at every poll;
  - /usr/bin/prometheus with its own temporary TSDB, scraping the sidecar every 15 s (timeout
    10 s, every limit 0 = none: body_size_limit, sample_limit, label limits), for --minutes.
Then it reads Prometheus's API and its own /metrics: head series, RSS (VmRSS/VmHWM from /proc and
process_resident_memory_bytes), every scrape's duration, `up` and samples as raw samples over
the run, the scrape failure counters and the target's last error; and the sidecar's /metrics
bytes (Prometheus text and OpenMetrics, which Prometheus asks for; text and gzip), poll time
(Sidecar.poll: the poll and the publish) and RSS.

Estates (100 partitions a topic, as bench_memory):
  - healthy:  the mirror copies everything but the last poll's appends: every partition IN_SYNC;
  - lagging1: the same, but from poll LAG_FROM on partition 0 of every topic (1 %) copies half
    of what its source appends: its LRO moves every poll, its time lag grows past
    replication.lag.time.max.ms (30 s) within three polls and keeps growing: LAGGING (not
    STALLED, which needs an LRO unmoved for longer than 30 s or stale);
  - stalled:  from poll LAG_FROM on the mirror copies nothing while the source keeps appending:
    every LRO unmoved and stale, every partition STALLED.
The source's log starts do not move (retention far beyond the run), so no partition is AT_RISK:
bench_memory's stand-in moves them, which would make a stalled partition AT_RISK, not STALLED.
The source probe at LRO + 1 reads the simulation (StandInFetcher), not a broker.

Prometheus's scrape_timeout bounds the HTTP fetch only: scrape_duration_seconds also counts
parsing and appending the samples, so a scrape that creates 1.5 M series can take longer than the
timeout and still succeed (`up` 1). Results: tests/bench/RESULTS.md, "Issue 25: a real Prometheus
scraping 100k partitions".
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mirrorlag.kafka.probe import SourceProbe
from tests.bench.bench_memory import POLL_S, StandIn, StandInSource

PROMETHEUS = "/usr/bin/prometheus"
ESTATES = ("healthy", "lagging1", "stalled")
DETAILS = ("auto", "full")
LAG_FROM = 6  # the poll from which lagging partitions slow down and a stalled mirror stops
WARMUP_POLLS = 14  # simulated polls before serving: LAG_FROM + a few to settle, windows full
LAGGING_EVERY = 100  # every 100th partition (partition 0 of each topic) lags in `lagging1`
SCRAPE_INTERVAL_S = 15
SCRAPE_TIMEOUT_S = 10
OFFSET_BASE = 1 << 30  # StandInSource's offsets start there


def vm_kib(pid: int | str = "self") -> dict[str, int]:
    """VmRSS and VmHWM of a process, KiB."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            out[name] = int(value.split()[0])
    return out


# ---------------------------------------------------------------------------- the sidecar (child)

class FarRetentionSource(StandInSource):
    """StandInSource whose log starts never move: retention is far beyond the run, so a stalled
    partition reads STALLED, not AT_RISK (which outranks it)."""

    def start_offsets(self, partitions):
        return {tp: OFFSET_BASE for tp in partitions}


class StandInFetcher:
    """The source probe's reads (mirrorlag.kafka.probe.Fetcher) answered from the simulation: the
    first data record at or after a start offset is at that offset (no transaction markers),
    appended when the stand-in source wrote it (partition i appends its 3 + i % 5 records of poll
    k evenly over the POLL_S before it). Without it the poller would build a real consumer for
    the probe, and every poll of a stalled mirror would wait out the probe's 5 s timeout on a
    broker that does not exist."""

    def __init__(self, bench: EstateStandIn) -> None:
        self.bench = bench
        self.index = {key: i for i, key in enumerate(bench.keys)}

    def fetch(self, starts, timeout_s):
        out = {}
        for tp, start in starts.items():
            step = self.bench.appends[self.index[tp]]
            poll, nth = divmod(start - OFFSET_BASE, step)
            out[tp] = (start, self.bench.started_at + POLL_S * (poll + (nth + 1) / step))
        return out

    def close(self) -> None:
        pass


class EstateStandIn(StandIn):
    """StandIn with the metrics detail chosen (StandIn's config says full) and the mirror's progress
    following an estate. Built on StandIn's source, topics and tracker; the Sidecar is built
    again from StandIn's settings with `metrics_detail` replaced, and `mirrorlag run`'s pacing."""

    def __init__(self, partitions: int, estate: str, detail: str) -> None:
        from mirrorlag.cli import run_pacing
        from mirrorlag.sidecar.service import Sidecar

        super().__init__(partitions)  # the callback feed: a ReplicationTracker
        assert self.tracker is not None
        settings = dataclasses.replace(self.sidecar.settings, metrics_detail=detail)
        self.sidecar.server.httpd.server_close()  # StandIn's (full detail) sidecar is dropped unused
        self.sidecar = Sidecar(settings, trackers=[self.tracker], gc_pacing=run_pacing())
        self.poller = self.sidecar.poller
        self.source = FarRetentionSource("src", self.poller.sources["src"].flows, self.source.topics)
        self.poller.sources = {"src": self.source}
        self.poller.clock = lambda: self.now
        self.started_at = self.now  # poll n runs at started_at + n * POLL_S
        self.estate = estate
        self.keys = self.source.partitions()
        # Partition i appends 3 + i % 5 records per poll (StandInSource.end_offsets).
        self.appends = [3 + i % 5 for i in range(len(self.keys))]
        self.sizes = [200 + i % 50 for i in range(len(self.keys))]
        # The probe as Poller._probe would build it, over the stand-in fetcher (the poller makes
        # one per source alias when it first needs it; made here, it finds this one).
        self.poller._probes["src", "read_uncommitted"] = SourceProbe(None, "read_uncommitted", fetcher=StandInFetcher(self))
        # The poll alone, timed apart from the publish (the sidecar's own poll duration reads the
        # poller's clock, which is simulated here and stands still during a poll).
        self.poll_once_s = 0.0
        poll_once = self.poller.poll_once

        def timed_poll_once():
            started = time.perf_counter()
            try:
                return poll_once()
            finally:
                self.poll_once_s = time.perf_counter() - started

        self.poller.poll_once = timed_poll_once  # type: ignore[method-assign]

    def copied_through(self, i: int, n: int) -> int | None:
        """How many records of partition i the mirror has copied at poll n (None: no report)."""
        step = self.appends[i]
        if n < LAG_FROM or self.estate == "healthy" or (self.estate == "lagging1" and i % LAGGING_EVERY):
            return (n - 1) * step  # all but the last poll's appends
        if self.estate == "stalled":
            return None  # nothing copied since poll LAG_FROM - 1
        return (LAG_FROM - 2) * step + (n - LAG_FROM + 1) * (step // 2)  # half the appends, LRO moving

    def step(self, n: int) -> tuple[Any, float]:
        """Poll n (from 1) as `mirrorlag run` would: (snapshot, Sidecar.poll wall time)."""
        replicated = self.tracker.replicated  # type: ignore[union-attr]
        for i, (topic, partition) in enumerate(self.keys):
            copied = self.copied_through(i, n)
            if copied is not None:
                replicated(topic, partition, OFFSET_BASE + copied - 1, self.sizes[i])
        self.now += POLL_S
        started = time.perf_counter()
        snapshot = self.sidecar.poll()
        return snapshot, time.perf_counter() - started


def state_counts(snapshot) -> dict[str, int]:
    from mirrorlag.model import STATES

    counts = np.bincount(snapshot.columns.state, minlength=len(STATES))
    return {str(state): int(c) for state, c in zip(STATES, counts) if c}


def expected_states(estate: str, partitions: int) -> dict[str, int]:
    if estate == "healthy":
        return {"IN_SYNC": partitions}
    if estate == "lagging1":
        lagging = len(range(0, partitions, LAGGING_EVERY))
        return {"IN_SYNC": partitions - lagging, "LAGGING": lagging}
    return {"STALLED": partitions}


def emit(record: dict[str, Any]) -> None:
    print(json.dumps(record), flush=True)


def serve(partitions: int, estate: str, detail: str) -> int:
    """The child: warm up, check the estate, serve and poll every POLL_S until SIGTERM; one JSON
    line when serving (the port), one at the end (the polls' figures)."""
    from mirrorlag.cli import tune_process

    tune_process()
    bench = EstateStandIn(partitions, estate, detail)
    expected = expected_states(estate, partitions)
    n = 0
    for n in range(1, WARMUP_POLLS + 1):
        snapshot, _ = bench.step(n)
    states = state_counts(snapshot)
    if states != expected:
        print(f"estate {estate}: states {states} after {n} polls, expected {expected}", file=sys.stderr)
        return 3
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    server = bench.sidecar.server
    server.start()  # as Sidecar.start, which would also publish an empty exposition first
    emit({"port": server.port, "pid": os.getpid(), "states": states})
    polls: list[dict[str, float]] = []
    drifted: list[dict[str, Any]] = []
    next_at = time.monotonic() + POLL_S
    while not stop.wait(max(0.0, next_at - time.monotonic())):
        n += 1
        snapshot, took = bench.step(n)
        states = state_counts(snapshot)
        if states != expected:
            drifted.append({"poll": n, "states": states})
        polls.append({"poll_s": took, "poll_once_s": bench.poll_once_s,
                      "rss_kib": vm_kib()["VmRSS"]})
        next_at = max(next_at + POLL_S, time.monotonic())  # a poll longer than POLL_S: the next at once
    kib = vm_kib()
    current = server.current
    server.stop()
    emit({
        "served_polls": len(polls), "states": states, "drifted": drifted,
        "poll_s_median": statistics.median(p["poll_s"] for p in polls) if polls else None,
        "poll_s_max": max((p["poll_s"] for p in polls), default=None),
        "poll_once_s_median": statistics.median(p["poll_once_s"] for p in polls) if polls else None,
        "poll_once_s_max": max((p["poll_once_s"] for p in polls), default=None),
        "rss_mib_max": max((p["rss_kib"] for p in polls), default=kib["VmRSS"]) / 1024,
        "rss_mib_end": kib["VmRSS"] / 1024, "hwm_mib": kib["VmHWM"] / 1024,
        "metrics_text_bytes": current.metrics.size, "metrics_gzip_bytes": len(current.metrics.gzipped),
        "openmetrics_text_bytes": current.openmetrics.size,
        "openmetrics_gzip_bytes": len(current.openmetrics.gzipped),
        "withheld": bench.sidecar.renderer.partitions.withheld,
    })
    return 0


# ------------------------------------------------------------------ Prometheus and the measurement

@dataclass
class Result:
    estate: str
    detail: str
    partitions: int
    minutes: float
    states: dict[str, int]
    head_series: int = 0
    head_series_max: int = 0
    partition_series: int | None = None  # series with a `partition` label at the end (instant query)
    other_series: int | None = None  # the sidecar's series without one (aggregates, the sidecar's own)
    prom_rss_mib: float = 0.0  # /proc VmRSS at the end
    prom_rss_mib_max: float = 0.0  # the largest VmRSS seen (sampled every 15 s)
    prom_hwm_mib: float = 0.0  # /proc VmHWM
    prom_resident_mib: float = 0.0  # process_resident_memory_bytes at the end
    scrapes: int = 0  # `up` samples over the run
    scrapes_up: int = 0
    scrape_s_median: float | None = None
    scrape_s_max: float | None = None
    samples_scraped: int | None = None  # the last scrape's scrape_samples_scraped
    samples_scraped_max: int | None = None
    failure_counters: dict[str, float] = field(default_factory=dict)  # prometheus_target_scrapes_* > 0
    last_error: str = ""
    target_health: str = ""
    sidecar: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.scrapes > 0 and self.scrapes == self.scrapes_up and not self.failure_counters


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url: str, timeout: float = 120.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.read()


def own_metrics(base: str) -> dict[str, float]:
    """Prometheus's /metrics: unlabelled samples by name, labelled ones by their full line key."""
    out = {}
    for line in http_get(f"{base}/metrics").decode().splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            out[key] = float(value)
    return out


def query(base: str, expr: str, at: float) -> list[dict[str, Any]]:
    url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": expr, "time": f"{at:.3f}"})
    reply = json.loads(http_get(url))
    if reply["status"] != "success":
        raise RuntimeError(f"{expr}: {reply}")
    return reply["data"]["result"]


def raw_samples(base: str, expr: str, seconds: int, at: float) -> list[float]:
    """Every sample of `expr` in the `seconds` before `at` (a range vector: no step interpolation)."""
    result = query(base, f"{expr}[{seconds}s]", at)
    return [float(v) for series in result for _, v in series["values"]]


def prometheus_config(port: int) -> str:
    # Every limit 0: none (Prometheus's defaults, said here so a full exposition is never refused
    # for its size: the finding is then how long Prometheus takes, not a limit).
    return f"""global:
  scrape_interval: {SCRAPE_INTERVAL_S}s
  scrape_timeout: {SCRAPE_TIMEOUT_S}s
scrape_configs:
  - job_name: mirrorlag
    body_size_limit: 0
    sample_limit: 0
    label_limit: 0
    label_name_length_limit: 0
    label_value_length_limit: 0
    static_configs:
      - targets: ["127.0.0.1:{port}"]
"""


def wait_ready(base: str, proc: subprocess.Popen, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"prometheus exited with {proc.returncode}")
        try:
            http_get(f"{base}/-/ready", timeout=2)
            return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError("prometheus not ready")


def stop_process(proc: subprocess.Popen, timeout_s: float = 60.0) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def measure(partitions: int, estate: str, detail: str, minutes: float, keep: bool) -> Result:
    tmp = Path(tempfile.mkdtemp(prefix=f"bench_prometheus_{estate}_{detail}_"))
    sidecar = subprocess.Popen(
        [sys.executable, "-m", "tests.bench.bench_prometheus", "--serve", estate, "--details", detail,
         "--partitions", str(partitions)], stdout=subprocess.PIPE, text=True)
    prometheus: subprocess.Popen | None = None
    try:
        line = sidecar.stdout.readline()  # type: ignore[union-attr]
        if not line:
            raise RuntimeError(f"sidecar {estate}/{detail} exited with {sidecar.wait()} before serving")
        ready = json.loads(line)
        result = Result(estate, detail, partitions, minutes, ready["states"])
        web = free_port()
        base = f"http://127.0.0.1:{web}"
        (tmp / "prometheus.yml").write_text(prometheus_config(ready["port"]))
        with open(tmp / "prometheus.log", "w") as log:
            prometheus = subprocess.Popen(
                [PROMETHEUS, f"--config.file={tmp / 'prometheus.yml'}", f"--storage.tsdb.path={tmp / 'data'}",
                 f"--web.listen-address=127.0.0.1:{web}", "--storage.tsdb.retention.time=1d"],
                stdout=log, stderr=subprocess.STDOUT)
        wait_ready(base, prometheus)
        started = time.time()
        print(f"  {estate}/{detail}: sidecar pid {ready['pid']} on :{ready['port']}, prometheus pid "
              f"{prometheus.pid} on :{web}, {tmp}", flush=True)
        # Sampled every 15 s: the peak head series and RSS (the end's may be past a peak).
        end = started + minutes * 60
        while (left := end - time.time()) > 0:
            time.sleep(min(15.0, left))
            if prometheus.poll() is not None or sidecar.poll() is not None:
                raise RuntimeError(f"prometheus {prometheus.returncode} / sidecar {sidecar.returncode} exited")
            own = own_metrics(base)
            result.head_series_max = max(result.head_series_max, int(own["prometheus_tsdb_head_series"]))
            result.prom_rss_mib_max = max(result.prom_rss_mib_max, vm_kib(prometheus.pid)["VmRSS"] / 1024)
        at = time.time()
        seconds = int(at - started) + 1
        job = '{job="mirrorlag"}'
        up = raw_samples(base, f"up{job}", seconds, at)
        durations = raw_samples(base, f"scrape_duration_seconds{job}", seconds, at)
        samples = raw_samples(base, f"scrape_samples_scraped{job}", seconds, at)
        result.scrapes, result.scrapes_up = len(up), sum(1 for v in up if v == 1.0)
        if durations:
            result.scrape_s_median, result.scrape_s_max = statistics.median(durations), max(durations)
        if samples:
            result.samples_scraped, result.samples_scraped_max = int(samples[-1]), int(max(samples))
        counted = query(base, 'count({job="mirrorlag", partition!=""})', at)
        result.partition_series = int(counted[0]["value"][1]) if counted else 0
        counted = query(base, 'count({job="mirrorlag", partition="", __name__=~"mirrorlag_.*"})', at)
        result.other_series = int(counted[0]["value"][1]) if counted else 0
        own = own_metrics(base)
        result.head_series = int(own["prometheus_tsdb_head_series"])
        result.head_series_max = max(result.head_series_max, result.head_series)
        result.prom_resident_mib = own["process_resident_memory_bytes"] / 2**20
        result.failure_counters = {k: v for k, v in own.items()
                                   if re.match(r"prometheus_target_scrapes_\w+_total", k) and v > 0}
        kib = vm_kib(prometheus.pid)
        result.prom_rss_mib, result.prom_hwm_mib = kib["VmRSS"] / 1024, kib["VmHWM"] / 1024
        result.prom_rss_mib_max = max(result.prom_rss_mib_max, result.prom_rss_mib)
        (target,) = json.loads(http_get(f"{base}/api/v1/targets"))["data"]["activeTargets"]
        result.last_error, result.target_health = target["lastError"], target["health"]
        stop_process(sidecar)
        out, _ = sidecar.communicate()
        result.sidecar = json.loads(out.strip().splitlines()[-1])
        if result.sidecar["drifted"]:
            raise RuntimeError(f"{estate}/{detail}: the estate drifted while served: {result.sidecar['drifted'][:3]}")
        return result
    finally:
        if prometheus is not None:
            stop_process(prometheus)
        stop_process(sidecar)
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)


def mb(n: float | None) -> str:
    return "-" if n is None else f"{n / 1e6:.2f}"


def seconds(s: float | None) -> str:
    return "-" if s is None else f"{s:.3f}"


def table(results: list[Result]) -> str:
    rows = [
        "| estate | detail | head series (max) | per-partition + other series | Prometheus RSS end / max, MiB "
        "| scrape median / max, s | samples per scrape | scrapes up / all | /metrics text, MB (Prom / OM) "
        "| gzip, MB (Prom / OM) | sidecar RSS max, MiB | sidecar poll median / max, s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        s = r.sidecar
        rows.append(
            f"| {r.estate} | {r.detail} | {r.head_series:,} ({r.head_series_max:,}) "
            f"| {r.partition_series or 0:,} + {r.other_series or 0:,} "
            f"| {r.prom_rss_mib:,.0f} / {r.prom_rss_mib_max:,.0f} "
            f"| {seconds(r.scrape_s_median)} / {seconds(r.scrape_s_max)} "
            f"| {r.samples_scraped or 0:,} | {r.scrapes_up} / {r.scrapes} "
            f"| {mb(s.get('metrics_text_bytes'))} / {mb(s.get('openmetrics_text_bytes'))} "
            f"| {mb(s.get('metrics_gzip_bytes'))} / {mb(s.get('openmetrics_gzip_bytes'))} "
            f"| {s.get('rss_mib_max', 0):,.0f} | {seconds(s.get('poll_s_median'))} / {seconds(s.get('poll_s_max'))} |")
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--minutes", type=float, default=10.0, help="Prometheus scrapes this long per run")
    parser.add_argument("--estates", nargs="+", choices=ESTATES, default=list(ESTATES))
    parser.add_argument("--details", nargs="+", choices=DETAILS, default=list(DETAILS))
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    parser.add_argument("--keep", action="store_true", help="keep each run's temporary directory (TSDB, log)")
    parser.add_argument("--serve", choices=ESTATES, help=argparse.SUPPRESS)  # the sidecar child
    args = parser.parse_args()
    if args.partitions % 100:
        parser.error("--partitions: a multiple of 100 (100 partitions a topic)")
    if args.serve:
        return serve(args.partitions, args.serve, args.details[0])
    version = subprocess.run([PROMETHEUS, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    print(f"{version}; {args.partitions:,} partitions, {args.minutes} min a run", flush=True)
    results: list[Result] = []
    for estate in args.estates:
        for detail in args.details:
            results.append(measure(args.partitions, estate, detail, args.minutes, args.keep))
            r = results[-1]
            print(f"  {estate}/{detail}: {r.head_series:,} head series, scrapes {r.scrapes_up}/{r.scrapes} up, "
                  f"scrape median {seconds(r.scrape_s_median)} s, max {seconds(r.scrape_s_max)} s"
                  + (f", failures {r.failure_counters}" if r.failure_counters else "")
                  + (f", last error: {r.last_error}" if r.last_error else ""), flush=True)
            if args.out:  # after every run: a long measurement keeps what finished
                args.out.write_text(json.dumps({"prometheus": version, "python": sys.version.split()[0],
                                                "results": [dataclasses.asdict(x) for x in results]}, indent=1))
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
