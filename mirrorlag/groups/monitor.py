"""Failover readiness on its own cadence (MM2's emit.checkpoints.interval.seconds by default) and
thread, never the LEO poll's: each run reads every flow's evidence (flow_reader), assesses it with
the newest LROs the lag engine published, and swaps in a new immutable snapshot for the exporters.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

from mirrorlag.groups.assess import GroupReadiness, assess
from mirrorlag.groups.flow_reader import FlowGroupsReader
from mirrorlag.groups.readiness import Limits
from mirrorlag.model import FlowId

log = logging.getLogger(__name__)

LroOf = Callable[[FlowId], Callable[[str, int], int | None]]  # flow -> (source topic, partition) -> LRO


@dataclass(frozen=True)
class FlowGroups:
    flow: FlowId
    groups: tuple[GroupReadiness, ...]
    read_at_ms: int | None  # when this flow was last read (None: never)
    error: str | None = None  # why the last run could not read it (its groups are the run before's)
    listed: int = 0  # groups the source listed: only those the principal may Describe
    checkpoints_read: bool = True  # MM2's checkpoints topic was read to its end


@dataclass(frozen=True)
class GroupsSnapshot:
    flows: tuple[FlowGroups, ...] = ()


@dataclass
class GroupsMonitor:
    readers: Sequence[FlowGroupsReader]
    lro_of: LroOf
    limits: Limits
    clock_ms: Callable[[], int] = lambda: int(time.time() * 1000)
    snapshot: GroupsSnapshot = field(default_factory=GroupsSnapshot)

    def run_once(self) -> GroupsSnapshot:
        before = {f.flow: f for f in self.snapshot.flows}
        flows = []
        for reader in self.readers:
            flow = reader.flow
            evidence = reader.read()
            if evidence is None:
                kept = before.get(flow.id)
                log.warning("flow %s: failover readiness not read: %s", flow.id, reader.last_error)
                flows.append(FlowGroups(flow.id, kept.groups if kept else (), kept.read_at_ms if kept else None,
                                        reader.last_error, kept.listed if kept else 0,
                                        kept.checkpoints_read if kept else False))
                continue
            now_ms = self.clock_ms()
            groups = assess(evidence, lambda t, f=flow: f.policy.remote_topic(f.source, t), reader.syncs.slots,
                            self.lro_of(flow.id), self.limits.for_flow(flow.emit_checkpoints_interval_s), now_ms,
                            reader.history.slots,
                            flow.target_transactional)
            flows.append(FlowGroups(flow.id, tuple(groups), now_ms, None, evidence.listed, evidence.checkpoints_read))
        self.snapshot = GroupsSnapshot(tuple(flows))  # one reference swap: readers see old or new
        return self.snapshot

    def close(self) -> None:
        for reader in self.readers:
            reader.close()
