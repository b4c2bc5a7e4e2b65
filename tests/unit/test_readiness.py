"""Failover readiness of one group partition (docs/design.md §9), on the syncs MM2 would hold."""

import pytest

from mirrorlag.groups.readiness import (NONE_COPIED, GroupState, Limits, NotCheckpointedBecause, PartitionEvidence,
                                        partition_readiness, worst)
from mirrorlag.groups.sync_store import SYNCS_PER_PARTITION, Sync, translate, updated, upstream_of

LIMITS = Limits(reread_max_records=1000, checkpoint_max_age_ms=120_000)
NOW = 1_000_000


def _slots(*syncs: tuple[int, int]) -> list[Sync]:
    slots = [Sync(*syncs[0])] * SYNCS_PER_PARTITION
    for s in syncs[1:]:
        slots = updated(slots, Sync(*s), read_to_end=True)
    return slots


def _evidence(g, lro=None, checkpoint=None, at=NOW - 30_000, target=None, read_at=None):
    """`read_at`: the group's source offset the checkpoint translated (default: a moment before g)."""
    return PartitionEvidence(group_offset=g, lro=lro, checkpoint_downstream=checkpoint,
                             checkpoint_upstream=None if checkpoint is None else (g - 1 if read_at is None else read_at),
                             checkpoint_ms=None if checkpoint is None else at, target_offset=target)


def test_a_group_past_the_newest_sync_rereads_from_the_record_after_it():
    # source 0..999 copied to target 0..999 one to one; syncs at 0 and 900 (offset.lag.max 100)
    slots = _slots((0, 0), (900, 900))
    g = 950
    checkpoint = translate(slots, g).downstream  # 901: what MM2 writes
    r = partition_readiness(_evidence(g, lro=999, checkpoint=checkpoint), slots, True, LIMITS, NOW)
    assert (r.resume_target, r.resume_source) == (901, 901)
    assert r.reread == 49  # 901 .. 949 consumed already and read again
    assert (r.skipped, r.not_yet_mirrored, r.checkpoint_age_ms) == (0, 0, 30_000)
    assert r.state is GroupState.READY


def test_the_group_moved_on_since_its_checkpoint_counts_in_the_reread():
    slots = _slots((0, 0), (900, 900))
    r = partition_readiness(_evidence(2_500, lro=4_000, checkpoint=901), slots, True, LIMITS, NOW)
    assert r.reread == 2_500 - 901
    assert r.state is GroupState.REREAD_HIGH


def test_reread_counts_only_records_the_target_holds():
    slots = _slots((0, 0), (900, 900))
    r = partition_readiness(_evidence(1_200, lro=999, checkpoint=901), slots, True, LIMITS, NOW)
    assert r.reread == 1_000 - 901  # min(G, LRO + 1) - resume
    assert r.not_yet_mirrored == 200


def test_an_old_checkpoint_mm2_owes_a_newer_one_for_is_its_own_cause():
    # the checkpoint translated 500 through (0, 0); the group is at 950 now, which translates
    # through (900, 900) to 901: MM2 owes that checkpoint and is late with it
    slots = _slots((0, 0), (900, 900))
    r = partition_readiness(_evidence(950, lro=999, checkpoint=1, at=NOW - 600_000, read_at=500), slots, True,
                            LIMITS, NOW)
    assert r.state is GroupState.CHECKPOINT_OLD and r.checkpoint_age_ms == 600_000 and r.checkpoint_old


def test_a_high_reread_is_not_hidden_behind_an_old_checkpoint():
    # Owed (950 translates to 901, the checkpoint says 1) and 10 minutes old, and a failover now
    # would read 949 records again, over a limit of 500: the cost is the state, the cause a flag.
    slots = _slots((0, 0), (900, 900))
    limits = Limits(reread_max_records=500, checkpoint_max_age_ms=120_000)
    r = partition_readiness(_evidence(950, lro=999, checkpoint=1, at=NOW - 600_000, read_at=500), slots, True,
                            limits, NOW)
    assert (r.state, r.reread, r.checkpoint_old) == (GroupState.REREAD_HIGH, 949, True)
    fresh = partition_readiness(_evidence(950, lro=999, checkpoint=1, at=NOW - 60_000, read_at=500), slots, True,
                                limits, NOW)
    assert (fresh.state, fresh.checkpoint_old) == (GroupState.REREAD_HIGH, False)


