"""Each partition's day for the report's line charts: per 5 minutes, the largest record lag and
time lag and the worst state, computed in the day's one pass (partials.py) for every partition.

The report draws the worst partitions only, and which they are is known after the pass; with
their curves already summarised here, it needs no second scan of the day for them (a filtered
scan costs about as much as the day's bare scan).
A chart is ~600 px wide: 288 slots per day are about two pixels each, and the maxima keep every
spike a plot of all 5,760 samples would show.

A partition's slots travel as one binary value of SLOT records (numpy's packed structured
array): the map side reduces its rows to slots, the merge reduces the slots of all parts again
(a slot cut by a segment boundary is in two parts), both with `reduce`. The merge then gives each
slot the time its state holds until (`held`, HELD records): its samples count to the partition's
next sample, at most the cap past the last of them (partition_day.py), so at a poll of 5 minutes
or more the shading runs across the slots between two samples as the tables count them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mirrorlag.model import State
from mirrorlag.rollup.schema import AT_RISK, GONE, IN_SYNC, STALLED, STATE_CODES, UNRECOGNIZED

SLOT_MS = 300_000
SLOTS = 86_400_000 // SLOT_MS
NULL = np.iinfo(np.int64).min  # no value in the slot (every sample's lag was null)
SLOT = np.dtype([("record_lag", "<i8"), ("time_lag_ms", "<i8"), ("slot", "<i2"), ("rank", "u1")])
# A merged slot: with the end of the time its state holds, in ms since the start of the day.
HELD = np.dtype([*((name, SLOT.fields[name][0]) for name in SLOT.names), ("until_ms", "<i4")])
DAY_MS = SLOTS * SLOT_MS

# A slot shows its worst state: AT_RISK (records being lost) over STALLED over any other state out
# of sync (LAGGING, RESET, REWIND, UNKNOWN, unrecognized) over IN_SYNC over GONE. The rank keeps the
# code in its low bits, so the largest rank names the state.
_CODE_BITS = 4
_SEVERITY = {AT_RISK: 4, STALLED: 3, IN_SYNC: 1, GONE: 0}
_NAMES = {code: name for name, code in STATE_CODES.items()}


def rank(state: np.ndarray) -> np.ndarray:
    """Severity rank of each state code (schema.STATE_CODES, UNRECOGNIZED)."""
    severity = np.full(len(STATE_CODES) + 1, 2, np.uint8)  # index code + 1: UNRECOGNIZED at 0
    for code, level in _SEVERITY.items():
        severity[code + 1] = level
    return (severity[state + 1] << _CODE_BITS) | (state + 1).astype(np.uint8)


def state_name(r: int) -> str | None:
    """The state a rank names (None: a state this version does not know)."""
    code = (r & ((1 << _CODE_BITS) - 1)) - 1
    return None if code == UNRECOGNIZED else _NAMES[code]


@dataclass
class Slots:
    """Slot records of several groups, in (group, slot) order; `group` says whose each is."""

    group: np.ndarray
    records: np.ndarray  # SLOT

    @classmethod
    def reduce(cls, group: np.ndarray, slot: np.ndarray, record_lag: np.ndarray, time_lag_ms: np.ndarray,
               rank: np.ndarray) -> "Slots":
        """One record per (group, slot): the maxima of the values given (of samples, or of
        parts' records), as plain columns: a structured array per sample would be written and
        reduced field by field with a stride. Rows in group order are usually in time order
        already: sorted only if not."""
        key = group * SLOTS + slot
        columns = (slot, record_lag, time_lag_ms, rank)
        if key.size > 1 and (key[1:] < key[:-1]).any():
            order = np.argsort(key, kind="stable")
            key, group, columns = key[order], group[order], tuple(c[order] for c in columns)
        first = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if key.size else key
        out = np.empty(first.size, SLOT)
        out["slot"] = columns[0][first]
        for f, values in zip(("record_lag", "time_lag_ms", "rank"), columns[1:]):
            out[f] = np.maximum.reduceat(values, first) if first.size else values
        return cls(group[first], out)

    @classmethod
    def of_records(cls, group: np.ndarray, records: np.ndarray) -> "Slots":
        """`reduce` of SLOT records (the merge: the parts' slots)."""
        return cls.reduce(group, records["slot"], records["record_lag"], records["time_lag_ms"], records["rank"])

    def counts(self, groups: int) -> np.ndarray:
        return np.bincount(self.group, minlength=groups)

    def held(self, cap_ms: np.ndarray) -> np.ndarray:
        """The records as HELD, each slot's state holding to its group's next slot with samples,
        at most `cap_ms[group]` past the slot's end (its last sample is in the slot: to a slot's
        resolution, the time the tables count for it), never past midnight."""
        out = np.empty(self.records.size, HELD)
        for name in SLOT.names:
            out[name] = self.records[name]
        end = (self.records["slot"].astype(np.int64) + 1) * SLOT_MS + cap_ms[self.group]
        if end.size > 1:
            same = self.group[1:] == self.group[:-1]
            end[:-1] = np.where(same, np.minimum(end[:-1], self.records["slot"][1:].astype(np.int64) * SLOT_MS), end[:-1])
        out["until_ms"] = np.minimum(end, DAY_MS)
        return out


def of_samples(group: np.ndarray, ts_ms: np.ndarray, timed: np.ndarray, state: np.ndarray,
               record_lag: tuple[np.ndarray, np.ndarray], time_lag: tuple[np.ndarray, np.ndarray],
               start_ms: int) -> Slots:
    """Samples (group, ms, has a time, state code, (lag, valid) per measure) to slots of the day
    starting at start_ms; samples without a time are in no slot, times outside the day are
    clamped to its first or last slot (as the hours are)."""
    if not timed.all():
        keep = np.flatnonzero(timed)
        group, ts_ms, state = group[keep], ts_ms[keep], state[keep]
        record_lag, time_lag = ((v[keep], valid[keep]) for v, valid in (record_lag, time_lag))
    slot = np.clip((ts_ms - start_ms) // SLOT_MS, 0, SLOTS - 1)
    lags = [np.where(valid, v, NULL) for v, valid in (record_lag, time_lag)]
    return Slots.reduce(group, slot, *lags, rank(state))


@dataclass
class Curve:
    """One partition's slots, decoded for a chart."""

    hours: list[float]  # each slot's start, in hours since the start of the day
    record_lag: list[int | None]
    time_lag_s: list[float | None]
    states: list[str | None]
    until: list[float]  # the hour each slot's state holds until (Slots.held)


def decode(blob: bytes) -> Curve:
    """A merged partition's curve (HELD records)."""
    r = np.frombuffer(blob, HELD)
    return Curve(
        hours=(r["slot"].astype(np.float64) * SLOT_MS / 3_600_000).tolist(),
        record_lag=[None if v == NULL else v for v in r["record_lag"].tolist()],
        time_lag_s=[None if v == NULL else v / 1000.0 for v in r["time_lag_ms"].tolist()],
        states=[state_name(x) for x in r["rank"].tolist()],
        until=(r["until_ms"].astype(np.float64) / 3_600_000).tolist(),
    )


assert len(State) < (1 << _CODE_BITS) - 1 and SLOTS < 1 << 15 and DAY_MS < 1 << 31
