"""Long C-level loops cut into pieces, so that other threads get the GIL between them.

CPython hands the GIL to a waiting thread only between bytecodes, so one call such as
`list(map(f, rows))`, `Counter(pairs)` or `d.update(zip(keys, values))` over 100k partitions holds
it from start to end: 20-45 ms each on the poll thread, and a scrape that arrives meanwhile waits
that long (tests/bench/RESULTS.md, bench_poll --holds-ms). Cut into pieces of `STEP` items the
longest such hold is a few milliseconds, for about the same total time.
"""

from __future__ import annotations

from typing import Iterator, Sequence, TypeVar

STEP = 8192

T = TypeVar("T")


def pieces(items: Sequence[T], step: int = STEP) -> Iterator[Sequence[T]]:
    """`items` in consecutive slices of at most `step` (one slice, itself, when it is short)."""
    if len(items) <= step:
        yield items
        return
    for start in range(0, len(items), step):
        yield items[start:start + step]
