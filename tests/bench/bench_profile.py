"""Where a poll's own time goes at scale, without a broker. Run by hand, never in the suite:

    .venv/bin/python -m tests.bench.bench_profile --partitions 100000 --runs 5
    .venv/bin/python -m tests.bench.bench_profile --partitions 100000 --pyinstrument
    .venv/bin/python -m tests.bench.bench_profile --partitions 100000 --render-only --runs 7

With `mirrorlag run`'s process settings (`tune_process`, `run_pacing` around each run), a real
Sidecar over bench_memory's stand-in source (all features on, tables filled by --warmup
polls), then per run, timed separately: `Poller.poll_once` (feeds, LRO cache, engine, snapshot:
everything a poll adds to the ListOffsets round trips), the /metrics render, the /status document,
and the publish of /metrics (render and gzip a family at a time, as the sidecar does). Medians of
--runs. With --pyinstrument, one poll and publish run under pyinstrument (pip install
pyinstrument; not a dependency) and its tree is printed. With --render-only, only the
per-partition block of /metrics (`PartitionBlock.families_encoded`, its chunks consumed one by one) is timed,
over one snapshot.
"""

from __future__ import annotations

import argparse
import statistics
import time

from mirrorlag.cli import run_pacing, tune_process
from tests.bench.bench_memory import StandIn
from tests.exposition import block_pieces, metrics_text, status_document


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--warmup", type=int, default=8)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--pyinstrument", action="store_true")
    parser.add_argument("--render-only", action="store_true")
    args = parser.parse_args()
    tune_process()  # as `mirrorlag run`
    bench = StandIn(args.partitions)
    pacing = run_pacing()  # as `mirrorlag run`: each run below is one poll and its publish
    n = 0
    for n in range(1, args.warmup + 1):
        bench.poll(n, publish=False)
    if args.pyinstrument:
        from pyinstrument import Profiler

        profiler = Profiler(interval=0.001)
        profiler.start()
        bench.poll(n + 1, publish=True)
        profiler.stop()
        print(profiler.output_text(unicode=False, color=False, show_all=False))
        return
    sidecar, stats = bench.sidecar, bench.poller.stats
    if args.render_only:
        cols = bench.poll(n + 1, publish=False).columns
        block_times = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            for _chunk in block_pieces(sidecar.renderer.partitions, cols):
                pass
            block_times.append(time.perf_counter() - t0)
        bench.close()
        print(f"partitions={args.partitions} runs={args.runs} block_ms={statistics.median(block_times) * 1000:.0f}")
        return
    times: dict[str, list[float]] = {"poll": [], "render": [], "status": [], "publish": []}
    for run in range(args.runs):
        with pacing.around_poll():
            t0 = time.perf_counter()
            snapshot = bench.poll(n + 1 + run, publish=False)
            t1 = time.perf_counter()
            metrics_text(sidecar.renderer, snapshot, stats)
            t2 = time.perf_counter()
            status_document(snapshot, True, {})
            t3 = time.perf_counter()
            sidecar._publish(snapshot)
            t4 = time.perf_counter()
        for name, dt in zip(times, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
            times[name].append(dt)
    bench.close()
    print(f"partitions={args.partitions} runs={args.runs} "
          + " ".join(f"{name}_ms={statistics.median(v) * 1000:.0f}" for name, v in times.items()))


if __name__ == "__main__":
    main()
