"""Topics coming and going under the real MirrorMaker 2, judged against the truth from the data:
partitions never written (caught up: nothing to copy), a topic created and a partition added while
MM2 and the sidecar run, a topic deleted (GONE), and retention deleting records MM2 never copied
while it was frozen (lost counts data records only, never a transaction marker)."""

from __future__ import annotations

import json
import signal
import time

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import (AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions, OffsetSpec,
                                   ResourceType)

from mirrorlag.embedded import free_port
from tests.apache.flow_watch import TxnProducer
from tests.apache.sidecar_watch import PollWatch, sidecar_properties
from tests.apache.test_mm2_partitions import start_copying, truth, wait_all_copied
from tests.apache.truth import NumberedProducer, lag_true, read_partition
from tests.helpers import eventually, labels, mirrorlag, produce_records, running_sidecar, scrape, status

pytestmark = pytest.mark.integration

# New topics and partitions are read within this age and a poll (the default, 60 s, is for production).
METADATA_AGE = "mirrorlag.metadata.max.age.ms = 1000\n"


def check_rows(config, extra, *topics: str) -> tuple[int, dict[tuple[str, int], dict]]:
    result = mirrorlag("check", "--config", str(config), "--config", str(extra), "--json", "--timeout", "15")
    assert result.returncode in (0, 1, 2), result.stdout + result.stderr
    return result.returncode, {(r["topic"], r["partition"]): r for r in json.loads(result.stdout)
                               if r["topic"] in topics}


def test_topics_never_written_created_grown_and_deleted(mirror, tmp_path):
    """A topic with partitions never written checks OK (exit 0, record lag 0 everywhere); a topic
    created and a partition added while everything runs are found, copied by MM2 and IN_SYNC at
    lag_true; a deleted topic reads GONE, and the flow's other topics are untouched."""
    quiet = f"orders-{mirror.tag}-quiet"
    mirror.clusters.create_topic(quiet, 3)
    producer = NumberedProducer(mirror.pair.source.bootstrap_servers, quiet)
    producer.produce({0: 10})  # partitions 1 and 2: never a record
    mirror.write_config(f"orders-{mirror.tag}.*")
    mirror.start()
    wait_all_copied(mirror, quiet, 3, timeout=90)
    extra = sidecar_properties(tmp_path / "sidecar.properties", port := free_port(), METADATA_AGE)

    code, rows = check_rows(mirror.config, extra, quiet)
    assert code == 0, rows
    assert {k: (r["state"], r["record_lag"]) for k, r in rows.items()} == {
        (quiet, 0): ("IN_SYNC", 0), (quiet, 1): ("IN_SYNC", 0), (quiet, 2): ("IN_SYNC", 0)}

    def rows_of(topic: str) -> dict[int, dict]:
        return {r["partition"]: r for r in status(port)["partitions"] if r["topic"] == topic}

    with running_sidecar(mirror.config, extra, port=port, log=tmp_path / "sidecar.log"):
        born = f"orders-{mirror.tag}-born"
        mirror.clusters.create_topic(born, 2)
        NumberedProducer(mirror.pair.source.bootstrap_servers, born).produce({0: 7, 1: 3})
        wait_all_copied(mirror, born, 2, timeout=60)

        def born_in_sync() -> None:
            rows = rows_of(born)
            assert sorted(rows) == [0, 1], rows
            for p, row in rows.items():
                assert (row["state"], row["lro"], row["record_lag"]) == ("IN_SYNC", truth(mirror, born, p), 0), row
        eventually(born_in_sync, timeout=30)

        admin = mirror.clusters.admin()
        for future in admin.create_partitions([NewPartitions(quiet, 4)]).values():
            future.result(timeout=15)
        # A producer of its own: the first one's metadata knows three partitions for minutes yet.
        NumberedProducer(mirror.pair.source.bootstrap_servers, quiet, counter=producer.counter).produce({3: 5})
        wait_all_copied(mirror, quiet, 4, timeout=60)  # MM2 grows the remote topic on its next topic refresh

        def grown() -> None:
            rows = rows_of(quiet)
            assert sorted(rows) == [0, 1, 2, 3], rows
            assert (rows[3]["state"], rows[3]["leo"], rows[3]["lro"], rows[3]["record_lag"]) == (
                "IN_SYNC", 5, truth(mirror, quiet, 3), 0), rows[3]
        eventually(grown, timeout=30)

        mirror.clusters.delete_topic(born)

        def gone() -> None:
            assert {r["state"] for r in rows_of(born).values()} == {"GONE"}
        eventually(gone, timeout=30)
        eventually(lambda: not rows_of(born), timeout=30)  # dropped after it was reported
        assert {r["state"] for r in rows_of(quiet).values()} == {"IN_SYNC"}


