"""Failover readiness of consumer groups on the real MirrorMaker 2's checkpoints, judged against MM2's
own answer and against what a failed-over consumer really reads.

MM2's answer for where a group resumes on the target is `RemoteClusterUtils.translateOffsets`
(tests/apache/java/TranslateOffsets.java, compiled at test time against each pinned version's
connect-mirror-client). The re-read is measured from the data: the remote partition consumed from
that resume point, counting the records whose source offset (known by their unique values,
truth.py) lies below the group's committed offset. Every figure is mirrorlag's as the real CLI
(`mirrorlag check --groups --json`) and the running sidecar (`/status`, `/metrics`) give it:

- a caught-up idle group is READY, resuming where MM2 says, re-reading nothing;
- a group behind resumes where MM2 says, and re-reads exactly what consuming the target from
  there re-reads;
- MM2 restarted (3.7.1+ reloads its checkpoints and keeps its older syncs): the answers still
  equal MM2's, and a group that moved on without moving its translation (MM2 owes it no new
  checkpoint) raises no CHECKPOINT_OLD on a checkpoint older than the limit; a group that went
  back gets MM2's new checkpoint, and mirrorlag follows it.
"""

from __future__ import annotations

import json
import threading
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

from mirrorlag.embedded import free_port
from mirrorlag.formats import decode_offset_sync
from mirrorlag.groups.readiness import NotCheckpointedBecause
from mirrorlag.groups.sync_store import SyncStore, translate
from tests.apache.conftest import Mirror
from tests.apache.flow_watch import TxnProducer, last_data_offset
from tests.apache.javac import compile_java, run_java
from tests.apache.sidecar_watch import sidecar_properties
from tests.apache.truth import NumberedProducer, lro_true, read_partition
from tests.helpers import eventually, mirrorlag, running_sidecar, scrape, status

pytestmark = pytest.mark.integration

COUNTS = {0: 250, 1: 40}  # records per partition before MM2 starts: syncs at MM2's own spacing
BEHIND = {0: 150, 1: 10}  # the lagging group's committed offsets
MORE = {0: 60, 1: 5}  # produced while MM2 is down
AGE_MAX_MS = 2000  # mirrorlag.failover.checkpoint.max.age.ms: a checkpoint older than this is old


@pytest.fixture(scope="session")
def translator(kafka_jars, tmp_path_factory) -> Path:
    return compile_java(kafka_jars, tmp_path_factory.mktemp(f"translate-{kafka_jars.version}"), "TranslateOffsets.java")


def mm2_answer(mirror: Mirror, classes: Path, topic: str, *groups: str) -> dict[tuple[str, int], int]:
    """RemoteClusterUtils.translateOffsets of each group, keyed (group, partition) on `topic`'s remote."""
    out = run_java(mirror.pair.jars, classes, "TranslateOffsets", mirror.pair.target.bootstrap_servers,
                   mirror.src, *groups)
    answer = {}
    for line in out.splitlines():
        group, remote, partition, offset = line.split("\t")
        if remote == mirror.remote(topic):
            answer[group, int(partition)] = int(offset)
    return answer


def check_groups(mirror: Mirror, extra: Path, topic: str | None = None) -> tuple[int, dict[tuple[str, int], dict]]:
    """`mirrorlag check --groups --json`: its exit status and rows keyed (group, partition), of
    `topic` only where given (else of a test's one topic)."""
    result = mirrorlag("check", "--groups", "--json", "--config", str(mirror.config), "--config", str(extra),
                       "--timeout", "30", timeout=90)
    assert result.returncode in (0, 1), result.stdout + result.stderr
    return result.returncode, {(r["group"], r["partition"]): r for r in json.loads(result.stdout)
                               if topic is None or r["topic"] == topic}


def reread_true(mirror: Mirror, topic: str, partition: int, resume: int, committed: int) -> tuple[int, int | None]:
    """Consuming the remote partition from `resume`: how many records it reads whose source offset
    is below `committed` (read already on the source), and the source offset of the first it reads."""
    offset_of = {v: o for o, v in read_partition(mirror.pair.source.bootstrap_servers, topic, partition,
                                                 "read_uncommitted")}
    read = [offset_of[v] for o, v in read_partition(mirror.pair.target.bootstrap_servers, mirror.remote(topic),
                                                   partition) if o >= resume]
    return sum(1 for s in read if s < committed), (read[0] if read else None)


