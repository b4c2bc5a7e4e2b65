"""MM2's own keys, read per flow as MirrorMakerConfig resolves them, on real brokers (issue 30,
cases 3 and 8): the source consumer's isolation level (for the LEO and the probe) and
emit.offset-syncs.enabled (no syncs read, not even old ones: connect-offsets instead).

tansu answers 0 to a READ_COMMITTED `latest` while a transaction is open, Kafka the LSO (docs/design.md
§8): either is below the high watermark, which is what tells the levels apart here."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Producer

from mirrorlag import ReplicationTracker
from mirrorlag.config import load_settings
from mirrorlag.embedded import free_port
from mirrorlag.formats import ConnectOffsetKey, OffsetSync, encode_connect_offset
from mirrorlag.model import PartitionKey
from mirrorlag.poll.poller import Poller
from mirrorlag.poll.wiring import lag_engine
from tests.conftest import write_properties
from tests.helpers import eventually, mirrorlag, produce_records, running_sidecar, status

pytestmark = pytest.mark.integration

RC, RU = "read_committed", "read_uncommitted"
BASE_MS = 1_700_000_000_000
SYNC_TOPIC = "mm2-offset-syncs.dst.internal"  # on the source: offset-syncs.topic.location = source
OFFSETS_TOPIC = "mm2-offsets.src.internal"  # dedicated MM2's Connect offsets, on the target


def test_each_flow_reads_its_leo_and_probes_at_its_mm2_consumers_level(tmp_path, clusters, topic_name):
    clusters.create_topic(topic_name, 1)
    config = tmp_path / "mm2.properties"
    config.write_text(
        f"clusters = src, dst, oth\nsrc.bootstrap.servers = {clusters.source}\n"
        f"dst.bootstrap.servers = {clusters.target}\noth.bootstrap.servers = {clusters.target}\n"
        f"src->dst.enabled = true\nsrc->oth.enabled = true\n"
        f"src->dst.topics = {topic_name}\nsrc->oth.topics = {topic_name}\n"
        # MM2's consumers: read_committed for every flow from src, but src->oth's own key wins.
        f"src.consumer.isolation.level = read_committed\n"
        f"src->oth.source.consumer.isolation.level = read_uncommitted\n"
        f"mirrorlag.request.timeout.ms = 5000\n")
    settings = load_settings([config])
    trackers = [ReplicationTracker("src", "dst"), ReplicationTracker("src", "oth")]
    poller = Poller(settings, lag_engine(settings), trackers=trackers)
    dst, oth = PartitionKey("src", "dst", topic_name, 0), PartitionKey("src", "oth", topic_name, 0)
    producer = Producer({"bootstrap.servers": clusters.source, "transactional.id": f"tx-{topic_name}",
                         "batch.num.messages": 1, "linger.ms": 0})
    try:
        produce_records(clusters.source, topic_name, 0, [BASE_MS, BASE_MS + 1000])  # offsets 0 and 1
        producer.init_transactions(15)
        producer.begin_transaction()
        for i in range(2):  # offsets 2 and 3, in a transaction left open
            producer.produce(topic_name, value=b"t", partition=0, timestamp=BASE_MS + 2000 + i * 1000)
            assert producer.flush(15) == 0
        rows = poller.poll_once().by_key()
        # read_uncommitted: the high watermark; read_committed: below it (Kafka: the LSO, 2; tansu: 0).
        assert rows[oth].leo == 4, rows[oth]
        assert rows[dst].leo is not None and rows[dst].leo < 4, rows[dst]
        producer.commit_transaction(15)  # its marker takes offset 4
    finally:
        producer.flush(5)
        del producer
    for tracker in trackers:
        tracker.replicated(topic_name, 0, 0)  # both mirrors copied record 0 only
    rows = poller.poll_once().by_key()
    assert (rows[dst].leo, rows[oth].leo) == (5, 5)  # committed: the LSO is the high watermark
    rows = poller.poll_once().by_key()  # the LRO stood still since the last poll: probed now
    # One probe per level, each fetching at its flow's level, each asked for its flow's partition.
    assert set(poller._probes) == {("src", RC), ("src", RU)}
    # src->oth (read_uncommitted) was owed from its log start at the first poll (the callback sees
    # every copy), so its probe also fetched from offset 0 then; src->dst's read_committed LEO was
    # below its log start's records (the open transaction), so it owed nothing yet.
    fetches = {RC: 1, RU: 2}
    for (_, level), probe in poller._probes.items():
        assert (probe.fetcher.isolation, probe.stats.probes_total, probe.stats.errors_total) == (
            level, fetches[level], 0)
    for key in (dst, oth):
        assert (rows[key].lro, rows[key].record_lag) == (0, 4), rows[key]
    poller.close()


def _write_connect_offset(bootstrap: str, topic: str, offset: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    key, value = encode_connect_offset(ConnectOffsetKey("MirrorSourceConnector", "src", topic, 0), offset)
    producer.produce(OFFSETS_TOPIC, key=key, value=value, partition=0)
    assert producer.flush(15) == 0


def _estate(tmp_path, clusters, topic: str, extra: str = "", port: int | None = None):
    """Source records 0..4, all copied to the target (src.<topic> holds 5); an old sync (3, 3) in
    the syncs topic; Connect's offsets say record 1."""
    clusters.create_topic(topic, 1)
    clusters.produce(topic, {0: 5})
    clusters.create_topic(f"src.{topic}", 1, which="target")
    clusters.produce(f"src.{topic}", {0: 5}, which="target")
    for name, which in ((SYNC_TOPIC, "source"), (OFFSETS_TOPIC, "target")):
        try:
            clusters.create_topic(name, 1, which=which)
        except Exception:
            pass  # shared across tests; the partitions named differ per test
    clusters.write_offset_syncs(SYNC_TOPIC, [OffsetSync(topic, 0, 3, 3)])
    _write_connect_offset(clusters.target, topic, 1)
    return write_properties(tmp_path / "mm2.properties", clusters, f"src->dst.topics = {topic}\n{extra}", port)


