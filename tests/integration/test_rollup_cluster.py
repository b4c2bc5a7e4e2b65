"""The rollup on a real Spark standalone cluster: a master and two workers (1 core each) from the
pyspark wheel's own launcher on loopback, `spark-submit --master spark://...` in client mode, and
mirrorlag shipped to the executors as a user would: `python -m mirrorlag.rollup.ship` then
`--py-files mirrorlag.zip`. The executors' Python cannot import mirrorlag any other way
(rollup_spark.executor_python), so the job's success is the shipping's proof. Output equals the
local session's, row for row.
"""

from __future__ import annotations

import re
import subprocess
import sys
from datetime import date
from pathlib import Path
from typing import Iterator

import pytest

from tests.integration.rollup_spark import (
    DAYS, ENTRY, GAP_DAY, SPARK_SUBMIT, Cluster, assert_same_output, cannot_import_mirrorlag, clean_env,
    executor_python, free_port, QUICK_JVM, local_reference, one_error_line, rollup_args, running, started_by,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(spark, tmp_path_factory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("spark-cluster")
    yield from running(Cluster(root, executor_python(root), daemon_java_opts=QUICK_JVM), spark, tmp_path_factory)


def submit(cluster: Cluster, zip_path: Path, args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """The documented command: client mode, one core per executor, mirrorlag on --py-files."""
    argv = [str(SPARK_SUBMIT), "--master", cluster.url, "--deploy-mode", "client", "--name", "mirrorlag-rollup",
            "--driver-memory", "1g", "--executor-memory", "1g", "--executor-cores", "1",
            "--total-executor-cores", str(len(cluster.workers)), "--py-files", str(zip_path),
            "--conf", f"spark.pyspark.python={cluster.python}", "--conf", f"spark.pyspark.driver.python={sys.executable}",
            "--conf", "spark.ui.enabled=false",
            "--conf", f"spark.driver.extraJavaOptions={QUICK_JVM}", "--conf", f"spark.executor.extraJavaOptions={QUICK_JVM}",
            str(ENTRY), *args]
    return subprocess.run(argv, cwd=cwd, env=clean_env(), capture_output=True, text=True, timeout=600)


def _rollup_equals_local(cluster: Cluster, spark, tmp_path_factory, tmp_path: Path, days: list[date],
                         *extra: str) -> str:
    """The submission's output equals the local session's; returns what the workers' Python logged."""
    history, expected = local_reference(spark, tmp_path_factory, days)
    assert "No module named 'mirrorlag'" in cannot_import_mirrorlag(cluster.python, tmp_path)
    ship = subprocess.run([sys.executable, "-m", "mirrorlag.rollup.ship", str(tmp_path / "dist" / "mirrorlag.zip")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert ship.returncode == 0, ship.stderr

    out = tmp_path / "out-cluster"
    proc = submit(cluster, tmp_path / "dist" / "mirrorlag.zip", [*rollup_args(history, out, days), *extra], tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    assert all(f"✓ {d}" in proc.stdout for d in days), proc.stdout  # progress lines
    assert f"{len(days)} day" in proc.stdout, proc.stdout  # and the summary
    assert "Traceback" not in proc.stderr
    # Its tasks ran in both workers' executors.
    for worker in cluster.workers:
        assert re.search(r"Asked to launch executor app-\S+ for mirrorlag-rollup", worker.log.read_text()), worker.tail()
    assert_same_output(expected, out, days)
    started = started_by(cluster.python).read_text()
    assert "-m pyspark.daemon" in started  # the workers' Python was it
    return started


def test_a_day_on_the_cluster_equals_local(cluster, spark, tmp_path_factory, tmp_path):
    """The day with a gap and a stall, mirrorlag on --py-files (the executors have no other), by
    the spark-submit of the pyspark wheel with the entry file and the subcommand's arguments.
    session.DEFAULTS reach the workers' Python (glibc's malloc settings that keep a worker's freed
    pages for its next task), and a user's --conf still wins over them."""
    started = _rollup_equals_local(cluster, spark, tmp_path_factory, tmp_path, [GAP_DAY],
                                   "--conf", "spark.executorEnv.MALLOC_TRIM_THRESHOLD_=12345")
    daemons = {line for line in started.splitlines() if "-m pyspark.daemon" in line}
    assert daemons == {"-m pyspark.daemon pyspark.worker MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=12345"}, started


@pytest.mark.soak
def test_a_backfill_on_the_cluster_equals_local(cluster, spark, tmp_path_factory, tmp_path):
    """Three days in one submission: the trends of each day read the days the cluster wrote before.
    Soak: ~70 s more than the one day (`pytest -m soak tests/integration/test_rollup_cluster.py`)."""
    _rollup_equals_local(cluster, spark, tmp_path_factory, tmp_path, DAYS)


def test_an_unreachable_master_is_one_line(tmp_path):
    """At once: Spark's own driver would retry for a minute and say so only in its log."""
    (tmp_path / "history" / "date=2024-01-01").mkdir(parents=True)
    (tmp_path / "history" / "date=2024-01-01" / "part-0.parquet").write_bytes(b"not read")
    proc = subprocess.run([sys.executable, "-m", "mirrorlag", "rollup", "--master", f"spark://127.0.0.1:{free_port()}",
                           "--history", str(tmp_path / "history"), "--out", str(tmp_path / "out"), "--date", "2024-01-01"],
                          cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert one_error_line(proc).startswith("mirrorlag: error: cannot reach the Spark master at 127.0.0.1:")
