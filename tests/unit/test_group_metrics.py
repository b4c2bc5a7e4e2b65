"""Failover readiness families: aggregates per group always, partitions only where not READY,
under a cap that keeps the worst."""

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from mirrorlag.groups.assess import GroupPartition, GroupReadiness
from mirrorlag.groups.checkpoints import Checkpointed
from mirrorlag.groups.metrics import GroupsCollector
from mirrorlag.groups.monitor import FlowGroups, GroupsSnapshot
from mirrorlag.groups.readiness import GroupState, PartitionReadiness
from mirrorlag.model import FlowId


def _p(partition, state, reread, age_ms=10_000):
    r = PartitionReadiness(state, 1, 1, reread, 0, 0, age_ms)
    return GroupPartition("orders", partition, 100, Checkpointed(99, 1, 0), None, r)


def _samples(snapshot, cap=10):
    registry = CollectorRegistry()
    registry.register(GroupsCollector(lambda: snapshot, cap))
    out = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


SNAP = GroupsSnapshot((FlowGroups(FlowId("A", "B"), (
    GroupReadiness("billing", [_p(0, GroupState.READY, 5), _p(1, GroupState.READY, 7, 40_000)]),
    GroupReadiness("audit", [_p(0, GroupState.REREAD_HIGH, 5000), _p(1, GroupState.NOT_CHECKPOINTED, None, None),
                             _p(2, GroupState.READY, 3)], active_on_target=True),
), 1_790_000_000_000),))


def test_aggregates_for_every_group_and_partitions_only_where_not_ready():
    s = _samples(SNAP)
    g = lambda name, group, **extra: s[(name, tuple(sorted({"source": "A", "target": "B", "group": group, **extra}.items())))]
    assert g("mirrorlag_group_ready", "billing") == 1 and g("mirrorlag_group_ready", "audit") == 0
    assert g("mirrorlag_group_failover_reread_records", "billing", stat="sum") == 12
    assert g("mirrorlag_group_failover_reread_records", "audit", stat="max") == 5000
    assert g("mirrorlag_group_checkpoint_age_seconds", "billing") == 40
    assert g("mirrorlag_group_partitions", "audit", state="NOT_CHECKPOINTED") == 1
    assert g("mirrorlag_group_active_on_target", "audit") == 1
    partition_series = {k for k in s if k[0].startswith("mirrorlag_group_partition_")}
    assert {dict(k[1])["group"] for k in partition_series} == {"audit"}
    assert {dict(k[1])["partition"] for k in partition_series} == {"0", "1"}
    flows = {dict(k[1])["state"]: v for k, v in s.items() if k[0] == "mirrorlag_flow_groups"}
    assert flows["READY"] == 1 and flows["NOT_CHECKPOINTED"] == 1 and flows["SKIPS"] == 0
    billing_series = [k for k in s if dict(k[1]).get("group") == "billing"]
    assert len(billing_series) == 5  # ready, re-read sum and max, age, partitions{READY}: a healthy group's cost
    assert s[("mirrorlag_group_partitions_withheld", ())] == 0
    assert s[("mirrorlag_flow_groups_last_read_timestamp_seconds", (("source", "A"), ("target", "B")))] == 1_790_000_000


def test_a_flow_never_read_has_no_read_time():
    s = _samples(GroupsSnapshot((FlowGroups(FlowId("A", "B"), (), None, "cannot list the consumer groups"),)))
    assert not any(k[0] == "mirrorlag_flow_groups_last_read_timestamp_seconds" for k in s)


def test_the_cap_keeps_the_worst_partitions_and_counts_the_rest():
    s = _samples(SNAP, cap=1)
    states = [dict(k[1])["state"] for k in s if k[0] == "mirrorlag_group_partition_state"]
    assert states == ["NOT_CHECKPOINTED"]
    assert s[("mirrorlag_group_partitions_withheld", ())] == 1
