"""The shared vocabulary: partition keys, states, LRO readings and snapshot rows.

Everything here is plain data. Times are wall-clock seconds (float, `time.time()` scale) taken
by the edges and passed in; nothing here reads a clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Mapping, NamedTuple


class FlowId(NamedTuple):
    """One enabled `source->target` pair of an MM2 config."""

    source: str
    target: str

    def __str__(self) -> str:
        return f"{self.source}->{self.target}"


class PartitionKey(NamedTuple):
    """A source partition as seen by one flow: (source alias, target alias, source topic, partition)."""

    source: str
    target: str
    topic: str
    partition: int

    @property
    def flow(self) -> FlowId:
        return FlowId(self.source, self.target)


class State(StrEnum):
    UNKNOWN = "UNKNOWN"  # no LRO yet, or no LEO this poll: never reported as 0
    IN_SYNC = "IN_SYNC"  # time lag <= replication.lag.time.max.ms
    LAGGING = "LAGGING"  # time lag > max while the LRO still moves
    STALLED = "STALLED"  # out of sync and the LRO has not moved for longer than the max (or went stale)
    RESET = "RESET"  # LEO went backwards or an LRO seen earlier is beyond the LEO
    REWIND = "REWIND"  # the LRO stepped back (MM2 resumed from an older commit) and is re-copying
    GONE = "GONE"  # partition left the flow; reported once, then dropped


@dataclass(frozen=True, slots=True)
class LroReading:
    """What the LRO cache knows of one partition at the moment of a poll."""

    offset: int  # source offset of the last record the target acknowledged
    feed: str  # which feed said so: "callback", "offset-syncs", ...
    changed_at: float  # when the sidecar first saw this value
    stale: bool  # the TTL expired without a newer value


@dataclass(frozen=True, slots=True)
class PollObservation:
    """One poll's input to the lag engine.

    The LEO snapshot is taken at `leo_at`, before the LROs are read at `now` (DESIGN §3).
    `leos` names every partition that exists in the flows now; None means its LEO could not be
    read this poll. A key absent from `leos` has left the flow.
    """

    leo_at: float
    now: float
    leos: Mapping[PartitionKey, int | None]
    lros: Mapping[PartitionKey, LroReading]


@dataclass(frozen=True, slots=True)
class PartitionRow:
    """The engine's verdict on one partition at one poll: what every exporter shows."""

    key: PartitionKey
    state: State
    leo: int | None
    lro: int | None
    lro_feed: str | None
    lro_age_s: float | None  # now - changed_at of the LRO
    record_lag: int | None  # max(0, LEO - (LRO + 1)); None when unknown
    record_lag_min: float | None  # SampledStat window figures; None when no sample in the window
    record_lag_max: float | None
    record_lag_avg: float | None
    time_lag_s: float | None  # now - last_caught_up; 0 when caught up; None when unknown


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Immutable result of one poll. Exporters read it; nobody mutates it."""

    taken_at: float
    rows: tuple[PartitionRow, ...]

    def by_key(self) -> dict[PartitionKey, PartitionRow]:
        return {row.key: row for row in self.rows}