def set_retention_ms(mirror, topic: str, ms: int | None) -> None:
    """The topic's retention.ms set (None: back to the broker's default), as kafka-configs does."""
    op = AlterConfigOpType.SET if ms is not None else AlterConfigOpType.DELETE
    entry = ConfigEntry("retention.ms", str(ms) if ms is not None else None, incremental_operation=op)
    admin = mirror.clusters.admin()
    for future in admin.incremental_alter_configs([ConfigResource(ResourceType.TOPIC, topic,
                                                                  incremental_configs=[entry])]).values():
        future.result(timeout=15)


def log_start(mirror, topic: str) -> int:
    admin = mirror.clusters.admin()
    earliest = admin.list_offsets({TopicPartition(topic, 0): OffsetSpec.earliest()})
    return next(iter(earliest.values())).result(timeout=15).offset


def test_retention_deletes_records_a_frozen_mm2_never_copied(mirror, tmp_path):
    """MM2 frozen, records appended (a committed transaction among them), then retention deletes
    them all (retention.ms lowered to 1 ms: the broker's own check rolls the segment and deletes
    it): the partition is AT_RISK and says how many were lost, counting only records the
    probe proved data (the commit marker is no record lost), every deleted offset accounted for as
    lost or unverified; thawed, MM2 copies what is left and the lost records stay counted."""
    topic, producer = start_copying(mirror, partitions=1, records=5)
    extra = sidecar_properties(tmp_path / "sidecar.properties", port := free_port(),
                               "mirrorlag.retention.poll.interval.ms = 1000\n")  # log starts: 60 s by default
    watch = PollWatch(port, topic)
    with running_sidecar(mirror.config, extra, port=port, log=tmp_path / "sidecar.log") as sidecar:
        watch.until(lambda p: p.rows[0]["state"] == "IN_SYNC", 30, "IN_SYNC before the freeze")
        mirror.mm2.pause()
        copied = truth(mirror, topic, 0)
        # The sidecar is held still while the doomed records are written, so that its probe's one
        # fetch from LRO + 1 (at its next poll) finds them all, whatever the machine's speed; and
        # each run of plain records goes as one batch (a linger longer than the produce calls),
        # so that every batch of the range fits the probe's 1 KB per partition.
        unbatched, producer.producer = producer.producer, Producer({
            "bootstrap.servers": mirror.pair.source.bootstrap_servers, "linger.ms": 1000, "log_level": 0,
            "enable.idempotence": True})
        sidecar.send_signal(signal.SIGSTOP)
        try:
            producer.produce({0: 10})
            now_ms = int(time.time() * 1000)
            produce_records(mirror.pair.source.bootstrap_servers, topic, 0, [now_ms] * 3, transactional=True)
            producer.produce({0: 5})
        finally:
            sidecar.send_signal(signal.SIGCONT)
            producer.producer = unbatched
        # The transaction coordinator writes the commit marker after the commit returns (found on
        # both versions): until it is written the end offset read here (the LSO: this consumer
        # reads committed) stays at the transaction's first record, and the 5 plain records may
        # come before the marker. Where it is, from the data.
        def all_written() -> None:
            assert mirror.clusters.end_offset(topic) == copied + 1 + 10 + 3 + 1 + 5
        eventually(all_written, timeout=15, interval=0.2)
        doomed_end = mirror.clusters.end_offset(topic)
        data = [o for o, _ in read_partition(mirror.pair.source.bootstrap_servers, topic, 0, "read_uncommitted")
                if copied < o < doomed_end]
        assert (copied, doomed_end) == (4, 24)  # 5 copied, then 10 + 3 + a commit marker + 5 uncopied
        watch.until(lambda p: p.rows[0]["leo"] == doomed_end, 15, "the uncopied records seen")
        # Retention, as the broker runs it: every record is older than a millisecond, so its check
        # (each second on the tier's brokers) rolls the active segment and deletes the others.
        set_retention_ms(mirror, topic, 1)

        def deleted() -> None:
            assert log_start(mirror, topic) == doomed_end
        eventually(deleted, timeout=30, interval=0.2)
        set_retention_ms(mirror, topic, None)
        producer.produce({0: 2})  # these two survive

        deleted_uncopied = doomed_end - (copied + 1)
        data_deleted = deleted_uncopied - 1  # less the one commit marker
        assert len(data) == data_deleted, data
        # What the evidence proves: the probe's fetch from 5 received every record of the range
        # (~600 B in 6 batches), consecutive from 5 up to the marker, which is never handed over:
        # those are proved data (13 with the marker at 18; all 18 with it at 23, where both
        # versions wrote it in our runs). The marker and what follows it: nothing proved their kind.
        proved = next(i for i, o in enumerate(data + [doomed_end]) if o != copied + 1 + i)
        lost = watch.until(lambda p: p.rows[0]["log_start"] == doomed_end, 20, "the new log start")
        row = lost.rows[0]
        assert row["state"] == "AT_RISK", watch.describe(lost)
        assert row["records_lost"] <= data_deleted, row
        assert (row["records_lost"], row["records_lost_unverified"]) == (proved, deleted_uncopied - proved), (row, data)
        # (a poll before the two new records: the log is empty, nothing is left to copy)
        assert row["record_lag"] == (0 if row["leo"] == doomed_end else lag_true(row["leo"], copied)), row
        # A cold check never saw the deleted range: what it held is unverified, so no AT_RISK (no
        # alert rests on unverified offsets); the frozen mirror still reads STALLED, exit 2 (CRITICAL).
        code, rows = check_rows(mirror.config, extra, topic)
        cold = rows[(topic, 0)]
        assert (code, cold["state"], cold["records_lost"], cold["records_lost_unverified"]) == (
            2, "STALLED", 0, deleted_uncopied), cold
        # A sidecar started now cannot date the oldest record owed (a fetch from LRO + 1 is below
        # the log start): its time lag counts from its first look, flagged in /status and /metrics;
        # the first sidecar, whose probe dated it before the deletion, has no such series.
        flag = ("mirrorlag_replication_time_lag_lower_bound",
                labels(source=mirror.src, target=mirror.dst, topic=topic, partition=0))
        late = sidecar_properties(tmp_path / "late.properties", late_port := free_port(),
                                  "mirrorlag.retention.poll.interval.ms = 1000\n")
        with running_sidecar(mirror.config, late, port=late_port, log=tmp_path / "late.log"):
            first_look = PollWatch(late_port, topic).until(lambda p: p.rows[0]["log_start"] == doomed_end, 20,
                                                           "the late sidecar's log start")
            assert first_look.rows[0]["time_lag_lower_bound"] and first_look.rows[0]["state"] != "IN_SYNC", \
                first_look.rows[0]
            assert scrape(late_port).get(flag) == 1
        assert flag not in scrape(port) and not watch.next().rows[0]["time_lag_lower_bound"]

        mirror.mm2.resume()
        leo = mirror.clusters.end_offset(topic)
        final = watch.until(lambda p: p.rows[0]["state"] == "IN_SYNC" and p.rows[0]["leo"] == leo, 60,
                            "IN_SYNC after the thaw")
        assert final.rows[0]["lro"] == truth(mirror, topic, 0) == leo - 1
        flow = labels(source=mirror.src, target=mirror.dst)
        samples = scrape(port)  # the row says what is lost now; the counters keep what was
        assert (samples.get(("mirrorlag_records_lost_total", flow), 0),
                samples.get(("mirrorlag_records_lost_unverified_total", flow), 0)) == (
            row["records_lost"], row["records_lost_unverified"]), samples


