"""Failover readiness as Prometheus families, under the partitions' cardinality rule (docs/metrics.md,
"How many series"):
aggregates per flow and group always, a group partition's own series only where it is not READY,
and at most `partition_series_max` of those (the worst first; the rest counted).

A healthy group costs five series: ready, re-read sum and max, checkpoint age, its partitions{READY}.
"""

from __future__ import annotations

from typing import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from mirrorlag.groups.monitor import GroupsSnapshot
from mirrorlag.groups.readiness import GroupState

_RANK = {s: i for i, s in enumerate(GroupState)}
FLOW = ["source", "target"]
GROUP = [*FLOW, "group"]
PARTITION = [*GROUP, "topic", "partition"]


class GroupsCollector(Collector):
    def __init__(self, snapshot: Callable[[], GroupsSnapshot], partition_series_max: int) -> None:
        self._snapshot = snapshot
        self._max = partition_series_max

    def collect(self) -> Iterator[Metric]:
        snap = self._snapshot()
        by_state = GaugeMetricFamily("mirrorlag_flow_groups", "Consumer groups of each flow by failover readiness "
                                     "state (a group's state is its worst partition's).", labels=[*FLOW, "state"])
        ready = GaugeMetricFamily("mirrorlag_group_ready", "1 when every committed partition of the group is "
                                  "checkpointed, its re-read and checkpoint age within their limits.", labels=GROUP)
        reread = GaugeMetricFamily("mirrorlag_group_failover_reread_records", "Records the group already consumed "
                                   "that it would read again if it failed over now (at most), over its partitions.",
                                   labels=[*GROUP, "stat"])
        age = GaugeMetricFamily("mirrorlag_group_checkpoint_age_seconds", "Age of the group's oldest checkpoint "
                                "(MM2 writes one only when the group moves).", labels=GROUP)
        partitions = GaugeMetricFamily("mirrorlag_group_partitions", "The group's committed partitions by state, "
                                       "states with none left out.", labels=[*GROUP, "state"])
        active = GaugeMetricFamily("mirrorlag_group_active_on_target", "1 for a group with members on the target "
                                   "cluster: its consumers have moved already.", labels=GROUP)
        part_state = GaugeMetricFamily("mirrorlag_group_partition_state", "A group partition that is not READY, "
                                       "1 for its state.", labels=[*PARTITION, "state"])
        part_reread = GaugeMetricFamily("mirrorlag_group_partition_reread_records", "Records a group partition that "
                                        "is not READY would read again on failover (at most).", labels=PARTITION)
        read_at = GaugeMetricFamily("mirrorlag_flow_groups_last_read_timestamp_seconds", "When the flow's groups were "
                                    "last read whole (Unix time): while a read fails, the groups shown are older.",
                                    labels=FLOW)
        not_ready = []
        for flow in snap.flows:
            f = [flow.flow.source, flow.flow.target]
            if flow.read_at_ms is not None:
                read_at.add_metric(f, flow.read_at_ms / 1000)
            counts = {s: 0 for s in GroupState}
            for g in flow.groups:
                counts[g.state] += 1
                labels = [*f, g.group]
                ready.add_metric(labels, 1 if g.state is GroupState.READY else 0)
                reread.add_metric([*labels, "sum"], g.reread_sum)
                reread.add_metric([*labels, "max"], g.reread_max)
                if g.checkpoint_age_max_ms is not None:
                    age.add_metric(labels, g.checkpoint_age_max_ms / 1000)
                for state, n in sorted(g.by_state.items(), key=lambda kv: _RANK[kv[0]]):
                    partitions.add_metric([*labels, state.value], n)
                if g.active_on_target:
                    active.add_metric(labels, 1)
                not_ready += [(labels, p) for p in g.partitions if p.readiness.state is not GroupState.READY]
            for state in GroupState:
                by_state.add_metric([*f, state.value], counts[state])
        not_ready.sort(key=lambda lp: (_RANK[lp[1].readiness.state], -(lp[1].readiness.reread or 0)))
        for labels, p in not_ready[:self._max]:
            key = [*labels, p.topic, str(p.partition)]
            part_state.add_metric([*key, p.readiness.state.value], 1)
            if p.readiness.reread is not None:
                part_reread.add_metric(key, p.readiness.reread)
        yield from (by_state, read_at, ready, reread, age, partitions, active, part_state, part_reread)
        withheld = max(0, len(not_ready) - self._max)
        yield GaugeMetricFamily("mirrorlag_group_partitions_withheld", "Group partitions that are not READY without "
                                "series of their own: past the cap, the worst are shown first.", value=withheld)