def syncs_written(mirror: Mirror, topic: str, partition: int) -> list[tuple[int, int]]:
    """Every offset sync (upstream, downstream) MM2 wrote for the partition, in order (the source's sync topic)."""
    consumer = Consumer({"bootstrap.servers": mirror.pair.source.bootstrap_servers, "group.id": "mirrorlag-truth",
                         "enable.auto.commit": False, "log_level": 0})
    sync_topic = f"mm2-offset-syncs.{mirror.dst}.internal"
    try:
        tp = TopicPartition(sync_topic, 0)
        _, high = consumer.get_watermark_offsets(tp, timeout=10, cached=False)
        consumer.assign([TopicPartition(sync_topic, 0, OFFSET_BEGINNING)])
        out: list[tuple[int, int]] = []
        while consumer.position([tp])[0].offset < high:
            for message in consumer.consume(num_messages=500, timeout=0.5):
                if message.error() is None:
                    sync = decode_offset_sync(message.key(), message.value())
                    if (sync.topic, sync.partition) == (topic, partition):
                        out.append((sync.upstream_offset, sync.downstream_offset))
        return out
    finally:
        consumer.close()


def wait_copied(mirror: Mirror, topic: str) -> None:
    def copied() -> None:
        for p in COUNTS:
            leo = mirror.clusters.end_offset(topic, p)
            assert lro_true(mirror.pair.source.bootstrap_servers, topic, mirror.pair.target.bootstrap_servers,
                            mirror.remote(topic), p) == leo - 1, f"partition {p} not copied yet"
    eventually(copied, timeout=90, interval=0.5)


class StatusWatch:
    """Every `/status` groups row of `groups` the sidecar publishes, from a thread, until stopped."""

    def __init__(self, port: int, groups: set[str]) -> None:
        self.port, self.groups, self.rows = port, groups, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.3):
            try:
                doc = status(self.port)
            except OSError:
                continue
            self.rows += [r for r in doc.get("groups", []) if r["group"] in self.groups]

    def __enter__(self) -> "StatusWatch":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(10)


