"""The mirror's checkpoint decisions against MirrorCheckpointTask's rules, and MM2's group filter."""

import pytest

from mirrorlag.config import load_settings
from mirrorlag.config.group_filter import compile_patterns
from mirrorlag.groups.checkpoints import Checkpointed
from mirrorlag.groups.sync_store import SyncStore
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
