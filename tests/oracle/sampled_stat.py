"""Windowed min/max/avg of one partition's record lag, with Kafka's SampledStat semantics.

Kafka keeps one SampledStat per statistic (Min, Max, Avg); each holds `metrics.num.samples`
samples of `metrics.sample.window.ms`. The three would record the same values at the same times,
so their samples always have identical start times and counts: one set of samples carrying
min, max and sum together gives the same three measurements for a third of the bookkeeping.

One of these exists per partition (100k of them), so a stat is one flat list of 5 slots per
sample, no per-sample objects. A list, not an `array('d')`: reading an array boxes a new float
every time, which made record+measure 2-3x slower here, while a list's slots mostly point at
shared objects (the poll's `now`, small cached ints for counts and lags, the two infinities),
so it costs about the same memory (~140 bytes for two samples plus any large-int lags).
"""

from __future__ import annotations

_INF = float("inf")
_NINF = float("-inf")

# Layout of one sample inside the flat list: [start, count, min, max, sum].
#   start: when the sample began (seconds)
#   count: events recorded into it (int)
#   min:   +inf while empty (Kafka Min's initial value is Double.MAX_VALUE)
#   max:   -inf while empty (Kafka Max's initial value is Double.NEGATIVE_INFINITY)
#   sum:   0 while empty (Kafka Avg's initial value); exact while values are ints
_WIDTH = 5

Measure = tuple[float | None, float | None, float | None]
_EMPTY: Measure = (None, None, None)

# min and max are mostly small int lags: their floats are taken from here, so 100k partitions'
# snapshot rows share them instead of holding two new floats each (48 bytes a partition).
_SMALL = 1024
_FLOATS = tuple(float(i) for i in range(_SMALL))


