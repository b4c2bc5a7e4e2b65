"""Ground truth from the data, not from MM2's own claims.

Every record a test produces carries a value unique in its partition (`<partition>:<n>`); reading
the source maps each value to its source offset, and reading the remote partition says which
values MM2 really copied. LRO_true is the highest source offset among them (-1: none), and
lag_true = LEO - (LRO_true + 1) at a given LEO: the records MM2 still owes, counted in offsets as
mirrorlag counts them.
"""

from __future__ import annotations

import itertools
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from tests.helpers import every


def read_partition(bootstrap: str, topic: str, partition: int,
                   isolation: str = "read_committed") -> list[tuple[int, bytes]]:
    """(offset, value) of every record a consumer at `isolation` reads, from the log start to the
    end offset it sees at the start of the read."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "mirrorlag-truth",
                         "enable.auto.commit": False, "isolation.level": isolation, "log_level": 0})
    try:
        tp = TopicPartition(topic, partition)
        if consumer.list_topics(topic, timeout=10).topics[topic].error is not None:
            return []  # not created yet (MM2 creates the remote topic when it first sees the source's)
        try:  # librdkafka asks for the end offset at the consumer's isolation level: the LSO under read_committed
            low, high = consumer.get_watermark_offsets(tp, timeout=10, cached=False)
        except KafkaException as exc:  # a partition created a moment ago may have no leader yet
            raise AssertionError(f"{topic}[{partition}] not readable yet: {exc}") from None
        if high <= low:
            return []
        consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        records: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            for message in consumer.consume(num_messages=1000, timeout=0.5):
                if message.error():
                    if message.error().code() == KafkaError._PARTITION_EOF:
                        continue
                    raise AssertionError(f"reading {topic}[{partition}]: {message.error()}")
                records.append((message.offset(), message.value()))
            position = consumer.position([tp])[0].offset
            if position >= high:
                return records
        raise AssertionError(f"reading {topic}[{partition}] to {high} took over 30 s")
    finally:
        consumer.close()


def append_time_s(bootstrap: str, topic: str, partition: int, offset: int) -> float | None:
    """When the record at `offset` was written (its timestamp, s; MM2 keeps it on the copy); None
    when no record is there to read (deleted, or a transaction marker)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "mirrorlag-truth",
                         "enable.auto.commit": False, "log_level": 0})
    try:
        consumer.assign([TopicPartition(topic, partition, offset)])
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            for message in consumer.consume(num_messages=10, timeout=0.5):
                if message.error() is None:
                    return message.timestamp()[1] / 1000.0 if message.offset() == offset else None
            if consumer.position([TopicPartition(topic, partition)])[0].offset > offset:
                return None
        return None
    finally:
        consumer.close()


def lro_true(source: str, topic: str, target: str, remote_topic: str, partition: int) -> int:
    """The highest source offset whose record MM2 really wrote to the remote partition (-1: none)."""
    offset_of = {value: offset for offset, value in read_partition(source, topic, partition, "read_uncommitted")}
    copied = [offset_of[value] for _, value in read_partition(target, remote_topic, partition)
              if value in offset_of]
    return max(copied, default=-1)


def watermarks(bootstrap: str, topic: str, partition: int) -> dict[str, tuple[int, int]]:
    """(log start, end offset) of a partition as a consumer at each isolation level sees it: an
    open transaction holds read_committed's end (the LSO) below read_uncommitted's (the HW). For
    failure messages: what the source really held when a verdict looked wrong."""
    seen = {}
    for isolation in ("read_uncommitted", "read_committed"):
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "mirrorlag-truth", "log_level": 0,
                             "isolation.level": isolation})
        try:
            seen[isolation] = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10,
                                                             cached=False)
        except KafkaException as exc:
            seen[isolation] = str(exc)
        finally:
            consumer.close()
    return seen


def lag_true(leo: int, lro: int) -> int:
    return max(0, leo - (lro + 1))


@dataclass
class NumberedProducer:
    """Produces records whose values are unique per partition, and remembers when each was sent."""

    bootstrap: str
    topic: str
    counter: Iterator[int] = field(default_factory=itertools.count)
    sent_at: list[float] = field(default_factory=list)  # time.time() of each acknowledged record

    def __post_init__(self) -> None:
        self.producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 0, "log_level": 0,
                                  "enable.idempotence": True})

    def produce(self, counts: dict[int, int]) -> None:
        """`counts[p]` records into partition p, acknowledged before this returns."""
        for partition, n in counts.items():
            for _ in range(n):
                self.producer.produce(self.topic, value=f"{partition}:{next(self.counter)}".encode(),
                                      partition=partition, on_delivery=self._delivered)
        assert self.producer.flush(30) == 0

    def _delivered(self, err, _msg) -> None:
        assert err is None, err
        self.sent_at.append(time.time())

    def produced_between(self, start: float, end: float) -> int:
        return sum(1 for t in self.sent_at if start <= t <= end)

    @contextmanager
    def steadily(self, every_s: float, partition: int = 0) -> Iterator[None]:
        """One record every `every_s` into `partition`, from a thread, until the block ends."""
        def produce() -> None:
            self.producer.produce(self.topic, value=f"{partition}:{next(self.counter)}".encode(),
                                  partition=partition, on_delivery=self._delivered)
            self.producer.poll(0)

        with every(every_s, produce):
            yield
        assert self.producer.flush(30) == 0
