"""The callback feed: a replicator tells mirrorlag each record the target acknowledged.

This path runs once per replicated record, so `replicated()` is a dict store and two integer adds:
TTL bookkeeping, change detection and everything else happen once per poll (DESIGN §4).
"""

from __future__ import annotations

from typing import Callable

from mirrorlag.model import FlowId

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
    (topic, partition): the same dict store per record, without a key tuple kept per partition
    (at 100k partitions the store's RSS fell from 321 to 67-182 bytes a partition, and a record
    costs ~25 % less: tests/bench/RESULTS.md, seventh pass). A topic's dict is never removed, so
    a store taken from `store_for` never writes into an orphan.
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
        """The leanest per-record form, for replicators where ~0.3 µs a record shows (issue 7's
        end-to-end benchmark: a Python consume/produce loop costs ~3 µs a record): take
        `store = tracker.store_for(topic)` once per topic, then `store(partition, offset)` per
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
