"""The poller's per-source view: a key per partition, kept while discovery returns the same
topology (a real SourceCluster builds a new one from fresh metadata at each discovery)."""

from pathlib import Path

from mirrorlag import ReplicationTracker
from mirrorlag.config import load_settings
from mirrorlag.interfaces import LroFeed
from mirrorlag.kafka.source import partitions_of
from mirrorlag.model import FlowId, PartitionKey, State
from mirrorlag.kafka.probe import SourceProbe
from mirrorlag.poll.poller import Poller
from mirrorlag.poll.wiring import lag_engine


class FreshSource:
    """Answers from memory, with a new topology at every discovery, as a broker would."""

    def __init__(self, flows, topics: dict[str, int]) -> None:
        self.alias = "src"
        self.flows = flows
        self.topics = topics
        self.discoveries = 0
        self.unanswered: set[tuple[str, int]] = set()  # partitions whose end offset fails
        self.metadata_errors = 0  # as SourceCluster's
        self.recreated: frozenset[str] = frozenset()
        self.unresolved: frozenset[str] = frozenset()
        self.ids_read: frozenset[str] = frozenset()
        self.ids_asked: list[list[str] | None] = []  # per discovery, the IDs asked (None: all, the cadence)
        self.leos: dict[tuple[str, int], int] = {}  # end offsets other than 10
        self.starts: dict[tuple[str, int], int] = {}  # log starts other than 0

    def discover(self, ids_of=None):
        self.discoveries += 1
        self.ids_asked.append(None if ids_of is None else sorted(ids_of))
        return {flow.id: tuple((t, range(n)) for t, n in sorted(self.topics.items()) if flow.should_replicate(t))
                for flow in self.flows}

    def request_end_offsets(self, partitions):
        return None

    def end_offsets(self, partitions, pending=None):
        return {tp: None if tuple(tp[-2:]) in self.unanswered else self.leos.get(tuple(tp[-2:]), 10) for tp in partitions}

    def start_offsets(self, partitions):
        return {tp: self.starts.get(tuple(tp[-2:]), 0) for tp in partitions}


# Metadata at every poll unless a test says otherwise: these tests change the topology between polls.
EVERY_POLL = "mirrorlag.metadata.max.age.ms = 0\n"


def _poller(tmp_path: Path, more: str = EVERY_POLL) -> tuple[Poller, FreshSource]:
    config = tmp_path / "mm2.properties"
    config.write_text("clusters = src, dst\nsrc.bootstrap.servers = 127.0.0.1:9\n"
                      "dst.bootstrap.servers = 127.0.0.1:9\nsrc->dst.enabled = true\n" + more)
    settings = load_settings([config])
    poller = Poller(settings, lag_engine(settings), trackers=[ReplicationTracker("src", "dst")])
    source = FreshSource(poller.sources["src"].flows, {"a": 3, "b": 2})
    poller.sources = {"src": source}  # type: ignore[dict-item]
    # No source to probe either: partitions owed from their log start ask, and get no answer at once.
    poller._probes["src", "read_uncommitted"] = SourceProbe(None, fetcher=_NoAnswer())
    return poller, source


class _NoAnswer:
    def fetch(self, starts, timeout_s):
        return {}

    def close(self) -> None:
        pass


def test_an_unchanged_topology_keeps_its_view_and_no_pair_per_partition(tmp_path):
    poller, _ = _poller(tmp_path)
    flow = FlowId("src", "dst")
    poller.poll_once()
    view = poller._views["src"]
    poller.poll_once()
    assert poller._views["src"] is view  # not rebuilt
    (topics,) = view.topology
    assert poller._topology[flow] == topics == (("a", range(3)), ("b", range(2)))
    # One flow: ListOffsets is asked with the keys themselves, no (topic, partition) pairs.
    assert view.key_parts is view.keys and view.partitions is view.keys
    assert [(k.topic, k.partition) for k in view.keys] == partitions_of(topics)


