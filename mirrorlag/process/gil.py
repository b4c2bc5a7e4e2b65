"""Long C-level loops cut into pieces, so that other threads get the GIL between them.

CPython hands the GIL to a waiting thread only between bytecodes, so one call such as
`list(map(f, rows))`, `Counter(pairs)` or `d.update(zip(keys, values))` over every partition holds
it from start to end, and a scrape that arrives meanwhile waits that long (bench_poll --holds-ms
finds such holds). Cut into pieces of `STEP` items each hold stays short, for about the same
total time.
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