@pytest.mark.parametrize("interval_s, state", [(60.0, GroupState.CHECKPOINT_OLD), (300.0, GroupState.READY)])
def test_the_default_age_limit_is_three_of_the_flows_emission_intervals(interval_s, state):
    # Owed a checkpoint 240 s ago: late for an MM2 emitting every minute (limit 180 s); on time for
    # one emitting every 5 minutes (limit 900 s), whose checkpoints are never fresher than 300 s.
    slots = _slots((0, 0), (900, 900))
    limits = Limits(reread_max_records=1000, checkpoint_max_age_ms=0).for_flow(interval_s)
    assert limits.checkpoint_max_age_ms == 3_000 * interval_s
    r = partition_readiness(_evidence(950, lro=999, checkpoint=1, at=NOW - 240_000, read_at=500), slots, True,
                            limits, NOW)
    assert r.state is state
    assert Limits(1000, 120_000).for_flow(interval_s).checkpoint_max_age_ms == 120_000  # set: as set


def test_a_group_moved_on_without_passing_a_sync_is_owed_nothing():
    # 940 -> 950 translates to 901 both times: MM2 writes no new checkpoint (checkpointIsMoreRecent),
    # and the old one, as old as it gets, still says where the group resumes (the real MM2 does so)
    slots = _slots((0, 0), (900, 900))
    r = partition_readiness(_evidence(950, lro=999, checkpoint=901, at=NOW - 600_000, read_at=940), slots, True,
                            LIMITS, NOW)
    assert r.state is GroupState.READY and r.checkpoint_age_ms == 600_000


def test_a_group_that_went_back_is_owed_a_checkpoint():
    # MM2 writes a checkpoint after an upstream rewind even when the translation is the same
    slots = _slots((0, 0), (900, 900))
    r = partition_readiness(_evidence(920, lro=999, checkpoint=901, at=NOW - 600_000, read_at=940), slots, True,
                            LIMITS, NOW)
    assert r.state is GroupState.CHECKPOINT_OLD


def test_no_checkpoint_is_owed_that_mm2_cannot_translate():
    # only the newest sync kept, above the group's offset: MM2 writes nothing, so owes nothing
    slots = _slots((900, 900))
    r = partition_readiness(_evidence(850, lro=999, checkpoint=1, at=NOW - 600_000, read_at=500), slots, True,
                            LIMITS, NOW, history=_slots((0, 0), (900, 900)))
    assert r.state is not GroupState.CHECKPOINT_OLD


def test_an_idle_groups_old_checkpoint_is_still_true():
    # MM2 writes no checkpoint while the group stands still: age grows, the checkpoint holds
    slots = _slots((0, 0), (900, 900))
    r = partition_readiness(_evidence(950, lro=999, checkpoint=901, at=NOW - 86_400_000, read_at=950),
                            slots, True, LIMITS, NOW)
    assert r.state is GroupState.READY and r.checkpoint_age_ms == 86_400_000


def test_a_resume_point_beyond_the_group_skips_records():
    # target record 880 + k copies source record 900 + k or later: resuming at 960 starts at
    # source 980 at the earliest, past the group's 950 (MM2 < 3.4.1 could translate so)
    slots = _slots((0, 0), (900, 880))
    r = partition_readiness(_evidence(950, lro=999, checkpoint=960), slots, True, LIMITS, NOW)
    assert (r.resume_source, r.skipped, r.reread) == (980, 30, 0) and r.state is GroupState.SKIPS


def test_the_target_groups_own_offset_wins_where_mm2_synced_it():
    slots = _slots((0, 0), (900, 900))
    r = partition_readiness(_evidence(950, lro=999, checkpoint=901, target=940), slots, True, LIMITS, NOW)
    assert (r.resume_target, r.reread) == (940, 10)


@pytest.mark.parametrize("slots, ready, g, because", [
    (None, False, 10, NotCheckpointedBecause.SYNCS_LOADING),
    (None, True, 10, NotCheckpointedBecause.NO_SYNC),
    (_slots((500, 500)), True, 10, NotCheckpointedBecause.OLDER_THAN_SYNCS),
    (_slots((0, 0), (500, 500)), True, 600, NotCheckpointedBecause.NOT_WRITTEN),
])
def test_not_checkpointed_names_the_likely_cause(slots, ready, g, because):
    r = partition_readiness(_evidence(g, lro=999), slots, ready, LIMITS, NOW)
    assert r.state is GroupState.NOT_CHECKPOINTED and r.because is because and r.reread is None


@pytest.mark.parametrize("g, lro, state", [
    (0, NONE_COPIED, GroupState.READY),  # never written (or emptied) and never copied: nothing to skip or read again
    (0, None, GroupState.NOT_CHECKPOINTED),  # the LRO unknown: the target may hold records already
    (0, 4, GroupState.NOT_CHECKPOINTED),  # records copied: a consumer starting at the target's end skips them
    (3, NONE_COPIED, GroupState.NOT_CHECKPOINTED),  # it consumed records: MM2 owes a checkpoint
])
def test_a_group_at_offset_0_of_a_partition_mm2_copied_nothing_of_is_ready(g, lro, state):
    r = partition_readiness(_evidence(g, lro=lro), None, True, LIMITS, NOW)
    assert r.state is state, r
    if state is GroupState.READY:
        assert (r.resume_target, r.reread, r.skipped, r.not_yet_mirrored) == (None, 0, 0, 0)


