"""The interfaces between the stages of docs/design.md §2: what a feed gives the poller, what the poller
asks of the lag engine it is handed, and what the poller gives the exporters about itself.

They live here, not in any stage, so that feeds, poller, exporters and sidecar depend on this
module rather than on one another. It imports nothing of mirrorlag but the model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Mapping, Protocol, Sequence

import numpy as np

from mirrorlag.model import FlowId, PartitionKey, PollObservation, Snapshot

if TYPE_CHECKING:
    from mirrorlag.kafka.topic_reader import TopicReader

# The poller's key object of a (flow, topic, partition), or None while metadata does not list it.
KeyOf = Callable[[FlowId, str, int], PartitionKey | None]
# Per flow, its topics' keys by partition number (None where metadata lists none).
TopicKeysOf = Callable[[FlowId], Mapping[str, Sequence[PartitionKey | None]]]
# Where a flow's topic sits in the poll's rows (the order the LRO cache holds the partitions): its
# first row and its partition numbers (sorted), or None while metadata does not list it.
TopicRowsOf = Callable[[FlowId, str], "tuple[int, Sequence[int]] | None"]

NO_OFFSET = -1  # a PollRows row without an offset (an offset is never negative)


class PollRows(Mapping[PartitionKey, int]):
    """A feed's LROs as one int64 array aligned with the poll's rows (NO_OFFSET where none): how
    a feed of 100k partitions hands them over without a dict entry and an int object each. The
    LRO cache reads the array as it is when `rows` is the very sequence it holds; anything else
    reads it as a Mapping (its index is built at the first lookup)."""

    def __init__(self, rows: Sequence[PartitionKey], offsets: np.ndarray) -> None:
        self.rows = rows
        self.offsets = offsets
        self._index: dict[PartitionKey, int] | None = None

    def __getitem__(self, key: PartitionKey) -> int:
        if self._index is None:
            self._index = {k: i for i, k in enumerate(self.rows)}
        value = int(self.offsets[self._index[key]])
        if value == NO_OFFSET:
            raise KeyError(key)
        return value

    def __iter__(self) -> Iterator[PartitionKey]:
        return (self.rows[i] for i in np.flatnonzero(self.offsets != NO_OFFSET).tolist())

    def __len__(self) -> int:
        return int(np.count_nonzero(self.offsets != NO_OFFSET))

    def merged(self, other: PollRows) -> PollRows:
        """Two feeds of one kind on different clusters (disjoint flows): one array."""
        return PollRows(self.rows, np.maximum(self.offsets, other.offsets))


class LroFeed(Protocol):
    """A source of last replicated offsets, read once per poll.

    The hooks below the first method are every call the poller makes on a feed besides
    `offsets()`. A feed subclasses this class to inherit the ones it has no use for as no-ops.
    """

    name: str
    bad_records: int
    reader: TopicReader | None  # the MM2 topics it reads, if any (its health is exported)

    def offsets(self) -> Mapping[PartitionKey, int]: ...

    def use_keys(self, key_of: KeyOf) -> None:
        """Called once, at the poller's construction: a feed that decodes partitions from MM2's
        records keys its offsets by the poller's own key objects rather than a copy per partition."""

    def use_topic_keys(self, topic_keys: TopicKeysOf) -> None:
        """As `use_keys`, for a feed that looks partitions up a topic at a time."""

    def use_topic_rows(self, topic_rows: TopicRowsOf) -> None:
        """Called once, at the poller's construction: where each flow's topic sits in the poll's
        rows, for a feed that hands its LROs as PollRows."""

    def forget(self, keys: Iterable[PartitionKey]) -> None:
        """Partitions that are gone: an LRO of the old log must never apply to a recreated one."""

    def see_leos(self, leos: Mapping[PartitionKey, int | None], rows: Sequence[PartitionKey]) -> None:
        """Called each poll before `offsets()`, with the poll's LEO snapshot (None: unread) and its
        rows (`leos`'s keys, in order, as the LRO cache will hold them): a feed whose reading can
        run ahead of the snapshot caps its LROs there, and a feed may hand PollRows over `rows`."""

    def health(self) -> FeedHealth | None:
        """What the feed reads and whether it answers (None: nothing to report)."""
        return FeedHealth.of(self.name, self.reader, self.bad_records) if self.reader is not None else None

    def evidence_read(self) -> Mapping[FlowId, str | None]:
        """Per flow whose copies this feed would show: None once it has read all it holds of
        them, else why not yet. A partition no feed gives an LRO is owed every record once a feed
        that shows every first copy has read through (docs/design.md §3)."""
        return {}

    def evidence_times(self) -> Mapping[PartitionKey, float]:
        """When the records behind the offsets last handed out were written (record timestamps,
        seconds), for the partitions the feed can date, then forgotten: an old sync or commit read
        at start is old evidence, not fresh (docs/design.md §3)."""
        return {}

    def close(self) -> None:
        """Release the feed's consumer; called once no poll runs."""
        if self.reader is not None:
            self.reader.close()