def test_groups_resume_where_mm2_says_before_and_after_a_restart(mirror, translator, tmp_path):
    topic = f"orders-{mirror.tag}"
    mirror.clusters.create_topic(topic, len(COUNTS))
    producer = NumberedProducer(mirror.pair.source.bootstrap_servers, topic)
    producer.produce(COUNTS)
    mirror.write_config(topic)
    mirror.start()
    wait_copied(mirror, topic)
    ready, behind = f"ready-{mirror.tag}", f"behind-{mirror.tag}"
    mirror.clusters.commit_group(ready, {(topic, p): n for p, n in COUNTS.items()})
    mirror.clusters.commit_group(behind, {(topic, p): g for p, g in BEHIND.items()})
    committed = {ready: dict(COUNTS), behind: dict(BEHIND)}
    port = free_port()
    extra = sidecar_properties(tmp_path / "sidecar.properties", port,
                               f"mirrorlag.failover.interval.ms = 500\n"
                               f"mirrorlag.failover.checkpoint.max.age.ms = {AGE_MAX_MS}\n")

    def agreed(stage: str) -> tuple[dict, dict]:
        """mirrorlag's rows once they equal MM2's answer read just before them (a checkpoint MM2
        wrote in between shows as a difference, and the next try reads both again)."""
        def same() -> tuple[dict, dict]:
            before = mm2_answer(mirror, translator, topic, *committed)
            assert set(before) == {(g, p) for g in committed for p in COUNTS}, (stage, before)
            # (a): MM2 resumes the caught-up group exactly at its end once the newest sync is out
            assert all(before[ready, p] == n for p, n in COUNTS.items()), (stage, before)
            code, rows = check_groups(mirror, extra)
            got = {k: rows[k]["checkpoint_downstream"] for k in before}
            assert got == before, (stage, "mirrorlag's resume offsets", got, "MM2's", before, rows)
            assert code == 0, (stage, rows)  # every group READY
            return before, rows
        answer, rows = eventually(same, timeout=60, interval=1)
        return answer, rows

    def judged(stage: str, answer: dict, rows: dict) -> None:
        for (group, p), resume in answer.items():
            row, g = rows[group, p], committed[group][p]
            assert row["committed"] == g and row["state"] == "READY", (stage, row)
            assert row["skipped_records"] == 0 and row["active_on_target"] is False, (stage, row)
            reread, first = reread_true(mirror, topic, p, resume, g)
            # what a consumer failed over to the target really reads again, and where it starts (at
            # the end: nothing to read, the next record is the source's next)
            first = g if first is None else first
            assert (row["reread_records"], row["resume_source_offset"]) == (reread, first), (stage, row)
        for p, n in COUNTS.items():  # (a): the caught-up group resumes exactly at its end
            assert answer[ready, p] == rows[ready, p]["committed"], (stage, answer)
            assert rows[ready, p]["reread_records"] == 0
        assert any(rows[behind, p]["reread_records"] > 0 for p in COUNTS), (stage, rows)  # (b) costs something

    # (a), (b): MM2 as first started
    answer, rows = agreed("first start")
    judged("first start", answer, rows)

    with ExitStack() as running:  # the watch stops first, then the sidecar
        running.enter_context(running_sidecar(mirror.config, extra, port=port, log=tmp_path / "sidecar.log"))
        eventually(lambda: _all_read(status(port), answer), timeout=30)
        watch = running.enter_context(StatusWatch(port, {ready, behind, f"late-{mirror.tag}"}))

        # (c): MM2 stopped, more records while it is down, started again: it reloads its checkpoints,
        # copies the rest, and translates the groups as before
        mirror.mm2.stop()
        producer.produce(MORE)
        mirror.start()
        wait_copied(mirror, topic)
        # A group first committed after the restart, at an offset only syncs from before it cover:
        # MM2 (3.7.1+, its checkpoints reloaded) kept older syncs and translates it. Through the syncs
        # it holds now, fewer than when it checkpointed the group behind at the same offset (the
        # syncs after it pushed some out of the slots): that group keeps its better checkpoint (MM2
        # never moves one back but for a rewind), the late one resumes earlier.
        late = f"late-{mirror.tag}"
        # ... once MM2 wrote the sync of the last record it copied (at its next offset commit): the
        # late group's translation is then final (else MM2 keeps a checkpoint from fewer syncs)
        eventually(lambda: _synced_to_end(mirror, topic), timeout=30, interval=0.5)
        mirror.clusters.commit_group(late, {(topic, p): g for p, g in BEHIND.items()})
        committed[late] = dict(BEHIND)
        restarted, rows = agreed("after the restart")
        assert {k: v for k, v in restarted.items() if k[0] != late} == answer  # no group moved: nor did MM2's answer
        assert all(0 <= restarted[late, p] <= answer[behind, p] for p in COUNTS), restarted
        for p in COUNTS:  # MM2's slots are mirrorlag's replica's, fed every sync it wrote
            store = SyncStore.keeping_history()
            for upstream, downstream in syncs_written(mirror, topic, p):
                store.apply(topic, p, upstream, downstream)
            assert translate(store.slots(topic, p), BEHIND[p]).downstream == restarted[late, p], \
                (p, syncs_written(mirror, topic, p), restarted)
        judged("after the restart", restarted, rows)

        # The group behind moves on without passing a sync: translate(G) is what it was, so MM2
        # writes no new checkpoint (MirrorCheckpointTask.checkpointIsMoreRecent) and its newest
        # one, older than the limit, translated the old G. Nothing is owed: no CHECKPOINT_OLD.
        syncs = [u for u, _ in syncs_written(mirror, topic, 0) if u > BEHIND[0]]
        moved = min([BEHIND[0] + 10, *(u - 1 for u in syncs)])
        assert moved > BEHIND[0], syncs
        mirror.clusters.commit_group(behind, {(topic, 0): moved})
        committed[behind][0] = moved
        after_move, rows = agreed("moved without a new translation")
        assert after_move == restarted
        assert rows[behind, 0]["checkpoint_upstream"] == BEHIND[0], rows[behind, 0]  # MM2 did not write one
        assert rows[behind, 0]["checkpoint_age_s"] * 1000 > AGE_MAX_MS, rows[behind, 0]
        judged("moved without a new translation", after_move, rows)

        # The group goes back below its checkpoint's upstream offset: MM2 writes a checkpoint for the
        # rewind whatever the translation (here through the syncs it holds now: the later syncs
        # pushed (101, 101) out of its 64 slots, so further back than before), and mirrorlag follows it.
        back = BEHIND[0] - 10
        mirror.clusters.commit_group(behind, {(topic, 0): back})
        committed[behind][0] = back
        rewound, rows = agreed("went back")
        assert rows[behind, 0]["checkpoint_upstream"] == back, rows[behind, 0]
        assert rewound[behind, 0] <= restarted[behind, 0], rewound
        judged("went back", rewound, rows)
        eventually(lambda: _back_seen(status(port), behind, back, rewound[behind, 0]), timeout=30)
        samples = scrape(port)
        for group in committed:
            key = ("mirrorlag_group_ready", tuple(sorted({"source": mirror.src, "target": mirror.dst,
                                                          "group": group}.items())))
            assert samples.get(key) == 1, (group, key)

    # Every row the running sidecar published, across the restart and the move, was READY, but the
    # late group's before MM2's first checkpoint of it: not written yet, and nothing else.
    early = [r for r in watch.rows if r["checkpoint_downstream"] is None]
    assert all(r["group"] == f"late-{mirror.tag}" for r in early), early[:3]
    # (the sidecar started before the restart: its replica of a restarted MM2 holds only the newest
    # sync, so it names the older MM2's restart too, as no more than a possibility; a run that did
    # not reach the checkpoints topic's end says that)
    assert {(r["state"], r["because"]) for r in early} <= {
        ("NOT_CHECKPOINTED", b.value) for b in (NotCheckpointedBecause.NOT_WRITTEN,
                                                NotCheckpointedBecause.OLDER_THAN_SYNCS_AFTER_RESTART,
                                                NotCheckpointedBecause.CHECKPOINTS_UNREAD)}, \
        {(r["state"], r["because"]) for r in early}
    checkpointed = [r for r in watch.rows if r["checkpoint_downstream"] is not None]
    assert checkpointed and all(r["state"] == "READY" for r in checkpointed), \
        [(r["group"], r["partition"], r["state"], r.get("because"), r["checkpoint_downstream"])
         for r in checkpointed if r["state"] != "READY"][:5]
    assert {(r["group"], r["partition"]) for r in watch.rows} == set(restarted)
    assert all(r["checkpoint_downstream"] in (None, restarted[r["group"], r["partition"]],
                                              rewound[r["group"], r["partition"]]) for r in watch.rows)


