"""Target-progress evidence (issue 23) on real brokers through the real CLI: the remote partition's
end offset on the target, translated through the newest offset sync, proves what the sync alone
cannot (LRO >= U + (T - 1 - D), capped at the LEO snapshot), off where MM2 writes the target in
transactions, and said so where the remote topic is missing. Offset syncs are written by hand,
the bytes MM2 writes; target records stand for MM2's copies."""

from __future__ import annotations

import json
import time
import uuid

import pytest
from confluent_kafka import KafkaError, KafkaException

from mirrorlag.embedded import free_port
from mirrorlag.formats import OffsetSync
from tests.conftest import write_properties
from tests.helpers import (eventually, labels, mirrored_topic, mirrorlag, produce_records, running_mirror,
                           running_sidecar, scrape, status, steady_producer)

pytestmark = pytest.mark.integration

SYNC_TOPIC = "mm2-offset-syncs.dst.internal"  # on the source: offset-syncs.topic.location = source



def _ensure_topic(clusters, name: str, which: str = "source") -> None:
    """Creates a one-partition topic the tests share (the offset-syncs topics); one there already
    is kept, any other failure fails the test."""
    try:
        clusters.create_topic(name, 1, which=which)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise

def _estate(tmp_path, clusters, topic: str, source_records: int, target_records: int, sync: OffsetSync,
            extra: str = "", port: int | None = None):
    clusters.create_topic(topic, 1)
    clusters.produce(topic, {0: source_records})
    if target_records:
        clusters.create_topic(f"src.{topic}", 1, which="target")
        clusters.produce(f"src.{topic}", {0: target_records}, which="target")
    _ensure_topic(clusters, SYNC_TOPIC)
    clusters.write_offset_syncs(SYNC_TOPIC, [sync])
    return write_properties(tmp_path / "mm2.properties", clusters, f"src->dst.topics = {topic}\n{extra}", port)


def _check(config) -> tuple[int, dict]:
    result = mirrorlag("check", "--config", str(config), "--json", "--timeout", "3")
    (row,) = json.loads(result.stdout)
    return result.returncode, row


def test_target_progress_proves_records_copied_after_the_newest_sync(tmp_path, clusters, topic_name):
    # Source records 0..9; the sync says upstream 2 became target record 2; the target holds 7
    # records, so upstream records 3..6 were copied too: LRO 6, record lag 3.
    config = _estate(tmp_path, clusters, topic_name, 10, 7, OffsetSync(topic_name, 0, 2, 2))
    _, row = _check(config)
    assert (row["leo"], row["lro"], row["record_lag"], row["lro_feed"]) == (10, 6, 3, "target-progress"), row


def test_target_progress_is_capped_at_the_leo_snapshot(tmp_path, clusters, topic_name):
    # More target records than source records after the sync (read after the LEO snapshot, the
    # target can be ahead of it): caught up, never an LRO beyond the LEO (that would read RESET).
    config = _estate(tmp_path, clusters, topic_name, 10, 14, OffsetSync(topic_name, 0, 2, 2))
    status_code, row = _check(config)
    assert (row["lro"], row["record_lag"], row["state"]) == (9, 0, "IN_SYNC"), row
    assert status_code == 0


def test_target_progress_is_off_where_mm2_writes_the_target_in_transactions(tmp_path, clusters, topic_name):
    port = free_port()
    config = _estate(tmp_path, clusters, topic_name, 10, 7, OffsetSync(topic_name, 0, 2, 2),
                     "dst.exactly.once.source.support = enabled\n", port)
    _, row = _check(config)
    assert (row["lro"], row["record_lag"], row["lro_feed"]) == (2, 7, "offset-syncs"), row
    with running_sidecar(config, port=port, log=tmp_path / "sidecar.log"):
        def named() -> dict:
            (progress,) = [f for f in status(port)["feeds"] if f["feed"] == "target-progress"]
            assert progress["off"], progress
            return progress
        progress = eventually(named)
    # Every topic of the flow (none named): {flows, topics, reason}.
    assert progress["off"] == [{"flows": ["src->dst"], "topics": [], "reason": "dst.exactly.once.source.support = "
                                "enabled (transaction markers take target offsets)"}], progress