def test_a_log_retention_emptied_is_caught_up_whatever_its_lro(mirror, tmp_path):
    """A transactional partition copied to its end ends with the commit marker, which MM2 never
    copies (LRO = LEO - 2). Retention then deletes every record: `[log start, LEO)` is empty and
    nothing is left to copy. Every poll of the running sidecar reads IN_SYNC at record lag 0 and
    nothing lost (its probe saw that the deleted offset was a marker); a cold check exits 0, IN_SYNC
    at 0, and counts the marker it cannot fetch unverified, never lost."""
    topic = f"emptied-{mirror.tag}"
    mirror.clusters.create_topic(topic, 1)
    TxnProducer(mirror.pair.source.bootstrap_servers, topic).transaction(5)  # 0-4, the marker at 5
    mirror.write_config(topic)
    mirror.start()
    leo = 6
    assert mirror.clusters.end_offset(topic) == leo
    eventually(lambda: truth(mirror, topic, 0) == leo - 2, timeout=90, interval=0.5)
    extra = sidecar_properties(tmp_path / "sidecar.properties", port := free_port(),
                               "mirrorlag.retention.poll.interval.ms = 1000\n")
    watch = PollWatch(port, topic)
    with running_sidecar(mirror.config, extra, port=port, log=tmp_path / "sidecar.log"):
        first = watch.until(lambda p: p.rows[0]["lro"] == leo - 2, 30, "MM2's LRO read")
        set_retention_ms(mirror, topic, 1)
        eventually(lambda: log_start(mirror, topic) == leo, timeout=30, interval=0.2)
        set_retention_ms(mirror, topic, None)
        emptied = watch.until(lambda p: p.rows[0]["log_start"] == leo, 20, "the log start at the LEO")
        polls = watch.polls[watch.polls.index(first):]
        wrong = [watch.describe(p) for p in polls if (p.rows[0]["state"], p.rows[0]["record_lag"]) != ("IN_SYNC", 0)
                 or p.rows[0]["records_lost"] or p.rows[0]["records_lost_unverified"]]
        assert not wrong, wrong
        assert emptied.rows[0]["leo"] == leo and emptied.rows[0]["lro"] == leo - 2, watch.describe(emptied)
        code, rows = check_rows(mirror.config, extra, topic)
        cold = rows[(topic, 0)]
        assert (code, cold["state"], cold["record_lag"], cold["records_lost"], cold["records_lost_unverified"]) == (
            0, "IN_SYNC", 0, 0, 1), cold


