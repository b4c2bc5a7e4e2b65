"""`mirrorlag demo` as a user runs it: brokers, mirror and sidecar as separate processes; lag shows
on /metrics; piped, it prints plain lines; Ctrl-C leaves no process behind and keeps its logs; it
starts again at once on the same port; the history it kept rolls up into tables and a report."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
from datetime import date
from pathlib import Path

import pytest

from mirrorlag.embedded import free_port
from tests.helpers import scrape
from tests.helpers import status as status_of

pytestmark = pytest.mark.integration


def children(pid: int) -> dict[int, str]:
    """Direct children of `pid`: {pid: command line}. `-ww`: never cut to the terminal's width
    (a checkout under a long path pushed the broker's name past column 80)."""
    out = subprocess.run(["ps", "-ww", "-o", "pid=,ppid=,args=", "-A"], capture_output=True, text=True).stdout
    rows = (line.split(None, 2) for line in out.splitlines())
    return {int(p): args for p, pp, args in rows if int(pp) == pid}


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def in_time_wait(port: int) -> bool:
    """A connection to 127.0.0.1:port in TIME-WAIT (state 06 in /proc/net/tcp)."""
    rows = Path("/proc/net/tcp").read_text().splitlines()[1:]
    return any(r.split()[1] == f"0100007F:{port:04X}" and r.split()[3] == "06" for r in rows)


def start_demo(port: int, run_dir: Path) -> tuple[subprocess.Popen, list[str], threading.Thread]:
    """The demo with its stdout a pipe (as `mirrorlag demo | tee`), and a thread collecting its lines."""
    proc = subprocess.Popen([sys.executable, "-m", "mirrorlag", "demo", "--port", str(port), "--dir", str(run_dir)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []  # the demo's status lines: "12:00:01 mirror: copying | ... | IN_SYNC 9"
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True)
    reader.start()
    return proc, lines, reader


def test_demo_runs_the_production_topology_and_stops_cleanly_on_ctrl_c(tmp_path, spark):
    port = free_port()
    run_dir = tmp_path / "run"
    proc, lines, reader = start_demo(port, run_dir)
    try:
        deadline = time.monotonic() + 60
        lag: dict = {}
        while time.monotonic() < deadline and len(lag) < 9:
            assert proc.poll() is None, "".join(lines)
            time.sleep(1)
            try:
                samples = scrape(port)
            except (urllib.error.URLError, ConnectionError):
                continue
            lag = {(dict(lab)["topic"], dict(lab)["partition"]): v for (name, lab), v in samples.items()
                   if name == "mirrorlag_replication_record_lag" and dict(lab)["topic"] != "heartbeats"}
        assert len(lag) == 9, lag  # orders 3 + payments 2 + clickstream 4
        assert all(v >= 0 for v in lag.values())
        started = children(proc.pid)
        commands = sorted(" ".join(args.split()[1:4]) for args in started.values())
        assert sum("tansu" in args for args in started.values()) == 2, started
        assert any("mirrorlag mirror" in args for args in commands), commands
        assert any("mirrorlag run" in args for args in commands), commands
        # The table tells the truth at a glance: IN_SYNC while the mirror copies (bursts included;
        # a machine too busy to let the mirror keep up may read LAGGING, which is the truth then,
        # but never STALLED), STALLED while it is paused.
        def states(line: str) -> str:  # "IN_SYNC 10" (9 partitions and the heartbeats), "LAGGING 3, STALLED 7", ...
            return line.rsplit(" | ", 1)[-1].strip()

        deadline = time.monotonic() + 70
        while not any("mirror: paused" in line and re.fullmatch(r"STALLED \d+", states(line)) for line in lines):
            assert time.monotonic() < deadline, "".join(lines[-30:])
            time.sleep(0.5)
        status = [line for line in lines if re.match(r"\d\d:\d\d:\d\d mirror: ", line)]
        copying = [states(line) for line in status[:next(i for i, line in enumerate(status) if "mirror: paused" in line)]]
        assert any(re.fullmatch(r"IN_SYNC \d+", s) for s in copying), copying
        assert not any("STALLED" in s for s in copying), copying
        # The demo's consumer group, checkpointed by the mirror: its failover readiness beside the lag.
        deadline = time.monotonic() + 40
        while not any(re.search(r"\| group orders-audit: [A-Z_]+, re-read \(sum\) \d+ \|", line) for line in lines):
            assert time.monotonic() < deadline, "".join(lines[-30:])
            time.sleep(0.5)
        groups = status_of(port)["groups"]
        assert {(r["group"], r["topic"]) for r in groups} == {("orders-audit", "orders")}, groups
        assert {r["partition"] for r in groups} == {0, 1, 2}, groups
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    reader.join(timeout=10)
    assert proc.returncode == 0, "".join(lines[-30:])
    assert [pid for pid in started if alive(pid)] == []
    out = "".join(lines)
    # Piped: plain lines, periodically (rich's Live would print nothing after the first line),
    # and the whole table now and then.
    assert len(status) >= 10, out[-3000:]
    assert "mirrorlag: replication lag per source partition" in out and "orders" in out
    # The table's numbers come from two files: both are named, with the check that agrees with it.
    mm2, own = run_dir / "mm2.properties", run_dir / "mirrorlag.properties"
    assert f"check --config {mm2} --config {own}" in out, out[:2000]
    assert "replication.lag.time.max.ms = 8000" in own.read_text()
    # The logs are kept, and said where.
    for name in ("mirror.log", "sidecar.log"):
        assert (run_dir / name).stat().st_size > 0
    assert f"Kept in {run_dir}: mm2.properties, mirrorlag.properties, mirror.log, sidecar.log" in out, out[-2000:]
    assert f"rollup --history {run_dir / 'history'} --out {run_dir / 'rollup'} --date " in out

    # Started again at once: the port's last connections are in TIME-WAIT, which the sidecar's
    # server binds over (SO_REUSEADDR), so the demo's own check must not refuse it.
    assert in_time_wait(port)
    again, lines, reader = start_demo(port, run_dir)
    try:
        deadline = time.monotonic() + 60
        while not any(" mirror: " in line for line in lines):
            assert again.poll() is None, "".join(lines)
            assert time.monotonic() < deadline, "".join(lines)
            time.sleep(0.5)
    finally:
        again.send_signal(signal.SIGINT)
        again.wait(timeout=30)
    reader.join(timeout=10)
    assert again.returncode == 0, "".join(lines[-30:])
    _rolls_up(spark, run_dir / "history", tmp_path / "rollup")


def _rolls_up(spark, history: Path, out: Path) -> None:
    """The sidecar wrote its buffer as a final segment when the demo stopped; the nightly job
    turns it into the daily tables and a report (the same run_days `mirrorlag rollup` calls)."""
    from mirrorlag.rollup.job import RollupOptions, run_days
    from mirrorlag.rollup.paths import DayStatus

    days = sorted(date.fromisoformat(d.name.removeprefix("date=")) for d in history.glob("date=*"))
    assert days and list(history.glob("date=*/*.parquet")), list(history.rglob("*"))
    results = run_days(spark, RollupOptions(str(history), str(out), days))
    assert all(r.status is DayStatus.PRESENT for r in results)
    rows = spark.read.parquet(str(out / "partition_daily")).collect()
    assert {r.topic for r in rows} >= {"orders", "payments", "clickstream"}
    assert all(r.samples > 0 and r.covered_seconds > 0 for r in rows)
    assert Path(results[-1].report).read_text(encoding="utf-8").count("data:image/png;base64,") >= 3
