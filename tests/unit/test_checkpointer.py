"""The mirror's checkpoint decisions against MirrorCheckpointTask's rules, and MM2's group filter."""

import pytest

from mirrorlag.config import load_settings
from mirrorlag.config.group_filter import compile_patterns
from mirrorlag.groups.checkpoints import Checkpointed
from mirrorlag.groups.sync_store import SyncStore, kept
from mirrorlag.mirror.checkpointer import new_checkpoints, offsets_to_sync


def _store(*syncs, ready=True):
    store = SyncStore()
    if ready:
        store.read_to_end()
    for u, d in syncs:
        store.apply("t", 0, u, d)
    return store


def remote(topic):
    return None if topic == "other" else f"A.{topic}"


def test_translated_with_the_store_and_dropped_where_it_cannot():
    store = _store((100, 10), (200, 110))
    out = new_checkpoints("g", {("t", 0): 250, ("t", 1): 5, ("other", 0): 7}, store, {}, remote)
    assert [(c.topic, c.partition, c.upstream_offset, c.downstream_offset) for c in out] == [("A.t", 0, 250, 111)]
    assert new_checkpoints("g", {("t", 0): 50}, store, {}, remote) == []  # older than every sync: -1, dropped


def test_nothing_before_the_sync_topic_is_read_to_its_end():
    assert new_checkpoints("g", {("t", 0): 250}, _store((100, 10), ready=False), {}, remote) == []


@pytest.mark.parametrize("before, upstream, emitted", [
    ((240, 111), 250, False),  # same downstream: a repeated checkpoint
    ((300, 150), 250, True),  # upstream rewind: emitted even though downstream goes back
    ((240, 105), 250, True),  # downstream advanced
    ((200, 120), 250, False),  # downstream would go back without an upstream rewind
])
def test_only_more_recent_checkpoints_are_written(before, upstream, emitted):
    store = _store((100, 10), (200, 110))
    last = {("g", "A.t", 0): Checkpointed(before[0], before[1], 0)}
    assert bool(new_checkpoints("g", {("t", 0): upstream}, store, last, remote)) is emitted


def test_group_offsets_sync_only_forward_and_all_of_a_new_group():
    converted = {("A.t", 0): 50, ("A.t", 1): 70}
    assert offsets_to_sync(converted, None) == converted
    assert offsets_to_sync(converted, {("A.t", 0): 60, ("A.t", 1): 10}) == {("A.t", 1): 70}


def test_group_filter_defaults_and_legacy_blacklist(tmp_path):
    def flow(extra: str):
        path = tmp_path / "mm2.properties"
        path.write_text("clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\n"
                        "A->B.enabled = true\n" + extra)
        (f,) = load_settings([path]).flows
        return f

    f = flow("").group_filter
    assert f.accepts("billing") and not f.accepts("console-consumer-42") and not f.accepts("__consumer_offsets")
    f = flow("groups = app-.*\nA->B.groups.blacklist = app-test\n").group_filter
    assert f.accepts("app-prod") and not f.accepts("app-test") and not f.accepts("billing")
    f = flow("groups.exclude = \ngroups.blacklist = x\n").group_filter  # exclude set: blacklist ignored
    assert f.accepts("x") and f.accepts("console-consumer-1")
    with pytest.raises(ValueError, match="invalid regular expression '\\('"):
        compile_patterns("ok, (")
    assert not flow("emit.checkpoints.interval.seconds = -1\n").emit_checkpoints
    assert not flow("A->B.emit.offset-syncs.enabled = false\n").emit_checkpoints
    assert flow("A->B.sync.group.offsets.enabled = true\n").sync_group_offsets


class _Reader:
    """A TopicReader stand-in: hands out its records on the first drain."""

    def __init__(self, topic, records, read_through=True):
        self.topics, self.records, self.read_through, self.closed = [topic], list(records), read_through, False

    def drain(self, apply):
        for record in self.records:
            apply(self.topics[0], *record)
        self.records = []

    def unread(self, topic):
        return None if self.read_through else "not read to its end yet"

    def close(self):
        self.closed = True


