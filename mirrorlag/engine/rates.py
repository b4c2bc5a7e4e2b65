"""Rates (docs/design.md §3 beyond KIP-971): the source's append rate (LEO), the mirror's copy rate (LRO)
and from them the time to catch up.

Kafka's `Rate` over a SampledStat divides what its live samples counted by the time they span,
between (num_samples - 1) and num_samples windows. This does the same with two checkpoints per
counter instead of per-sample counts: `a`, the base, and `b`, taken when the previous one was
half a window W old (W = num_samples x sample window). The rate is (x - a.x) / (t - a.t), over a
span from W/2 up to W plus one poll gap. The LEO and the LRO share one checkpoint schedule (set by
the LEO's times), so both rates cover the same polls; a rewind restarts the copy rate alone.
"""

from __future__ import annotations

import numpy as np

from mirrorlag.engine.columns import PartitionColumns


def rates(c: PartitionColumns, r: np.ndarray, leo: np.ndarray, lro: np.ndarray, t: float, now: float,
          half_s: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Add rows `r`'s samples, the LEO at the snapshot time `t` and the LRO as read at `now`:
    (append rate, known, copy rate, known), each unknown until two samples span a positive time."""
    b_t = c.lb_t[r]
    new = np.isnan(b_t)
    rn = r[new]
    c.la_x[rn] = c.lb_x[rn] = leo[new]
    c.la_t[rn] = c.lb_t[rn] = t
    c.ca_x[rn] = c.cb_x[rn] = lro[new]
    c.ca_t[rn] = c.cb_t[rn] = now
    shift = ~new & ((t - b_t) >= half_s)  # b is half a window old: it becomes the base
    rs = r[shift]
    c.la_x[rs] = c.lb_x[rs]
    c.la_t[rs] = b_t[shift]
    c.lb_x[rs] = leo[shift]
    c.lb_t[rs] = t
    c.ca_x[rs] = c.cb_x[rs]
    c.ca_t[rs] = c.cb_t[rs]
    c.cb_x[rs] = lro[shift]
    c.cb_t[rs] = now
    span_a = t - c.la_t[r]
    span_c = now - c.ca_t[r]
    with np.errstate(divide="ignore", invalid="ignore"):
        append = (leo - c.la_x[r]) / span_a
        copy = (lro - c.ca_x[r]) / span_c
    return append, ~new & (span_a > 0.0), copy, ~new & (span_c > 0.0)


def restart_copy(c: PartitionColumns, r: np.ndarray, lro: np.ndarray, now: float) -> None:
    """The LRO stepped back: its history says nothing about the copy rate from here on."""
    c.ca_x[r] = c.cb_x[r] = lro
    c.ca_t[r] = c.cb_t[r] = now


def forget(c: PartitionColumns, r: np.ndarray) -> None:
    """A new log: both rates start again at the next poll."""
    c.lb_t[r] = np.nan


def catch_up_s(lag: np.ndarray, append: np.ndarray, append_known: np.ndarray, copy: np.ndarray,
               copy_known: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Seconds until the mirror catches up at the current rates: (seconds, known). 0 when caught
    up; unknown when it is not gaining or a rate is unknown."""
    caught = lag == 0
    with np.errstate(divide="ignore", invalid="ignore"):
        gaining = ~caught & append_known & copy_known & (copy > append)
        seconds = np.where(caught, 0.0, lag / (copy - append))
    return seconds, caught | gaining
