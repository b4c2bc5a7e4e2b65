"""Per-record cost of the callback feed. Run by hand:

    .venv/bin/python -m tests.bench.bench_callback --calls 1000000 --partitions 10000 --runs 7

Side by side in one process: ReplicationTracker.replicated(topic, partition, offset, nbytes) versus a
bare `d[(topic, partition)] = offset` loop over the same inputs, and the leaner
`stores[topic](partition, offset)` with each topic's `tracker.store_for(topic)` (sizes then go per
batch through `tracker.sized`).
Median of --runs; target ratio <= 4.
"""

from __future__ import annotations

import argparse
import statistics
import time

from mirrorlag import ReplicationTracker


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    topics = [f"topic-{i}" for i in range(args.partitions // 100)]
    inputs = [(topics[i % len(topics)], (i // len(topics)) % 100, i) for i in range(args.calls)]

    bare_times, tracker_times, store_times = [], [], []
    for _ in range(args.runs):
        bare: dict[tuple[str, int], int] = {}
        t0 = time.perf_counter()
        for topic, partition, offset in inputs:
            bare[(topic, partition)] = offset
        bare_times.append(time.perf_counter() - t0)

        tracker = ReplicationTracker("A", "B")
        replicated = tracker.replicated
        t0 = time.perf_counter()
        for topic, partition, offset in inputs:
            replicated(topic, partition, offset, 100)
        tracker_times.append(time.perf_counter() - t0)
        assert tracker.offsets() == bare

        tracker = ReplicationTracker("A", "B")
        stores = {topic: tracker.store_for(topic) for topic in topics}  # as a replicator keeps them
        t0 = time.perf_counter()
        for topic, partition, offset in inputs:
            stores[topic](partition, offset)
        store_times.append(time.perf_counter() - t0)
        assert tracker.offsets() == bare

    bare_ns = statistics.median(bare_times) / args.calls * 1e9
    tracker_ns = statistics.median(tracker_times) / args.calls * 1e9
    store_ns = statistics.median(store_times) / args.calls * 1e9
    print(f"calls={args.calls} partitions={args.partitions} bare_dict_ns={bare_ns:.0f} "
          f"tracker_ns={tracker_ns:.0f} ratio={tracker_ns / bare_ns:.2f} "
          f"store_ns={store_ns:.0f} store_ratio={store_ns / bare_ns:.2f}")


if __name__ == "__main__":
    main()
