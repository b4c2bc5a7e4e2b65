"""Shared fixtures. Integration tests run against two embedded tansu brokers on loopback, or
against real Kafka clusters when MIRRORLAG_TEST_SOURCE_BOOTSTRAP and
MIRRORLAG_TEST_TARGET_BOOTSTRAP name them."""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from mirrorlag.embedded import EmbeddedBroker, free_port
from mirrorlag.formats import OffsetSync, encode_offset_sync


@dataclass
class Clusters:
    source: str  # bootstrap servers
    target: str

    def admin(self, which: str = "source") -> AdminClient:
        return AdminClient({"bootstrap.servers": getattr(self, which)})

    def create_topic(self, name: str, partitions: int, which: str = "source") -> None:
        admin = self.admin(which)  # must outlive its futures
        for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
            future.result(timeout=15)

    def delete_topic(self, name: str, which: str = "source") -> None:
        admin = self.admin(which)
        for future in admin.delete_topics([name]).values():
            future.result(timeout=15)

    def produce(self, topic: str, counts: dict[int, int], which: str = "source") -> None:
        """`counts[p]` records into partition p, one record per batch (tansu's LEO quirk, docs/design.md §8)."""
        producer = Producer({"bootstrap.servers": getattr(self, which), "batch.num.messages": 1, "linger.ms": 0})
        for partition, n in counts.items():
            for i in range(n):
                producer.produce(topic, value=b"v" * 100, key=str(i).encode(), partition=partition)
        assert producer.flush(15) == 0

    def commit_group(self, group: str, offsets: dict[tuple[str, int], int], which: str = "source",
                     metadata: str | None = None) -> None:
        """Commit `offsets` ((topic, partition) -> offset) for `group`, without joining it (docs/design.md §8),
        with `metadata` on each where given."""
        consumer = Consumer({"bootstrap.servers": getattr(self, which), "group.id": group, "enable.auto.commit": False})
        try:
            extra = {} if metadata is None else {"metadata": metadata}
            consumer.commit(offsets=[TopicPartition(t, p, o, **extra) for (t, p), o in offsets.items()],
                            asynchronous=False)
        finally:
            consumer.close()

    def end_offset(self, topic: str, partition: int = 0, which: str = "source") -> int:
        """The partition's high watermark; 0 while the topic does not exist yet."""
        consumer = Consumer({"bootstrap.servers": getattr(self, which), "group.id": "mirrorlag-tests"})
        try:
            if consumer.list_topics(topic, timeout=5).topics[topic].error is not None:
                return 0
            return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=5, cached=False)[1]
        finally:
            consumer.close()

    def write_offset_syncs(self, sync_topic: str, syncs: list[OffsetSync], which: str = "source",
                           timestamp_ms: int = 0) -> None:
        """The syncs as MM2 writes them; `timestamp_ms` (0: now) dates them, as if written then."""
        producer = Producer({"bootstrap.servers": getattr(self, which), "batch.num.messages": 1, "linger.ms": 0})
        for sync in syncs:
            key, value = encode_offset_sync(sync)
            producer.produce(sync_topic, key=key, value=value, partition=0, timestamp=timestamp_ms)
        assert producer.flush(15) == 0


def _clusters(name: str) -> Iterator[Clusters]:
    source_env = os.environ.get("MIRRORLAG_TEST_SOURCE_BOOTSTRAP")
    target_env = os.environ.get("MIRRORLAG_TEST_TARGET_BOOTSTRAP")
    if source_env and target_env:
        yield Clusters(source_env, target_env)
        return
    with EmbeddedBroker(f"{name}-source") as source, EmbeddedBroker(f"{name}-target") as target:
        yield Clusters(source.bootstrap_servers, target.bootstrap_servers)


@pytest.fixture(scope="session")
def clusters() -> Iterator[Clusters]:
    yield from _clusters("session")


@pytest.fixture(scope="module")
def own_clusters() -> Iterator[Clusters]:
    """A broker pair for one test module: for tests that run a mirror, which writes the fixed-name
    `heartbeats` topic that every flow replicates (it would leak into the shared brokers' flows)."""
    yield from _clusters("module")


@pytest.fixture(scope="session")
def spark():
    """One local SparkSession for the whole run: a JVM takes ~20 s to start on this machine. Its
    JVM compiles with C1 only and collects with the serial GC: the suite's jobs are seconds of
    tiny work, where C2 compiling on two cores costs more than it saves (rollup_spark.QUICK_JVM)."""
    from tests.integration.rollup_spark import suite_session

    session = suite_session("mirrorlag-tests")
    yield session
    session.stop()


@pytest.fixture
def topic_name() -> str:
    """A fresh topic name per test, so tests share brokers without sharing state."""
    return f"t-{uuid.uuid4().hex[:10]}"


def write_properties(path: Path, clusters: Clusters, extra: str = "", port: int | None = None) -> Path:
    """An MM2-style properties file for the test clusters, aliases `src` and `dst`."""
    path.write_text(
        f"clusters = src, dst\n"
        f"src.bootstrap.servers = {clusters.source}\n"
        f"dst.bootstrap.servers = {clusters.target}\n"
        f"src->dst.enabled = true\n"
        f"mirrorlag.http.listener = 127.0.0.1:{port or free_port()}\n"
        f"{extra}"
    )
    return path
