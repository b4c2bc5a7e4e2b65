"""The real command line in its own process: `python -m mirrorlag rollup` and `spark-submit`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from argparse import Namespace
from datetime import date
from pathlib import Path

import pytest

from mirrorlag.cli import build_parser
from mirrorlag.rollup.cli import days_from_args
from mirrorlag.rollup.errors import RollupError
from tests.rollup.history import H, day_ms, every, series, write

REPO = Path(__file__).resolve().parents[2]


def _mirrorlag(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mirrorlag", "rollup", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=120)


def test_missing_day_is_one_line_and_exit_3(tmp_path):
    (tmp_path / "history" / "date=2024-01-02").mkdir(parents=True)
    proc = _mirrorlag("--history", str(tmp_path / "history"), "--out", str(tmp_path / "out"), "--date", "2024-01-01")
    assert proc.returncode == 3
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("mirrorlag: error: no history for 2024-01-01 under ")
    assert "Traceback" not in proc.stderr and "Exception" not in proc.stderr


def test_empty_day_is_exit_3(tmp_path):
    day = tmp_path / "history" / "date=2024-01-01"
    day.mkdir(parents=True)
    (day / ".part-1.parquet.tmp").write_bytes(b"a writer died here")
    proc = _mirrorlag("--history", str(tmp_path / "history"), "--out", str(tmp_path / "out"),
                      "--from", "2024-01-01", "--to", "2024-01-01")
    assert proc.returncode == 3 and proc.stderr.count("\n") == 1
    assert "no rows" in proc.stderr


def test_bad_arguments_are_exit_2(tmp_path):
    proc = _mirrorlag("--history", str(tmp_path), "--out", str(tmp_path), "--date", "2024-01-01", "--from", "2024-01-01")
    assert proc.returncode == 2 and proc.stderr.strip() == "mirrorlag: error: --date and --from/--to exclude each other"


def test_without_the_spark_extra_is_one_line_and_exit_2(tmp_path):
    """The demo's venv has no pyspark: say which extra to install, no ImportError traceback."""
    code = ("import sys; sys.modules['pyspark'] = None; from mirrorlag.cli import main; "
            f"raise SystemExit(main(['rollup', '--history', {str(tmp_path)!r}, '--out', {str(tmp_path)!r}]))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("mirrorlag: error: the rollup needs the spark extra (pyspark is not installed)")
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


def _without_java(tmp_path: Path) -> dict[str, str]:
    """The environment of a machine with no Java: a PATH of the shell tools Spark's launcher uses
    (no java among them), and no JAVA_HOME."""
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in ("bash", "sh", "env", "dirname", "basename", "uname", "ps", "cat", "head", "tr", "sed", "grep", "ls"):
        if (found := shutil.which(tool)) and tool != "java":
            (tools / tool).symlink_to(found)
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    return {**env, "PATH": str(tools)}


def _a_day(tmp_path: Path) -> list[str]:
    """Arguments of a rollup with history to roll up: Spark is started."""
    day = date(2024, 2, 29)
    ts = every(day_ms(day), day_ms(day) + H, 600_000)
    write(tmp_path / "history", day, series("A->B", "orders", 0, ts, ["IN_SYNC"] * len(ts), [7] * len(ts)))
    return ["--history", str(tmp_path / "history"), "--out", str(tmp_path / "out"), "--date", day.isoformat()]


@pytest.mark.parametrize("java_home", [None, "missing"])
def test_without_java_is_one_line_and_exit_2(tmp_path, java_home):
    """Issue 42: without Java the rollup said only JAVA_GATEWAY_EXITED. It says what to install,
    before Spark's launcher runs: no JVM, no traceback."""
    env = _without_java(tmp_path)
    if java_home:
        env["JAVA_HOME"] = str(tmp_path / java_home)
    proc = subprocess.run([sys.executable, "-m", "mirrorlag", "rollup", *_a_day(tmp_path)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    where = f"none at JAVA_HOME={tmp_path / java_home} (no bin/java there) or on PATH" if java_home else \
        "none found on PATH or JAVA_HOME (unset)"
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == (f"mirrorlag: error: the rollup needs Java 17 (a JRE): {where}; "
                           "install it, e.g. apt-get install openjdk-17-jre-headless\n")


def test_a_java_that_cannot_start_is_named_not_java_gateway_exited(tmp_path):
    """A java there that exits at once (a broken JRE, a JVM option it refuses): its own words, then
    one line of ours instead of PySpark's JAVA_GATEWAY_EXITED."""
    java = tmp_path / "jre" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("#!/bin/sh\necho 'Error: Could not create the Java Virtual Machine.' >&2\nexit 1\n")
    java.chmod(0o755)
    env = {**_without_java(tmp_path), "JAVA_HOME": str(java.parents[1])}
    proc = subprocess.run([sys.executable, "-m", "mirrorlag", "rollup", *_a_day(tmp_path)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "Error: Could not create the Java Virtual Machine.\n" in proc.stderr
    assert proc.stderr.endswith("mirrorlag: error: cannot start Spark's JVM: the rollup needs Java 17 (a JRE) at "
                                "JAVA_HOME or on PATH (java -version says which); install it, e.g. apt-get install "
                                "openjdk-17-jre-headless\n"), proc.stderr
    assert "JAVA_GATEWAY_EXITED" not in proc.stderr and "Traceback" not in proc.stderr


def test_a_rollup_keeps_the_jvms_incubator_notice_off_the_terminal(tmp_path):
    """Issue 42: every rollup printed Spark 4's JVM notice `WARNING: Using incubator modules:
    jdk.incubator.vector`. The JVM's stderr passes through a filter that drops that line alone."""
    proc = subprocess.run([sys.executable, "-m", "mirrorlag", "rollup", *_a_day(tmp_path), "--master", "local[1]",
                           "--conf", "spark.ui.enabled=false", "--no-report"],
                          cwd=REPO, capture_output=True, text=True, timeout=600)  # a JVM's start on a loaded machine
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "✓ 2024-02-29" in proc.stdout
    assert "incubator" not in proc.stderr, proc.stderr


def _args(**kw) -> Namespace:
    base = {"date": None, "date_from": None, "date_to": None}
    return Namespace(**{**base, **kw})


def test_days():
    today = date(2024, 3, 1)
    assert days_from_args(_args(), today) == [date(2024, 2, 29)]  # yesterday, UTC
    assert days_from_args(_args(date_from=date(2024, 2, 27)), today) == [date(2024, 2, 27), date(2024, 2, 28), date(2024, 2, 29)]
    assert len(days_from_args(_args(date_from=date(2023, 12, 30), date_to=date(2024, 1, 2)), today)) == 4
    with pytest.raises(RollupError):
        days_from_args(_args(date_to=date(2024, 1, 1)), today)
    with pytest.raises(RollupError):
        days_from_args(_args(date_from=date(2024, 1, 2), date_to=date(2024, 1, 1)), today)
    args = build_parser().parse_args(["rollup", "--history", "h", "--out", "o", "--conf", "spark.a=1=2", "--conf", "b=c"])
    assert dict(args.conf) == {"spark.a": "1=2", "b": "c"}


@pytest.mark.slow
def test_spark_submit(tmp_path):
    """The module runs under the spark-submit shipped in the pyspark wheel, with the same arguments.
    Slow (a JVM of its own): the default suite's tests/integration/test_rollup_cluster submits the
    same entry file with the same arguments through that spark-submit and checks its output."""
    spark_submit = Path(sys.executable).parent / "spark-submit"
    if not spark_submit.exists():
        pytest.skip(f"no spark-submit next to {sys.executable}")
    day = date(2024, 2, 29)
    ts = every(day_ms(day), day_ms(day) + 24 * H, 600_000)
    write(tmp_path / "history", day, series("A->B", "orders", 0, ts, ["IN_SYNC"] * len(ts), [7] * len(ts))
          + series("A->B", "orders", 1, ts, ["STALLED"] * 6 + ["IN_SYNC"] * (len(ts) - 6), [9] * len(ts)))
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    proc = subprocess.run(
        [str(spark_submit), "--master", "local[1]", "--conf", "spark.ui.enabled=false", "--driver-memory", "1g",
         "mirrorlag/rollup/__main__.py", "--history", str(tmp_path / "history"), "--out", str(tmp_path / "out"),
         "--date", day.isoformat(), "--conf", "spark.sql.shuffle.partitions=2"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"✓ {day}" in proc.stdout and "1 day" in proc.stdout  # progress line and summary
    for table in ("partition_daily", "topic_daily", "flow_daily", "trends"):
        assert (tmp_path / "out" / table / f"date={day}").is_dir()
    assert (tmp_path / "out" / "reports" / f"mirrorlag-{day}.html").is_file()
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_the_pass_workers_keep_their_heap():
    """session.DEFAULTS reach the Python workers (their own process, since the suite's session
    would be joined): glibc's malloc settings that keep a worker's freed pages for its next task,
    and a user's --conf still wins. Slow (a JVM of its own): the default suite's
    tests/integration/test_rollup_cluster checks both on the cluster's workers."""
    code = (
        "import os; from mirrorlag.rollup.session import build_session\n"
        "spark = build_session('local[1]', {'spark.executorEnv.MALLOC_TRIM_THRESHOLD_': '12345', 'spark.ui.enabled': 'false'})\n"
        "env = spark.sparkContext.parallelize([0], 1).map(lambda _: (os.environ.get('MALLOC_MMAP_MAX_'), "
        "os.environ.get('MALLOC_TRIM_THRESHOLD_'))).collect()\n"
        "print(env); spark.stop()\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[('0', '12345')]"


def test_the_spark_submit_entry_is_the_subcommand_without_the_top_level_cli(tmp_path):
    """spark-submit's file builds `mirrorlag rollup`'s own parser: the same errors and exit
    statuses, and mirrorlag/cli.py (the sidecar's commands) is never imported."""
    for args in (["--history", str(tmp_path), "--out", str(tmp_path), "--date", "2024-01-01", "--from", "2024-01-01"],
                 ["--history", str(tmp_path)], ["--history", str(tmp_path), "--out", str(tmp_path), "--worst", "0"]):
        entry = subprocess.run([sys.executable, "mirrorlag/rollup/__main__.py", *args], cwd=REPO,
                               capture_output=True, text=True, timeout=60)
        sub = _mirrorlag(*args)
        assert (entry.returncode, entry.stderr) == (sub.returncode, sub.stderr)
        assert entry.returncode == 2
    code = ("import sys; from mirrorlag.rollup.cli import main\n"
            f"status = main(['--history', {str(tmp_path)!r}, '--out', {str(tmp_path)!r}, '--worst', '0'])\n"
            "assert status == 2 and 'mirrorlag.cli' not in sys.modules, (status, sorted(sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
