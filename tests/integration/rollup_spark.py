"""Real Spark processes for the rollup's cluster and Connect tests, from the pyspark wheel itself.

- `executor_python`: an interpreter for the executors' Python workers that has the rollup's
  dependencies and NOT mirrorlag: a plain venv whose site-packages reach this venv's by a path
  line only (so this venv's editable install of mirrorlag, itself a .pth hook, is never run).
  Whatever mirrorlag the workers import was shipped to them.
- `SparkProcess`: a master, a worker or a Connect server, in its own process group and working
  directory outside the checkout, stopped by its own id.
- `multi_day_history` and `assert_same_output`: the input and the comparison the tests share.
"""

from __future__ import annotations

import math
import os
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any, Iterator, Protocol, Sequence, TypeVar

import pyarrow.dataset as ds
import pyspark

from tests.bench.bench_rollup import generate
from tests.rollup.history import H, day_ms, every, series, write

SPARK_HOME = Path(pyspark.__file__).resolve().parent
SPARK_SUBMIT = SPARK_HOME / "bin" / "spark-submit"
SPARK_CLASS = SPARK_HOME / "bin" / "spark-class"
REPO = Path(__file__).resolve().parents[2]
ENTRY = REPO / "mirrorlag" / "rollup" / "__main__.py"
TABLES = ("partition_daily", "topic_daily", "flow_daily", "trends")
DAYS = [date(2024, 3, 1), date(2024, 3, 2), date(2024, 3, 3)]  # the soak runs' backfill
GAP_DAY = DAYS[1]  # the default suite's one day (a Spark job of a tiny day costs ~half a minute)