def test_a_changed_topology_builds_a_new_view(tmp_path):
    poller, source = _poller(tmp_path)
    snapshot = poller.poll_once()
    assert len(snapshot) == 5
    source.topics["c"] = 1
    snapshot = poller.poll_once()
    assert len(snapshot) == 6
    (topics,) = poller._views["src"].topology
    assert poller._topology[FlowId("src", "dst")] == topics
    assert ("c", range(1)) in topics


def test_two_flows_from_one_source_ask_each_partition_once(tmp_path):
    config = tmp_path / "mm2.properties"
    config.write_text("clusters = src, dst, dr\nsrc.bootstrap.servers = 127.0.0.1:9\n"
                      "dst.bootstrap.servers = 127.0.0.1:9\ndr.bootstrap.servers = 127.0.0.1:9\n"
                      "src->dst.enabled = true\nsrc->dr.enabled = true\nsrc->dr.topics = b\n")
    settings = load_settings([config])
    poller = Poller(settings, lag_engine(settings))
    source = FreshSource(poller.sources["src"].flows, {"a": 2, "b": 2})
    asked = []
    answer = source.end_offsets
    source.end_offsets = lambda partitions, pending=None: (asked.append(list(partitions)), answer(partitions))[1]
    poller.sources = {"src": source}  # type: ignore[dict-item]
    snapshot = poller.poll_once()
    assert [tuple(tp[-2:]) for tp in asked[0]] == [("a", 0), ("a", 1), ("b", 0), ("b", 1)]
    rows = {(r.key.target, r.key.topic, r.key.partition): r.leo for r in snapshot.rows}
    assert rows == {("dst", "a", 0): 10, ("dst", "a", 1): 10, ("dst", "b", 0): 10, ("dst", "b", 1): 10,
                    ("dr", "b", 0): 10, ("dr", "b", 1): 10}


def test_the_trackers_offsets_reach_only_partitions_metadata_lists(tmp_path):
    poller, _ = _poller(tmp_path)
    (tracker,) = poller.trackers.values()
    tracker.replicated("a", 0, 5)
    tracker.replicated("a", 2, 8)
    tracker.replicated("b", 1, 6)
    snapshot = poller.poll_once()
    lro = {(row.key.topic, row.key.partition): (row.lro, row.lro_feed) for row in snapshot.rows}
    # The callback sees every copy, so a partition it never copied is owed from its log start (0).
    assert lro == {("a", 0): (5, "callback"), ("a", 1): (-1, "log-start"), ("a", 2): (8, "callback"),
                   ("b", 0): (-1, "log-start"), ("b", 1): (6, "callback")}
    # Partitions metadata does not list, and a replicator's junk, never enter the cache.
    tracker.replicated("a", 3, 1)
    tracker.replicated("a", -1, 4)
    tracker.replicated("zz", 0, 3)
    tracker.replicated("b", "1", 2)  # type: ignore[arg-type]
    tracker.replicated("b", 0, 9)
    snapshot = poller.poll_once()
    lro = {(row.key.topic, row.key.partition): row.lro for row in snapshot.rows}
    assert lro == {("a", 0): 5, ("a", 1): -1, ("a", 2): 8, ("b", 0): 9, ("b", 1): 6}
    assert len(poller.cache) == 5  # a/1's owed from its log start


def test_a_partition_never_copied_stays_owed_from_its_first_log_start(tmp_path):
    # Retention deleting records MM2 never copied moves the log start, not the LRO: they are lost
    # (unverified here: no probe proved them data), and nothing was copied.
    poller, source = _poller(tmp_path)
    (tracker,) = poller.trackers.values()
    for p in range(3):
        tracker.replicated("a", p, 9)
    tracker.replicated("b", 1, 9)
    assert poller.poll_once().by_key()[PartitionKey("src", "dst", "b", 0)].lro == -1
    source.starts[("b", 0)] = 4
    poller._log_starts_due = 0.0  # read again at this poll
    row = poller.poll_once().by_key()[PartitionKey("src", "dst", "b", 0)]
    assert (row.lro, row.lro_feed, row.log_start, row.record_lag) == (-1, "log-start", 4, 10), row
    assert (row.records_lost, row.records_lost_unverified) == (0, 4), row
    assert not row.copy_rate, row