def _synced_to_end(mirror: Mirror, topic: str) -> None:
    for p in COUNTS:
        leo = mirror.clusters.end_offset(topic, p)
        assert syncs_written(mirror, topic, p)[-1][0] == leo - 1, (p, leo)


def _all_read(doc: dict, answer: dict) -> None:
    got = {(r["group"], r["partition"]): r["checkpoint_downstream"] for r in doc.get("groups", [])}
    assert {k: got.get(k) for k in answer} == answer, got


def _back_seen(doc: dict, group: str, back: int, resume: int) -> None:
    rows = [r for r in doc.get("groups", []) if r["group"] == group and r["partition"] == 0]
    assert rows and (rows[0]["committed"], rows[0]["checkpoint_downstream"]) == (back, resume), rows


def target_offsets(mirror: Mirror, topic: str, *groups: str, metadata: bool = False) -> dict[tuple[str, int], Any]:
    """The groups' committed offsets on the target's remote topic, as MM2's group offset sync wrote
    them (with `metadata`: (offset, metadata) pairs)."""
    from confluent_kafka import ConsumerGroupTopicPartitions

    admin = mirror.clusters.admin("target")
    out = {}
    for group in groups:
        (future,) = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)]).values()
        for tp in future.result(timeout=15).topic_partitions or ():
            if tp.topic == mirror.remote(topic) and tp.offset >= 0:
                out[group, tp.partition] = (tp.offset, tp.metadata) if metadata else tp.offset
    return out


