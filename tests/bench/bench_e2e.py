"""End-to-end cost of the callback feed in a replicator. Run by hand, never in the suite:

    .venv/bin/python -m tests.bench.bench_e2e --records 1000000 --runs 3

Two local tansu brokers. --records records (100-byte values, keyed) are written once to a
10-partition source topic; then each run copies all of them to the target with a minimal Python
replicator (assign-only consumer, consume in batches, produce with a delivery callback per
record, flush), in two variants that differ only in the callback:
  - bare:    `if err is None: delivered += 1`
  - tracker: the same plus `tracker.replicated(topic, partition, offset, len(msg))`, as
             docs/states.md shows;
  - store:   the same plus `store(partition, offset)` with `store = tracker.store_for(topic)`
             (the topic's dict's own store, no Python frame) and `tracker.sized(n, nbytes)` once
             per consumed batch.
All build the same functools.partial per record. The variants rotate (bare, tracker, store, then
store, tracker, bare, ...) so drift on a shared machine hits them alike; the figure is the median
over --runs rounds of tracker throughput / bare throughput (and store / bare). Target >= 0.97. Also printed:
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


def copy_all(source: str, target: str, records: int, tracker: ReplicationTracker | None,
             lean: bool = False) -> tuple[float, float]:
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
    elif lean:
        store = tracker.store_for(SOURCE_TOPIC)  # the one topic this replicator copies

        def done(topic: str, partition: int, offset: int, err, msg) -> None:
            if err is None:
                delivered[0] += 1
                store(partition, offset)
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
        batch = consumer.consume(1000, timeout=1.0)
        batch_bytes = 0
        for msg in batch:
            if msg.error() is not None:
                continue
            consumed += 1
            if lean:
                batch_bytes += len(msg.value())
            kwargs = {"key": msg.key(), "value": msg.value(), "partition": msg.partition(),
                      "on_delivery": partial(done, msg.topic(), msg.partition(), msg.offset())}
            while True:
                try:
                    produce(TARGET_TOPIC, **kwargs)
                    break
                except BufferError:
                    producer.poll(0.01)
        if lean and batch_bytes:  # per batch; counted on consume, an estimate's input all the same
            tracker.sized(len(batch), batch_bytes)
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
    parser.add_argument("--runs", type=int, default=3, help="rounds of (bare, tracker, store) runs")
    args = parser.parse_args()
    with EmbeddedBroker("bench-e2e-source") as source, EmbeddedBroker("bench-e2e-target") as target:
        fill_source(source.bootstrap_servers, args.records)
        create(target.bootstrap_servers, TARGET_TOPIC)
        variants = ("bare", "tracker", "store")
        rates: dict[str, list[float]] = {v: [] for v in variants}
        ratios: dict[str, list[float]] = {v: [] for v in variants[1:]}
        cpu_ratios: dict[str, list[float]] = {v: [] for v in variants[1:]}
        for run in range(args.runs):
            wall, cpu = {}, {}
            for variant in variants if run % 2 == 0 else variants[::-1]:
                tracker = ReplicationTracker("src", "dst") if variant != "bare" else None
                wall[variant], cpu[variant] = copy_all(source.bootstrap_servers, target.bootstrap_servers,
                                                       args.records, tracker, lean=variant == "store")
                rates[variant].append(args.records / wall[variant])
            for variant in variants[1:]:
                ratios[variant].append(wall["bare"] / wall[variant])  # throughput, variant / bare
                cpu_ratios[variant].append(cpu["bare"] / cpu[variant])  # records per CPU second
            print(f"round {run + 1}: " + " ".join(f"{v}={rates[v][-1]:.0f}/s cpu={cpu[v]:.2f}s" for v in variants)
                  + " " + " ".join(f"{v}_ratio={ratios[v][-1]:.3f}" for v in variants[1:]), flush=True)
        print(f"records={args.records} rounds={args.runs} "
              + " ".join(f"{v}_records_per_s={statistics.median(rates[v]):.0f}" for v in variants) + " "
              + " ".join(f"{v}_ratio_median={statistics.median(ratios[v]):.3f} "
                         f"{v}_cpu_ratio_median={statistics.median(cpu_ratios[v]):.3f}" for v in variants[1:]))


if __name__ == "__main__":
    main()