def test_a_partition_keeps_its_key_object_when_the_topology_changes(tmp_path):
    """The LRO cache and the feeds keep the first key object they saw: a new one for every
    partition at each topology change would leave them a second set."""
    poller, source = _poller(tmp_path)
    poller.poll_once()
    before = {(k.topic, k.partition): k for k in poller._views["src"].keys}
    source.topics["c"] = 2
    del source.topics["b"]
    poller.poll_once()
    view = poller._views["src"]
    after = {(k.topic, k.partition): k for k in view.keys}
    assert set(after) == {("a", 0), ("a", 1), ("a", 2), ("c", 0), ("c", 1)}
    assert all(after[tp] is before[tp] for tp in after if tp in before)


class KeyTakingFeed(LroFeed):
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
    settings = load_settings([config])
    poller = Poller(settings, lag_engine(settings), feeds=[feed])
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
    assert source.ids_asked == [None] * 3  # on the cadence: every known topic's ID
    source.unanswered = {("a", 1)}  # e.g. its topic was deleted: metadata is read at once, at this poll
    now[0] += 15.0
    before = source.discoveries
    assert len(poller.poll_once()) == 6 and source.discoveries == before + 1
    assert source.ids_asked[-1] == ["a"]  # with the ID of the topic whose end offset failed
    source.unanswered = set()
    now[0] += 15.0
    poller.poll_once()  # it still failed after that read: read again at the next poll
    assert source.discoveries == before + 2 and source.ids_asked[-1] == []
    now[0] += 15.0
    poller.poll_once()  # the cadence is kept: due at 180 s whatever was read between
    assert source.discoveries == before + 3 and source.ids_asked[-1] is None
    now[0] += 15.0
    poller.poll_once()
    assert source.discoveries == before + 3  # answered in full: back to its age


def test_metadata_is_read_again_at_the_next_poll_while_an_absent_topic_is_unanswered(tmp_path):
    """A topic the listing omitted and the request naming it did not answer about (discovery
    keeps it, `unresolved`): the metadata is read again at the next poll, not at its age."""
    poller, source = _poller(tmp_path, "mirrorlag.metadata.max.age.ms = 60000\n")
    now = [1000.0]
    poller.clock = lambda: now[0]
    poller.poll_once()
    source.unresolved = frozenset({"a"})
    now[0] += 15.0
    poller.poll_once()  # still within its age: not read
    assert source.discoveries == 1
    now[0] += 60.0
    poller.poll_once()  # read at its age: unresolved, so read again at each next poll
    for _ in range(2):
        now[0] += 15.0
        poller.poll_once()
    assert source.discoveries == 4
    source.unresolved = frozenset()
    now[0] += 15.0
    poller.poll_once()  # the read the last one asked for: answered
    assert source.discoveries == 5
    for _ in range(3):  # back to its age: at 135 s (60 s after the cadence's read at 75 s), then none
        now[0] += 15.0
        poller.poll_once()
    assert source.discoveries == 6


def test_metadata_is_read_at_every_poll_with_a_max_age_of_0(tmp_path):
    poller, source = _poller(tmp_path, EVERY_POLL)
    for _ in range(3):
        poller.poll_once()
    assert source.discoveries == 3


def test_partition_numbers_are_a_range_when_they_are_zero_to_n():
    from mirrorlag.kafka.source import _numbers

    assert _numbers({2: None, 0: None, 1: None}) == range(3) and _numbers([]) == range(0)
    assert _numbers([3, 0, 1]) == (0, 1, 3)  # not 0..n-1: kept as they are


