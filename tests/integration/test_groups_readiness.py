"""Failover readiness read from real brokers while `mirrorlag mirror` copies and checkpoints as MM2
does: the figures equal MM2's own translation rule applied by hand to the syncs and checkpoints."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pyarrow.dataset as ds
import pytest
from confluent_kafka.admin import AdminClient

from mirrorlag.config import load_settings
from mirrorlag.config.group_filter import GROUPS_EXCLUDE_DEFAULT, GroupFilter, compile_patterns
from mirrorlag.groups.flow_reader import FlowGroupsReader
from mirrorlag.history.group_schema import SCHEMA as GROUPS_SCHEMA
from mirrorlag.groups.monitor import GroupsMonitor
from mirrorlag.groups.readiness import GroupState, Limits, NotCheckpointedBecause
from mirrorlag.groups.rows import FIELDS, group_rows
from mirrorlag.kafka.topic_reader import TopicReader, assign_only_consumer
from tests.helpers import eventually
from tests.nagios import parse
from tests.integration.test_mirror import LAG_MAX, Setup, expected_syncs, readers, syncs_of  # noqa: F401 (fixture)

pytestmark = pytest.mark.integration


def _reader(settings, setup: Setup, seed=lambda topic, partition: None) -> FlowGroupsReader:
    (flow,) = settings.flows
    return FlowGroupsReader(seed=seed,
        flow=flow, groups=GroupFilter(flow.groups_include, compile_patterns(GROUPS_EXCLUDE_DEFAULT)),
        source_admin=AdminClient({"bootstrap.servers": setup.clusters.source}),
        target_admin=AdminClient({"bootstrap.servers": setup.clusters.target}),
        checkpoint_reader=TopicReader("checkpoints", flow.target, assign_only_consumer(settings.clusters[flow.target]),
                                      [flow.policy.checkpoints_topic(flow.source)], 10.0, timed=True),
        sync_reader=TopicReader("offset-syncs", flow.source, assign_only_consumer(settings.clusters[flow.source]),
                                [flow.policy.offset_syncs_topic(flow.target)], 10.0))


def test_readiness_of_groups_as_mm2_checkpoints_them(tmp_path, own_clusters, readers):
    # The mirror never checkpoints `new-*` groups; the reader keeps MM2's default exclusions, so
    # it reads them: a group MM2 has not checkpointed, without racing its 1 s cadence.
    setup = Setup(tmp_path, own_clusters, extra="emit.checkpoints.interval.seconds = 1\n"
                                                "groups.exclude = new-.*\n")
    counts = {0: 12, 1: 7}
    setup.fill(counts)
    proc = setup.start(flush_ms=1000)
    try:
        want_syncs = {p: expected_syncs(n, LAG_MAX) for p, n in counts.items()}
        readers(own_clusters.source, setup.sync_topic).until(lambda r: syncs_of(r, setup.topic) == want_syncs)
        near, far, new = f"near-{setup.src}", f"far-{setup.src}", f"new-{setup.src}"
        own_clusters.commit_group(near, {(setup.topic, 0): 12, (setup.topic, 1): 7})  # caught up
        own_clusters.commit_group(far, {(setup.topic, 0): 6})  # between kept syncs (0,0) and (8,8)
        settings = load_settings([str(setup.config)])
        monitor = GroupsMonitor([_reader(settings, setup)], lro_of=lambda flow: lambda t, p: counts[p] - 1,
                                limits=Limits(3, 120_000))
        try:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                (flow_groups,) = monitor.run_once().flows
                assert flow_groups.error is None
                done = {(g.group, p.partition) for g in flow_groups.groups for p in g.partitions if p.checkpoint}
                if done >= {(near, 0), (near, 1), (far, 0)}:
                    break
                time.sleep(0.5)
            own_clusters.commit_group(new, {(setup.topic, 0): 12})
            (flow_groups,) = monitor.run_once().flows
            groups = {g.group: g for g in flow_groups.groups if g.group in (near, far, new)}
            rows = [r for r in group_rows(flow_groups.flow, flow_groups.groups) if r["group"] == far]
        finally:
            monitor.close()
    finally:
        setup.stop(proc)
    # near: 12 on p0 resumes one past the newest sync (11,11): 12, nothing re-read; p1 likewise
    assert groups[near].state is GroupState.READY
    assert [(p.readiness.resume_target, p.readiness.reread) for p in groups[near].partitions] == [(12, 0), (7, 0)]
    # far: 6 on p0; MM2 keeps (0,0), (8,8), (11,11), so it resumes at 1 and reads 1..5 again.
    # Our replica of MM2, started after the syncs were written, kept only (11,11): mapping back
    # goes through the history, which kept (0,0).
    (p0,) = groups[far].partitions
    assert (p0.checkpoint.upstream, p0.checkpoint.downstream) == (6, 1)
    assert (p0.readiness.resume_source, p0.readiness.reread) == (1, 5)
    assert groups[far].state is GroupState.REREAD_HIGH  # over the limit of 3
    assert 0 <= p0.readiness.checkpoint_age_ms < 60_000
    (n0,) = groups[new].partitions
    assert n0.readiness.state is GroupState.NOT_CHECKPOINTED
    assert n0.readiness.because is NotCheckpointedBecause.NOT_WRITTEN
    (row,) = rows
    assert tuple(row) == FIELDS
    assert {k: row[k] for k in ("group", "partition", "committed", "checkpoint_upstream", "checkpoint_downstream",
                                "resume_source_offset", "reread_records", "skipped_records", "state")} == {
        "group": far, "partition": 0, "committed": 6, "checkpoint_upstream": 6, "checkpoint_downstream": 1,
        "resume_source_offset": 1, "reread_records": 5, "skipped_records": 0, "state": "REREAD_HIGH"}


def _near_and_far(setup: Setup, clusters, readers) -> tuple[str, str]:
    """12 records copied on one partition with MM2's kept syncs (0,0), (8,8), (11,11) (the mirror
    already started); a group caught up (near, 12) and one at 6 (far: resumes at 1, re-reads 5),
    both checkpointed."""
    setup.fill({0: 12})
    readers(clusters.source, setup.sync_topic).until(lambda r: syncs_of(r, setup.topic) == {0: expected_syncs(12, LAG_MAX)})
    near, far = f"near-{setup.src}", f"far-{setup.src}"
    clusters.commit_group(near, {(setup.topic, 0): 12})
    clusters.commit_group(far, {(setup.topic, 0): 6})
    readers(clusters.target, f"{setup.src}.checkpoints.internal").until(lambda r: len(r) >= 2, what="checkpoints of both groups")
    return near, far


def test_check_groups_through_the_cli(tmp_path, own_clusters, readers):
    setup = Setup(tmp_path, own_clusters, extra="emit.checkpoints.interval.seconds = 1\n"
                                                "mirrorlag.failover.reread.max.records = 3\n")
    proc = setup.start(flush_ms=1000)
    try:
        near, far = _near_and_far(setup, own_clusters, readers)

        def check(*extra: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run([sys.executable, "-m", "mirrorlag", "check", "--groups", "--config", str(setup.config),
                                   *extra, "--timeout", "20"], capture_output=True, text=True, timeout=60)

        result = check("--json")
        assert result.returncode == 1, result.stderr
        rows = {r["group"]: r for r in json.loads(result.stdout) if r["group"] in (near, far)}
        assert (rows[far]["reread_records"], rows[far]["state"]) == (5, "REREAD_HIGH")
        assert (rows[near]["reread_records"], rows[near]["state"]) == (0, "READY")
        table = check()
        assert table.returncode == 1 and "REREAD_HIGH" in table.stdout and far in table.stdout
        assert "the source listed" in table.stdout
        status, text, perf = parse(table.stdout)  # as Nagios reads it
        assert status == "WARNING" and f"{far} REREAD_HIGH re-read (sum) " in text and f" {near} " not in text, text
        assert perf["reread_high"][0] == "1" and int(perf["reread_records"][0]) >= 5, perf
        assert "checkpoint downstream" not in table.stdout  # the table only with --verbose
        assert "checkpoint downstream" in check("--verbose").stdout
        relaxed = tmp_path / "relaxed.properties"
        relaxed.write_text("mirrorlag.failover.reread.max.records = 5\n")
        ok = subprocess.run([sys.executable, "-m", "mirrorlag", "check", "--groups", "--config", str(setup.config),
                             "--config", str(relaxed), "--timeout", "20"], capture_output=True, text=True, timeout=60)
        assert ok.returncode == 0, ok.stdout + ok.stderr
    finally:
        setup.stop(proc)


def test_the_running_sidecar_serves_the_groups_on_status_and_metrics(tmp_path, own_clusters, readers, spark):
    """`mirrorlag run` reads the groups on their own cadence: /status's `groups` rows are the
    objects `check --groups --json` prints, /metrics has the aggregates of every group and the
    series of the partitions that are not READY, and the history keeps each run's rows in
    `_groups/`, which readers of the partitions' history (Spark's, pyarrow's) pass over."""
    from mirrorlag.embedded import free_port
    from tests.helpers import running_sidecar, status

    setup = Setup(tmp_path, own_clusters, extra="emit.checkpoints.interval.seconds = 1\n")
    port = free_port()
    sidecar = tmp_path / "sidecar.properties"
    sidecar.write_text(f"mirrorlag.http.listener = 127.0.0.1:{port}\n"
                       "replication.record.lag.metric.refresh.interval = 500\n"
                       "mirrorlag.failover.interval.ms = 500\n"
                       "mirrorlag.failover.reread.max.records = 3\n"
                       f"mirrorlag.history.dir = {tmp_path / 'history'}\n")
    proc = setup.start(flush_ms=1000)
    try:
        near, far = _near_and_far(setup, own_clusters, readers)
        with running_sidecar(setup.config, sidecar, port=port, log=tmp_path / "sidecar.log"):
            def both_read() -> dict:
                doc = status(port)
                rows = {r["group"]: r for r in doc["groups"] if r["group"] in (near, far)}
                assert set(rows) == {near, far} and all(r["checkpoint_downstream"] is not None for r in rows.values())
                return doc

            doc = eventually(both_read, timeout=30)
            rows = {r["group"]: r for r in doc["groups"]}
            assert list(rows[far]) == list(FIELDS)
            assert (rows[far]["reread_records"], rows[far]["state"]) == (5, "REREAD_HIGH")
            assert (rows[near]["reread_records"], rows[near]["state"]) == (0, "READY")
            (flow,) = doc["groups_flows"]
            assert flow["error"] is None and flow["checkpoints_read"] and flow["groups"] >= 2
            samples = eventually(lambda: _with_groups(port, far), timeout=10)  # rendered at the next poll

            def labelled(name: str, **labels: str) -> float:
                key = (name, tuple(sorted({"source": setup.src, "target": setup.dst, **labels}.items())))
                assert key in samples, (key, sorted(k for k in samples if k[0].startswith("mirrorlag_group")))
                return samples[key]

            assert labelled("mirrorlag_group_failover_reread_records", group=far, stat="max") == 5
            assert labelled("mirrorlag_group_ready", group=far) == 0
            assert labelled("mirrorlag_group_ready", group=near) == 1
            assert labelled("mirrorlag_group_partition_state", group=far, topic=setup.topic, partition="0",
                            state="REREAD_HIGH") == 1
            assert not any(k[0] == "mirrorlag_group_partition_state" and ("group", near) in k[1] for k in samples)
    finally:
        setup.stop(proc)
    # Stopped: the last segments are written.
    history = tmp_path / "history"
    groups = ds.dataset(history / "_groups", format="parquet", partitioning="hive").to_table()
    assert groups.schema.remove(groups.schema.get_field_index("date")) == GROUPS_SCHEMA
    rows = [r for r in groups.to_pylist() if r["group"] == far]
    assert rows and {(r["source"], r["target"], r["topic"], r["partition"]) for r in rows} == {
        (setup.src, setup.dst, setup.topic, 0)}
    last = max(rows, key=lambda r: r["ts"])
    assert (last["committed"], last["reread_records"], last["state"], last["refresh_interval_ms"]) == (
        6, 5, "REREAD_HIGH", 500)
    partitions = ds.dataset(history, format="parquet", partitioning="hive").to_table()
    assert "group" not in partitions.column_names and partitions.num_rows > 0
    assert "group" not in spark.read.parquet(str(history)).columns


