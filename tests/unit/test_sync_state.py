"""MM2's offset-sync emission rule and queues, ported from apache/kafka connect/mirror
MirrorSourceTaskTest.testOffsetSync/testZeroOffsetSync and OffsetSyncWriterTest."""

from __future__ import annotations

import pytest

from mirrorlag.formats import OffsetSync
from mirrorlag.mirror.sync_state import OffsetSyncWriter, PartitionState


def test_offset_sync_sequence_of_mm2():  # MirrorSourceTaskTest.testOffsetSync, line for line
    state = PartitionState(50)
    assert state.update(0, 100), "always emit offset sync on first update"
    assert state.should_sync_offsets
    state.reset()
    assert not state.should_sync_offsets
    assert state.update(2, 102), "upstream offset skipped -> resync"
    state.reset()
    assert not state.update(3, 152), "no sync"
    state.reset()
    assert state.update(4, 153), "one past target offset"
    state.reset()
    assert not state.update(5, 154), "no sync"
    state.reset()
    assert not state.update(6, 203), "no sync"
    state.reset()
    assert state.update(7, 204), "one past target offset"
    state.reset()
    assert state.update(2, 206), "upstream reset"
    state.reset()
    assert not state.update(3, 207), "no sync"
    state.reset()
    assert state.update(4, 3), "downstream reset"
    state.reset()
    assert not state.update(5, 4), "no sync"
    assert state.update(7, 6), "sync"
    assert state.update(7, 6), "sync (sticky until reset)"
    assert state.update(8, 7), "sync (sticky until reset)"
    assert state.update(10, 57), "sync"
    state.reset()
    assert not state.update(11, 58)
    assert not state.should_sync_offsets


def test_zero_max_offset_lag_always_syncs():  # testZeroOffsetSync
    state = PartitionState(0)
    for upstream, downstream in [(0, 100), (2, 102), (3, 153), (4, 154), (5, 155), (6, 207), (2, 208),
                                 (3, 209), (4, 3), (5, 4), (7, 6), (7, 6), (8, 7), (10, 57), (11, 58)]:
        assert state.update(upstream, downstream), (upstream, downstream)
        state.reset()


def test_first_record_syncs_then_consecutive_records_within_lag_max_do_not():
    state = PartitionState(3)
    assert state.update(0, 0)
    state.reset()
    for offset in (1, 2, 3):
        assert not state.update(offset, offset), offset
    assert state.update(4, 4), "4 - (0 + 1) >= 3"


@pytest.mark.parametrize("lag_max", [1, 2, 3, 100])
def test_lag_max_boundary_exactly(lag_max):
    state = PartitionState(lag_max)
    assert state.update(10, 20)
    state.reset()
    # downstream - (20 + 1) >= lag_max first holds at downstream = 21 + lag_max
    for step in range(1, lag_max + 1):
        assert not state.update(10 + step, 20 + step), step
    assert state.update(11 + lag_max, 21 + lag_max)
    assert state.last_sync_downstream_offset == 21 + lag_max


def test_skipped_upstream_offset_syncs():
    state = PartitionState(100)
    state.update(0, 0)
    state.reset()
    assert not state.update(1, 1)
    assert state.update(3, 2), "a gap upstream (compaction, transaction marker) resyncs"


def test_downstream_truncation_syncs():
    state = PartitionState(100)
    state.update(5, 50)
    state.reset()
    assert not state.update(6, 51)
    assert state.update(7, 10), "downstream went backwards"
    assert state.last_sync_downstream_offset == 10


def test_a_repeated_upstream_offset_syncs():  # a re-copy after a restart or retry
    state = PartitionState(100)
    state.update(0, 0)
    state.reset()
    assert state.update(0, 1)


class Recorder:
    def __init__(self) -> None:
        self.sent: list[OffsetSync] = []

    def __call__(self, sync: OffsetSync) -> None:
        self.sent.append(sync)


def test_maybe_queue_offset_syncs():  # OffsetSyncWriterTest.testMaybeQueueOffsetSyncs
    sent = Recorder()
    writer = OffsetSyncWriter(2, sent, max_outstanding=1)
    writer.maybe_queue("topic", 0, 0, 1)
    assert ("topic", 0) not in writer.delayed
    assert ("topic", 0) in writer.pending
    writer.maybe_queue("topic", 0, 1, 2)
    assert ("topic", 0) in writer.delayed


def test_fire_pending_respects_outstanding_limit():  # testFirePendingOffsetSyncs
    sent = Recorder()
    writer = OffsetSyncWriter(1, sent, max_outstanding=1)
    writer.maybe_queue("topic", 0, 0, 100)
    writer.fire_pending()
    assert sent.sent == [OffsetSync("topic", 0, 0, 100)]
    writer.maybe_queue("topic", 0, 2, 102)
    writer.fire_pending()
    assert len(sent.sent) == 1, "one sync in flight: the next waits"
    writer.completed()
    writer.fire_pending()
    assert sent.sent[-1] == OffsetSync("topic", 0, 2, 102)


def test_pending_syncs_coalesce_per_partition_keeping_order():
    sent = Recorder()
    writer = OffsetSyncWriter(0, sent, max_outstanding=0)
    writer.maybe_queue("a", 0, 0, 0)
    writer.maybe_queue("b", 0, 0, 0)
    writer.maybe_queue("a", 0, 1, 1)  # replaces a's pending sync, keeps its place
    writer.max_outstanding = 10
    writer.fire_pending()
    assert sent.sent == [OffsetSync("a", 0, 1, 1), OffsetSync("b", 0, 0, 0)]


def test_promote_delayed_offset_syncs():  # testPromoteDelayedOffsetSyncs
    sent = Recorder()
    writer = OffsetSyncWriter(50, sent, max_outstanding=1)
    writer.maybe_queue("topic", 0, 0, 100)
    writer.maybe_queue("topic", 0, 1, 101)
    writer.promote_delayed()
    assert writer.delayed == {}
    assert writer.pending == {("topic", 0): OffsetSync("topic", 0, 1, 101)}


def test_promoting_a_delayed_sync_does_not_move_the_rule():
    """A delayed sync sent at a commit leaves lastSyncDownstreamOffset alone, as in MM2."""
    sent = Recorder()
    writer = OffsetSyncWriter(3, sent)
    for offset in range(3):
        writer.maybe_queue("t", 0, offset, offset)
        writer.fire_pending()
    writer.promote_delayed()
    writer.fire_pending()
    for offset in range(3, 9):
        writer.maybe_queue("t", 0, offset, offset)
        writer.fire_pending()
    assert [s.upstream_offset for s in sent.sent] == [0, 2, 4, 8]


def test_an_immediate_sync_drops_the_delayed_one():
    sent = Recorder()
    writer = OffsetSyncWriter(100, sent)
    writer.maybe_queue("t", 0, 0, 0)
    writer.maybe_queue("t", 0, 1, 1)
    assert ("t", 0) in writer.delayed
    writer.maybe_queue("t", 0, 5, 2)  # upstream skipped: immediate
    assert ("t", 0) not in writer.delayed
    assert writer.pending[("t", 0)] == OffsetSync("t", 0, 5, 2)


def test_a_failed_send_releases_its_slot():
    def broken(_: OffsetSync) -> None:
        raise BufferError("queue full")

    writer = OffsetSyncWriter(0, broken, max_outstanding=1)
    writer.maybe_queue("t", 0, 0, 0)
    with pytest.raises(BufferError):
        writer.fire_pending()
    assert writer.outstanding == 0
