"""The lag engine's update alone, on a steady estate (no Kafka, no exporters).

    .venv/bin/python -m tests.bench.bench_engine --partitions 100000 --warmup 64 --runs 10

Most partitions copied within a poll, some a little behind (the freshness table's search), a few
stalled; log starts read every fourth poll; the LROs handed over as the LRO cache does (an
LroTable). Prints the median and min of `update` over the timed polls. To compare two commits,
run it with PYTHONPATH pointing at each checkout in turn, alternated.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time

import numpy as np

import mirrorlag.engine as engine_package
from mirrorlag.config.settings import EngineParams
from mirrorlag.model import LroReading, LroTable, PartitionKey, PollObservation


def estate(partitions: int) -> list[PartitionKey]:
    return [PartitionKey("A", "B", f"topic{i // 100}", i % 100) for i in range(partitions)]


def observation(keys: list[PartitionKey], poll: int, now: float) -> PollObservation:
    n = len(keys)
    rate = 1 + np.arange(n) % 7
    leo = 1_000 + poll * rate
    behind = np.where(np.arange(n) % 10 == 0, rate * 2, 0)  # one in ten two polls behind
    stalled = np.arange(n) % 97 == 0
    lro = np.where(stalled, 999, leo - 1 - behind)
    lros = {k: LroReading(o, "callback", now - 1.0, False) for k, o in zip(keys, lro.tolist())}
    starts = dict(zip(keys, (leo // 2).tolist())) if poll % 4 == 0 else {}
    return PollObservation(now - 0.5, now, dict(zip(keys, leo.tolist())), LroTable.of(lros), starts, {})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--warmup", type=int, default=64, help="polls before timing (fills the tables)")
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    # The production engine: ColumnarLagEngine before issue 22, LagEngine after.
    cls = getattr(engine_package, "ColumnarLagEngine", None) or engine_package.LagEngine
    params = EngineParams()
    eng = cls(lambda flow: params)
    keys = estate(args.partitions)
    observations = [observation(keys, p, 1_700_000_000.0 + 15.0 * p) for p in range(args.warmup + args.runs)]
    times = []
    for i, obs in enumerate(observations):
        gc.collect()
        start = time.perf_counter()
        eng.update(obs)
        if i >= args.warmup:
            times.append(time.perf_counter() - start)
    print(f"{cls.__module__}.{cls.__name__}: {args.partitions} partitions, update median "
          f"{statistics.median(times) * 1000:.0f} ms, min {min(times) * 1000:.0f} ms over {args.runs} polls")


if __name__ == "__main__":
    main()
