"""The upload byte-rate quota, measured as KIP-956 measures the tiered-storage copy quota.

Kafka's RLMQuotaManager records copied bytes in a `SimpleRate` over a `SampledStat` with
`remote.log.manager.copy.quota.window.num` samples of `...window.size.seconds`, and throttles by
`QuotaUtils.throttleTime`. This is that arithmetic, pure: every call takes `now` (seconds, any
monotonic scale), nothing here reads a clock or sleeps.

- SampledStat (current Kafka): up to `samples + 1` samples; the current one is complete
  `window` after it started and the next record starts a new one (recycling the oldest slot); a
  sample whose last event is `samples * window` or more before `now` is obsolete and reset.
- SimpleRate: total of the live samples / max(now - start of the oldest sample, window). The
  first window counts as full, so a cold start may send one window's worth at once (1 s x quota
  with the defaults) and is then held to the quota, rather than being measured over a near-zero
  elapsed time.
- Throttle: to bring a rate O over quota T measured over W back to T with no new bytes takes
  X = (O - T) / T * W = total / T - W. `delay(now, n)` answers the question the uploader asks
  before sending n bytes: how long until (total + n) / W <= T, exactly, including samples that go
  obsolete while it waits (each one lowers the total and moves the oldest start).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(slots=True)
class _Sample:
    start: float
    last_event: float
    value: float = 0.0


class CopyQuota:
    """Bytes per second over `window_num` samples of `window_s` seconds."""

    def __init__(self, bytes_per_second: float, window_num: int = 11, window_s: float = 1.0) -> None:
        if not bytes_per_second > 0:
            raise ValueError(f"bytes_per_second must be > 0, got {bytes_per_second!r}")
        if window_num < 1:
            raise ValueError(f"window_num must be >= 1, got {window_num!r}")
        if not window_s > 0:
            raise ValueError(f"window_s must be > 0, got {window_s!r}")
        self.bytes_per_second = float(bytes_per_second)
        self.window_num = int(window_num)
        self.window_s = float(window_s)
        self._samples: list[_Sample] = []
        self._current = 0

    # --- Kafka SampledStat / SimpleRate ------------------------------------------------------

    def record(self, nbytes: float, now: float) -> None:
        if not self._samples:
            self._samples.append(_Sample(now, now))
        sample = self._samples[self._current]
        if now - sample.start >= self.window_s:  # Sample.isComplete (no event-count window)
            self._current = (self._current + 1) % (self.window_num + 1)  # one extra sample
            if self._current >= len(self._samples):
                sample = _Sample(now, now)
                self._samples.append(sample)
            else:
                sample = self._samples[self._current]
                sample.start = sample.last_event = now
                sample.value = 0.0
        sample.value += nbytes
        sample.last_event = now

    def _purge(self, now: float) -> None:
        expire = self.window_num * self.window_s
        for s in self._samples:
            if now - s.last_event >= expire:
                s.start = s.last_event = now
                s.value = 0.0

    def window(self, now: float) -> float:
        """SimpleRate.windowSize: seconds the rate is measured over at `now`."""
        self._purge(now)
        oldest = min((s.start for s in self._samples), default=now)
        return max(now - oldest, self.window_s)

    def total(self, now: float) -> float:
        self._purge(now)
        return sum(s.value for s in self._samples)

    def rate(self, now: float) -> float:
        """Measured bytes per second at `now` (Rate.measure)."""
        return self.total(now) / self.window(now)

    # --- what the uploader asks ---------------------------------------------------------------

    @property
    def max_chunk(self) -> int:
        """The largest send that can ever fit: one window's worth (the smallest window measured)."""
        return max(1, int(self.bytes_per_second * self.window_s))

    def delay(self, now: float, nbytes: float) -> float:
        """Seconds from `now` until recording `nbytes` keeps the measured rate at or under the quota.

        Between obsolescence events the total is constant and the window only grows, so the rate
        only falls: solve (total + n) / max(t - oldest, window) = quota in each such interval,
        earliest first. `nbytes` must not exceed `max_chunk`.
        """
        if nbytes > self.max_chunk:
            raise ValueError(f"{nbytes} bytes never fit in a window of {self.max_chunk}")
        q, expire = self.bytes_per_second, self.window_num * self.window_s
        self._purge(now)
        # Empty samples count too: their start still bounds the window, as in Kafka's oldest().
        live = sorted(self._samples, key=lambda s: s.last_event)
        t = now
        while True:
            total = sum(s.value for s in live) + nbytes
            oldest = min((s.start for s in live), default=t)
            # The window needed for the rate to be at quota; reached at oldest + needed, or at once
            # if the minimum window already does it.
            needed = total / q
            at = t if needed <= self.window_s else max(t, oldest + needed)
            if not live or at < live[0].last_event + expire:
                return at - now
            # That sample goes obsolete first: look again from just after (a few ulps, so that
            # `now + delay` lands past the boundary however the caller's float rounds).
            boundary = live[0].last_event + expire
            t = boundary + 4 * math.ulp(boundary) + 1e-9
            live.pop(0)
