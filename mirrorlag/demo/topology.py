"""The demo's brokers and mirror, either kind: embedded tansu brokers with `mirrorlag mirror`
(no Java needed), or Apache Kafka's own KRaft brokers with the real MirrorMaker 2 (`--kafka
apache`: Java 17+ and Maven, the jars resolved on first use). Either way the demo pauses and
resumes the mirror on the same schedule and the sidecar reads the same mm2.properties."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Callable


@dataclass
class Mirror:
    """A running mirror the demo can pause and resume, and ask whether it is still alive."""

    name: str  # its log is <run dir>/<name>.log
    pause: Callable[[], None]
    resume: Callable[[], None]
    exit_code: Callable[[], int | None]  # None while it runs


@dataclass
class Topology:
    source: str  # bootstrap servers
    target: str
    mm2_keys: str  # further mm2.properties lines this kind of mirror needs
    start_mirror: Callable[[ExitStack, Path, Path], Mirror]  # (stack, mm2.properties, run dir)


def spawn(stack: ExitStack, name: str, args: list[str], log_dir: Path) -> subprocess.Popen[bytes]:
    """A mirrorlag process in its own session (we stop it, in order), logging to a file."""
    log_file = open(log_dir / f"{name}.log", "ab")
    stack.callback(log_file.close)
    proc = subprocess.Popen([sys.executable, "-m", "mirrorlag", *args], stdin=subprocess.DEVNULL,
                            stdout=log_file, stderr=log_file, start_new_session=True)

    def stop() -> None:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    stack.callback(stop)
    return proc


def embedded(stack: ExitStack, mirror_rate: float) -> Topology:
    from mirrorlag.embedded import EmbeddedBroker

    source = stack.enter_context(EmbeddedBroker("source"))
    target = stack.enter_context(EmbeddedBroker("target"))

    def start_mirror(stack: ExitStack, mm2: Path, run_dir: Path) -> Mirror:
        proc = spawn(stack, "mirror", ["mirror", "--config", str(mm2), "--max-records-per-second",
                                       str(mirror_rate)], run_dir)
        return Mirror("mirror", lambda: proc.send_signal(signal.SIGUSR1), lambda: proc.send_signal(signal.SIGUSR2),
                      proc.poll)

    return Topology(source.bootstrap_servers, target.bootstrap_servers, "", start_mirror)


def apache(stack: ExitStack, run_dir: Path, version: str) -> Topology:
    """Two single-node KRaft clusters, formatted afresh in <run dir>/kafka/ each run, and MM2 in
    dedicated mode on the demo's mm2.properties (its log: <run dir>/mm2.log)."""
    from mirrorlag.apache_kafka.jars import resolve
    from mirrorlag.apache_kafka.mm2_config import SINGLE_NODE
    from mirrorlag.apache_kafka.processes import KRaftBroker, MirrorMaker2

    jars = resolve(version)  # a clear error when Java or Maven is missing, or Maven fails
    kafka_dir = run_dir / "kafka"
    shutil.rmtree(kafka_dir, ignore_errors=True)
    source = stack.enter_context(KRaftBroker(jars, kafka_dir / "source", "source"))
    target = stack.enter_context(KRaftBroker(jars, kafka_dir / "target", "target"))
    keys = "".join(f"{k} = {v}\n" for k, v in SINGLE_NODE.items())
    # MM2 finds topics and groups every 10 minutes by default: the demo's appear within seconds.
    keys += "refresh.topics.interval.seconds = 5\nrefresh.groups.interval.seconds = 5\n"

    def start_mirror(stack: ExitStack, mm2: Path, run_dir: Path) -> Mirror:
        # Every herder, as a plain `connect-mirror-maker.sh mm2.properties` runs: target->source emits the
        # heartbeats into the source that source->target copies (the table's heartbeat age).
        mirror = stack.enter_context(MirrorMaker2(jars, run_dir, "mm2", properties=mm2))

        def exit_code() -> int | None:
            proc = mirror.process
            return None if proc is None else proc.poll()
        return Mirror("mm2", mirror.pause, mirror.resume, exit_code)

    return Topology(source.bootstrap_servers, target.bootstrap_servers,
                    f"# MirrorMaker 2 {version} on single-node clusters\n{keys}", start_mirror)
