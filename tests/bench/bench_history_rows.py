"""Resident memory a lag-history row costs while it waits in memory (the open segment, and closed
segments a failing disk has not taken yet), for sizing the deployments. Run by hand, never in the
suite:

    .venv/bin/python -m tests.bench.bench_history_rows --partitions 10000 --snapshots 50

With `mirrorlag run`'s process settings, it takes a snapshot of bench_memory's stand-in estate and
encodes it `--snapshots` times into history record batches (what SegmentWriter holds per poll),
keeping them all, then prints the RSS growth and Arrow's buffer sizes a row. The history's memory is
then at most `mirrorlag.history.buffer.max.rows` rows, and in steady operation the open segment:
min(partitions x segment.ms / refresh interval, segment.max.rows) rows, plus the closed one while
it is written.
"""

from __future__ import annotations

import argparse
import gc

from mirrorlag.cli import tune_process
from mirrorlag.history.schema import encode
from tests.bench.bench_memory import StandIn, _status_kib


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--snapshots", type=int, default=50)
    args = parser.parse_args()
    tune_process()
    bench = StandIn(args.partitions, None, "target-progress")
    snapshot = None
    for n in range(1, 4):
        snapshot = bench.poll(n, publish=False)
    columns = snapshot.columns
    held = [encode(0, columns)]  # the first encode's one-off costs (Arrow's kernels) before the base
    gc.collect()
    base = _status_kib()["VmRSS"]
    for i in range(1, args.snapshots + 1):
        held.append(encode(i * 15_000, columns))
    gc.collect()
    grown = _status_kib()["VmRSS"] - base
    rows = args.partitions * args.snapshots
    arrow = sum(batch.nbytes for batch in held[1:])
    bench.close()
    print(f"rows={rows} rss_bytes_per_row={grown * 1024 / rows:.1f} arrow_bytes_per_row={arrow / rows:.1f}")


if __name__ == "__main__":
    main()