@pytest.mark.slow
def test_idle_groups_resume_at_their_offsets_mm2_synced_to_the_target(mirror, translator, tmp_path):
    """With sync.group.offsets.enabled MM2 writes an idle group's translated offset into the target's
    own group offsets: mirrorlag resumes it there, which equals translateOffsets, and its re-read
    equals consuming the target from there."""
    topic = f"orders-{mirror.tag}"
    mirror.clusters.create_topic(topic, len(COUNTS))
    NumberedProducer(mirror.pair.source.bootstrap_servers, topic).produce(COUNTS)
    mirror.write_config(topic, {"sync.group.offsets.enabled": "true"})
    mirror.start()
    wait_copied(mirror, topic)
    ready, behind = f"ready-{mirror.tag}", f"behind-{mirror.tag}"
    mirror.clusters.commit_group(ready, {(topic, p): n for p, n in COUNTS.items()})
    mirror.clusters.commit_group(behind, {(topic, p): g for p, g in BEHIND.items()})
    committed = {ready: COUNTS, behind: BEHIND}
    extra = tmp_path / "check.properties"
    extra.write_text("")

    def same() -> tuple[dict, dict]:
        answer = mm2_answer(mirror, translator, topic, ready, behind)
        synced = target_offsets(mirror, topic, ready, behind)
        assert set(answer) == {(g, p) for g in committed for p in COUNTS} and synced == answer, (answer, synced)
        code, rows = check_groups(mirror, extra)
        assert mm2_answer(mirror, translator, topic, ready, behind) == answer
        assert code == 0, rows
        return answer, rows

    answer, rows = eventually(same, timeout=60, interval=1)
    for (group, p), resume in answer.items():
        row, g = rows[group, p], committed[group][p]
        reread, first = reread_true(mirror, topic, p, resume, g)
        assert (row["state"], row["reread_records"], row["resume_source_offset"]) == (
            "READY", reread, g if first is None else first), row
    assert answer[behind, 0] < BEHIND[0] and rows[behind, 0]["reread_records"] > 0, answer