def test_with_offset_syncs_the_old_sync_and_target_progress_count(tmp_path, clusters, topic_name):
    # The control: what the syncs would prove if they were read (target progress: 3 + (5 - 1 - 3)).
    config = _estate(tmp_path, clusters, topic_name)
    result = mirrorlag("check", "--config", str(config), "--json", "--timeout", "3")
    (row,) = json.loads(result.stdout)
    assert (row["lro"], row["lro_feed"], row["state"]) == (4, "target-progress", "IN_SYNC"), row


def test_emit_offset_syncs_false_reads_no_sync_and_names_why(tmp_path, clusters, topic_name):
    port = free_port()
    config = _estate(tmp_path, clusters, topic_name, "src->dst.emit.offset-syncs.enabled = false\n"
                                                     "src.consumer.isolation.level = read_committed\n"
                                                     "dst.offset.flush.interval.ms = 5000\n"
                                                     # A second flow from src whose syncs are read.
                                                     f"clusters = src, dst, oth\noth.bootstrap.servers = {clusters.target}\n"
                                                     "src->oth.enabled = true\nsrc->oth.topics = none-such\n", port)
    result = mirrorlag("check", "--config", str(config), "--json", "--timeout", "3")
    (row,) = json.loads(result.stdout)
    assert (row["leo"], row["lro"], row["lro_feed"], row["record_lag"]) == (5, 1, "connect-offsets", 3), row
    with running_sidecar(config, port=port, log=tmp_path / "sidecar.log"):
        def seen() -> dict:
            body = status(port)
            (row,) = [r for r in body["partitions"] if r["topic"] == topic_name]
            assert (row["lro"], row["lro_feed"]) == (1, "connect-offsets"), row
            return body

        body = eventually(seen)
    flow, other = body["flows"]
    assert flow["flow"] == "src->dst" and flow["emit_offset_syncs"] is False
    assert other["flow"] == "src->oth" and other["emit_offset_syncs"] is True
    assert (flow["isolation_level"], flow["mm2_isolation_level"]) == (RC, RC)
    assert flow["isolation_level_from"].startswith("src.consumer.isolation.level at ")
    assert flow["offset_flush_interval_s"] == 5.0
    off = {(f["feed"], f["cluster"]): f["off"] for f in body["feeds"] if f["off"]}
    assert set(off) == {("offset-syncs", "src"), ("target-progress", "dst")}, body["feeds"]
    for entries in off.values():
        (entry,) = entries
        assert entry["flows"] == ["src->dst"] and entry["topics"] == [], entry
        assert entry["reason"].startswith("emit.offset-syncs.enabled = false"), entry
    # One entry for the syncs on src: it reads src->oth's topic only, and names src->dst as off.
    (syncs,) = [f for f in body["feeds"] if f["feed"] == "offset-syncs"]
    assert (syncs["cluster"], syncs["topics"]) == ("src", ["mm2-offset-syncs.oth.internal"]), syncs
    assert other["offset_flush_interval_s"] == 60.0  # each flow its own target's (feeds[]: the longest)
