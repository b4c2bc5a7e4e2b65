"""Per flow, as each flow's MM2 reads (issue 30, cases 3 and 8): the isolation level its LEOs are
asked and its partitions probed at, and the resolution of its flush-paced evidence."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from confluent_kafka import IsolationLevel

from mirrorlag.config import load_settings
from mirrorlag.config.settings import EngineParams
from mirrorlag.engine import LagEngine
from mirrorlag.feeds.off import offset_syncs_off_feeds, one_per_cluster
from mirrorlag.interfaces import FeedOff, FeedHealth
from mirrorlag.kafka.source import SourceCluster
from mirrorlag.model import FlowId, LroReading, LroTable, PartitionKey, PollObservation, State
from mirrorlag.poll.poller import Poller, _SourceView

RC, RU = "read_committed", "read_uncommitted"
THREE_FLOWS = """\
clusters = S, X, Y, Z
S.bootstrap.servers = 127.0.0.1:9
X.bootstrap.servers = 127.0.0.1:9
Y.bootstrap.servers = 127.0.0.1:9
Z.bootstrap.servers = 127.0.0.1:9
S->X.enabled = true
S->Y.enabled = true
S->Z.enabled = true
S.consumer.isolation.level = read_committed
S->Y.source.consumer.isolation.level = read_uncommitted
"""


def settings(tmp_path: Path, text: str = THREE_FLOWS):
    path = tmp_path / "mm2.properties"
    path.write_text(text)
    return load_settings([path])


def test_a_partition_is_asked_once_per_level_its_flows_read_at(tmp_path: Path) -> None:
    flows = settings(tmp_path).flows
    assert [(str(f.id), f.isolation_level) for f in flows] == [("S->X", RC), ("S->Y", RU), ("S->Z", RC)]
    topology = tuple(((("orders", range(2)),)) for _ in flows)
    view = _SourceView.build(flows, topology)
    x, y, z = ([PartitionKey("S", t, "orders", p) for p in range(2)] for t in "XYZ")
    assert sorted(view.partitions) == sorted(x + y)  # S->Z reads at S->X's level: asked as S->X's keys
    assert view.key_parts == (*x, *y, *x)


def test_one_level_for_every_flow_asks_each_partition_once(tmp_path: Path) -> None:
    flows = settings(tmp_path, THREE_FLOWS.replace("S->Y.source.consumer.isolation.level = read_uncommitted\n", "")).flows
    view = _SourceView.build(flows, tuple(((("orders", range(2)),)) for _ in flows))
    assert list(view.partitions) == [PartitionKey("S", "X", "orders", p) for p in range(2)]


def test_list_offsets_is_one_request_per_level(tmp_path: Path) -> None:
    s = settings(tmp_path)
    levels = {f.target: IsolationLevel.READ_COMMITTED if f.isolation_level == RC else IsolationLevel.READ_UNCOMMITTED
              for f in s.flows}
    source = SourceCluster("S", None, s.flows, 1.0, 250, levels["X"], levels)  # type: ignore[arg-type]
    x0, y0, y1 = PartitionKey("S", "X", "t", 0), PartitionKey("S", "Y", "t", 0), PartitionKey("S", "Y", "t", 1)
    assert source._by_isolation([x0, y0, y1]) == [(IsolationLevel.READ_COMMITTED, [x0]),
                                                  (IsolationLevel.READ_UNCOMMITTED, [y0, y1])]
    # A source whose flows agree sends its partitions as they are, at that level.
    same = SourceCluster("S", None, s.flows, 1.0, 250, IsolationLevel.READ_COMMITTED)  # type: ignore[arg-type]
    asked = [x0, y0]
    (group,) = same._by_isolation(asked)
    assert group[0] == IsolationLevel.READ_COMMITTED and group[1] is asked


class StandInProbe:
    def __init__(self) -> None:
        self.asked: list[list] = []

    def probe(self, requests, first_data=None):
        requests = list(requests)
        self.asked.append(requests)
        return {key: None for key, _, _ in requests}


def test_each_flow_is_probed_at_its_own_level(tmp_path: Path) -> None:
    s = settings(tmp_path)
    rc, ru = StandInProbe(), StandInProbe()
    poller = SimpleNamespace(_previous_poll=None, _isolation={f.id: f.isolation_level for f in s.flows},
                             _probes={("S", RC): rc, ("S", RU): ru}, _had_lro=(None, None))
    keys = [PartitionKey("S", t, "orders", 0) for t in "XYZ"]
    lros = LroTable.of({k: LroReading(4, "callback", 0.0, False) for k in keys})
    found = Poller._probe(poller, dict.fromkeys(keys, 10), keys, lros)  # type: ignore[arg-type]
    assert found == dict.fromkeys(keys)
    assert rc.asked == [[(keys[0], 5, 10), (keys[2], 5, 10)]] and ru.asked == [[(keys[1], 5, 10)]]


def test_each_flow_reads_its_own_targets_flush_resolution() -> None:
    """Two flows stalled alike; each is judged with its own evidence's resolution: the one whose
    target flushes every 60 s stays IN_SYNC within max + 60 s, the one at 5 s stalls past max + 5 s."""
    ab, cb = FlowId("A", "B"), FlowId("C", "D")
    a, c = PartitionKey("A", "B", "t", 0), PartitionKey("C", "D", "t", 0)
    engine = LagEngine(lambda flow: EngineParams(lag_time_max_s=30.0))
    res = {"connect-offsets": {ab: 60.0, cb: 5.0}}

    def poll(t: float, leo: int):
        lros = {k: LroReading(9, "connect-offsets", -1.0, False) for k in (a, c)}
        snap = engine.update(PollObservation(t, t + 0.5, {a: leo, c: leo}, lros, resolution_s=res))
        return {r.key: r.state for r in snap.rows}

    assert poll(0.0, 10) == {a: State.IN_SYNC, c: State.IN_SYNC}
    assert poll(15.0, 11) == {a: State.IN_SYNC, c: State.IN_SYNC}
    assert poll(45.0, 12) == {a: State.IN_SYNC, c: State.STALLED}
    assert poll(85.0, 12) == {a: State.IN_SYNC, c: State.STALLED}  # 85.5 s behind: within 30 + 60
    assert poll(105.0, 12) == {a: State.STALLED, c: State.STALLED}


def test_a_resolution_for_every_flow_still_reads_as_before() -> None:
    obs = PollObservation(0.0, 0.5, {}, {}, resolution_s={"connect-offsets": 60.0})
    assert obs.resolution("connect-offsets", FlowId("A", "B")) == 60.0
    assert obs.resolution("callback", FlowId("A", "B")) == obs.resolution(None, FlowId("A", "B")) == 0.0


def test_flows_without_offset_syncs_are_named_where_their_syncs_would_be(tmp_path: Path) -> None:
    text = THREE_FLOWS + "S->X.emit.offset-syncs.enabled = false\nS->Z.emit.offset-syncs.enabled = false\n" \
                         "S->Z.offset-syncs.topic.location = target\n"
    off = {(f.name, f.cluster_alias): f.health().off
           for f in offset_syncs_off_feeds(settings(tmp_path, text), ["offset-syncs", "target-progress"])}
    assert set(off) == {("offset-syncs", "S"), ("offset-syncs", "Z"), ("target-progress", "X"),
                        ("target-progress", "Z")}
    (entry,) = off["offset-syncs", "S"]
    assert entry.flows == ("S->X",) and entry.topics == ()
    assert entry.reason.startswith("emit.offset-syncs.enabled = false") and "mm2-offset-syncs.X.internal" in entry.reason
    assert "mm2-offset-syncs.S.internal" in off["offset-syncs", "Z"][0].reason
    # Only the feeds mirrorlag.lro.feeds lists.
    assert {f.name for f in offset_syncs_off_feeds(settings(tmp_path, text), ["connect-offsets"])} == set()


def test_an_off_feeds_reasons_join_the_feed_reading_that_cluster() -> None:
    reading = FeedHealth("offset-syncs", "S", ("mm2-offset-syncs.Y.internal",), (), 0)
    off_s = FeedHealth("offset-syncs", "S", (), (), 0, off=(FeedOff(("S->X",), (), "emit.offset-syncs.enabled = false"),))
    off_z = FeedHealth("offset-syncs", "Z", (), (), 0, off=(FeedOff(("S->Z",), (), "emit.offset-syncs.enabled = false"),))
    transactional = FeedHealth("target-progress", "X", (), (), 0, off=(FeedOff(("S->X",), (), "X.exactly.once..."),))
    assert one_per_cluster([reading, transactional, off_s, off_z]) == [
        FeedHealth("offset-syncs", "S", ("mm2-offset-syncs.Y.internal",), (), 0, off=off_s.off), transactional, off_z]
