"""The container's contract at run time, without a container runtime: `mirrorlag run` as an
unprivileged user (uid 10001, the image's USER) on a read-only root filesystem, with only the
history directory writable (a private mount namespace: `/` bind-remounted read-only). It must
poll, serve, write its history and stop cleanly on SIGTERM, and never trip over the read-only
filesystem. The static side (Dockerfile USER, Kubernetes securityContext) is in tests/deploy.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import uuid
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from mirrorlag.embedded import free_port
from tests.helpers import eventually, status, wait_ready

pytestmark = pytest.mark.integration

UID = 10001
VENV_PYTHON = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "python"


def _namespaces_work() -> bool:
    if os.geteuid() != 0 or not (shutil.which("unshare") and shutil.which("setpriv")):
        return False
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "--", "true"], capture_output=True)
    return probe.returncode == 0


@pytest.mark.skipif(not _namespaces_work(), reason="needs root with unshare and setpriv to build the read-only root")
def test_runs_as_uid_10001_on_a_read_only_root_with_only_the_history_dir_writable(clusters):
    base = Path(tempfile.mkdtemp(prefix="mirrorlag-ro-"))
    try:
        base.chmod(0o755)
        history = base / "history"
        history.mkdir()
        os.chown(history, UID, UID)
        topic = f"t-{uuid.uuid4().hex[:8]}"
        clusters.create_topic(topic, 1)
        clusters.produce(topic, {0: 3})
        port = free_port()
        config = base / "mm2.properties"
        config.write_text(
            f"clusters = src, dst\nsrc.bootstrap.servers = {clusters.source}\n"
            f"dst.bootstrap.servers = {clusters.target}\nsrc->dst.enabled = true\nsrc->dst.topics = {topic}\n"
            f"mirrorlag.http.listener = 127.0.0.1:{port}\n"
            "replication.record.lag.metric.refresh.interval = 500\n"
            f"mirrorlag.history.dir = {history}\nmirrorlag.history.segment.ms = 1000\n"
        )
        config.chmod(0o644)
        script = (
            f"mount --bind {history} {history} && mount --bind / / && mount -o remount,bind,ro / && "
            f"exec setpriv --reuid {UID} --regid {UID} --clear-groups -- "
            f"{VENV_PYTHON} -m mirrorlag run --config {config}"
        )
        log = base / "sidecar.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script],
                                    stdout=out, stderr=out, env={**os.environ, "HOME": "/nonexistent"})
        try:
            wait_ready(port, proc)
            eventually(lambda: _assert(status(port)["history"]["segments_written_total"] >= 1), timeout=20)
            assert any(r["topic"] == topic and r["leo"] == 3 for r in status(port)["partitions"])
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=10)
        text = log.read_text()
        assert proc.returncode == 0, text
        assert "Read-only file system" not in text and "Permission denied" not in text, text
        segments = list(history.rglob("*.parquet"))
        assert segments and all(p.stat().st_uid == UID for p in segments)
        assert ds.dataset(history, format="parquet", partitioning="hive").to_table().num_rows >= 1
        # Nothing else was written: the only files the run left are the history's and the log.
        assert {p.name for p in base.iterdir()} == {"history", "mm2.properties", "sidecar.log"}
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _assert(condition: bool) -> None:
    assert condition
