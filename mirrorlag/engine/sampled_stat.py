"""Windowed min/max/avg of one partition's record lag, with Kafka's SampledStat semantics.

Kafka keeps one SampledStat per statistic (Min, Max, Avg); each holds `metrics.num.samples`
samples of `metrics.sample.window.ms`. The three would record the same values at the same times,
so their samples always have identical start times and counts: one set of samples carrying
min, max and sum together gives the same three measurements for a third of the bookkeeping.

One of these exists per partition (100k of them), so a stat is a single flat `array('d')` of
5 doubles per sample (no per-sample objects, no boxed floats kept alive): about 150 bytes for two
samples, against ~1 KB for three Java-style stats of Sample objects.
"""

from __future__ import annotations

from array import array

_INF = float("inf")
_NINF = float("-inf")

# Layout of one sample inside the flat array.
_START = 0  # when the sample began (seconds)
_COUNT = 1  # events recorded into it
_MIN = 2  # +inf while empty (Kafka Min's initial value is Double.MAX_VALUE)
_MAX = 3  # -inf while empty (Kafka Max's initial value is Double.NEGATIVE_INFINITY)
_SUM = 4  # 0 while empty (Kafka Avg's initial value)
_WIDTH = 5

Measure = tuple[float | None, float | None, float | None]
_EMPTY: Measure = (None, None, None)


class WindowedLagStat:
    """min, max and avg over `num_samples` samples of `window_s` seconds each.

    `record(value, now)` and `measure(now)` follow Kafka's SampledStat.record/measure exactly,
    except that "no sample has events" is `None` rather than NaN. Times are seconds; they
    should not go backwards (as in Kafka, nothing breaks if they do, the windows just stretch).
    """

    __slots__ = ("_window_s", "_num_samples", "_current", "_d")

    def __init__(self, window_s: float, num_samples: int) -> None:
        if not window_s > 0:
            raise ValueError(f"window_s must be > 0, got {window_s!r}")
        if num_samples < 1:
            raise ValueError(f"num_samples must be >= 1, got {num_samples!r}")
        self._window_s = float(window_s)
        self._num_samples = int(num_samples)
        self._current = 0
        # Samples are created lazily, like Kafka's list that grows up to `samples` entries.
        self._d = array("d")

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
            d.extend((now, 0.0, _INF, _NINF, 0.0))
        i = self._current * _WIDTH
        if now - d[i] >= self._window_s:  # Sample.isComplete (time-based; no event window)
            cur = (self._current + 1) % self._num_samples
            self._current = cur
            i = cur * _WIDTH
            if i >= len(d):
                d.extend((now, 0.0, _INF, _NINF, 0.0))
            else:  # recycle the oldest sample
                d[i] = now
                d[i + 1] = 0.0
                d[i + 2] = _INF
                d[i + 3] = _NINF
                d[i + 4] = 0.0
        d[i + 1] += 1.0
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
        count = 0.0
        total = 0.0
        mn = _INF
        mx = _NINF
        for i in range(0, len(d), _WIDTH):
            if now - d[i] >= expire:
                d[i] = now
                d[i + 1] = 0.0
                d[i + 2] = _INF
                d[i + 3] = _NINF
                d[i + 4] = 0.0
                continue
            c = d[i + 1]
            if c > 0.0:
                count += c
                total += d[i + 4]
                v = d[i + 2]
                if v < mn:
                    mn = v
                v = d[i + 3]
                if v > mx:
                    mx = v
        if count == 0.0:
            return _EMPTY
        return (mn, mx, total / count)

    def record_and_measure(self, value: float, now: float) -> Measure:
        """`record(value, now)` then `measure(now)`, fused: the engine calls this once per
        partition per poll, so it is one Python call instead of three."""
        d = self._d
        if not d:
            d.extend((now, 1.0, value, value, value))
            return (float(value), float(value), float(value))
        i = self._current * _WIDTH
        if now - d[i] >= self._window_s:
            cur = (self._current + 1) % self._num_samples
            self._current = cur
            i = cur * _WIDTH
            if i >= len(d):
                d.extend((now, 0.0, _INF, _NINF, 0.0))
            else:
                d[i] = now
                d[i + 1] = 0.0
                d[i + 2] = _INF
                d[i + 3] = _NINF
                d[i + 4] = 0.0
        d[i + 1] += 1.0
        if value < d[i + 2]:
            d[i + 2] = value
        if value > d[i + 3]:
            d[i + 3] = value
        d[i + 4] += value
        # measure(now): the sample just written is live (its start is at most one window
        # back), so the combination below always has at least one event.
        expire = self._num_samples * self._window_s
        count = 0.0
        total = 0.0
        mn = _INF
        mx = _NINF
        for j in range(0, len(d), _WIDTH):
            if now - d[j] >= expire:
                d[j] = now
                d[j + 1] = 0.0
                d[j + 2] = _INF
                d[j + 3] = _NINF
                d[j + 4] = 0.0
                continue
            c = d[j + 1]
            if c > 0.0:
                count += c
                total += d[j + 4]
                v = d[j + 2]
                if v < mn:
                    mn = v
                v = d[j + 3]
                if v > mx:
                    mx = v
        return (mn, mx, total / count)

    def __repr__(self) -> str:
        samples = [
            tuple(self._d[i : i + _WIDTH]) for i in range(0, len(self._d), _WIDTH)
        ]
        return (
            f"WindowedLagStat(window_s={self._window_s}, num_samples={self._num_samples}, "
            f"current={self._current}, samples(start,count,min,max,sum)={samples})"
        )