@contextmanager
def running_group(bootstrap: str, group: str, topic: str) -> Iterator[Callable[[], int]]:
    """A member of `group` on `topic`, reading it from its committed offsets (else the start) and
    committing each record, on a thread until the block ends: `newest()` is the offset of the
    last record read (-1: none yet)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "log_level": 0})
    consumer.subscribe([topic])
    read, stop = [-1], threading.Event()

    def run() -> None:
        while not stop.is_set():
            for message in consumer.consume(num_messages=100, timeout=0.2):
                if message.error() is None:
                    read[0] = message.offset()
                    consumer.commit(message=message, asynchronous=False)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield lambda: read[0]
    finally:
        stop.set()
        thread.join(10)
        consumer.close()


def test_group_partitions_mm2_rightly_never_checkpoints_are_not_held_against_the_group(mirror, translator, tmp_path):
    """Two group partitions MM2 never checkpoints, and rightly. Offset 0 of a partition nobody ever
    wrote: MM2 copies nothing of it, so it has no offset sync to translate through, and needs none
    (the target's start and end are one: nothing to skip or read again): READY. And a heartbeats
    topic (`z<tag>.heartbeats`, a remote heartbeats topic to MM2's policy): MM2 copies it whatever
    its topics filter says, while its checkpoint task checkpoints only what that filter names: not
    assessed at all. Once MM2 has checkpointed the group's other partition, `check --groups`
    exits 0."""
    topic, group, beats = f"sparse-{mirror.tag}", f"sparse-{mirror.tag}", f"z{mirror.tag}.heartbeats"
    mirror.clusters.create_topic(topic, 2)
    mirror.clusters.create_topic(beats, 1)
    NumberedProducer(mirror.pair.source.bootstrap_servers, topic).produce({0: 10})
    NumberedProducer(mirror.pair.source.bootstrap_servers, beats).produce({0: 5})
    mirror.write_config(topic)
    mirror.start()
    wait_copied(mirror, topic)  # partition 1: nothing to copy
    eventually(lambda: lro_true(mirror.pair.source.bootstrap_servers, beats, mirror.pair.target.bootstrap_servers,
                                mirror.remote(beats), 0) == 4, timeout=60, interval=0.5)  # copied, filter or not
    mirror.clusters.commit_group(group, {(topic, 0): 10, (topic, 1): 0, (beats, 0): 5})
    extra = sidecar_properties(tmp_path / "sidecar.properties", free_port())

    def ready() -> None:
        code, rows = check_groups(mirror, extra, topic)
        assert check_groups(mirror, extra, beats)[1] == {}  # the heartbeats: not assessed
        caught_up, never = rows[group, 0], rows[group, 1]
        assert (caught_up["state"], caught_up["checkpoint_downstream"]) == ("READY", 10), caught_up
        assert (never["state"], never["checkpoint_downstream"], never["reread_records"]) == ("READY", None, 0), never
        assert code == 0
    eventually(ready, timeout=60, interval=1)
    assert syncs_written(mirror, topic, 1) == []  # MM2 wrote nothing for it
    assert syncs_written(mirror, beats, 0)  # ... and synced the heartbeats it copied, yet checkpoints none:
    translated = run_java(mirror.pair.jars, translator, "TranslateOffsets", mirror.pair.target.bootstrap_servers,
                          mirror.src, group)  # RemoteClusterUtils.translateOffsets, what a failover uses
    assert mirror.remote(topic) in translated and mirror.remote(beats) not in translated, translated


def test_a_checkpoint_mm2_owes_is_old_and_a_high_reread_shows_through_it(mirror, translator, tmp_path):
    """MM2 checkpointing every 20 s: a group checkpointed at 10 then committed at the end of the
    partition, past later syncs, is owed a new checkpoint (its translation moved on) that MM2 writes
    only at its next emission. Until then the old one is where a failover resumes: REREAD_HIGH (the
    cost now, over the limit of 100), flagged checkpoint_old (owed and older than 2 s), not a bare
    CHECKPOINT_OLD hiding the re-read. Then MM2 writes the owed checkpoint, the debt mirrorlag
    claimed, and the partition reads READY."""
    topic, group = f"owed-{mirror.tag}", f"owed-{mirror.tag}"
    mirror.clusters.create_topic(topic, len(COUNTS))
    NumberedProducer(mirror.pair.source.bootstrap_servers, topic).produce(COUNTS)
    mirror.write_config(topic, {"emit.checkpoints.interval.seconds": 20})
    mirror.start()
    wait_copied(mirror, topic)
    eventually(lambda: _synced_to_end(mirror, topic), timeout=30, interval=0.5)
    extra = tmp_path / "check.properties"
    extra.write_text(f"mirrorlag.failover.checkpoint.max.age.ms = {AGE_MAX_MS}\n"
                     "mirrorlag.failover.reread.max.records = 100\n")
    low, end = {0: 10, 1: 5}, dict(COUNTS)

    def checkpointed_at(offsets: dict[int, int]) -> dict:
        _, rows = check_groups(mirror, extra, topic)
        assert all(rows[group, p]["checkpoint_upstream"] == g for p, g in offsets.items()), rows
        return rows

    mirror.clusters.commit_group(group, {(topic, p): g for p, g in low.items()})
    for attempt in range(3):
        # Committed just after an emission wrote `low`'s checkpoint: MM2 owes the next for 20 s.
        eventually(lambda: checkpointed_at(low), timeout=90, interval=0.5)
        mirror.clusters.commit_group(group, {(topic, p): g for p, g in end.items()})

        def judged() -> tuple[int, dict]:  # once the checkpoint is older than the limit, or replaced
            code, rows = check_groups(mirror, extra, topic)
            row = rows[group, 0]
            assert row["checkpoint_upstream"] != low[0] or row["checkpoint_age_s"] * 1000 > AGE_MAX_MS, row
            return code, rows
        code, rows = eventually(judged, timeout=30, interval=0.2)
        if rows[group, 0]["checkpoint_upstream"] == low[0]:
            break
        # MM2 emitted before the check read its checkpoints (a loaded machine): go back and again
        mirror.clusters.commit_group(group, {(topic, p): g for p, g in low.items()})
    row = rows[group, 0]
    assert row["checkpoint_upstream"] == low[0], ("MM2 emitted before every check", rows)
    resume = row["checkpoint_downstream"]
    reread, _ = reread_true(mirror, topic, 0, resume, end[0])
    assert (row["state"], row["checkpoint_old"], row["reread_records"]) == ("REREAD_HIGH", True, reread), row
    assert reread > 100 and code == 1, (reread, code)
    assert mm2_answer(mirror, translator, topic, group)[group, 0] == resume  # where a failover now resumes

    def paid() -> None:  # the debt was real: MM2 writes the checkpoint, and nothing is owed
        _, rows = check_groups(mirror, extra, topic)
        row = rows[group, 0]
        assert (row["checkpoint_upstream"], row["state"], row["checkpoint_old"]) == (end[0], "READY", False), row
    eventually(paid, timeout=60, interval=1)


def test_a_group_committed_at_a_commit_marker_skips_nothing(mirror, translator, tmp_path):
    """A transaction's records 0-9, its commit marker at 10; MM2 copies them and syncs (9, 9) at its
    offset flush. The next transaction's record 11 goes to target 10: MM2 syncs (11, 10) where the
    offsets part (one record only: a later sync would push (9, 9) out of MM2's slots). A
    read_committed group committed at 10 (its position after record 9, the marker) resumes at
    target 10, a copy of 11, as RemoteClusterUtils says: the offset in between is the marker, no
    record skipped. READY, and `check --groups` exits 0."""
    topic, group = f"txn-{mirror.tag}", f"at-marker-{mirror.tag}"
    mirror.clusters.create_topic(topic, 1)
    txn = TxnProducer(mirror.pair.source.bootstrap_servers, topic)
    txn.transaction(10)
    mirror.write_config(topic)
    mirror.start()

    def synced(sync: tuple[int, int]) -> None:
        try:
            assert sync in syncs_written(mirror, topic, 0)
        except KafkaException as exc:  # the sync topic not created yet
            raise AssertionError(exc) from None
    eventually(lambda: synced((9, 9)), timeout=90, interval=0.5)
    txn.transaction(1)
    eventually(lambda: synced((11, 10)), timeout=60, interval=0.5)
    mirror.clusters.commit_group(group, {(topic, 0): 10})
    extra = sidecar_properties(tmp_path / "sidecar.properties", free_port())

    def ready() -> None:
        code, rows = check_groups(mirror, extra)
        row = rows[group, 0]
        assert (row["state"], row["checkpoint_downstream"], row["skipped_records"], row["reread_records"]) == (
            "READY", 10, 0, 0), row
        assert code == 0
    eventually(ready, timeout=60, interval=1)
    assert mm2_answer(mirror, translator, topic, group) == {(group, 0): 10}


def test_groups_on_an_exactly_once_target(mirror, translator, tmp_path):
    """MM2 writing the target in transactions (`exactly.once.source.support = enabled`): each
    transaction's commit marker takes a target offset, so target offsets count no records. Groups
    behind, far behind and caught up resume where RemoteClusterUtils says; the re-read mirrorlag
    gives is never below what a consumer there really reads again, and none reads SKIPS: nor one
    that resumes from its own offset on the target, past the newest sync and a commit marker, nor
    one whose consumers run on the target (it has failed over: active there)."""
    topic = f"eos-{mirror.tag}"
    mirror.clusters.create_topic(topic, 1)
    producer = NumberedProducer(mirror.pair.source.bootstrap_servers, topic)
    # sync.group.offsets.enabled: a group resumes from its own offset on the target where it has one
    mirror.write_config(topic, {f"{mirror.dst}.exactly.once.source.support": "enabled",
                                "sync.group.offsets.enabled": "true"})
    mirror.start()
    source, target = mirror.pair.source.bootstrap_servers, mirror.pair.target.bootstrap_servers
    for _ in range(6):  # copied in several transactions: markers between the target's records
        producer.produce({0: 40})
        leo = mirror.clusters.end_offset(topic)
        eventually(lambda: lro_true(source, topic, target, mirror.remote(topic), 0) == leo - 1, timeout=60, interval=0.3)
    assert mirror.clusters.end_offset(mirror.remote(topic), which="target") > leo, "no marker on the target"
    committed = {f"far-{mirror.tag}": 30, f"behind-{mirror.tag}": 170, f"ready-{mirror.tag}": leo}
    for group, g in committed.items():
        mirror.clusters.commit_group(group, {(topic, 0): g}, metadata=f"{group}-v7")
    # A group whose consumers ran on the target in a drill and left (no members there), committed
    # at its end: it resumes there (MM2 moves a group's target offset forward only), past the
    # newest sync by a record and the marker after it.
    drilled, target_end = f"drilled-{mirror.tag}", mirror.clusters.end_offset(mirror.remote(topic), which="target")
    mirror.clusters.commit_group(drilled, {(topic, 0): leo})
    mirror.clusters.commit_group(drilled, {(mirror.remote(topic), 0): target_end}, which="target")
    extra = sidecar_properties(tmp_path / "sidecar.properties", free_port())

    def agreed() -> tuple[dict, dict]:
        answer = mm2_answer(mirror, translator, topic, *committed)
        assert set(answer) == {(g, 0) for g in committed}, answer
        code, rows = check_groups(mirror, extra, topic)
        assert {k: rows[k]["checkpoint_downstream"] for k in answer} == answer, rows
        assert rows[f"ready-{mirror.tag}", 0]["reread_records"] == 0, rows  # once MM2 synced the last record
        return answer, rows
    answer, rows = eventually(agreed, timeout=60, interval=1)
    # MM2 copies a group's commit metadata into its checkpoint and from there into the offset it
    # syncs into the target (mirrorlag mirror does the same)
    far = f"far-{mirror.tag}"
    eventually(lambda: target_offsets(mirror, topic, far, metadata=True) == {(far, 0): (answer[far, 0], f"{far}-v7")},
               timeout=30, interval=0.5)
    for group, g in committed.items():
        row = rows[group, 0]
        reread, _ = reread_true(mirror, topic, 0, answer[group, 0], g)
        assert row["state"] != "SKIPS" and row["skipped_records"] == 0, row
        assert row["reread_records"] >= reread, (row, reread)  # at most: never understated
    # The drilled group reads nothing again and skips nothing (the target's end holds copies of
    # records below its G alone); counting the markers as records put it a record past G: SKIPS.
    row = check_groups(mirror, extra, topic)[1][drilled, 0]
    assert reread_true(mirror, topic, 0, target_end, leo) == (0, None)
    assert (row["state"], row["skipped_records"], row["reread_records"]) == ("READY", 0, 0), row

    # The group behind fails over: its consumers run on the target, read it to its end and commit
    # there, past where its frozen source offset translates (MM2 leaves an active group's offsets
    # alone). It has moved: reported active on the target, and no record is skipped.
    behind = f"behind-{mirror.tag}"
    last = last_data_offset(target, mirror.remote(topic), 0, "read_uncommitted")
    with running_group(target, behind, mirror.remote(topic)) as newest:
        eventually(lambda: newest() == last, timeout=60, interval=0.5)

        def failed_over() -> dict:
            row = check_groups(mirror, extra, topic)[1][behind, 0]
            assert row["active_on_target"], row
            return row
        row = eventually(failed_over, timeout=60, interval=1)
        assert (row["committed"], row["state"], row["skipped_records"]) == (170, "READY", 0), row
