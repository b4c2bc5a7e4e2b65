"""Lag history written by the real `mirrorlag run`: SIGTERM flushes it, kill -9 loses at most the
open buffer and never leaves a half-written file, an unwritable directory never stops the metrics."""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pytest

from mirrorlag.embedded import free_port
from mirrorlag.formats import OffsetSync
from mirrorlag.history.layout import segment_name, tmp_path as writers_tmp, writer_tag
from tests.conftest import Clusters
from tests.helpers import eventually, scrape, status, wait_ready

pytestmark = pytest.mark.integration

COLUMNS = ["ts", "source", "target", "topic", "partition", "leo", "lro", "lro_feed", "record_lag",
           "time_lag_ms", "freshness_lag_ms", "byte_lag_estimate", "state", "writer", "refresh_interval_ms"]


def setup(tmp_path: Path, clusters: Clusters, history_dir: Path) -> tuple[Path, int, str]:
    tag = uuid.uuid4().hex[:8]
    src, dst, topic = f"s{tag}", f"d{tag}", f"t-{tag}"
    clusters.create_topic(topic, 2)
    clusters.produce(topic, {0: 10, 1: 5})
    sync_topic = f"mm2-offset-syncs.{dst}.internal"
    clusters.create_topic(sync_topic, 1)
    clusters.write_offset_syncs(sync_topic, [OffsetSync(topic, 0, 6, 6)])
    port = free_port()
    config = tmp_path / "mm2.properties"
    config.write_text(
        f"clusters = {src}, {dst}\n{src}.bootstrap.servers = {clusters.source}\n"
        f"{dst}.bootstrap.servers = {clusters.target}\n{src}->{dst}.enabled = true\n"
        f"{src}->{dst}.topics = {topic}\nmirrorlag.lro.feeds = offset-syncs\n"
        f"mirrorlag.http.listener = 127.0.0.1:{port}\n"
        "replication.record.lag.metric.refresh.interval = 300\n"
        f"mirrorlag.history.dir = {history_dir}\nmirrorlag.history.segment.ms = 600000\n"
    )
    return config, port, topic


def start(config: Path, log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen([sys.executable, "-m", "mirrorlag", "run", "--config", str(config)],
                                stdout=out, stderr=out)


def tmp_file(day: Path, writer_id: str) -> Path:
    """Where writer `writer_id` writes a segment of `day` before its rename."""
    return writers_tmp(day / segment_name(1_767_225_600_000), writer_tag(writer_id))


def read_history(history_dir: Path) -> pa.Table:
    return ds.dataset(history_dir, format="parquet", partitioning="hive").to_table()


def test_sigterm_flushes_the_open_buffer_with_the_exact_schema(tmp_path, clusters):
    history_dir = tmp_path / "history"
    config, port, topic = setup(tmp_path, clusters, history_dir)
    proc = start(config, tmp_path / "sidecar.log")
    wait_ready(port, proc)
    eventually(lambda: _polls_at_least(port, 5))
    assert not list(history_dir.rglob("*.parquet"))  # nothing rolled yet: all in the open buffer
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=5) == 0

    table = read_history(history_dir)
    assert table.schema.names == COLUMNS + ["date"]
    file_schema = ds.dataset(history_dir, format="parquet").schema
    assert file_schema.field("ts").type == pa.timestamp("ms", tz="UTC")
    assert file_schema.field("partition").type == pa.int32()
    for name in ("leo", "lro", "record_lag", "time_lag_ms", "freshness_lag_ms", "byte_lag_estimate"):
        assert file_schema.field(name).type == pa.int64(), name
    rows = table.to_pylist()
    p0 = [r for r in rows if r["topic"] == topic and r["partition"] == 0]
    p1 = [r for r in rows if r["topic"] == topic and r["partition"] == 1]
    assert len(p0) >= 5 and len(p0) == len(p1)
    assert {(r["leo"], r["lro"], r["record_lag"], r["lro_feed"]) for r in p0} == {(10, 6, 3, "offset-syncs")}
    # Every row names its writer (by default the host and the HTTP port) and its poll interval.
    assert {(r["writer"], r["refresh_interval_ms"]) for r in rows} == {(f"{socket.gethostname()}:{port}", 300)}
    # No sync for p1 once the syncs topic is read: owed from its log start, its records just written.
    assert {(r["leo"], r["lro"], r["record_lag"], r["lro_feed"], r["state"]) for r in p1} == {
        (5, -1, 5, "log-start", "IN_SYNC")}


