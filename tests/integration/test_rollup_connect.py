"""The rollup through Spark Connect: `mirrorlag rollup --remote sc://...` against the Connect server
that ships in the pyspark wheel (its spark-connect jar, started with spark-submit), whose Python
workers cannot import mirrorlag but what the client sends (remote.ship_to). Output equals the
local session's. And every way it can go wrong is one line and exit 2: a bad URL, nothing
listening, something that is not a Connect server, a setting only the server can have.

Connect runs in child processes only: a Connect session in this process would turn PySpark's
Connect mode on for the whole process (an environment variable), and the suite's local session
with it.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from datetime import date
from pathlib import Path
from typing import Iterator

import pytest

from tests.integration.rollup_spark import (
    DAYS, GAP_DAY, SPARK_SUBMIT, SparkProcess, assert_same_output, cannot_import_mirrorlag, clean_env,
    executor_python, free_port, QUICK_JVM, local_reference, one_error_line, rollup_args, running, shared_history,
    started_by,
)

pytestmark = pytest.mark.integration
SERVER = "org.apache.spark.sql.connect.service.SparkConnectServer"


class ConnectServer:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.python = executor_python(root)
        self.port = free_port()
        self.url = f"sc://127.0.0.1:{self.port}"
        self.process: SparkProcess | None = None

    def start(self) -> None:
        argv = [str(SPARK_SUBMIT), "--class", SERVER, "--master", "local[2]", "--driver-memory", "1g",
                "--driver-java-options", QUICK_JVM,
                "--conf", f"spark.connect.grpc.binding.port={self.port}",
                "--conf", "spark.connect.grpc.binding.address=127.0.0.1", "--conf", "spark.ui.enabled=false"]
        self.process = SparkProcess.start("connect", argv, self.root / "server", clean_env(PYSPARK_PYTHON=str(self.python)))

    def ready(self) -> None:
        assert self.process is not None
        self.process.wait_for(r"Spark Connect server started at")

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()


@pytest.fixture(scope="module")
def server(spark, tmp_path_factory) -> Iterator[ConnectServer]:
    yield from running(ConnectServer(tmp_path_factory.mktemp("spark-connect")), spark, tmp_path_factory)


def rollup(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mirrorlag", "rollup", *args], cwd=cwd,
                          env=env or clean_env(), capture_output=True, text=True, timeout=timeout)


def _rollup_equals_local(server: ConnectServer, spark, tmp_path_factory, tmp_path: Path, days: list[date],
                         env: dict[str, str] | None = None, remote: list[str] | None = None) -> None:
    history, expected = local_reference(spark, tmp_path_factory, days)
    assert "No module named 'mirrorlag'" in cannot_import_mirrorlag(server.python, tmp_path)
    out = tmp_path / "out-connect"
    proc = rollup(*(remote if remote is not None else ["--remote", server.url]), *rollup_args(history, out, days),
                  cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    assert all(f"✓ {d}" in proc.stdout for d in days), proc.stdout
    assert "Traceback" not in proc.stderr
    assert_same_output(expected, out, days)
    assert "-m pyspark.daemon" in started_by(server.python).read_text()  # the workers' Python was it


def test_a_day_through_connect_equals_local(server, spark, tmp_path_factory, tmp_path):
    _rollup_equals_local(server, spark, tmp_path_factory, tmp_path, [GAP_DAY])


@pytest.mark.soak
def test_a_backfill_through_spark_remote_equals_local(server, spark, tmp_path_factory, tmp_path):
    """Three days, the server named by SPARK_REMOTE. Soak: ~30 s more than the one day
    (`pytest -m soak tests/integration/test_rollup_connect.py`)."""
    _rollup_equals_local(server, spark, tmp_path_factory, tmp_path, DAYS,
                         env=clean_env(SPARK_REMOTE=server.url), remote=[])


def test_listing_through_connect(server, tmp_path_factory, tmp_path):
    """A remote URL's day and table listing (paths.py) through the server's own file systems."""
    history = shared_history(tmp_path_factory)
    code = (
        "import sys; from datetime import date\n"
        "from mirrorlag.rollup.remote import connect\n"
        "from mirrorlag.rollup.paths import remote_day_input, remote_table_days\n"
        f"spark = connect({server.url!r}, {{}})\n"
        f"print(remote_day_input(spark, 'file://{history}/date={GAP_DAY}'))\n"
        f"print(remote_day_input(spark, 'file://{history}/date=1999-01-01'))\n"
        f"print(remote_table_days(spark, 'file://{history}'))\n"
        f"print(remote_table_days(spark, 'file://{tmp_path}/nothing'))\n"
        "spark.stop()\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # What Spark lists: the segments, not the hidden files beside them (the rollup's receipt).
    size = sum(f.stat().st_size for f in (history / f"date={GAP_DAY}").iterdir() if not f.name.startswith((".", "_")))
    present, missing, days, none = proc.stdout.strip().splitlines()
    assert present == f"DayInput(status=<DayStatus.PRESENT: 'present'>, bytes={size})"
    assert missing == "DayInput(status=<DayStatus.MISSING: 'missing'>, bytes=0)"
    assert days == repr(DAYS) and none == "[]"


@pytest.mark.parametrize("conf, says", [
    ("spark.executor.memory=2g", "the Spark Connect server does not take it from a client"),
    ("spark.sql.shuffle.partitions=many", "[INVALID_CONF_VALUE.TYPE_MISMATCH]"),
])
def test_a_setting_the_server_refuses_is_one_line(server, tmp_path_factory, tmp_path, conf, says):
    history = shared_history(tmp_path_factory)
    proc = rollup("--remote", server.url, "--history", str(history), "--out", str(tmp_path / "out"),
                  "--date", GAP_DAY.isoformat(), "--conf", conf, cwd=tmp_path, timeout=120)
    assert proc.returncode == 2
    line = one_error_line(proc)
    assert line.startswith(f"mirrorlag: error: --conf {conf.split('=')[0]}: {says}"), line
    assert not (tmp_path / "out").exists()


# Without a server: each is one line and exit 2, at once.

def _history(tmp_path: Path) -> list[str]:
    (tmp_path / "history" / "date=2024-01-01").mkdir(parents=True)
    (tmp_path / "history" / "date=2024-01-01" / "part-0.parquet").write_bytes(b"not read")
    return ["--history", str(tmp_path / "history"), "--out", str(tmp_path / "out"), "--date", "2024-01-01"]


@pytest.mark.parametrize("url", ["http://127.0.0.1:15002", "sc://", "sc://host:99999", "127.0.0.1:15002"])
def test_a_bad_remote_url_is_one_line(tmp_path, url):
    proc = rollup("--remote", url, *_history(tmp_path), cwd=tmp_path, timeout=60)
    assert proc.returncode == 2
    assert one_error_line(proc).startswith("mirrorlag: error: --remote: ")


def test_nothing_listening_is_one_line_and_the_token_stays_secret(tmp_path):
    """SPARK_REMOTE is read like --remote; an unreachable server fails at once, not after
    the Connect client's ten minutes of retries."""
    url = f"sc://127.0.0.1:{free_port()}/;token=s3cr3t-value"
    proc = rollup(*_history(tmp_path), cwd=tmp_path, env=clean_env(SPARK_REMOTE=url), timeout=60)
    assert proc.returncode == 2
    line = one_error_line(proc)
    assert line.startswith("mirrorlag: error: cannot reach the Spark Connect server at 127.0.0.1:"), line
    assert "s3cr3t" not in proc.stderr + proc.stdout