def _task(tmp_path, checkpoint_reader, syncs):
    from mirrorlag.formats import OffsetSync, encode_offset_sync
    from mirrorlag.mirror.checkpointer import CheckpointOptions, CheckpointTask

    path = tmp_path / "mm2.properties"
    path.write_text("clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\n"
                    "A->B.enabled = true\ngroups = app-.*\n")
    (flow,) = load_settings([path]).flows
    sync_reader = _Reader("mm2-offset-syncs.B.internal", [encode_offset_sync(OffsetSync("t", 0, u, d)) for u, d in syncs])
    warnings = []
    task = CheckpointTask(flow, CheckpointOptions(flow.group_filter, emit_interval_s=3600), None, None, None,
                          sync_reader, checkpoint_reader, load_timeout_s=30,
                          warn=lambda key, message: warnings.append(message))
    return task, warnings


def test_a_restart_reads_its_checkpoints_then_keeps_every_sync(tmp_path):
    """MM2 3.7.1+ (KAFKA-15905): the checkpoints it wrote (its groups' only) are read first, and
    having read them the sync store keeps older syncs from the start."""
    from mirrorlag.formats import Checkpoint, encode_checkpoint

    mine = encode_checkpoint(Checkpoint("app-1", "A.t", 0, 150, 11, ""))
    other = encode_checkpoint(Checkpoint("billing", "A.t", 0, 150, 11, ""))
    reader = _Reader("A.checkpoints.internal", [(*mine, 1000), (*other, 1000)])
    task, warnings = _task(tmp_path, reader, [(100, 10), (200, 110)])
    task.start()
    assert task.started and reader.closed and not warnings
    assert set(task.checkpoints.newest) == {("app-1", "A.t", 0)}
    assert not task.store.must_read_to_end and task.store.ready
    assert [(s.upstream, s.downstream) for s in kept(task.store.slots("t", 0))] == [(200, 110), (100, 10)]
    # The checkpoint read is the last one: the same translation is not written again.
    assert new_checkpoints("app-1", {("t", 0): 150}, task.store, task.checkpoints.newest, remote) == []


def test_checkpoints_not_read_hold_everything_back_then_fall_back_to_the_newest_syncs(tmp_path):
    reader = _Reader("A.checkpoints.internal", [], read_through=False)
    task, warnings = _task(tmp_path, reader, [(100, 10), (200, 110)])
    task.start()
    assert not task.started and not task.store.ready  # MM2 polls nothing before its checkpoints are read
    task.tick(task._load_deadline - 1)
    assert not task.started and task.sync_reader.records
    task.tick(task._load_deadline + 1)
    assert task.started and reader.closed and warnings
    assert task.store.must_read_to_end and task.store.ready
    assert {(s.upstream, s.downstream) for s in task.store.slots("t", 0)} == {(200, 110)}


def test_without_a_checkpoint_reader_the_syncs_are_read_as_mm2_before_3_7_1(tmp_path):
    task, _ = _task(tmp_path, None, [(100, 10), (200, 110)])
    task.start()
    assert task.started and task.store.must_read_to_end
    assert {(s.upstream, s.downstream) for s in task.store.slots("t", 0)} == {(200, 110)}


def test_checkpoints_carry_the_groups_commit_metadata():
    store = SyncStore()
    store.apply("t", 0, 100, 10)
    store.read_to_end()
    (c,) = new_checkpoints("app-1", {("t", 0): 150}, store, {}, remote, {("t", 0): "consumer-7 at 149"})
    assert (c.upstream_offset, c.downstream_offset, c.metadata) == (150, 11, "consumer-7 at 149")
    (c,) = new_checkpoints("app-2", {("t", 0): 150}, store, {}, remote)
    assert c.metadata == ""


def test_groups_are_listed_at_start_and_every_refresh_interval(tmp_path, monkeypatch):
    import dataclasses

    from mirrorlag.mirror import checkpointer

    listings = []

    def list_groups(admin, timeout_s):
        listings.append(len(listings))
        return ["app-1", "billing"] if len(listings) == 1 else ["app-1", "app-2"]
    monkeypatch.setattr(checkpointer, "list_groups", list_groups)
    task, _ = _task(tmp_path, None, [])
    task.options = dataclasses.replace(task.options, refresh_groups_interval_s=600.0)
    assert task._list_groups(0.0) == ["app-1"]  # filtered by groups = app-.*
    assert task._list_groups(599.0) == ["app-1"] and len(listings) == 1  # a new group waits for the refresh
    assert task._list_groups(600.0) == ["app-1", "app-2"] and len(listings) == 2
    task.options = dataclasses.replace(task.options, refresh_groups_interval_s=None)  # refresh.groups.enabled=false
    assert task._list_groups(10_000.0) == ["app-1", "app-2"] and len(listings) == 2