def test_sigterm_taken_by_another_thread_still_stops_the_sidecar(tmp_path, clusters):
    """The kernel hands a process's signal to any thread not blocking it; Python runs the handler
    only in the main thread, once that thread wakes. A SIGTERM another thread took once left
    the sidecar running until Kubernetes' SIGKILL, its open buffer lost."""
    history_dir = tmp_path / "history"
    config, port, _ = setup(tmp_path, clusters, history_dir)
    proc = start(config, tmp_path / "sidecar.log")
    wait_ready(port, proc)
    eventually(lambda: _polls_at_least(port, 2))
    # One of the sidecar's own Python threads (librdkafka's block every signal).
    other = next(tid for tid in map(int, os.listdir(f"/proc/{proc.pid}/task")) if tid != proc.pid
                 and "SigBlk:\t0000000000000000" in Path(f"/proc/{proc.pid}/task/{tid}/status").read_text())
    tgkill = ctypes.CDLL(None, use_errno=True).syscall
    assert tgkill(234, proc.pid, other, signal.SIGTERM) == 0  # SYS_tgkill on x86-64: to that thread alone
    try:
        assert proc.wait(timeout=20) == 0
    finally:
        proc.kill()
    assert len(read_history(history_dir)) > 0  # the open buffer was flushed


def test_spark_reads_what_a_running_sidecar_wrote_with_the_exact_types(tmp_path, clusters, spark):
    from pyspark.sql import types as T

    history_dir = tmp_path / "history"
    config, port, topic = setup(tmp_path, clusters, history_dir)
    proc = start(config, tmp_path / "sidecar.log")
    wait_ready(port, proc)
    eventually(lambda: _polls_at_least(port, 3))
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=5) == 0

    df = spark.read.parquet(str(history_dir))
    assert [(f.name, f.dataType) for f in df.schema.fields] == [
        ("ts", T.TimestampType()), ("source", T.StringType()), ("target", T.StringType()),
        ("topic", T.StringType()), ("partition", T.IntegerType()), ("leo", T.LongType()),
        ("lro", T.LongType()), ("lro_feed", T.StringType()), ("record_lag", T.LongType()),
        ("time_lag_ms", T.LongType()), ("freshness_lag_ms", T.LongType()),
        ("byte_lag_estimate", T.LongType()), ("state", T.StringType()), ("writer", T.StringType()),
        ("refresh_interval_ms", T.LongType()), ("date", T.DateType()),
    ]
    lagging = df.where(f"topic = '{topic}' AND partition = 0").select("record_lag", "lro").distinct().collect()
    assert [(r["record_lag"], r["lro"]) for r in lagging] == [(3, 6)]


def test_kill_9_leaves_only_whole_segments_and_a_restart_cleans_up(tmp_path, clusters):
    history_dir = tmp_path / "history"
    config, port, _ = setup(tmp_path, clusters, history_dir)
    config.write_text(config.read_text().replace("segment.ms = 600000", "segment.ms = 200"))
    proc = start(config, tmp_path / "sidecar.log")
    wait_ready(port, proc)
    eventually(lambda: _assert(len(list(history_dir.rglob("*.parquet"))) >= 3), timeout=20)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=5)
    # Half-written files as a writer killed mid-write leaves them: this sidecar's own (its id is
    # the host and its port), one of a version before writer ids, and another replica's, which
    # may be writing it now and so is not this sidecar's to remove.
    day = history_dir / "date=2026-01-01"
    day.mkdir(exist_ok=True)
    own = tmp_file(day, f"{socket.gethostname()}:{port}")
    legacy = day / ".part-1767225600000-deadbeef.parquet.tmp"
    other = tmp_file(day, "mirrorlag-1:9464")
    for half in (own, legacy, other):
        half.write_bytes(b"PAR1 half a file")
    for segment in history_dir.rglob("*.parquet"):  # every visible segment is whole
        ds.dataset(segment, format="parquet").to_table()
    left = set(history_dir.rglob("*.tmp"))  # with any the kill itself left mid-write

    proc = start(config, tmp_path / "sidecar2.log")
    try:
        wait_ready(port, proc)
        # Only what was left before: the restarted sidecar writes a segment every 200 ms, and the
        # one it is writing now is a .tmp of its own.
        assert left & set(history_dir.rglob("*.tmp")) == {other}
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=5)
    assert len(read_history(history_dir)) > 0


def test_an_unwritable_history_dir_never_stops_the_metrics(tmp_path, clusters):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a regular file where the history directory's parent should be")
    config, port, topic = setup(tmp_path, clusters, blocker / "history")
    config.write_text(config.read_text().replace("segment.ms = 600000", "segment.ms = 200"))
    proc = start(config, tmp_path / "sidecar.log")
    try:
        wait_ready(port, proc)

        def failing_but_serving() -> None:
            samples = scrape(port)
            assert samples[("mirrorlag_history_write_errors_total", ())] >= 1
            assert samples[("mirrorlag_history_healthy", ())] == 0
            assert status(port)["history"]["healthy"] is False
            assert any(name == "mirrorlag_replication_record_lag" for name, _ in samples)
        eventually(failing_but_serving, timeout=20)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
    assert proc.returncode == 0
    log = (tmp_path / "sidecar.log").read_text()
    assert "Traceback" not in log


def _polls_at_least(port: int, n: int) -> None:
    assert status(port)["polls_total"] >= n


def _assert(condition: bool) -> None:
    assert condition