def test_something_that_is_not_a_connect_server_is_one_line(tmp_path):
    """A port that accepts connections and says nothing gRPC understands."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        port = listener.getsockname()[1]
        proc = rollup("--remote", f"sc://127.0.0.1:{port}", *_history(tmp_path), cwd=tmp_path, timeout=60)
    finally:
        stop.set()
        thread.join()
        listener.close()
    assert proc.returncode == 2
    assert one_error_line(proc).startswith(f"mirrorlag: error: no Spark Connect server answers at 127.0.0.1:{port}: ")


def test_master_and_remote_exclude_each_other(tmp_path):
    proc = rollup("--master", "local[1]", "--remote", "sc://127.0.0.1:1", *_history(tmp_path), cwd=tmp_path, timeout=60)
    assert proc.returncode == 2
    assert one_error_line(proc) == "mirrorlag: error: --master and --remote (or SPARK_REMOTE) exclude each other"
    assert os.environ.get("SPARK_CONNECT_MODE_ENABLED") is None  # this process stayed classic


@pytest.mark.soak
def test_a_server_gone_mid_run_is_one_line_within_a_minute_or_two(spark, tmp_path_factory, tmp_path):
    """Its own server, killed while the job runs: the run ends with one line, exit 2, after the
    job's short retries (a Connect server's sessions die with it), not the client's ten minutes.
    Soak: ~90 s (`pytest -m soak tests/integration/test_rollup_connect.py`)."""
    history = shared_history(tmp_path_factory)
    server = ConnectServer(tmp_path / "server")
    server.start()
    try:
        server.ready()
        run = subprocess.Popen([sys.executable, "-m", "mirrorlag", "rollup", "--remote", server.url,
                                *rollup_args(history, tmp_path / "out", DAYS)],
                               cwd=tmp_path, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert server.process is not None
        server.process.wait_for(r"Starting job", timeout_s=60)  # past the setup: the job runs
        os.killpg(server.process.proc.pid, signal.SIGKILL)  # a crash, not a shutdown
        gone = time.monotonic()
    finally:
        server.stop()
    _, stderr = run.communicate(timeout=180)
    assert run.returncode == 2 and time.monotonic() - gone < 120
    assert stderr.count("\n") == 1 and stderr.startswith("mirrorlag: error: 2024-03-01: Spark failed: UNAVAILABLE: "), stderr