class WindowedLagStat:
    """min, max and avg over `num_samples` samples of `window_s` seconds each.

    `record(value, now)` and `measure(now)` follow Kafka's SampledStat.record/measure (the
    time-based window; there is no event-count window), except that "no sample has events" is
    `None` rather than NaN. Times are seconds and should not go backwards (as in Kafka, nothing
    breaks if they do; the windows just stretch).

    Samples are purged by their *start* time, as the classic SampledStat does. (Recent Kafka
    releases keep `samples + 1` samples and purge by the last event time instead; mirrorlag
    specifies the classic rule.)
    """

    __slots__ = ("_window_s", "_num_samples", "_current", "_d")

    def __init__(self, window_s: float, num_samples: int) -> None:
        if not window_s > 0:
            raise ValueError(f"window_s must be > 0, got {window_s!r}")
        if num_samples < 1:
            raise ValueError(f"num_samples must be >= 1, got {num_samples!r}")
        self._window_s = float(window_s)
        self._num_samples = int(num_samples)
        self._current = 0  # where the current sample starts in _d (a multiple of _WIDTH)
        # No samples yet: the shared empty tuple costs nothing. Samples are created lazily, like
        # Kafka's list that grows up to `samples` entries.
        self._d: list | tuple = ()

    @property
    def window_s(self) -> float:
        return self._window_s

    @property
    def num_samples(self) -> int:
        return self._num_samples

    def record(self, value: float, now: float) -> None:
        """Add one event: Kafka SampledStat.record (current sample, advance when complete)."""
        d = self._d
        if not d:  # Kafka's current(): the first sample starts at the first record
            self._d = [now, 1, value, value, value]
            return
        i = self._current
        if now - d[i] >= self._window_s:  # Sample.isComplete
            i += _WIDTH
            if i >= self._num_samples * _WIDTH:
                i = 0
            self._current = i
            if i >= len(d):
                # Concatenation allocates exactly; append/extend would over-allocate the list.
                self._d = d + [now, 1, value, value, value]
                return
            # Recycle the oldest sample, then record into it below.
            d[i] = now
            d[i + 1] = 0
            d[i + 2] = _INF
            d[i + 3] = _NINF
            d[i + 4] = 0
        d[i + 1] += 1
        if value < d[i + 2]:
            d[i + 2] = value
        if value > d[i + 3]:
            d[i + 3] = value
        d[i + 4] += value

    def measure(self, now: float) -> Measure:
        """(min, max, avg) over the live samples, or (None, None, None) when none has events.

        Purges first, as Kafka does: a sample that started `num_samples * window_s` or more
        before `now` is reset to empty with start=now.
        """
        d = self._d
        if not d:
            return _EMPTY
        expire = self._num_samples * self._window_s
        count = 0
        total = 0
        mn = _INF
        mx = _NINF
        for i in range(0, len(d), _WIDTH):
            if now - d[i] >= expire:  # purgeObsoleteSamples
                d[i] = now
                d[i + 1] = 0
                d[i + 2] = _INF
                d[i + 3] = _NINF
                d[i + 4] = 0
                continue
            c = d[i + 1]
            if c:
                count += c
                total += d[i + 4]
                v = d[i + 2]
                if v < mn:
                    mn = v
                v = d[i + 3]
                if v > mx:
                    mx = v
        if not count:
            return _EMPTY
        return (float(mn), float(mx), total / count)

    def record_and_measure(self, value: float, now: float) -> Measure:
        """`record(value, now)` then `measure(now)`, fused into one body.

        The engine calls this once per partition per poll, so it is written for bytecode count:
        the sample just recorded into is read from locals (it started less than one window ago,
        so the purge never takes it), and with two samples (Kafka's default) the other one is
        read without a loop, which halves the cost. It must stay equivalent to the pair (a
        property test checks that, against a port of Kafka's SampledStat as well).
        """
        d = self._d
        if not d:
            self._d = [now, 1, value, value, value]
            v = _FLOATS[value] if value.__class__ is int and 0 <= value < _SMALL else float(value)
            return (v, v, v)
        i = self._current
        if now - d[i] >= self._window_s:
            i += _WIDTH
            if i >= self._num_samples * _WIDTH:
                i = 0
            self._current = i
            if i >= len(d):
                d = self._d = d + [now, 1, value, value, value]
            else:
                d[i] = now
                d[i + 1] = 1
                d[i + 2] = value
                d[i + 3] = value
                d[i + 4] = value
            count = 1
            mn = mx = total = value
        else:
            count = d[i + 1] + 1
            d[i + 1] = count
            mn = d[i + 2]
            if value < mn:
                mn = d[i + 2] = value
            mx = d[i + 3]
            if value > mx:
                mx = d[i + 3] = value
            total = d[i + 4] + value
            d[i + 4] = total
        expire = self._num_samples * self._window_s
        n = len(d)
        if n == 2 * _WIDTH:
            j = _WIDTH - i  # the other sample
            if now - d[j] >= expire:  # purgeObsoleteSamples
                d[j] = now
                d[j + 1] = 0
                d[j + 2] = _INF
                d[j + 3] = _NINF
                d[j + 4] = 0
            else:
                c = d[j + 1]
                if c:
                    count += c
                    # The sum in index order, as measure() adds it (float sums are not associative).
                    total = d[4] + d[9]
                    v = d[j + 2]
                    if v < mn:
                        mn = v
                    v = d[j + 3]
                    if v > mx:
                        mx = v
        elif n > _WIDTH:
            # More than two samples (metrics.num.samples > 2, not the default): measure()'s loop.
            return self.measure(now)
        return (
            _FLOATS[mn] if mn.__class__ is int and 0 <= mn < _SMALL else float(mn),
            _FLOATS[mx] if mx.__class__ is int and 0 <= mx < _SMALL else float(mx),
            total / count,
        )

    def __repr__(self) -> str:
        d = self._d
        samples = [tuple(d[i : i + _WIDTH]) for i in range(0, len(d), _WIDTH)]
        return (
            f"WindowedLagStat(window_s={self._window_s}, num_samples={self._num_samples}, "
            f"current={self._current // _WIDTH}, samples[start, count, min, max, sum]={samples})"
        )