# For the tests' JVMs only: they live for seconds of tiny work, where C2 compiling on two cores
# costs more than it saves (a day on the cluster takes ~half the time with C1 alone).
QUICK_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def suite_session(app_name: str) -> "pyspark.sql.SparkSession":
    """The test suite's local SparkSession (tests/conftest.py's `spark`; bench_day_cost measures
    with the same): QUICK_JVM, no UI, 4 shuffle partitions, UTC."""
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[2]").appName(app_name)
               .config("spark.driver.extraJavaOptions", QUICK_JVM)
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "4")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    return session


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_env(**extra: str) -> dict[str, str]:
    """The environment of a Spark process: nothing that points Python at this checkout."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYSPARK_GATEWAY_PORT", "SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED")}
    env.update(SPARK_HOME=str(SPARK_HOME), SPARK_LOCAL_IP="127.0.0.1", PYTHONDONTWRITEBYTECODE="1", **extra)
    return env


def executor_python(root: Path) -> Path:
    """A venv for the executors: numpy, pyarrow, pandas, pyspark (this venv's, by a path line in
    a .pth file: a plain path, so the .pth files over there, mirrorlag's editable hook among
    them, are not run) and no mirrorlag. Returned as a wrapper that logs each start to
    `started_by(python)`, so a test can tell the workers ran it."""
    venv = root / "executor-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    python = venv / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    ours = next(p for p in sys.path if p.endswith("site-packages") and Path(p).resolve().is_relative_to(Path(sys.prefix).resolve()))
    (Path(site) / "rollup-deps.pth").write_text(ours + "\n")
    wrapper = venv / "bin" / "python-logged"
    # Each start logs its arguments and the malloc settings it was given (session.DEFAULTS'
    # spark.executorEnv.MALLOC_*, which must reach the workers).
    wrapper.write_text(f'#!/bin/sh\necho "$* MALLOC_MMAP_MAX_=$MALLOC_MMAP_MAX_ '
                       f'MALLOC_TRIM_THRESHOLD_=$MALLOC_TRIM_THRESHOLD_" >> {started_by(wrapper)}\n'
                       f'exec {python} "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


def started_by(python: Path) -> Path:
    return python.with_name("started.log")


def cannot_import_mirrorlag(python: Path, cwd: Path) -> str:
    """The error of `import mirrorlag` in that interpreter, as the workers start it."""
    proc = subprocess.run([str(python), "-c", "import numpy, pyarrow, pandas, pyspark; import mirrorlag"],
                          cwd=cwd, env=clean_env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0, f"{python} imports mirrorlag without it being shipped"
    return proc.stderr.strip().splitlines()[-1]


@dataclass
class SparkProcess:
    name: str
    proc: subprocess.Popen
    log: Path

    @classmethod
    def start(cls, name: str, argv: Sequence[str], workdir: Path, env: dict[str, str]) -> "SparkProcess":
        workdir.mkdir(parents=True, exist_ok=True)
        log = workdir / f"{name}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(list(argv), cwd=workdir, env=env, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        return cls(name, proc, log)

    def wait_for(self, pattern: str, timeout_s: float = 90.0) -> re.Match:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            m = re.search(pattern, self.log.read_text(errors="replace"))
            if m:
                return m
            if self.proc.poll() is not None:
                break
            time.sleep(0.2)
        raise AssertionError(f"{self.name}: no {pattern!r} (exit {self.proc.poll()}):\n{self.tail()}")

    def tail(self, chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-chars:]

    def stop(self) -> None:
        """SIGTERM to its own process group (a worker's executors and their Python workers with it)."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=15)


@dataclass
class Cluster:
    """A standalone master and `workers` workers of one core each, on loopback: the Service the
    cluster test runs in, and the bench's (tests/bench/bench_rollup.py --cluster)."""

    root: Path
    python: Path  # the executors' Python (PYSPARK_PYTHON)
    workers_n: int = 2
    worker_memory: str = "1536m"
    daemon_java_opts: str = ""
    processes: list[SparkProcess] = field(default_factory=list)
    url: str = ""

    @property
    def workers(self) -> list[SparkProcess]:
        return self.processes[1:]

    def start(self) -> None:
        """Launch the master and the workers; `ready` waits for them."""
        port = free_port()
        env = clean_env(SPARK_NO_DAEMONIZE="1", SPARK_DAEMON_JAVA_OPTS=self.daemon_java_opts)
        self.url = f"spark://127.0.0.1:{port}"
        self.processes.append(SparkProcess.start(
            "master", [str(SPARK_CLASS), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                       "--port", str(port), "--webui-port", "0"], self.root / "master", env))
        for i in range(self.workers_n):
            work = self.root / f"worker-{i}"
            self.processes.append(SparkProcess.start(
                f"worker-{i}", [str(SPARK_CLASS), "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                                "--webui-port", "0", "--cores", "1", "--memory", self.worker_memory,
                                "--work-dir", str(work / "work"), self.url], work, env))

    def ready(self) -> None:
        self.processes[0].wait_for(r"ALIVE")
        for worker in self.workers:
            worker.wait_for(r"Successfully registered with master")

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.stop()


class Service(Protocol):
    def start(self) -> None: ...
    def ready(self) -> None: ...
    def stop(self) -> None: ...


S = TypeVar("S", bound=Service)


def running(service: S, spark, tmp_path_factory) -> Iterator[S]:
    """A module fixture's body: the service launched, the local reference of the default day
    made while its JVMs start, then the service ready; stopped however the tests end."""
    try:
        service.start()
        local_reference(spark, tmp_path_factory, [GAP_DAY])
        service.ready()
        yield service
    finally:
        service.stop()


def multi_day_history(root: Path) -> Path:
    """Three days of eight partitions in two flows every minute (tests/bench's generator: lagging,
    stalled and at-risk episodes, the odd UNKNOWN); on the second day a four-hour gap (a segment
    missing) and a partition of a third topic stalled for two hours, with null lags."""
    history = root / "history"
    for seed, day in enumerate(DAYS):
        generate(history, day, partitions=8, interval_s=60, chunk_polls=240, seed=seed)
    (gap,) = (history / f"date={GAP_DAY}").glob("part-*-00000002.parquet")
    gap.unlink()
    ts = every(day_ms(GAP_DAY), day_ms(GAP_DAY) + 24 * H, 60_000)
    stalled = [("STALLED" if 600 <= i < 720 else "IN_SYNC") for i in range(len(ts))]
    lags = [None if i % 97 == 0 else (5 * (i - 600) + 3 if 600 <= i < 720 else 3) for i in range(len(ts))]
    write(history, GAP_DAY, series("us-east->eu-west", "payments", 0, ts, stalled, lags), name="part-payments.parquet")
    return history


def rollup_args(history: Path, out: Path, days: Sequence[date]) -> list[str]:
    # --settle-minutes 0: the history was written whole a moment ago, so its days are final, as in
    # the local reference (the CLI's default would make them provisional for an hour).
    return ["--history", str(history), "--out", str(out), "--from", days[0].isoformat(), "--to", days[-1].isoformat(),
            "--settle-minutes", "0"]


def _rows(out: Path, table: str) -> list[dict[str, Any]]:
    rows = ds.dataset(out / table, partitioning="hive").to_table().to_pylist()
    return sorted(rows, key=lambda r: repr([v for v in r.values() if not isinstance(v, float)]))


def _same(want: dict[str, Any], got: dict[str, Any]) -> bool:
    """Equal, floats to 1e-12 relative: a sum over a shuffle adds in the order rows arrive."""
    return want.keys() == got.keys() and all(
        math.isclose(w, g, rel_tol=1e-12) if isinstance(w, float) and isinstance(g, float) else w == g
        for w, g in zip(want.values(), got.values()))


_GENERATED = re.compile(r"generated \d{4}-\d\d-\d\d \d\d:\d\d UTC")


def assert_same_output(expected: Path, actual: Path, days: Sequence[date]) -> None:
    """Every table row for row, and every report byte for byte but for the minute it was made."""
    for table in TABLES:
        want, got = _rows(expected, table), _rows(actual, table)
        assert want, f"{expected / table} is empty"
        assert len(got) == len(want), f"{table}: {len(got)} rows, not {len(want)}"
        for w, g in zip(want, got):
            assert _same(w, g), f"{table} differs:\n{w}\n{g}"
    reports = sorted(p.name for p in (expected / "reports").iterdir())
    assert reports == [f"mirrorlag-{d}.html" for d in days]
    assert sorted(p.name for p in (actual / "reports").iterdir()) == reports
    for name in reports:
        want, got = ((out / "reports" / name).read_text() for out in (expected, actual))
        assert _GENERATED.sub("", got) == _GENERATED.sub("", want), f"{name} differs"


def one_error_line(proc: subprocess.CompletedProcess) -> str:
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("mirrorlag: error: "), proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "grpc" not in proc.stderr.lower() and "py4j" not in proc.stderr.lower()
    return proc.stderr.strip()


_history: list[Path] = []
_references: dict[tuple[date, ...], Path] = {}


def local_reference(spark, tmp_path_factory, days: Sequence[date]) -> tuple[Path, Path]:
    """The history, and its rollup of `days` by the suite's local session (local[2], this
    machine's cores): made once a run, for every test that compares with it (the report names
    the history's path, so they all read the same one)."""
    from mirrorlag.rollup.job import run_days
    from mirrorlag.rollup.options import RollupOptions

    history = shared_history(tmp_path_factory)
    key = tuple(days)
    if key not in _references:
        out = tmp_path_factory.mktemp("rollup-reference") / "out"
        results = run_days(spark, RollupOptions(str(history), str(out), days))
        assert all(r.samples for r in results)
        _references[key] = out
    return history, _references[key]


def shared_history(tmp_path_factory) -> Path:
    """multi_day_history, written once a run."""
    if not _history:
        _history.append(multi_day_history(tmp_path_factory.mktemp("rollup-history")))
    return _history[0]
