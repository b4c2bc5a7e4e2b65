"""Rates of rising counters sampled at polls: the source's append rate (LEO), the mirror's copy
rate (LRO) and the source's log-start advance rate, with two remembered points each.

Kafka's `Rate` over a SampledStat divides what its live samples counted by the time they span,
which is between (num_samples - 1) and num_samples sample windows. This does the same with two
checkpoints instead of per-sample counts: `a`, the base, and `b`, taken when the previous one was
half a window W old (W = num_samples x sample window). The rate is (x - a.x) / (t - a.t), over a
span from W/2 up to W plus one poll gap, "the oldest point within the window" without keeping
every point of it: 100k partitions each keep three of these, so they must be a few slots and a
handful of operations per poll.
"""

from __future__ import annotations


class WindowRate:
    """Per-second rate of a counter over about the last `window_s` seconds (see the module doc)."""

    __slots__ = ("a_x", "a_t", "b_x", "b_t")

    def __init__(self, x: int, t: float) -> None:
        self.a_x = self.b_x = x
        self.a_t = self.b_t = t

    def reset(self, x: int, t: float) -> None:
        """Forget the history (the counter restarted: a rewind, a new log)."""
        self.a_x = self.b_x = x
        self.a_t = self.b_t = t

    def update(self, x: int, t: float, window_s: float) -> float | None:
        """Add the sample (x, t); the rate since the base checkpoint, None until two samples span
        a positive time."""
        if t - self.b_t >= window_s * 0.5:
            # b is half a window old: it becomes the base, and this sample the next checkpoint.
            self.a_x = self.b_x
            self.a_t = self.b_t
            self.b_x = x
            self.b_t = t
        span = t - self.a_t
        return (x - self.a_x) / span if span > 0.0 else None

    def __repr__(self) -> str:
        return f"WindowRate(a=({self.a_x}, {self.a_t}), b=({self.b_x}, {self.b_t}))"


class RatePair:
    """The source's append rate and the mirror's copy rate of one partition: two WindowRates
    sampled at the same polls, the LEO at the LEO snapshot time and the LRO when it was read.

    They share one checkpoint schedule (set by the LEO's times), so both rates cover the same
    polls and the engine tests "is it time to move the base?" once per partition. A rewind
    restarts the copy rate alone: the mirror's progress restarts from an older offset, the
    source's does not. The engine inlines `update` (a property test checks they agree).
    """

    __slots__ = ("la_x", "la_t", "lb_x", "lb_t", "ca_x", "ca_t", "cb_x", "cb_t")

    def __init__(self, leo: int, t: float, lro: int, now: float) -> None:
        self.la_x = self.lb_x = leo
        self.la_t = self.lb_t = t
        self.ca_x = self.cb_x = lro
        self.ca_t = self.cb_t = now

    def restart_copy(self, lro: int, now: float) -> None:
        """The LRO stepped back: its history says nothing about the copy rate from here on."""
        self.ca_x = self.cb_x = lro
        self.ca_t = self.cb_t = now

    def update(
        self, leo: int, t: float, lro: int, now: float, window_s: float
    ) -> tuple[float | None, float | None]:
        """Add one poll's samples; (append rate, copy rate), each None until its two samples
        span a positive time."""
        if t - self.lb_t >= window_s * 0.5:
            self.la_x = self.lb_x
            self.la_t = self.lb_t
            self.lb_x = leo
            self.lb_t = t
            self.ca_x = self.cb_x
            self.ca_t = self.cb_t
            self.cb_x = lro
            self.cb_t = now
        span = t - self.la_t
        append_rate = (leo - self.la_x) / span if span > 0.0 else None
        span = now - self.ca_t
        copy_rate = (lro - self.ca_x) / span if span > 0.0 else None
        return (append_rate, copy_rate)


def catch_up_s(record_lag: int, copy_rate: float | None, append_rate: float | None) -> float | None:
    """Seconds until the mirror catches up at the current rates: 0 when caught up, None when it is
    not gaining (or a rate is unknown)."""
    if record_lag == 0:
        return 0.0
    if copy_rate is None or append_rate is None or not copy_rate > append_rate:
        return None
    return record_lag / (copy_rate - append_rate)
