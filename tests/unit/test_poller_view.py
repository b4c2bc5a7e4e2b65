"""The poller's per-source view holds each partition's (topic, partition) once, whatever discovery
returns at each poll (a real SourceCluster builds new lists of new tuples from fresh metadata)."""

from pathlib import Path

from mirrorlag import ReplicationTracker
from mirrorlag.config import load_settings
from mirrorlag.model import FlowId
from mirrorlag.poller import Poller


class FreshSource:
    """Answers from memory, with new lists of new tuples at every discovery, as a broker would."""

    def __init__(self, flows, topics: dict[str, int]) -> None:
        self.alias = "src"
        self.flows = flows
        self.topics = topics
        self.discoveries = 0
        self.unanswered: set[tuple[str, int]] = set()  # partitions whose end offset fails

    def discover(self):
        self.discoveries += 1
        return {flow.id: [(t, p) for t, n in self.topics.items() for p in range(n)] for flow in self.flows}

    def request_end_offsets(self, partitions):
        return None

    def end_offsets(self, partitions, pending=None):
        return {tp: None if tp in self.unanswered else 10 for tp in partitions}

    def start_offsets(self, partitions):
        return {tp: 0 for tp in partitions}


def _poller(tmp_path: Path, more: str = "") -> tuple[Poller, FreshSource]:
    config = tmp_path / "mm2.properties"
    config.write_text("clusters = src, dst\nsrc.bootstrap.servers = 127.0.0.1:9\n"
                      "dst.bootstrap.servers = 127.0.0.1:9\nsrc->dst.enabled = true\n" + more)
    poller = Poller(load_settings([config]), trackers=[ReplicationTracker("src", "dst")])
    source = FreshSource(poller.sources["src"].flows, {"a": 3, "b": 2})
    poller.sources = {"src": source}  # type: ignore[dict-item]
    return poller, source


def test_an_unchanged_topology_is_held_once_with_the_views_own_tuples(tmp_path):
    poller, _ = _poller(tmp_path)
    flow = FlowId("src", "dst")
    poller.poll_once()
    view = poller._views["src"]
    poller.poll_once()
    assert poller._views["src"] is view  # not rebuilt
    (parts,) = view.topology
    assert poller._topology[flow] is parts  # the newest discovery's lists were dropped
    assert all(a is b for a, b in zip(view.key_parts, parts))
    assert {id(tp) for tp in view.partitions} == {id(tp) for tp in parts}
    assert [(k.topic, k.partition) for k in view.keys] == parts


def test_a_changed_topology_builds_a_new_view(tmp_path):
    poller, source = _poller(tmp_path)
    snapshot = poller.poll_once()
    assert len(snapshot) == 5
    source.topics["c"] = 1
    snapshot = poller.poll_once()
    assert len(snapshot) == 6
    (parts,) = poller._views["src"].topology
    assert poller._topology[FlowId("src", "dst")] is parts
    assert ("c", 0) in parts


def test_the_trackers_offsets_reach_only_partitions_metadata_lists(tmp_path):
    poller, _ = _poller(tmp_path)
    (tracker,) = poller.trackers.values()
    tracker.replicated("a", 0, 5)
    tracker.replicated("a", 2, 8)
    tracker.replicated("b", 1, 6)
    snapshot = poller.poll_once()
    lro = {(row.key.topic, row.key.partition): row.lro for row in snapshot.rows}
    assert lro == {("a", 0): 5, ("a", 1): None, ("a", 2): 8, ("b", 0): None, ("b", 1): 6}
    # Partitions metadata does not list, and a replicator's junk, never enter the cache.
    tracker.replicated("a", 3, 1)
    tracker.replicated("a", -1, 4)
    tracker.replicated("zz", 0, 3)
    tracker.replicated("b", "1", 2)  # type: ignore[arg-type]
    tracker.replicated("b", 0, 9)
    snapshot = poller.poll_once()
    lro = {(row.key.topic, row.key.partition): row.lro for row in snapshot.rows}
    assert lro == {("a", 0): 5, ("a", 1): None, ("a", 2): 8, ("b", 0): 9, ("b", 1): 6}
    assert len(poller.cache) == 4


