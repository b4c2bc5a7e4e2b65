"""`mirrorlag demo` as a user runs it: lag shows up on /metrics, Ctrl-C leaves no process behind."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from mirrorlag.embedded import free_port

pytestmark = pytest.mark.integration


def tansu_children(pid: int) -> list[int]:
    """PIDs of tansu brokers whose parent is `pid` (the demo starts them in their own session)."""
    out = subprocess.run(["ps", "-o", "pid=,ppid=,comm=", "-A"], capture_output=True, text=True).stdout
    return [int(p) for p, pp, comm in (line.split(None, 2) for line in out.splitlines())
            if int(pp) == pid and comm.strip() == "tansu"]


def test_demo_shows_lag_and_stops_cleanly_on_ctrl_c():
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "mirrorlag", "demo", "--no-ui", "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        lag_series = {}
        while time.monotonic() < deadline and len(lag_series) < 9:
            assert proc.poll() is None, proc.stderr.read()
            time.sleep(1)
            try:
                body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
            except (urllib.error.URLError, ConnectionError):
                continue
            lag_series = {
                (s.labels["topic"], s.labels["partition"]): s.value
                for f in text_string_to_metric_families(body) if f.name == "mirrorlag_replication_record_lag"
                for s in f.samples
            }
        assert len(lag_series) == 9, lag_series  # orders 3 + payments 2 + clickstream 4
        assert all(v >= 0 for v in lag_series.values())
        brokers = tansu_children(proc.pid)
        assert len(brokers) == 2
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)
    assert proc.returncode == 0, proc.stderr.read()
    assert tansu_children(proc.pid) == []
    for pid in brokers:
        assert subprocess.run(["kill", "-0", str(pid)], capture_output=True).returncode != 0
