"""The callback feed: a replicator tells mirrorlag each record the target acknowledged.

This path runs once per replicated record, so `replicated()` is a dict store and two integer adds:
TTL bookkeeping, change detection and everything else happen once per poll (DESIGN §4).
"""

from __future__ import annotations

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
    copies the dict. The byte counters are an estimate's inputs; a lost increment under a race
    costs nothing that matters.
    """

    __slots__ = ("flow", "_offsets", "_sized_records", "_sized_bytes", "store")

    def __init__(self, source: str, target: str) -> None:
        self.flow = FlowId(source, target)
        self._offsets: dict[tuple[str, int], int] = {}
        self._sized_records = 0
        self._sized_bytes = 0
        # The leanest per-record form, for replicators where ~0.3 µs a record shows (issue 7's
        # end-to-end benchmark: a Python consume/produce loop costs ~3 µs a record):
        # `store((topic, partition), offset)` is the dict's own C-level store, no Python frame;
        # report sizes per batch with `sized(records, nbytes)`.
        self.store = self._offsets.__setitem__

    def replicated(self, source_topic: str, partition: int, source_offset: int, nbytes: int = 0) -> None:
        """Record that the source record at `source_offset` is now on the target."""
        self._offsets[(source_topic, partition)] = source_offset
        if nbytes:
            self._sized_records += 1
            self._sized_bytes += nbytes

    def sized(self, records: int, nbytes: int) -> None:
        """Add `records` delivered records of `nbytes` bytes in all to the mean record size
        (with `store`, once per batch rather than per record)."""
        self._sized_records += records
        self._sized_bytes += nbytes

    def offsets(self) -> dict[tuple[str, int], int]:
        """A consistent copy of the newest offset per (topic, partition); called once per poll."""
        return self._offsets.copy()

    def mean_record_bytes(self) -> float | None:
        """Mean size of the records reported with a size, or None when none were."""
        records = self._sized_records
        return self._sized_bytes / records if records else None

    def forget(self, source_topic: str, partition: int) -> None:
        """Drop a partition that left the flow (called by the poller, not per record)."""
        self._offsets.pop((source_topic, partition), None)