def _with_groups(port: int, group: str) -> dict:
    from tests.helpers import scrape

    samples = scrape(port)
    assert any(name == "mirrorlag_group_ready" and ("group", group) in labels for name, labels in samples), \
        "no groups on /metrics yet"
    return samples


def test_a_partition_first_committed_after_the_syncs_were_read_is_seeded_from_the_feed(tmp_path, own_clusters, readers):
    """The groups' sync stores keep the partitions some group committed on. One a group starts to
    commit on later had its syncs passed over: the offset-syncs feed's newest sync seeds it (read
    under the feed's lock, from the groups job's thread), so it is translated, not UNMAPPED."""
    from mirrorlag.feeds.offset_syncs import offset_syncs_feeds
    from mirrorlag.groups.service import seeds_from

    setup = Setup(tmp_path, own_clusters, extra="emit.checkpoints.interval.seconds = 1\n")
    counts = {0: 12, 1: 7}
    setup.fill(counts)
    proc = setup.start(flush_ms=1000)
    try:
        # Copied: each partition's newest sync is its last record's. Only the newest matters here,
        # and a loaded machine's mirror copies in more batches than one, each with syncs of its own.
        readers(own_clusters.source, setup.sync_topic).until(
            lambda r: {p: s[-1] for p, s in syncs_of(r, setup.topic).items()} == {p: (n - 1, n - 1) for p, n in counts.items()})
        settings = load_settings([str(setup.config)])
        (feed,) = offset_syncs_feeds(settings)
        feed.offsets()  # the poll's drain: the newest sync of both partitions
        (flow,) = settings.flows
        early, late = f"early-{setup.src}", f"late-{setup.src}"
        own_clusters.commit_group(early, {(setup.topic, 0): 12})
        reader = _reader(settings, setup, seeds_from([feed])(flow.id))
        monitor = GroupsMonitor([reader], lro_of=lambda flow: lambda t, p: counts[p] - 1, limits=Limits(3, 120_000))

        def checkpointed(group: str) -> list:
            (flow_groups,) = monitor.run_once().flows
            (g,) = [g for g in flow_groups.groups if g.group == group]
            assert all(p.checkpoint for p in g.partitions), g
            return g.partitions

        try:
            eventually(lambda: checkpointed(early), timeout=20, interval=0.5)
            assert (setup.topic, 1) not in reader._watched  # its syncs were passed over
            own_clusters.commit_group(late, {(setup.topic, 1): 7})
            (p1,) = eventually(lambda: checkpointed(late), timeout=20, interval=0.5)
        finally:
            monitor.close()
            feed.close()
    finally:
        setup.stop(proc)
    # 7 on p1 resumes one past the newest sync (6,6): the seed's. Mapped back to 7: nothing re-read
    # (without the seed: resumes at 7, mapped back to nothing).
    assert (p1.checkpoint.downstream, p1.readiness.resume_source, p1.readiness.reread) == (7, 7, 0)
    assert p1.readiness.state is GroupState.READY
