"""Failover readiness inside the running sidecar (docs/design.md §9): the groups job's state between runs.

The sidecar schedules `run` on an executor of its own, at `mirrorlag.failover.interval.ms` (MM2's
emit.checkpoints.interval.seconds by default), never on the LEO poll's thread. A run assesses each
flow's groups against the LROs of the newest published snapshot, and leaves behind what the
exporters read: the snapshot for the Prometheus collector, and `/status`'s `groups` member
already encoded (a 1,000 × 100 estate is 100,000 rows: encoded once a run, not per request).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from mirrorlag.config.settings import Settings
from mirrorlag.groups.flow_reader import Seed, flow_readers
from mirrorlag.groups.metrics import GroupsCollector
from mirrorlag.groups.monitor import FlowGroups, GroupsMonitor, GroupsSnapshot
from mirrorlag.groups.readiness import Limits, group_lro
from mirrorlag.groups.rows import group_rows
from mirrorlag.history.group_schema import GroupRows
from mirrorlag.interfaces import LroFeed
from mirrorlag.model import FlowId, PartitionKey, Snapshot

log = logging.getLogger(__name__)


def limits_of(settings: Settings) -> Limits:
    f = settings.failover
    return Limits(f.reread_max_records, int(f.checkpoint_max_age_s * 1000))


def checkpointed(settings: Settings) -> bool:
    """Whether the sidecar has groups to watch: failover readiness on, and a flow MM2 checkpoints."""
    return settings.failover.enabled and any(flow.emit_checkpoints for flow in settings.flows)


@dataclass
class SnapshotLros:
    """The LROs of the newest published snapshot, by flow, topic and partition. The index of its
    keys is built once per key list: the poller hands over the same list poll after poll."""

    latest: Callable[[], Snapshot | None]
    _keys: object = None
    _index: dict[PartitionKey, int] = field(default_factory=dict)

    def of(self, flow: FlowId) -> Callable[[str, int], int | None]:
        snapshot = self.latest()
        if snapshot is None or not len(snapshot):
            return lambda topic, partition: None
        cols = snapshot.columns
        if cols.keys is not self._keys:
            self._index = {key: i for i, key in enumerate(cols.keys)}
            self._keys = cols.keys
        index, lro, known = self._index, cols.ints["lro"], cols.valid["lro"]
        lag, lag_known = cols.ints["record_lag"], cols.valid["record_lag"]

        def lro_of(topic: str, partition: int) -> int | None:
            i = index.get(PartitionKey(flow.source, flow.target, topic, partition))
            if i is None:
                return None
            return group_lro(int(lro[i]) if known[i] else None, int(lag[i]) if lag_known[i] else None)

        return lro_of


def seeds_from(feeds: Sequence[LroFeed]) -> Callable[[FlowId], Seed]:
    """Each flow's newest sync per partition, from the offset-syncs feeds the poller reads."""
    from mirrorlag.feeds.offset_syncs import OffsetSyncsFeed

    syncs = [feed for feed in feeds if isinstance(feed, OffsetSyncsFeed)]

    def seed_of(flow: FlowId) -> Seed:
        def seed(topic: str, partition: int) -> tuple[int, int] | None:
            for feed in syncs:
                if (newest := feed.newest_sync(flow, topic, partition)) is not None:
                    return newest
            return None
        return seed

    return seed_of


@dataclass
class GroupsService:
    monitor: GroupsMonitor
    series_max: int = 1000  # mirrorlag.failover.partition.series.max
    collector: GroupsCollector = field(init=False)
    status_json: bytes = b"[]"  # `/status`'s `groups`: every group partition's row (rows.FIELDS)
    flows_json: bytes = b"[]"  # `/status`'s `groups_flows`: per flow, when read and what was seen
    runs_total: int = 0
    listeners: list[Callable[[GroupRows], None]] = field(default_factory=list)  # each run's rows (the history)

    def __post_init__(self) -> None:
        self.collector = GroupsCollector(lambda: self.monitor.snapshot, self.series_max)

    @classmethod
    def build(cls, settings: Settings, latest: Callable[[], Snapshot | None], feeds: Sequence[LroFeed]) -> "GroupsService":
        lros = SnapshotLros(latest)
        seed_of = seeds_from(feeds)
        readers = flow_readers(settings, settings.request_timeout_s, lambda flow: seed_of(flow.id))
        monitor = GroupsMonitor(readers, lros.of, limits_of(settings))
        return cls(monitor, settings.failover.partition_series_max)

    def run(self) -> GroupsSnapshot:
        started = time.time()
        snapshot = self.monitor.run_once()
        shown: list[dict[str, Any]] = []  # every flow's, a flow that could not be read its last run's
        rows: list[dict[str, Any]] = []  # this run's only, for the history
        for flow in snapshot.flows:
            flow_rows = group_rows(flow.flow, flow.groups)
            shown += flow_rows
            if flow.error is None:
                rows += flow_rows
        self.status_json = encode_rows(shown)
        for listener in self.listeners:  # a flow that could not be read repeats no old rows
            listener(GroupRows(started, rows))
        self.flows_json = json.dumps([flow_summary(f) for f in snapshot.flows], separators=(",", ":")).encode()
        self.runs_total += 1
        return snapshot

    def close(self) -> None:
        self.monitor.close()


ROWS_A_PIECE = 1000


def encode_rows(rows: Sequence[dict[str, Any]]) -> bytes:
    """A JSON array of `rows`, encoded ROWS_A_PIECE at a time: one json.dumps of 100,000 rows holds
    the GIL for its whole C call, which the LEO poll's thread would wait out."""
    pieces = [json.dumps(rows[i:i + ROWS_A_PIECE], separators=(",", ":"))[1:-1] for i in range(0, len(rows), ROWS_A_PIECE)]
    return ("[" + ",".join(pieces) + "]").encode()


def flow_summary(flow: FlowGroups) -> dict[str, Any]:
    """A flow's line of `groups_flows`: what its last run read, and why not where it could not."""
    return {
        "flow": str(flow.flow), "read_at": None if flow.read_at_ms is None else flow.read_at_ms / 1000,
        "error": flow.error, "groups": len(flow.groups), "listed": flow.listed,
        "checkpoints_read": flow.checkpoints_read,
    }
