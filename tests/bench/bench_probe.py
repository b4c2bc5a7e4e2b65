"""The source probe's reach at start (issue 30): run by hand, never in the suite.

    .venv/bin/python -m tests.bench.bench_probe --partitions 100000 --compare 98543c6
    .venv/bin/python -m tests.bench.bench_probe --partitions 10000 --broker apache

One broker (tansu, or with `--broker apache` Apache Kafka's KRaft broker) holds `--partitions` partitions (topics of 100), two records each. A mirror that
copied record 0 of every partition and then stopped (LRO 0, LEO 2) is what a sidecar started
during an outage sees: every partition is behind, and its time lag is only proved by the probe's
answer for record 1 (docs/design.md §3, "No history is no excuse"). Each code tree measured (this one, and
with `--compare REV` a `git worktree` of REV, in its own child process with PYTHONPATH on that
tree) builds the real SourceProbe for the cluster with its defaults and calls it as the poller
does, once a "poll" (back to back, no 15 s wait), with every partition's request, until every
partition has been answered or `--max-polls`. Reported per tree: polls until every partition is
proved, each poll's probe time and fetches, and the child's peak RSS growth over the probe.

Then the healthy estate: `Poller._probe` over the same keys with every partition caught up
(LRO 1), which asks the probe nothing: its cost per poll (median of --healthy-polls).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from tests.bench.bench_poll import PARTITIONS_PER_TOPIC, bench_broker, prepare

PREFIX = "probe-"


def rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def child(bootstrap: str, partitions: int, max_polls: int, healthy_polls: int) -> dict:
    """Runs in the measured tree's process: the probe at start, then the healthy estate."""
    from mirrorlag.config.settings import ClusterSettings
    from mirrorlag.kafka.probe import SourceProbe
    from mirrorlag.model import LroTable, PartitionKey, LroReading
    from mirrorlag.poll.poller import Poller

    cluster = ClusterSettings("src", bootstrap, {"bootstrap.servers": bootstrap})
    topics = [f"{PREFIX}{i:04d}" for i in range(partitions // PARTITIONS_PER_TOPIC)]
    keys = [PartitionKey("src", "dst", t, p) for t in topics for p in range(PARTITIONS_PER_TOPIC)]
    requests = [(k, 1, 2) for k in keys]  # LRO 0, LEO 2: record 1 uncopied
    probe = SourceProbe.for_cluster(cluster)
    rss0 = rss_mib()
    answered: set = set()
    polls = []
    for _ in range(max_polls):
        before = probe.stats.probes_total
        started = time.perf_counter()
        found = probe.probe(requests)
        took = time.perf_counter() - started
        answered.update(k for k, v in found.items() if v is not None)
        polls.append({"s": round(took, 3), "fetched": probe.stats.probes_total - before, "proved": len(answered),
                      "outcomes": dict(probe.stats.outcomes)})
        if len(answered) == len(keys):
            break
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    probe.close()

    # The healthy estate: every partition caught up, as Poller._probe sees it.
    lros = LroTable.of({k: LroReading(1, "callback", 0.0, False) for k in keys})
    leos = {k: 2 for k in keys}
    poller = type("P", (), {})()
    poller._previous_poll = 1.0
    poller._probes = {}
    poller._isolation = {}
    poller._had_lro = (None, None)
    poller.settings = None
    times = []
    for _ in range(healthy_polls):
        started = time.perf_counter()
        Poller._probe(poller, leos, keys, lros)  # type: ignore[arg-type]
        times.append(time.perf_counter() - started)
    return {"polls_until_proved": len(polls) if len(answered) == len(keys) else None, "proved": len(answered),
            "partitions": len(keys), "polls": polls, "probe_s_total": round(sum(p["s"] for p in polls), 3),
            "rss_before_mib": round(rss0, 1), "peak_rss_mib": round(peak, 1),
            "healthy_probe_ms_median": round(statistics.median(times) * 1000, 2)}


def measure(tree: Path, bootstrap: str, args: argparse.Namespace) -> dict:
    """`child` in a process whose `mirrorlag` is the tree's (this file loaded by its path)."""
    code = ("import importlib.util, json, sys;"
            f"spec = importlib.util.spec_from_file_location('bench_probe_child', {str(Path(__file__).resolve())!r});"
            "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m);"
            f"print(json.dumps(m.child({bootstrap!r}, {args.partitions}, {args.max_polls}, {args.healthy_polls})))")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(tree)}, cwd=tree, timeout=3600)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--compare", help="a git revision measured the same way, side by side")
    parser.add_argument("--max-polls", type=int, default=150)
    parser.add_argument("--healthy-polls", type=int, default=7)
    parser.add_argument("--broker", choices=["tansu", "apache"], default="tansu")
    args = parser.parse_args()

    here = Path(__file__).resolve().parents[2]
    with tempfile.TemporaryDirectory() as tmp, bench_broker(args.broker, "bench-probe", Path(tmp)) as broker:
        started = time.monotonic()
        prepare(broker.bootstrap_servers, args.partitions, PREFIX, records=2)
        print(f"prepared {args.partitions} partitions in {time.monotonic() - started:.0f} s", flush=True)
        trees = {"this tree": here}
        if args.compare:
            old = Path(tmp) / "old"
            subprocess.run(["git", "-C", str(here), "worktree", "add", "--detach", str(old), args.compare],
                           check=True, capture_output=True)
            trees[args.compare] = old
        try:
            for name, tree in trees.items():
                result = measure(tree, broker.bootstrap_servers, args)
                polls = result.pop("polls")
                print(name, json.dumps(result))
                print("  per poll (s, fetched, proved so far):",
                      [(p["s"], p["fetched"], p["proved"]) for p in polls[:5]], "..." if len(polls) > 5 else "",
                      "outcomes so far", polls[-1]["outcomes"],
                      f"median {np.median([p['s'] for p in polls]):.3f} s", flush=True)
        finally:
            if args.compare:
                subprocess.run(["git", "-C", str(here), "worktree", "remove", "--force", str(trees[args.compare])],
                               check=False, capture_output=True)


if __name__ == "__main__":
    main()
