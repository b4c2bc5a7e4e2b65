"""Apache Kafka's own processes on loopback: a KRaft broker in combined mode and MirrorMaker 2 in
dedicated mode, each a JVM on the jars of one pinned version, stopped by PID.

Both can be stopped, paused (SIGSTOP: alive, silent), resumed, killed (SIGKILL, as a crash) and
started again on the same ports and storage. A JVM dies with the process that started it.
"""

from __future__ import annotations

import base64
import shutil
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from mirrorlag.apache_kafka.jars import KafkaJars
from mirrorlag.process.child_process import ChildProcess
from mirrorlag.embedded import free_port
from mirrorlag.errors import MirrorlagError

# Small, short-lived JVMs: C1 only and the serial collector start faster and cost less CPU on two
# cores than the defaults, which suit long-running servers.
JVM_OPTIONS = ("-Xms64m", "-Xmx512m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
               "-Djava.awt.headless=true")
LOG4J2 = """rootLogger.level = WARN
rootLogger.appenderRef.stdout.ref = STDOUT
appender.stdout.type = Console
appender.stdout.name = STDOUT
appender.stdout.layout.type = PatternLayout
appender.stdout.layout.pattern = [%d] %p %m (%c)%n
"""
LOG4J1 = """log4j.rootLogger=WARN, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
"""


def _logging_option(jars: KafkaJars, directory: Path) -> str:
    """The JVM flag that points the version's own logging backend at a WARN-level console config."""
    if jars.major >= 4:
        path = directory / "log4j2.properties"
        path.write_text(LOG4J2)
        return f"-Dlog4j2.configurationFile={path}"
    path = directory / "log4j.properties"
    path.write_text(LOG4J1)
    return f"-Dlog4j.configuration=file:{path}"


def java_command(jars: KafkaJars, directory: Path, main_class: str, *args: str) -> list[str]:
    """`java ... main_class args` on `jars`, logging at WARN to the console (a config in `directory`)."""
    java = shutil.which("java")
    if java is None:
        raise MirrorlagError("java is not on PATH (Apache Kafka needs Java 17+)")
    return [java, "-cp", jars.classpath, *JVM_OPTIONS, _logging_option(jars, directory), main_class, *args]


def _properties(values: Mapping[str, object]) -> str:
    return "".join(f"{key}={value}\n" for key, value in values.items())


def _cluster_id() -> str:
    """A random KRaft cluster id as Kafka's own Uuid makes them: never starting with "-", which
    kafka-storage's argument parser would take for an option (one id in 64)."""
    while (cluster_id := base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()).startswith("-"):
        pass
    return cluster_id


@dataclass
class JavaProcess(ChildProcess):
    """One JVM running `main_class args` with its output appended to `log`."""

    jars: KafkaJars
    directory: Path
    name: str

    @property
    def log(self) -> Path:
        return self.directory / f"{self.name}.log"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def _java(self, main_class: str, *args: str) -> list[str]:
        return java_command(self.jars, self.directory, main_class, *args)

    def _spawn(self, command: list[str]) -> None:
        if setpriv := shutil.which("setpriv"):
            # Die with our process even when it is killed hard: no orphaned JVMs.
            command = [setpriv, "--pdeathsig", "KILL", "--", *command]
        with open(self.log, "ab") as out:
            self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                            start_new_session=True)

    def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM, then SIGKILL past `timeout_s`: a JVM's clean shutdown takes seconds."""
        super().stop(timeout_s)

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


@dataclass
class KRaftBroker(JavaProcess):
    """A single-node Kafka cluster: broker and controller in one JVM (KRaft combined mode), its
    storage formatted with a random cluster id on first start and kept across restarts."""

    overrides: Mapping[str, object] = field(default_factory=dict)
    port: int = field(default_factory=free_port)
    controller_port: int = field(default_factory=free_port)

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def server_properties(self) -> dict[str, object]:
        return {
            "process.roles": "broker,controller",
            "node.id": 1,
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": self.directory / "data",
            "num.partitions": 1,
            "auto.create.topics.enable": "false",  # MM2 creates what it writes; nothing else should
            "offsets.topic.replication.factor": 1,
            "offsets.topic.num.partitions": 2,
            "transaction.state.log.replication.factor": 1,
            "transaction.state.log.min.isr": 1,
            "transaction.state.log.num.partitions": 2,
            "group.initial.rebalance.delay.ms": 0,
            # Retention checked every second from the start (the defaults: 5 min, first after 30 s).
            "log.retention.check.interval.ms": 1000,
            "log.initial.task.delay.ms": 0,
            **self.overrides,
        }

    def start(self, timeout_s: float = 60.0) -> "KRaftBroker":
        self.directory.mkdir(parents=True, exist_ok=True)
        config = self.directory / "server.properties"
        config.write_text(_properties(self.server_properties()))
        if not (self.directory / "data" / "meta.properties").is_file():
            cluster_id = _cluster_id()
            fmt = subprocess.run(self._java("kafka.tools.StorageTool", "format", "-t", cluster_id,
                                            "-c", str(config)),
                                 capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
            if fmt.returncode != 0:
                raise MirrorlagError(f"formatting {self.name}'s storage failed: {fmt.stderr.strip()[-500:]}")
        self._spawn(self._java("kafka.Kafka", str(config)))
        self._wait_ready(timeout_s)
        return self

    def _wait_ready(self, timeout_s: float) -> None:
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + timeout_s
        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers, "log_level": 0})
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                raise MirrorlagError(f"Kafka broker {self.name} exited: {self.log_tail()}")
            try:
                if admin.list_topics(timeout=1).brokers:
                    return
            except Exception:  # noqa: BLE001 - not listening yet
                time.sleep(0.1)
        self.stop()
        raise MirrorlagError(f"Kafka broker {self.name} was not ready within {timeout_s:.0f} s: {self.log_tail()}")

    def __enter__(self) -> "KRaftBroker":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass
class MirrorMaker2(JavaProcess):
    """MirrorMaker 2 in dedicated mode (`connect-mirror-maker.sh mm2.properties`): MirrorMaker's
    own main class on `properties`, limited to the herders that write into `targets` (MM2's
    `--clusters`) when given."""

    properties: Path = Path("mm2.properties")
    targets: tuple[str, ...] = ()

    def start(self) -> "MirrorMaker2":
        """Start the JVM; what it copies, and when, is for the caller to wait for on the brokers."""
        if self.running():
            raise MirrorlagError(f"{self.name} is already running")
        self.directory.mkdir(parents=True, exist_ok=True)
        args = [str(self.properties)]
        if self.targets:
            args += ["--clusters", *self.targets]
        self._spawn(self._java("org.apache.kafka.connect.mirror.MirrorMaker", *args))
        return self

    def restart(self) -> "MirrorMaker2":
        self.stop()
        return self.start()

    def __enter__(self) -> "MirrorMaker2":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