def test_a_group_committed_at_a_commit_marker_skips_nothing():
    # A transaction's records 0..9 and its marker at 10, the next one's records from 11: MM2 copies
    # 0..9 to 0..9 and 11 to 10, so it writes syncs (9, 9) and (11, 10). A read_committed group at 10,
    # the marker, resumes at 10, a copy of 11: the offset between is the marker, no record skipped.
    slots = _slots((0, 0), (9, 9), (11, 10))
    r = partition_readiness(_evidence(10, lro=11, checkpoint=translate(slots, 10).downstream), slots, True, LIMITS, NOW)
    assert (r.resume_target, r.resume_source, r.skipped, r.reread) == (10, 11, 0, 0)
    assert r.state is GroupState.READY


def test_on_a_transactional_target_markers_take_offsets_between_copies():
    # Source records 0..999 copied to an exactly-once target in transactions of 10: each commit
    # marker takes a target offset, so target offset D + k after a sync (U, D) is a copy of source
    # record U + ceil(k / 2) or later (a marker after each record at worst), not U + k.
    slots = _slots((0, 0), (900, 990))
    assert upstream_of(slots, 1001) == 911 and upstream_of(slots, 1001, transactional_target=True) == 906
    # Target 1001 truly holds source 910 (990-999 records 900-909, a marker at 1000). A group at
    # 950 with its checkpoint there re-reads 40: at most 44 says the transactional bound, never
    # the 39 that reading the offsets as records says.
    r = partition_readiness(_evidence(950, lro=999, checkpoint=1001), slots, True, LIMITS, NOW,
                            transactional_target=True)
    assert (r.resume_source, r.reread, r.skipped, r.state) == (906, 44, 0, GroupState.READY)
    assert partition_readiness(_evidence(950, lro=999, checkpoint=1001), slots, True, LIMITS, NOW).reread == 39
    # A checkpoint past the group (MM2 < 3.4.1, or a reset below the syncs): at least the records
    # proved between where MM2 copies G to (991) and the resume point, and no more than the least
    # source offset the resume point can be a copy of (906) less G.
    r = partition_readiness(_evidence(905, lro=999, checkpoint=1002), slots, True, LIMITS, NOW,
                            transactional_target=True)
    assert translate(slots, 905).downstream == 991
    assert (r.resume_source, r.skipped, r.state) == (906, 1, GroupState.SKIPS)
    r = partition_readiness(_evidence(905, lro=999, checkpoint=992), slots, True, LIMITS, NOW,
                            transactional_target=True)
    assert (r.resume_source, r.skipped, r.state) == (901, 0, GroupState.READY)  # 991 may be a marker


def test_a_group_only_syncs_mm2_drops_at_restart_cover():
    mm2 = _slots((500, 500))  # what MM2 keeps after reading the topic at start
    history = _slots((0, 0), (500, 500))
    r = partition_readiness(_evidence(10, lro=999), mm2, True, LIMITS, NOW, history)
    assert r.because is NotCheckpointedBecause.OLDER_THAN_SYNCS_AFTER_RESTART


def test_a_checkpoint_maps_back_through_the_history_mm2_may_no_longer_hold():
    r = partition_readiness(_evidence(950, lro=999, checkpoint=1), _slots((500, 500)), True, LIMITS, NOW,
                            _slots((0, 0), (500, 500)))
    assert (r.resume_source, r.reread) == (1, 949)


def test_a_checkpoint_no_kept_sync_maps_back_is_unmapped_not_ready():
    r = partition_readiness(_evidence(950, lro=999, checkpoint=100), _slots((500, 500)), True, LIMITS, NOW)
    assert r.state is GroupState.UNMAPPED and r.reread is None


def test_a_group_state_is_its_worst_partition():
    assert worst([GroupState.READY, GroupState.REREAD_HIGH, GroupState.NOT_CHECKPOINTED]) is GroupState.NOT_CHECKPOINTED
    assert worst([GroupState.CHECKPOINT_OLD, GroupState.SKIPS]) is GroupState.SKIPS
    assert worst([]) is GroupState.READY


def test_without_the_checkpoints_topic_the_cause_says_so():
    r = partition_readiness(_evidence(600, lro=999), _slots((0, 0), (500, 500)), True, LIMITS, NOW,
                            checkpoints_read=False)
    assert r.because is NotCheckpointedBecause.CHECKPOINTS_UNREAD
