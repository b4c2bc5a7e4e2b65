"""`mirrorlag demo --kafka apache` as a user runs it: Apache Kafka's brokers and the real
MirrorMaker 2 started by one command, the table IN_SYNC while MM2 copies and STALLED while it is
frozen, the consumer group's readiness from MM2's own checkpoints, and Ctrl-C leaving no JVM behind."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
import time

import pytest

from mirrorlag.apache_kafka.jars import missing_tools
from mirrorlag.embedded import free_port
from tests.integration.test_demo import alive, children

pytestmark = pytest.mark.integration


def test_demo_on_apache_kafka_and_the_real_mm2(tmp_path):
    if reason := missing_tools():
        pytest.skip(reason)
    port, run_dir = free_port(), tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "mirrorlag", "demo", "--kafka", "apache", "--port", str(port),
                             "--dir", str(run_dir)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True)
    reader.start()

    def states(line: str) -> str:  # "IN_SYNC 10", "STALLED 9, IN_SYNC 1", ...
        return line.rsplit(" | ", 1)[-1].strip()

    started: dict[int, str] = {}
    try:
        deadline = time.monotonic() + 150
        while not any("mirror: paused" in line and "STALLED" in states(line) for line in lines):
            assert proc.poll() is None, "".join(lines[-30:])
            assert time.monotonic() < deadline, "".join(lines[-30:])
            started.update(children(proc.pid))
            time.sleep(0.5)
        java = [args for args in started.values() if "java" in args.split()[0] or "setpriv" in args]
        assert sum("kafka.Kafka" in args for args in java) == 2, started
        assert sum("org.apache.kafka.connect.mirror.MirrorMaker" in args for args in java) == 1, started
        assert not any("tansu" in args or "mirrorlag mirror" in args for args in started.values()), started
        status = [line for line in lines if re.match(r"\d\d:\d\d:\d\d mirror: ", line)]
        first_pause = next(i for i, line in enumerate(status) if "mirror: paused" in line)
        # Before the schedule starts MM2 is starting (UNKNOWN until it writes its topics, and then
        # rightly STALLED if it has copied nothing for longer than max): not judged here.
        copying = [states(line) for line in status[:first_pause] if "mirror: copying" in line]
        assert any(re.fullmatch(r"IN_SYNC \d+", s) for s in copying), copying
        assert not any("STALLED" in s for s in copying), copying
        assert any(re.search(r"\| group orders-audit: READY, re-read \(sum\) \d+ \|", line) for line in lines), lines[-10:]
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    reader.join(timeout=10)
    assert proc.returncode == 0, "".join(lines[-30:])
    assert [pid for pid in started if alive(pid)] == []
    assert (run_dir / "mm2.log").stat().st_size >= 0 and (run_dir / "sidecar.log").stat().st_size > 0
    out = "".join(lines)
    assert f"Kept in {run_dir}: mm2.properties, mirrorlag.properties, mm2.log, sidecar.log" in out, out[-2000:]
