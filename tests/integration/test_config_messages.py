"""What the real CLI says about its configuration (issue 31): a misspelt MM2/KIP-971 key is one
warning with file and line, `run` logs the settings it starts with (secrets masked), and
`mirrorlag.http.listener = :PORT` listens on every interface."""

from __future__ import annotations

import queue
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from mirrorlag.embedded import free_port
from tests.conftest import write_properties
from tests.helpers import mirrorlag, wait_ready

pytestmark = pytest.mark.integration

TYPOS = "replication.lag.time.max = 8000\nreplication.record.lag.metric.refresh.intervall = 2000\n"


def test_check_warns_about_near_misses_with_file_and_line(tmp_path: Path) -> None:
    config = tmp_path / "mm2.properties"
    # Nothing listens on these ports: the check loads the config, warns, fails to read, exits 3 (UNKNOWN).
    config.write_text(f"clusters = src, dst\nsrc.bootstrap.servers = 127.0.0.1:{free_port()}\n"
                      f"dst.bootstrap.servers = 127.0.0.1:{free_port()}\nsrc->dst.enabled = true\n" + TYPOS)
    result = mirrorlag("check", "--config", str(config), "--timeout", "1")
    assert result.returncode == 3, result.stderr
    warnings = [line.split(" WARNING mirrorlag.config.near_miss: ", 1)[1] for line in result.stderr.splitlines()
                if " WARNING mirrorlag.config.near_miss: " in line]
    assert [w.split("? (")[0] for w in warnings] == [  # the rest of the message: tests/unit/test_near_miss.py
        f"{config}:5: unknown key 'replication.lag.time.max'; did you mean 'replication.lag.time.max.ms'",
        f"{config}:6: unknown key 'replication.record.lag.metric.refresh.intervall'; "
        "did you mean 'replication.record.lag.metric.refresh.interval'",
    ]


def _lines(stream) -> queue.Queue[str]:
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in stream], daemon=True).start()
    return lines


def _read_until(lines: queue.Queue[str], marker: str, timeout: float = 30) -> list[str]:
    seen, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            seen.append(lines.get(timeout=0.2).rstrip("\n"))
        except queue.Empty:
            continue
        if marker in seen[-1]:
            return seen
    raise AssertionError(f"no {marker!r} in stderr:\n" + "\n".join(seen))


def test_run_logs_its_settings_masks_secrets_and_listens_on_every_interface(tmp_path: Path, clusters) -> None:
    port = free_port()
    mm2 = write_properties(tmp_path / "mm2.properties", clusters,
                           # read only for SASL_* clusters (these are PLAINTEXT): set, but not used
                           'sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required '
                           'username="mm2" password="hunter2";\n' + TYPOS)
    own = tmp_path / "mirrorlag.properties"
    own.write_text(f"mirrorlag.http.listener = :{port}\nreplication.lag.time.max.ms = 8000\nmetrics.num.samples = 2\n")
    proc = subprocess.Popen([sys.executable, "-m", "mirrorlag", "run", "--config", str(mm2), "--config", str(own)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        stderr = _read_until(_lines(proc.stderr), "serving /metrics")
        wait_ready(port, proc)
        for host in ("127.0.0.1", "127.0.0.2"):  # 127.0.0.2 answers only a listener on every interface
            assert urllib.request.urlopen(f"http://{host}:{port}/healthz", timeout=5).read() == b"ok\n"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=15)
    text = "\n".join(stderr)
    assert "hunter2" not in text
    in_force = [line.split("mirrorlag.config.effective:   ", 1)[1] for line in stderr if "effective:   " in line]
    assert f"{mm2}:6: sasl.jaas.config = ***" in in_force
    assert f"{own}:1: mirrorlag.http.listener = :{port}" in in_force
    assert f"{own}:2: replication.lag.time.max.ms = 8000" in in_force
    assert not any("metrics.num.samples" in line or "intervall" in line for line in in_force)  # default; unknown
    assert f"{mm2}:8: unknown key 'replication.record.lag.metric.refresh.intervall'" in text
    assert f"on 0.0.0.0:{port}" in stderr[-1]


def test_a_taken_ipv6_listener_is_one_line_with_brackets(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET6) as taken:
        taken.bind(("::1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = tmp_path / "mm2.properties"
        config.write_text(f"clusters = src, dst\nsrc.bootstrap.servers = 127.0.0.1:{free_port()}\n"
                          f"dst.bootstrap.servers = 127.0.0.1:{free_port()}\nsrc->dst.enabled = true\n"
                          f"mirrorlag.http.listener = [::1]:{port}\n")
        result = mirrorlag("run", "--config", str(config))
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == f"mirrorlag: error: mirrorlag.http.listener [::1]:{port}: Address already in use"