class HeartbeatSource(Protocol):
    """The newest replicated MM2 heartbeat per flow, read once per poll."""

    name: str
    bad_records: int
    reader: TopicReader | None

    def newest(self) -> Mapping[FlowId, int]: ...

    def close(self) -> None:
        """Release the source's consumer; called once no poll runs."""
        if self.reader is not None:
            self.reader.close()


class Engine(Protocol):
    """The pure lag engine as the poller uses it: one observation in, one snapshot out, and the
    per-flow counters the poller exports. The poller is handed one (mirrorlag.poll.wiring)."""

    rewinds_total: Mapping[FlowId, int]
    records_lost_total: Mapping[FlowId, int]

    def update(self, obs: PollObservation) -> Snapshot: ...


@dataclass(frozen=True, order=True)
class FeedOff:
    """Where a feed gives no evidence by design: these flows' remote topics (none named: all of
    them), and why. One entry covers every topic that is off for the same reason."""

    flows: tuple[str, ...]  # "A->B"
    topics: tuple[str, ...]  # remote topics on the feed's cluster; () = every topic of the flows
    reason: str


@dataclass(frozen=True, order=True)
class DuplicateCount:
    """Target records MM2 wrote more than once for one flow's topic, seen since the sidecar started."""

    source: str
    target: str
    topic: str  # the source topic
    records: int


@dataclass(frozen=True)
class FeedHealth:
    """What an operator needs to tell "no data" from "no feed": which topics exist, what was junk."""

    feed: str
    cluster: str
    topics: tuple[str, ...]
    missing: tuple[str, ...]  # topics not found yet (the feed retries every poll)
    bad_records: int
    up: bool = True  # False from a consumer error (cluster unreachable, ...) until it answers again
    errors_total: int = 0
    last_error: str | None = None  # the newest error's short text (secret values masked)
    # How often the feed's evidence can move at most (s; 0: at every copied record or poll); None
    # for heartbeats, which are no LRO evidence.
    resolution_s: float | None = None
    off: tuple[FeedOff, ...] = ()  # where the feed gives no evidence by design, and why
    # offset-syncs: per flow and topic, the target records written more than once (consecutive
    # syncs (U, D), (U', D') with D' - D > U' - U); topics with syncs, 0 included
    duplicates: tuple[DuplicateCount, ...] = ()

    @classmethod
    def of(cls, feed: str, reader: TopicReader, bad_records: int) -> FeedHealth:
        errors = reader.errors
        return cls(feed, reader.cluster_alias, tuple(reader.topics), tuple(reader.missing), bad_records,
                   errors.up, errors.total, errors.last)


@dataclass
class PollStats:
    """The sidecar's own health, exported next to the lag figures."""

    polls_total: int = 0
    poll_errors_total: dict[str, int] = field(default_factory=dict)  # by source cluster alias
    # Topic-level metadata errors other than UNKNOWN_TOPIC_OR_PART, by source cluster alias: the
    # topic is kept with the partitions of its previous discovery (only "does not exist" is GONE).
    metadata_errors_total: dict[str, int] = field(default_factory=dict)
    last_poll_duration_s: float = 0.0
    last_poll_at: float | None = None
    last_success_at: float | None = None
    lro_cache_size: int = 0
    lro_evictions_total: int = 0
    mean_record_bytes: dict[FlowId, float] = field(default_factory=dict)
    heartbeat_ms: dict[FlowId, int] = field(default_factory=dict)  # newest replicated heartbeat per flow
    rewinds_total: dict[FlowId, int] = field(default_factory=dict)
    records_lost_total: dict[FlowId, int] = field(default_factory=dict)
    # Deleted uncopied offsets no probe proved were data (a marker may be all they were).
    records_lost_unverified_total: dict[FlowId, int] = field(default_factory=dict)
    # The source probe's requests by outcome (kafka.probe.REASONS), per source cluster alias.
    probe_outcomes_total: dict[str, dict[str, int]] = field(default_factory=dict)
    feeds: list[FeedHealth] = field(default_factory=list)
    # Flows whose partitions without an LRO stay UNKNOWN rather than owed from their log start,
    # and why (a feed's topic not read through yet, MM2 starting at `latest`).
    evidence_unread: dict[FlowId, str] = field(default_factory=dict)
