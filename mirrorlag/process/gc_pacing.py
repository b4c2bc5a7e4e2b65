"""When the cyclic garbage collector walks the sidecar's long-lived state.

A poll leaves several tracked objects per partition alive (engine slots, snapshot rows, label
strings) and allocates as many again. Left to itself, CPython's collector runs inside the poll:
many young collections and full ones, each holding the GIL while it walks (a young list with a
row per partition is walked whole each time), and a scrape waits behind every such hold. Almost
all of that state is freed by reference counting; a poll leaves no cyclic garbage, the collector
only ever finds the odd cycle (an exception's traceback, a logging record).

So the automatic collector is off while a poll runs, and when it ends everything alive is frozen
out of the collector's sight (`gc.freeze`: a list splice, no walk); reference counting still frees
frozen objects. Between polls the collector runs as usual for the other threads' objects. A
cycle that became frozen would never be found, so once per `full_every_s` the state is unfrozen
and collected in full: one long pause an hour instead of several per poll, and
cyclic garbage is bounded by an hour's worth. Then, optionally, the heap's free pages go back to
the system (mirrorlag.process.malloc).
"""

from __future__ import annotations

import gc
import logging
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator

FULL_EVERY_S = 3600.0

log = logging.getLogger("mirrorlag.gc_pacing")  # its name before the move (issue 42): operators' log filters


@dataclass
class GcPacing:
    full_every_s: float = FULL_EVERY_S
    last_full_at: float | None = None  # monotonic seconds; None: not yet (the first call collects)
    # Called after each freeze, to hand the poll's freed heap pages back to the system
    # (mirrorlag.process.malloc.heap_trimmer in `mirrorlag run`).
    release_memory: Callable[[], object] | None = None

    def due(self, now: float) -> bool:
        return self.last_full_at is None or now - self.last_full_at >= self.full_every_s

    @contextmanager
    def around_poll(self, clock: Callable[[], float] = time.monotonic) -> Iterator[None]:
        """Run a poll (on the poll thread) with the automatic collector off, then `after_poll`,
        even when the poll failed. The collector comes back on only after the freeze: the poll
        left all its objects counted as young, and the first allocation after re-enabling would
        otherwise walk them all."""
        enabled = gc.isenabled()
        gc.disable()
        try:
            yield
        finally:
            try:
                self.after_poll(clock())
            finally:
                if enabled:
                    gc.enable()

    def after_poll(self, now: float) -> None:
        """Freeze what lives after a poll; collect in full first when `full_every_s` has passed
        (and at the first call). `now` is monotonic seconds."""
        if self.due(now):
            gc.unfreeze()
            gc.collect()
            self.last_full_at = now
        gc.freeze()
        self.release()

    def release(self) -> None:
        """Hand the heap's free pages back, if this process can."""
        if self.release_memory is not None:
            try:
                self.release_memory()
            except Exception:
                # Memory handed back is a saving, not a duty: it must never replace the outcome of
                # what called it (a poll's `finally`, a /status render). Logged once, then not tried again.
                log.warning("releasing free heap memory failed; not trying again", exc_info=True)
                self.release_memory = None
