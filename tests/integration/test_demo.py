"""`mirrorlag demo` as a user runs it: brokers, mirror and sidecar as separate processes; lag shows
on /metrics; Ctrl-C leaves no process behind."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import urllib.error

import pytest

from mirrorlag.embedded import free_port
from tests.helpers import scrape

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


def test_demo_runs_the_production_topology_and_stops_cleanly_on_ctrl_c():
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "mirrorlag", "demo", "--no-ui", "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        lag: dict = {}
        while time.monotonic() < deadline and len(lag) < 9:
            assert proc.poll() is None, proc.stderr.read()
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
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    assert proc.returncode == 0, proc.stderr.read()
    assert [pid for pid in started if alive(pid)] == []
