"""When the cyclic garbage collector walks the sidecar's long-lived state.

A poll at 100k partitions leaves ~1M tracked objects alive (engine slots, snapshot rows, label
strings) and allocates hundreds of thousands more, so CPython's full collections, each walking all
of them while holding the GIL, came every poll or two and took 0.5-1 s: the longest pause a scrape
waited behind (tests/bench/RESULTS.md). Almost all of that state is freed by reference counting;
the collector only ever finds the odd cycle (an exception's traceback, a logging record).

So after each poll the young generations are collected (cheap: only what the poll made) and
everything still alive is frozen out of the collector's sight (`gc.freeze`); reference counting
still frees frozen objects. A cycle that died after reaching the old generation would never be
found while frozen, so once per `full_every_s` the state is unfrozen and collected in full: one
long pause an hour instead of one per poll, and cyclic garbage is bounded by an hour's worth.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass

FULL_EVERY_S = 3600.0


@dataclass
class GcPacing:
    full_every_s: float = FULL_EVERY_S
    last_full_at: float | None = None  # monotonic seconds; None: not yet (the first call collects)
    full_collections: int = 0

    def due(self, now: float) -> bool:
        return self.last_full_at is None or now - self.last_full_at >= self.full_every_s

    def after_poll(self, now: float) -> None:
        """Call on the poll thread after a poll was published, with a monotonic `now`."""
        if self.due(now):
            gc.unfreeze()
            gc.collect()
            self.last_full_at = now
            self.full_collections += 1
        else:
            gc.collect(1)  # the poll's own cyclic garbage, before it would be frozen with the rest
        gc.freeze()
