"""The real-Kafka tier: Apache Kafka's KRaft brokers and MirrorMaker 2 themselves, at each pinned
version (mirrorlag/apache_kafka/jars.py), on loopback.

One source and one target broker per version serve the whole run, started when a test first
needs them; each test mirrors topics and aliases of its own, so a test's MM2 sees nothing of
another's. Where Java or Maven is missing the tier skips and says which.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Mapping

import pytest

from mirrorlag.apache_kafka.jars import VERSIONS, KafkaJars, missing_tools, resolve
from mirrorlag.apache_kafka.mm2_config import mm2_properties
from mirrorlag.apache_kafka.processes import KRaftBroker, MirrorMaker2, java_command
from mirrorlag.errors import MirrorlagError
from tests.conftest import Clusters


@pytest.fixture(scope="session", params=VERSIONS, ids=[f"kafka-{v}" for v in VERSIONS])
def kafka_jars(request) -> KafkaJars:
    if reason := missing_tools():
        pytest.skip(reason)
    try:
        return resolve(request.param)
    except MirrorlagError as exc:
        pytest.fail(str(exc))  # Java and Maven are here: a pinned version that does not resolve is a failure


@dataclass
class ApachePair:
    """A source and a target cluster of one Kafka version, as the tansu tests' `Clusters`."""

    jars: KafkaJars
    source: KRaftBroker
    target: KRaftBroker
    directory: Path

    @property
    def clusters(self) -> Clusters:
        return Clusters(self.source.bootstrap_servers, self.target.bootstrap_servers)


class ApachePairs:
    """Each version's pair, started on its first test and kept to the end of the session: a
    pytest-xdist worker runs whole modules (`--dist loadfile`), each of both versions in turn, and
    would otherwise stop and start a pair at every change of version."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.pairs: dict[str, ApachePair] = {}

    def get(self, jars: KafkaJars) -> ApachePair:
        if (pair := self.pairs.get(jars.version)) is None:
            directory = self.directory / f"kafka-{jars.version}"
            source = KRaftBroker(jars, directory / "source", "source")
            # Quotas measured over 2 s, not 11: a client quota then throttles within a test's seconds.
            target = KRaftBroker(jars, directory / "target", "target",
                                 overrides={"quota.window.num": 2, "quota.window.size.seconds": 1})
            try:
                source.start()
                target.start()
            except BaseException:
                source.stop()
                target.stop()
                raise
            pair = self.pairs[jars.version] = ApachePair(jars, source, target, directory)
        return pair

    def stop(self) -> None:
        for pair in self.pairs.values():
            pair.source.stop()
            pair.target.stop()


@pytest.fixture(scope="session")
def apache_pairs(tmp_path_factory) -> Iterator[ApachePairs]:
    pairs = ApachePairs(tmp_path_factory.mktemp("kafka"))
    try:
        yield pairs
    finally:
        pairs.stop()


@pytest.fixture(scope="session")
def apache_pair(kafka_jars: KafkaJars, apache_pairs: ApachePairs) -> ApachePair:
    return apache_pairs.get(kafka_jars)


@dataclass
class Mirror:
    """One test's MM2: aliases of its own (`s<tag>` -> `d<tag>`), its mm2.properties, its JVM."""

    pair: ApachePair
    directory: Path
    tag: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    extra: dict[str, object] = field(default_factory=dict)
    mm2: MirrorMaker2 | None = None

    @property
    def src(self) -> str:
        return f"s{self.tag}"

    @property
    def dst(self) -> str:
        return f"d{self.tag}"

    @property
    def clusters(self) -> Clusters:
        return self.pair.clusters

    @property
    def config(self) -> Path:
        return self.directory / "mm2.properties"

    def remote(self, topic: str) -> str:
        """The remote topic's name under DefaultReplicationPolicy."""
        return f"{self.src}.{topic}"

    def write_config(self, topics: str, extra: Mapping[str, object] | None = None) -> Path:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.extra.update(extra or {})
        self.config.write_text(mm2_properties(
            {self.src: self.pair.source.bootstrap_servers, self.dst: self.pair.target.bootstrap_servers},
            [f"{self.src}->{self.dst}"], {f"{self.src}->{self.dst}.topics": topics, **self.extra}))
        return self.config

    def start(self) -> MirrorMaker2:
        if self.mm2 is None:
            self.mm2 = MirrorMaker2(self.pair.jars, self.directory, "mm2", properties=self.config,
                                    targets=(self.dst,))
        return self.mm2.start()

    def stop(self) -> None:
        if self.mm2 is not None:
            self.mm2.stop()


@pytest.fixture
def mirror(apache_pair: ApachePair, tmp_path: Path) -> Iterator[Mirror]:
    """A mirror of this test's own, stopped after the test whatever happened in it."""
    m = Mirror(apache_pair, tmp_path / "mm2")
    try:
        yield m
    finally:
        m.stop()


def set_default_producer_quota(pair: ApachePair, byte_rate: int | None) -> None:
    """Every client's produce rate on the target cluster, as `kafka-configs.sh --entity-default`
    sets it (None: removed): a way to make MM2 copy a backlog over several polls."""
    import subprocess

    change = ["--add-config", f"producer_byte_rate={byte_rate}"] if byte_rate else ["--delete-config",
                                                                                    "producer_byte_rate"]
    java = java_command(
        pair.jars, pair.directory, "kafka.admin.ConfigCommand", "--bootstrap-server", pair.target.bootstrap_servers, "--alter",
        "--entity-type", "clients", "--entity-default", *change)
    result = subprocess.run(java, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stdout + result.stderr