def test_a_missing_remote_topic_is_named_and_the_sync_still_counts(tmp_path, clusters, topic_name):
    port = free_port()
    config = _estate(tmp_path, clusters, topic_name, 10, 0, OffsetSync(topic_name, 0, 2, 2),
                     "dst.exactly.once.source.support = disabled\n", port)
    with running_sidecar(config, port=port, log=tmp_path / "sidecar.log"):
        def seen() -> dict:
            body = status(port)
            (row,) = [r for r in body["partitions"] if r["topic"] == topic_name]
            assert (row["lro"], row["lro_feed"]) == (2, "offset-syncs"), row
            (progress,) = [f for f in body["feeds"] if f["feed"] == "target-progress"]
            assert progress["missing"] == [f"src.{topic_name}"], progress
            return body
        feeds = {f["feed"]: f for f in eventually(seen)["feeds"]}
    progress = feeds["target-progress"]
    assert (progress["cluster"], progress["up"], progress["resolution_s"], progress["off"]) == ("dst", True, 0.0, [])
    # The evidence's resolution is named: offset syncs move once per offset flush at worst.
    assert feeds["offset-syncs"]["resolution_s"] == 60.0, feeds


def test_a_busy_partition_beside_the_mirror_reads_within_a_few_records(tmp_path, own_clusters):
    """20 records/s copied within milliseconds by `mirrorlag mirror`, which writes offset syncs as
    MM2's OffsetSyncWriter does: every 100 records (offset.lag.max) or at each 6 s flush. The syncs
    alone trail by up to 99 records; the target's end offset proves the rest at every poll, so the
    record lag read is what arrived between the LEO snapshot and the target read: a few records."""
    config, topic = mirrored_topic(tmp_path, own_clusters, "busy")
    port = free_port()
    config.write_text(config.read_text() + f"mirrorlag.http.listener = 127.0.0.1:{port}\n"
                      "replication.record.lag.metric.refresh.interval = 1000\n")

    def on_target_progress() -> None:
        rows = [r for r in status(port)["partitions"] if r["topic"] == topic]
        assert rows and rows[0]["lro_feed"] == "target-progress", rows

    with (running_mirror(config, tmp_path / "mirror.log"), steady_producer(own_clusters.source, topic, 0.05),
          running_sidecar(config, port=port, log=tmp_path / "sidecar.log")):
        eventually(on_target_progress, timeout=30)
        seen = []
        polls = status(port)["polls_total"]
        while len(seen) < 12:
            body = status(port)
            if body["polls_total"] == polls:
                time.sleep(0.1)
                continue
            polls = body["polls_total"]
            r = next(r for r in body["partitions"] if r["topic"] == topic)
            seen.append((r["leo"], r["lro"], r["record_lag"], r["lro_feed"], r["state"]))
        # 12 polls at 20 records/s: a sync alone would trail by up to 99 records.
        assert seen[-1][0] - seen[0][0] >= 150, seen
        assert max(lag for _, _, lag, _, _ in seen) <= 10, seen
        assert {feed for *_, feed, _ in seen} == {"target-progress"}, seen
        assert {state for *_, state in seen} == {"IN_SYNC"}, seen


def test_a_mirror_stalled_an_hour_before_start_is_stalled_at_first_look_with_target_progress(
        tmp_path, clusters, topic_name):
    """MM2 >= 3.7 sends the last copy's sync at its next offset flush, so an hour after a stall the
    newest sync is for the last record copied: target progress proves the same LRO, wins the tie
    (finest resolution) and keeps the sync's age. STALLED at `check`'s only look, never IN_SYNC."""
    hour_ago_ms = int(time.time() * 1000) - 3_600_000
    clusters.create_topic(topic_name, 1)
    produce_records(clusters.source, topic_name, 0, [hour_ago_ms + i for i in range(10)])
    clusters.create_topic(f"src.{topic_name}", 1, which="target")
    clusters.produce(f"src.{topic_name}", {0: 5}, which="target")  # copies of 0..4
    _ensure_topic(clusters, SYNC_TOPIC)
    clusters.write_offset_syncs(SYNC_TOPIC, [OffsetSync(topic_name, 0, 4, 4)], timestamp_ms=hour_ago_ms + 5)
    config = write_properties(tmp_path / "mm2.properties", clusters, f"src->dst.topics = {topic_name}\n")
    status_code, row = _check(config)
    assert (row["lro"], row["record_lag"], row["lro_feed"]) == (4, 5, "target-progress"), row
    assert (row["state"], status_code) == ("STALLED", 2), row
    assert row["lro_age_s"] >= 3_590 and row["time_lag_s"] >= 3_590, row