def test_records_mm2_never_copied_deleted_by_retention_are_lost(mirror, tmp_path):
    """A topic created while MM2 is frozen is owed from its log start (`lro_feed` log-start, LRO
    log start - 1). Retention deleting its records moves the log start, not the LRO: they are lost
    (the probe proved them data), no copy rate shows, the LRO's age goes on, and the partition reads
    AT_RISK; thawed, MM2 copies what is left from the new log start, and the loss stays counted."""
    topic, fresh = f"orders-{mirror.tag}", f"orders-{mirror.tag}-fresh"
    mirror.clusters.create_topic(topic, 1)
    NumberedProducer(mirror.pair.source.bootstrap_servers, topic).produce({0: 5})
    mirror.write_config(f"orders-{mirror.tag}.*")
    mirror.start()
    wait_all_copied(mirror, topic, 1, timeout=90)  # MM2 has committed: its evidence is there to read
    extra = sidecar_properties(tmp_path / "sidecar.properties", port := free_port(),
                               "mirrorlag.retention.poll.interval.ms = 1000\n" + METADATA_AGE)
    with running_sidecar(mirror.config, extra, port=port, log=tmp_path / "sidecar.log"):
        PollWatch(port, topic).until(lambda p: p.rows[0]["state"] == "IN_SYNC", 30, "IN_SYNC before the freeze")
        mirror.mm2.pause()
        mirror.clusters.create_topic(fresh, 1)
        producer = NumberedProducer(mirror.pair.source.bootstrap_servers, fresh)
        producer.produce({0: 10})
        watch = PollWatch(port, fresh)
        owed = watch.until(lambda p: 0 in p.rows and (p.rows[0]["leo"], p.rows[0]["lro"], p.rows[0]["lro_feed"])
                           == (10, -1, "log-start"), 30, "owed from its log start")
        set_retention_ms(mirror, fresh, 1)
        eventually(lambda: log_start(mirror, fresh) == 10, timeout=30, interval=0.2)
        set_retention_ms(mirror, fresh, None)
        producer.produce({0: 2})
        lost = watch.until(lambda p: (p.rows[0]["log_start"], p.rows[0]["leo"]) == (10, 12), 20, "the deletion seen")
        row = lost.rows[0]
        assert (row["lro"], row["lro_feed"], row["records_lost"], row["records_lost_unverified"], row["state"]) == (
            -1, "log-start", 10, 0, "AT_RISK"), row
        assert not row["copy_rate"] and row["lro_age_s"] >= owed.rows[0]["lro_age_s"], (owed.rows[0], row)
        mirror.mm2.resume()
        final = watch.until(lambda p: p.rows[0]["state"] == "IN_SYNC" and p.rows[0]["lro"] == 11, 90,
                            "the rest copied after the thaw")
        assert truth(mirror, fresh, 0) == 11, watch.describe(final)
        flow = labels(source=mirror.src, target=mirror.dst)
        assert scrape(port).get(("mirrorlag_records_lost_total", flow)) == 10
