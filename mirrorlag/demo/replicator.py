"""A small in-process mirror: source consumer -> target producer, reporting to a ReplicationTracker.

It copies at full speed, crawls, and pauses in turn, so the demo shows lag rising and draining.
Remote topic names follow the flow's replication policy, as MM2's would.
"""

from __future__ import annotations

import functools
import itertools
import threading
import time
from dataclasses import dataclass, field

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition

from mirrorlag.config.policy import ReplicationPolicy
from mirrorlag.feeds.callback import ReplicationTracker
from mirrorlag.kafka.source import LIBRDKAFKA_LOGGER

# (seconds, phase name, max records per second; None = unthrottled)
SPEEDS: tuple[tuple[float, str, float | None], ...] = (
    (15, "copying", None), (10, "slow", 15.0), (6, "paused", 0.0), (12, "copying", None),
)


@dataclass
class DemoReplicator:
    source_alias: str
    source_servers: str
    target_servers: str
    topics: dict[str, int]
    tracker: ReplicationTracker
    policy: ReplicationPolicy = field(default_factory=ReplicationPolicy)
    stop_event: threading.Event = field(default_factory=threading.Event)
    phase: str = "starting"
    copied: int = 0

    def _delivered(self, topic: str, partition: int, offset: int, err: KafkaError | None, msg) -> None:
        if err is None:
            self.tracker.replicated(topic, partition, offset, len(msg))
            self.copied += 1

    def run(self) -> None:
        consumer = Consumer({"bootstrap.servers": self.source_servers, "group.id": "mirrorlag-demo",
                             "enable.auto.commit": False, "logger": LIBRDKAFKA_LOGGER})
        consumer.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t, n in self.topics.items() for p in range(n)])
        producer = Producer({"bootstrap.servers": self.target_servers, "linger.ms": 5,
                             "enable.idempotence": True, "logger": LIBRDKAFKA_LOGGER})
        try:
            for seconds, phase, rate in itertools.cycle(SPEEDS):
                self.phase = phase
                phase_end = time.monotonic() + seconds
                while time.monotonic() < phase_end:
                    if self.stop_event.is_set():
                        return
                    producer.poll(0)
                    if rate == 0:
                        self.stop_event.wait(0.1)
                        continue
                    batch = consumer.consume(num_messages=500 if rate is None else 1, timeout=0.1)
                    for rec in batch:
                        if rec.error():
                            continue
                        producer.produce(
                            self.policy.remote_topic(self.source_alias, rec.topic()),
                            key=rec.key(), value=rec.value(), headers=rec.headers(),
                            timestamp=rec.timestamp()[1], partition=rec.partition(),
                            on_delivery=functools.partial(self._delivered, rec.topic(), rec.partition(), rec.offset()),
                        )
                    if rate is not None and batch:
                        self.stop_event.wait(1.0 / rate)
        finally:
            producer.flush(5)
            consumer.close()