def test_keys_by_topic_name_each_flows_own_keys_also_where_numbers_have_gaps(tmp_path):
    from mirrorlag.poll.poller import _SourceView, _TopicKeys

    config = tmp_path / "mm2.properties"
    config.write_text("clusters = src, dst, dr\nsrc.bootstrap.servers = 127.0.0.1:9\n"
                      "dst.bootstrap.servers = 127.0.0.1:9\ndr.bootstrap.servers = 127.0.0.1:9\n"
                      "src->dst.enabled = true\nsrc->dr.enabled = true\n")
    flows = load_settings([config]).flows
    topology = ((("a", range(2)), ("g", (0, 3))), (("g", (0, 3)),))
    view = _SourceView.build(flows, topology)
    dst, dr = (_TopicKeys.of(view, flow.id) for flow in flows)
    assert dst.key("a", 1) == ("src", "dst", "a", 1) and dst.key("g", 3) == ("src", "dst", "g", 3)
    assert dr.key("g", 3) == ("src", "dr", "g", 3) and dr.key("a", 0) is None
    assert [dst.key("g", p) for p in (1, 2, 4, -1)] == [None] * 4 and dst.key("a", 2) is None
    assert list(dst["g"]) == [view.keys[2], None, None, view.keys[3]] and dst["a"] == view.keys[:2]
    assert [k[-2:] for k in view.partitions] == [("a", 0), ("a", 1), ("g", 0), ("g", 3)]
    assert view.key_parts[4:] == view.keys[2:4]  # dr's g partitions are asked as dst's


class RecordingFeed(LroFeed):
    """Reports fixed offsets and records what the poller makes it forget."""

    name = "offset-syncs"
    bad_records = 0
    reader = None

    def __init__(self, offsets) -> None:
        self.lros = dict(offsets)
        self.forgotten: list = []

    def offsets(self):
        return dict(self.lros)

    def forget(self, keys) -> None:
        keys = list(keys)
        self.forgotten.append(sorted((k.topic, k.partition) for k in keys))
        for key in keys:
            self.lros.pop(key, None)


class RecreatingSource(FreshSource):
    """A FreshSource whose `recreated` names topics as SourceCluster.discover does."""

    def __init__(self, flows, topics, leos) -> None:
        super().__init__(flows, topics)
        self.leos = leos
        self.recreated: frozenset = frozenset()
        self.metadata_errors = 0



class IdSource(RecreatingSource):
    """A RecreatingSource that tells a topic recreated (`renewed`) only at a discovery that
    reads its topic ID, as SourceCluster.discover does."""

    def __init__(self, flows, topics, leos) -> None:
        super().__init__(flows, topics, leos)
        self.renewed: set[str] = set()

    def discover(self, ids_of=None):
        topology = super().discover(ids_of)
        self.ids_read = frozenset(self.topics if ids_of is None else set(ids_of) & set(self.topics))
        self.recreated = frozenset(self.renewed & self.ids_read)
        self.renewed -= self.ids_read
        return topology


def _recording_poller(tmp_path, more: str = EVERY_POLL, source_type: type[RecreatingSource] = RecreatingSource):
    config = tmp_path / "mm2.properties"
    config.write_text("clusters = src, dst\nsrc.bootstrap.servers = 127.0.0.1:9\n"
                      "dst.bootstrap.servers = 127.0.0.1:9\nsrc->dst.enabled = true\n" + more)
    settings = load_settings([config])
    flow = settings.flows[0]
    keys = {(t, p): PartitionKey("src", "dst", t, p) for t, n in (("a", 2), ("b", 1)) for p in range(n)}
    feed = RecordingFeed({keys["a", 0]: 9, keys["a", 1]: 9, keys["b", 0]: 9})
    poller = Poller(settings, lag_engine(settings), feeds=[feed])
    source = source_type([flow], {"a": 2, "b": 1}, {})
    poller.sources = {"src": source}  # type: ignore[dict-item]
    poller._probes["src", "read_uncommitted"] = SourceProbe(None, fetcher=_NoAnswer())
    seen = []
    update = poller.engine.update
    poller.engine.update = lambda obs: (seen.append(obs), update(obs))[1]  # type: ignore[method-assign]
    return poller, source, feed, seen


def _by_topic(snapshot):
    return {(r.key.topic, r.key.partition): (r.state, r.lro) for r in snapshot.rows}