def test_a_partition_keeps_its_key_object_when_the_topology_changes(tmp_path):
    """The LRO cache and the feeds keep the first key object they saw: a new one for every
    partition at each topology change would leave them a second set."""
    poller, source = _poller(tmp_path)
    poller.poll_once()
    before = {(k.topic, k.partition): k for k in poller._views["src"].keys}
    before_tp = {tp: tp for tp in poller._views["src"].key_parts}
    source.topics["c"] = 2
    del source.topics["b"]
    poller.poll_once()
    view = poller._views["src"]
    after = {(k.topic, k.partition): k for k in view.keys}
    assert set(after) == {("a", 0), ("a", 1), ("a", 2), ("c", 0), ("c", 1)}
    assert all(after[tp] is before[tp] for tp in after if tp in before)
    (parts,) = view.topology
    assert all(tp is before_tp[tp] for tp in parts if tp in before_tp)  # the tuples too
    assert poller._topology[FlowId("src", "dst")] is parts
    assert all(a is b for a, b in zip(view.key_parts, parts))


class KeyTakingFeed:
    name = "offset-syncs"
    bad_records = 0
    reader = None

    def __init__(self) -> None:
        self.key_of = None

    def use_keys(self, key_of) -> None:
        self.key_of = key_of

    def offsets(self):
        return {}


def test_feeds_that_decode_keys_are_given_the_pollers_key_objects(tmp_path):
    config = tmp_path / "mm2.properties"
    config.write_text("clusters = src, dst\nsrc.bootstrap.servers = 127.0.0.1:9\n"
                      "dst.bootstrap.servers = 127.0.0.1:9\nsrc->dst.enabled = true\n")
    feed = KeyTakingFeed()
    poller = Poller(load_settings([config]), feeds=[feed])
    poller.sources = {"src": FreshSource(poller.sources["src"].flows, {"a": 3})}  # type: ignore[dict-item]
    poller.poll_once()
    flow = FlowId("src", "dst")
    (key,) = [k for k in poller._views["src"].keys if k.partition == 2]
    assert feed.key_of(flow, "a", 2) is key
    assert feed.key_of(flow, "a", 3) is None and feed.key_of(flow, "b", 0) is None
    assert feed.key_of(flow, "a", -1) is None and feed.key_of(FlowId("x", "y"), "a", 0) is None


def test_metadata_is_read_again_when_it_is_older_than_its_max_age(tmp_path):
    poller, source = _poller(tmp_path, "mirrorlag.metadata.max.age.ms = 60000\n")
    now = [1000.0]
    poller.clock = lambda: now[0]
    polled = []
    for _ in range(9):  # 15 s apart: metadata at 0, 60 and 120 s
        polled.append(source.discoveries)
        snapshot = poller.poll_once()
        now[0] += 15.0
    assert [b - a for a, b in zip(polled, polled[1:] + [source.discoveries])] == [1, 0, 0, 0, 1, 0, 0, 0, 1]
    source.topics["c"] = 1  # not seen until the metadata is read again
    assert len(poller.poll_once()) == len(snapshot) == 5
    source.unanswered = {("a", 1)}  # e.g. its topic was deleted: the next poll reads metadata at once
    now[0] += 15.0
    poller.poll_once()
    source.unanswered = set()
    now[0] += 15.0
    before = source.discoveries
    assert len(poller.poll_once()) == 6 and source.discoveries == before + 1
    now[0] += 15.0
    poller.poll_once()
    assert source.discoveries == before + 1  # answered in full: back to its age


def test_metadata_is_read_at_every_poll_by_default(tmp_path):
    poller, source = _poller(tmp_path)
    for _ in range(3):
        poller.poll_once()
    assert source.discoveries == 3
