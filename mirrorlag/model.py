"""The shared vocabulary: partition keys, states, LRO readings and snapshot rows.

Everything here is plain data. Times are wall-clock seconds (float, `time.time()` scale) taken
by the edges and passed in; nothing here reads a clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field
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
    AT_RISK = "AT_RISK"  # the source's retention will delete records not yet copied (or already did)
    RESET = "RESET"  # LEO went backwards or an LRO seen earlier is beyond the LEO
    REWIND = "REWIND"  # the LRO stepped back (MM2 resumed from an older commit) and is re-copying
    GONE = "GONE"  # partition left the flow; reported once, then dropped


class LroReading(NamedTuple):
    """What the LRO cache knows of one partition at the moment of a poll.

    A NamedTuple, like PartitionRow: the cache builds one for every partition whose LRO moved, up
    to 100k a poll, and a tuple is built in half the time of a frozen dataclass (which sets each
    field through object.__setattr__) and drops out of the cyclic collector's sight."""

    offset: int  # source offset of the last record the target acknowledged
    feed: str  # which feed said so: "callback", "offset-syncs", ...
    changed_at: float  # when the sidecar first saw this value
    stale: bool  # the TTL expired without a newer value


@dataclass(frozen=True, slots=True)
class PollObservation:
    """One poll's input to the lag engine.

    The LEO snapshot is taken at `leo_at`, before the LROs are read at `now` (DESIGN §3).
    `leos` names every partition that exists in the flows now; None means its LEO could not be
    read this poll. A key absent from `leos` has left the flow. `log_starts` (ListOffsets
    earliest) is read less often than the LEO: a key absent from it keeps its last known value.
    `mean_record_bytes` is per flow, from feeds that know record sizes.
    """

    leo_at: float
    now: float
    leos: Mapping[PartitionKey, int | None]
    lros: Mapping[PartitionKey, LroReading]
    log_starts: Mapping[PartitionKey, int] = field(default_factory=dict)
    mean_record_bytes: Mapping[FlowId, float] = field(default_factory=dict)


class PartitionRow(NamedTuple):
    """The engine's verdict on one partition at one poll: what every exporter shows.

    A NamedTuple, not a dataclass: the engine builds one per partition per poll (100k of them),
    and a tuple is four times cheaper to build. Immutable all the same.
    """

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
    # How old the newest copied record is: when offset LRO + 1 was appended, from the poller's
    # (LEO, time) table. 0 when caught up. Beyond the table it is the table's age, a lower bound.
    freshness_lag_s: float | None = None
    freshness_lower_bound: bool = False
    byte_lag_estimate: int | None = None  # record lag x mean record size; None when no feed knows sizes
    append_rate: float | None = None  # source records/s over the sample windows
    copy_rate: float | None = None  # mirror records/s over the sample windows
    catch_up_s: float | None = None  # record lag / (copy rate - append rate) when the mirror gains
    log_start: int | None = None  # source log-start offset (ListOffsets earliest), last known
    retention_headroom_records: int | None = None  # copied records still before the log start moves past LRO + 1
    retention_headroom_s: float | None = None  # when retention will delete uncopied records; None: not in sight
    records_lost: int | None = None  # records the source deleted before they were copied


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Immutable result of one poll. Exporters read it; nobody mutates it."""

    taken_at: float
    rows: tuple[PartitionRow, ...]

    def by_key(self) -> dict[PartitionKey, PartitionRow]:
        return {row.key: row for row in self.rows}