def test_a_changed_topic_id_drops_the_old_lros_before_they_are_read_and_tells_the_engine(tmp_path):
    poller, source, feed, seen = _recording_poller(tmp_path)
    poller.poll_once()
    assert _by_topic(poller.poll_once())["a", 0][1] == 9 and feed.forgotten == []
    assert seen[-1].new_logs == frozenset()
    source.recreated = frozenset({"a"})
    snapshot = poller.poll_once()
    assert feed.forgotten[0] == [("a", 0), ("a", 1)]
    assert {(k.topic, k.partition) for k in seen[-1].new_logs} == {("a", 0), ("a", 1)}
    assert not any(k.topic == "a" for k in seen[-1].lros)  # dropped from the cache before the engine read it
    rows = _by_topic(snapshot)
    assert rows["a", 0] == rows["a", 1] == (State.RESET, None) and rows["b", 0][1] == 9
    source.recreated = frozenset()
    rows = _by_topic(poller.poll_once())
    assert rows["a", 0] == rows["a", 1] == (State.UNKNOWN, None)
    assert seen[-1].new_logs == frozenset()


def test_an_end_offset_that_went_back_has_its_topic_id_read_at_that_poll(tmp_path):
    """Metadata on its cadence (the default max age, a minute), yet a topic deleted and created
    again whose LEO went back has its topic ID read at the poll that sees it: RESET by its ID at
    once, so the next read on the cadence finds no second change (which would drop the new log's
    evidence again)."""
    poller, source, feed, seen = _recording_poller(tmp_path, "", IdSource)
    assert poller.settings.metadata_max_age_s == 60.0  # the default
    now = [1000.0]
    poller.clock = lambda: now[0]
    source.leos = {("a", 0): 100, ("a", 1): 100}
    for _ in range(2):
        poller.poll_once()
        now[0] += 15.0
    assert source.ids_asked == [None]  # one read, on the cadence: every topic's ID
    source.leos = {("a", 0): 5, ("a", 1): 100}  # recreated between two polls
    source.renewed = {"a"}
    rows = _by_topic(poller.poll_once())
    assert source.ids_asked == [None, ["a"]]  # read at once, with the ID of that topic alone
    assert {(k.topic, k.partition) for k in seen[-1].new_logs} == {("a", 0), ("a", 1)}  # both: a new log
    assert rows["a", 0] == rows["a", 1] == (State.RESET, None) and rows["b", 0][1] == 9
    forgotten = list(feed.forgotten)
    for _ in range(4):  # to the next read on the cadence, at 60 s
        now[0] += 15.0
        rows = _by_topic(poller.poll_once())
        assert rows["a", 0] == rows["a", 1] == (State.UNKNOWN, None), rows
    assert source.ids_asked == [None, ["a"], None] and feed.forgotten == forgotten  # no second RESET
    # An LEO going back at a poll whose cadence read has read the IDs: no second read.
    source.leos = {("a", 0): 1, ("a", 1): 100}
    source.renewed = {"a"}
    now[0] += 60.0
    assert _by_topic(poller.poll_once())["a", 0][0] == State.RESET
    assert source.ids_asked == [None, ["a"], None, None]


def test_a_reset_row_drops_its_lro_from_the_feeds_and_the_cache(tmp_path):
    poller, source, feed, _ = _recording_poller(tmp_path)
    source.leos = {("a", 0): 100}
    poller.poll_once()
    poller.poll_once()
    source.leos = {("a", 0): 5}  # the LEO went back: a new log
    rows = _by_topic(poller.poll_once())
    assert rows["a", 0][0] == State.RESET
    assert feed.forgotten == [[("a", 0)]]
    assert len(poller.cache) == 2
    rows = _by_topic(poller.poll_once())
    assert rows["a", 0] == (State.UNKNOWN, None) and rows["a", 1][1] == 9
    assert feed.forgotten == [[("a", 0)]]  # once, not at every poll


def test_metadata_errors_are_counted_per_source(tmp_path):
    poller, source, _, _ = _recording_poller(tmp_path)
    source.metadata_errors = 3
    poller.poll_once()
    assert poller.stats.metadata_errors_total == {"src": 3}
