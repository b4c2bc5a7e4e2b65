"""The callback feed: a replicator tells mirrorlag each record the target acknowledged.

This path runs once per replicated record, so `replicated()` is a dict store and two integer adds:
TTL bookkeeping, change detection and everything else happen once per poll (docs/design.md §4).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, Sequence

from mirrorlag.interfaces import LroFeed
from mirrorlag.model import FlowId, PartitionKey

if TYPE_CHECKING:
    from mirrorlag.kafka.topic_reader import TopicReader

FEED_NAME = "callback"


class ReplicationTracker:
    """Last replicated source offset per partition of one flow, fed from a producer's delivery callback.

    Example, in a confluent-kafka replicator::

        tracker = ReplicationTracker("A", "B")
        def on_delivery(err, msg, topic=rec.topic(), part=rec.partition(), off=rec.offset()):
            if err is None:
                tracker.replicated(topic, part, off, len(msg))

    Safe to call from any thread: under the GIL a dict store is atomic, and the poller only ever
    copies the dicts. The byte counters are an estimate's inputs; a lost increment under a race
    costs nothing that matters.

    The offsets are a dict per topic keyed by partition number, not one dict keyed by
    (topic, partition): the same dict store per record, without a key tuple made per record or
    kept per partition. A topic's dict is never removed, so a store taken from `store_for` never
    writes into an orphan.
    """

    __slots__ = ("flow", "_topics", "_sized_records", "_sized_bytes")

    def __init__(self, source: str, target: str) -> None:
        self.flow = FlowId(source, target)
        self._topics: dict[str, dict[int, int]] = {}
        self._sized_records = 0
        self._sized_bytes = 0

    def replicated(self, source_topic: str, partition: int, source_offset: int, nbytes: int = 0) -> None:
        """Record that the source record at `source_offset` is now on the target."""
        try:
            self._topics[source_topic][partition] = source_offset
        except KeyError:  # the topic's first record (setdefault: two threads get one dict)
            self._topics.setdefault(source_topic, {})[partition] = source_offset
        if nbytes:
            self._sized_records += 1
            self._sized_bytes += nbytes

    def store_for(self, source_topic: str) -> Callable[[int, int], None]:
        """The leanest per-record form, for replicators where even `replicated()`'s Python call
        shows beside their own per-record cost: take `store = tracker.store_for(topic)` once per topic, then `store(partition, offset)` per
        record is the topic's dict's own C-level store, no Python frame. Report sizes per batch
        with `sized(records, nbytes)`."""
        return self._topics.setdefault(source_topic, {}).__setitem__

    def sized(self, records: int, nbytes: int) -> None:
        """Add `records` delivered records of `nbytes` bytes in all to the mean record size
        (with `store_for`, once per batch rather than per record)."""
        self._sized_records += records
        self._sized_bytes += nbytes

    def by_topic(self) -> dict[str, dict[int, int]]:
        """A consistent copy of the newest offset per partition, per topic; called once per poll.
        (`list(items())` and `copy()` are single C calls: no writer runs in between.)"""
        return {topic: offsets.copy() for topic, offsets in list(self._topics.items())}

    def offsets(self) -> dict[tuple[str, int], int]:
        """The same as one map keyed by (topic, partition)."""
        return {(topic, p): o for topic, offsets in self.by_topic().items() for p, o in offsets.items()}

    def mean_record_bytes(self) -> float | None:
        """Mean size of the records reported with a size, or None when none were."""
        records = self._sized_records
        return self._sized_bytes / records if records else None

    def forget(self, source_topic: str, partition: int) -> None:
        """Drop a partition that left the flow (called by the poller, not per record)."""
        offsets = self._topics.get(source_topic)
        if offsets is not None:
            offsets.pop(partition, None)


@dataclass
class TrackerFeed(LroFeed):
    """Adapts an in-process ReplicationTracker (keyed by topic, then partition) to partition keys."""

    tracker: ReplicationTracker
    # The flow's partitions as the source's metadata names them: per topic, its keys by partition
    # number (None where metadata lists none), the key objects the poller uses (one per partition,
    # shared with the engine, not a copy per feed). A partition metadata does not know yet has no
    # key, and no LRO until it does.
    keys: Callable[[], Mapping[str, Sequence[PartitionKey | None]]]
    name: str = FEED_NAME
    bad_records: int = 0
    reader: TopicReader | None = None

    def evidence_read(self) -> dict[FlowId, str | None]:
        return {self.tracker.flow: None}  # in-process: every copy as it is acknowledged

    def offsets(self) -> dict[PartitionKey, int]:
        keys = self.keys()
        out: dict[PartitionKey | None, int] = {}
        for topic, offsets in self.tracker.by_topic().items():
            by_partition = keys.get(topic)
            if by_partition is None or not offsets:
                continue
            n = len(by_partition)
            try:
                every_one_known = 0 <= min(offsets) and max(offsets) < n
            except TypeError:  # a partition that is not a number: skipped below
                every_one_known = False
            if every_one_known:  # the common case, in C
                out.update(zip(map(by_partition.__getitem__, offsets), offsets.values()))
            else:
                out.update((by_partition[p], o) for p, o in offsets.items() if type(p) is int and 0 <= p < n)
        out.pop(None, None)  # partitions metadata does not list
        return out  # type: ignore[return-value]

    def forget(self, keys: Iterable[PartitionKey]) -> None:
        flow, tracker = self.tracker.flow, self.tracker
        for key in keys:
            if key.flow == flow:
                tracker.forget(key.topic, key.partition)
