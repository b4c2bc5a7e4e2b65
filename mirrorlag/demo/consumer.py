"""A consumer group on the demo's source, so failover readiness has something to show: it reads
`orders` at a steady pace, below the bursts, and commits each second. MM2 (`mirrorlag mirror`)
checkpoints it; the sidecar shows where it would resume on the target and what it would read again.

It assigns the partitions rather than joining the group (a join takes ~20 s on tansu, docs/design.md §8):
to MM2 and the sidecar a group is its committed offsets, however they were committed.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

from mirrorlag.kafka.source import LIBRDKAFKA_LOGGER

GROUP = "orders-audit"


@dataclass
class GroupConsumer:
    bootstrap_servers: str
    topic: str
    partitions: int
    group: str = GROUP
    records_per_second: float = 60.0  # above the load's average on one topic, below its bursts
    stop_event: threading.Event = field(default_factory=threading.Event)
    consumed: int = 0

    def run(self) -> None:
        consumer = Consumer({"bootstrap.servers": self.bootstrap_servers, "group.id": self.group,
                             "enable.auto.commit": False, "logger": LIBRDKAFKA_LOGGER})
        consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in range(self.partitions)])
        positions: dict[int, int] = {}
        committed: dict[int, int] = {}
        next_commit = time.monotonic() + 1.0
        try:
            while not self.stop_event.is_set():
                message = consumer.poll(0.1)
                if message is not None and message.error() is None:
                    positions[message.partition()] = message.offset() + 1
                    self.consumed += 1
                    self.stop_event.wait(1.0 / self.records_per_second)
                if time.monotonic() >= next_commit and positions != committed:
                    self._commit(consumer, positions)
                    committed = dict(positions)
                    next_commit = time.monotonic() + 1.0
        finally:
            consumer.close()

    def _commit(self, consumer: Consumer, positions: dict[int, int]) -> None:
        try:
            consumer.commit(offsets=[TopicPartition(self.topic, p, o) for p, o in positions.items()],
                            asynchronous=False)
        except KafkaException:
            pass  # the next second's commit carries the same positions on
