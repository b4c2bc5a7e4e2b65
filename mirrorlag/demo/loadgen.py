"""Source traffic with bursts and idle stretches, so lag comes and goes."""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass, field

from confluent_kafka import Producer

from mirrorlag.kafka.source import LIBRDKAFKA_LOGGER

# (seconds, records per second per topic): a steady trickle, a burst, and a quiet spell.
PATTERN: tuple[tuple[float, float], ...] = ((10, 20), (5, 150), (8, 0), (10, 40))


@dataclass
class LoadGenerator:
    bootstrap_servers: str
    topics: dict[str, int]  # topic -> partitions
    stop_event: threading.Event = field(default_factory=threading.Event)
    produced: int = 0

    def run(self) -> None:
        # One record per batch: tansu's `latest` offset is wrong after a multi-record batch (docs/design.md §8).
        producer = Producer({"bootstrap.servers": self.bootstrap_servers, "batch.num.messages": 1,
                             "linger.ms": 0, "logger": LIBRDKAFKA_LOGGER})
        targets = itertools.cycle([(t, p) for t, n in self.topics.items() for p in range(n)])
        seq = 0
        for seconds, rate in itertools.cycle(PATTERN):
            phase_end = time.monotonic() + seconds
            while time.monotonic() < phase_end:
                if self.stop_event.is_set():
                    producer.flush(5)
                    return
                if rate == 0:
                    self.stop_event.wait(0.2)
                    continue
                for topic in self.topics:
                    t, p = next(targets)
                    producer.produce(t, key=str(seq).encode(), value=f'{{"seq":{seq},"pad":"{"x" * 64}"}}'.encode(), partition=p)
                    seq += 1
                producer.poll(0)
                self.produced = seq
                self.stop_event.wait(1.0 / rate)
