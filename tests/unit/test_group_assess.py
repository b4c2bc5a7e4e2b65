"""A flow's groups assessed from one read's evidence: per partition as readiness.py says, per
group the worst state and the figures the exporters show."""

from mirrorlag.groups.assess import FlowEvidence, assess
from mirrorlag.groups.checkpoints import Checkpointed
from mirrorlag.groups.readiness import GroupState, Limits, NotCheckpointedBecause
from mirrorlag.groups.sync_store import SYNCS_PER_PARTITION, Sync

NOW = 10_000_000
SLOTS = {("orders", 0): [Sync(900, 900)] * 32 + [Sync(0, 0)] * (SYNCS_PER_PARTITION - 32),
         ("orders", 1): [Sync(500, 500)] * SYNCS_PER_PARTITION}


def test_groups_partitions_and_their_figures():
    evidence = FlowEvidence(
        committed={"billing": {("orders", 0): 950, ("orders", 1): 520},
                   "audit": {("orders", 0): 400, ("orders", 1): 100}},
        checkpoints={("billing", "A.orders", 0): Checkpointed(949, 901, NOW - 20_000),
                     ("billing", "A.orders", 1): Checkpointed(510, 501, NOW - 40_000),
                     ("audit", "A.orders", 0): Checkpointed(400, 1, NOW - 5_000)},
        target_offsets={}, members_on_target={"audit": 2}, syncs_ready=True)
    groups = assess(evidence, lambda t: f"A.{t}", lambda t, p: SLOTS.get((t, p)),
                    lambda t, p: 999, Limits(100, 120_000), NOW)
    audit, billing = groups
    assert billing.group == "billing" and billing.state is GroupState.READY
    assert (billing.reread_sum, billing.reread_max, billing.checkpoint_age_max_ms) == (49 + 19, 49, 40_000)
    assert audit.active_on_target
    p0, p1 = audit.partitions
    assert p0.readiness.reread == 399 and p0.readiness.state is GroupState.REREAD_HIGH
    assert p1.readiness.state is GroupState.NOT_CHECKPOINTED
    assert p1.readiness.because is NotCheckpointedBecause.OLDER_THAN_SYNCS
    assert audit.state is GroupState.NOT_CHECKPOINTED
    assert audit.by_state == {GroupState.REREAD_HIGH: 1, GroupState.NOT_CHECKPOINTED: 1}


def test_a_group_running_on_the_target_is_never_skips():
    # Failed over: its consumers commit on the target, past the frozen source offset; that resume
    # point maps back beyond G, which is no skip (a failover already happened).
    evidence = FlowEvidence(
        committed={"moved": {("orders", 1): 520}, "stayed": {("orders", 1): 520}},
        checkpoints={}, target_offsets={"moved": {("A.orders", 1): 600}, "stayed": {("A.orders", 1): 600}},
        members_on_target={"moved": 3}, syncs_ready=True)
    moved, stayed = assess(evidence, lambda t: f"A.{t}", lambda t, p: SLOTS.get((t, p)), lambda t, p: 999,
                           Limits(100, 120_000), NOW)
    assert moved.active_on_target and moved.partitions[0].readiness.skipped == 0
    assert moved.state is GroupState.READY
    assert stayed.partitions[0].readiness.skipped == 80 and stayed.state is GroupState.SKIPS