def test_target_progress_of_two_source_clusters_lands_on_the_right_partitions(tmp_path, clusters):
    """Two source aliases (on one broker here), a flow each into dst: each flow's partitions get
    the LRO its own remote topic and syncs prove (the feed hands LROs as an array over the poll's
    rows, the second source's after the first's)."""
    first, second = (f"t-{uuid.uuid4().hex[:10]}" for _ in range(2))
    for topic, records in ((first, 10), (second, 20)):
        clusters.create_topic(topic, 2)
        clusters.produce(topic, {0: records, 1: records})
    clusters.create_topic(f"src.{first}", 2, which="target")
    clusters.produce(f"src.{first}", {0: 7, 1: 3}, which="target")
    clusters.create_topic(f"two.{second}", 2, which="target")
    clusters.produce(f"two.{second}", {0: 15, 1: 20}, which="target")
    _ensure_topic(clusters, SYNC_TOPIC)
    clusters.write_offset_syncs(SYNC_TOPIC, [OffsetSync(first, 0, 2, 2), OffsetSync(first, 1, 1, 1)])
    second_syncs = "mm2-offset-syncs.two.internal"  # on the target: offset-syncs.topic.location = target
    clusters.create_topic(second_syncs, 1, which="target")
    clusters.write_offset_syncs(second_syncs, [OffsetSync(second, 0, 4, 4), OffsetSync(second, 1, 0, 0)],
                                which="target")
    config = tmp_path / "mm2.properties"
    config.write_text(
        f"clusters = src, two, dst\nsrc.bootstrap.servers = {clusters.source}\ntwo.bootstrap.servers = {clusters.source}\n"
        f"dst.bootstrap.servers = {clusters.target}\nsrc->dst.enabled = true\ntwo->dst.enabled = true\n"
        f"src->dst.topics = {first}\ntwo->dst.topics = {second}\ntwo->dst.offset-syncs.topic.location = target\n")
    result = mirrorlag("check", "--config", str(config), "--json", "--timeout", "3")
    got = {(r["source"], r["topic"], r["partition"]): (r["lro"], r["lro_feed"]) for r in json.loads(result.stdout)}
    assert got == {("src", first, 0): (6, "target-progress"), ("src", first, 1): (2, "target-progress"),
                   ("two", second, 0): (14, "target-progress"), ("two", second, 1): (19, "target-progress")}, got


