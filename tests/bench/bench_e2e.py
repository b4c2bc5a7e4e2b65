"""End-to-end cost of the callback feed in a replicator. Run by hand, never in the suite:

    .venv/bin/python -m tests.bench.bench_e2e --records 1000000 --runs 3

Two local tansu brokers. --records records (100-byte values, keyed) are written once to a
10-partition source topic; then each run copies all of them to the target with a minimal Python
replicator (assign-only consumer, consume in batches, produce with a delivery callback per
record, flush), in two variants that differ only in the callback:
  - bare:    `if err is None: delivered += 1`
  - tracker: the same plus `tracker.replicated(topic, partition, offset, len(msg))`, as the
             README shows.
Both build the same functools.partial per record. The variants alternate in ABBA order (bare,
tracker, tracker, bare, ...) so drift on a shared machine hits both alike; the figure is the
median over --runs pairs of tracker throughput / bare throughput. Target >= 0.97. Also printed:
the same ratio in records per CPU second of this process (steadier on a busy machine).
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time
import uuid

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from mirrorlag import ReplicationTracker
from mirrorlag.embedded import EmbeddedBroker

SOURCE_TOPIC = "e2e"
TARGET_TOPIC = "src.e2e"
PARTITIONS = 10


def create(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the futures resolve
    for future in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        future.result(timeout=60)


def fill_source(bootstrap: str, records: int) -> None:
    create(bootstrap, SOURCE_TOPIC)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 10_000,
                         "queue.buffering.max.messages": 1_000_000})
    value = b"v" * 100
    for i in range(records):
        producer.produce(SOURCE_TOPIC, key=b"%d" % i, value=value, partition=i % PARTITIONS)
        if i % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(300) == 0


def copy_all(source: str, target: str, records: int, tracker: ReplicationTracker | None) -> tuple[float, float]:
    """Copy every source record to the target: (wall seconds, process CPU seconds) from the first
    consume to the last ack. CPU time (this process, librdkafka's threads included) is less
    disturbed by other work on a shared machine than wall time."""
    consumer = Consumer({"bootstrap.servers": source, "group.id": f"bench-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(SOURCE_TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    producer = Producer({"bootstrap.servers": target, "linger.ms": 5, "batch.num.messages": 10_000,
                         "queue.buffering.max.messages": 500_000})
    delivered = [0]

    if tracker is None:
        def done(topic: str, partition: int, offset: int, err, msg) -> None:
            if err is None:
                delivered[0] += 1
    else:
        replicated = tracker.replicated

        def done(topic: str, partition: int, offset: int, err, msg) -> None:
            if err is None:
                delivered[0] += 1
                replicated(topic, partition, offset, len(msg))

    partial = functools.partial
    produce = producer.produce
    consumed = 0
    t0 = time.perf_counter()
    c0 = time.process_time()
    while consumed < records:
        for msg in consumer.consume(1000, timeout=1.0):
            if msg.error() is not None:
                continue
            consumed += 1
            kwargs = {"key": msg.key(), "value": msg.value(), "partition": msg.partition(),
                      "on_delivery": partial(done, msg.topic(), msg.partition(), msg.offset())}
            while True:
                try:
                    produce(TARGET_TOPIC, **kwargs)
                    break
                except BufferError:
                    producer.poll(0.01)
        producer.poll(0)
    assert producer.flush(300) == 0
    elapsed = time.perf_counter() - t0
    cpu = time.process_time() - c0
    consumer.close()
    assert delivered[0] == records, (delivered[0], records)
    if tracker is not None:
        assert len(tracker.offsets()) == PARTITIONS
    return elapsed, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3, help="pairs of (bare, tracker) runs")
    args = parser.parse_args()
    with EmbeddedBroker("bench-e2e-source") as source, EmbeddedBroker("bench-e2e-target") as target:
        fill_source(source.bootstrap_servers, args.records)
        create(target.bootstrap_servers, TARGET_TOPIC)
        ratios, cpu_ratios, bare_rates, tracker_rates = [], [], [], []
        for run in range(args.runs):
            order = ("bare", "tracker") if run % 2 == 0 else ("tracker", "bare")
            wall, cpu = {}, {}
            for variant in order:
                tracker = ReplicationTracker("src", "dst") if variant == "tracker" else None
                wall[variant], cpu[variant] = copy_all(source.bootstrap_servers, target.bootstrap_servers,
                                                       args.records, tracker)
            bare_rates.append(args.records / wall["bare"])
            tracker_rates.append(args.records / wall["tracker"])
            ratios.append(wall["bare"] / wall["tracker"])  # throughput ratio, tracker / bare
            cpu_ratios.append(cpu["bare"] / cpu["tracker"])  # records per CPU second, tracker / bare
            print(f"pair {run + 1}: bare={bare_rates[-1]:.0f}/s tracker={tracker_rates[-1]:.0f}/s "
                  f"ratio={ratios[-1]:.3f} cpu_ratio={cpu_ratios[-1]:.3f} "
                  f"cpu_s bare={cpu['bare']:.2f} tracker={cpu['tracker']:.2f}", flush=True)
        print(f"records={args.records} pairs={args.runs} bare_records_per_s={statistics.median(bare_rates):.0f} "
              f"tracker_records_per_s={statistics.median(tracker_rates):.0f} "
              f"ratio_median={statistics.median(ratios):.3f} cpu_ratio_median={statistics.median(cpu_ratios):.3f}")


if __name__ == "__main__":
    main()