def test_two_identity_flows_into_one_topic_turn_it_off_there_only(tmp_path, clusters):
    """src->dst and two->dst (IdentityReplicationPolicy) both mirror `shared` into dst's `shared`:
    its end offset holds both flows' copies, so translating it through either flow's sync would
    count the other's records (and asking dst's `shared/0` once per flow in one ListOffsets is
    refused whole by librdkafka, target progress down for every flow into dst). It is off for that
    topic, named with the reason, and on for `own`, which only src->dst mirrors; the target's
    ListOffsets answers."""
    shared, own = (f"t-{uuid.uuid4().hex[:10]}" for _ in range(2))
    for topic in (shared, own):
        clusters.create_topic(topic, 1)
        clusters.produce(topic, {0: 10})
        clusters.create_topic(topic, 1, which="target")  # identity: the same name on the target
    clusters.produce(shared, {0: 12}, which="target")  # copies from both flows
    clusters.produce(own, {0: 7}, which="target")
    _ensure_topic(clusters, SYNC_TOPIC)
    clusters.write_offset_syncs(SYNC_TOPIC, [OffsetSync(shared, 0, 2, 2), OffsetSync(own, 0, 2, 2)])
    second_syncs = "mm2-offset-syncs.two.internal"  # on the target: offset-syncs.topic.location = target
    _ensure_topic(clusters, second_syncs, which="target")
    clusters.write_offset_syncs(second_syncs, [OffsetSync(shared, 0, 4, 7)], which="target")
    port = free_port()
    config = tmp_path / "mm2.properties"
    config.write_text(
        f"clusters = src, two, dst\nsrc.bootstrap.servers = {clusters.source}\ntwo.bootstrap.servers = {clusters.source}\n"
        f"dst.bootstrap.servers = {clusters.target}\nsrc->dst.enabled = true\ntwo->dst.enabled = true\n"
        "replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy\n"
        f"src->dst.topics = {shared}, {own}\ntwo->dst.topics = {shared}\ntwo->dst.offset-syncs.topic.location = target\n"
        f"mirrorlag.http.listener = 127.0.0.1:{port}\nreplication.record.lag.metric.refresh.interval = 1000\n")

    def seen() -> dict:
        body = status(port)
        got = {(r["source"], r["topic"]): (r["lro"], r["lro_feed"]) for r in body["partitions"]}
        assert got == {("src", shared): (2, "offset-syncs"), ("two", shared): (4, "offset-syncs"),
                       ("src", own): (6, "target-progress")}, got
        return body

    with running_sidecar(config, port=port, log=tmp_path / "sidecar.log"):
        polls = eventually(seen)["polls_total"]

        def two_polls_later() -> None:
            assert status(port)["polls_total"] >= polls + 2

        eventually(two_polls_later)
        body = seen()  # and it stays so
    (progress,) = [f for f in body["feeds"] if f["feed"] == "target-progress"]
    assert progress["off"] == [{"flows": ["src->dst", "two->dst"], "topics": [shared],
                                "reason": "more than one writer feeds these topics on dst: src->dst, two->dst"}], progress
    assert (progress["up"], progress["errors_total"], progress["last_error"]) == (True, 0, None), progress
    assert progress["topics"] == [own], progress
    # Each flow's syncs of the shared topic show the other's records: no duplicate count there.
    sync_feeds = [f for f in body["feeds"] if f["feed"] == "offset-syncs"]
    counted = {(d["source"], d["topic"], d["records"]) for f in sync_feeds for d in f["duplicates"]}
    assert {c for c in counted if c[1] in (shared, own)} == {("src", own, 0)}, sync_feeds


def test_duplicates_shown_by_a_sync_are_counted_and_hold_target_progress_until_the_next(tmp_path, clusters,
                                                                                     topic_name):
    """The target holds 20 records, 5 of them written twice (copies of upstream 0..14). Before a
    sync shows them, the translation through (0, 0) reads 19, 5 above the truth (the documented
    limitation). Then MM2's sync (10, 15): 15 target records for 10 upstream offsets. /metrics
    counts the 5 for the flow and topic, and the partition gets no target progress (its LRO is
    the sync's 10, from the offset syncs; the step back from 19 is honest); the next sync
    (12, 17), clean, brings it back: 12 + 20 - 1 - 17 = 14, the truth."""
    port = free_port()
    config = _estate(tmp_path, clusters, topic_name, 30, 20, OffsetSync(topic_name, 0, 0, 0),
                     "replication.record.lag.metric.refresh.interval = 1000\n", port)
    key = labels(source="src", target="dst", topic=topic_name)

    def row() -> dict:
        (r,) = [r for r in status(port)["partitions"] if r["topic"] == topic_name]
        return r

    with running_sidecar(config, port=port, log=tmp_path / "sidecar.log"):
        def first() -> None:
            assert (row()["lro"], row()["lro_feed"]) == (19, "target-progress"), row()  # 0 + 20 - 1 - 0
            assert scrape(port)[("mirrorlag_mirror_duplicate_records_total", key)] == 0
        eventually(first)
        clusters.write_offset_syncs(SYNC_TOPIC, [OffsetSync(topic_name, 0, 10, 15)])

        def counted() -> None:
            assert scrape(port)[("mirrorlag_mirror_duplicate_records_total", key)] == 5
            assert (row()["lro"], row()["lro_feed"]) == (10, "offset-syncs"), row()
        eventually(counted)
        clusters.write_offset_syncs(SYNC_TOPIC, [OffsetSync(topic_name, 0, 12, 17)])

        def cleared() -> None:
            assert (row()["lro"], row()["lro_feed"]) == (14, "target-progress"), row()
            assert scrape(port)[("mirrorlag_mirror_duplicate_records_total", key)] == 5
        eventually(cleared)
