"""Offset-syncs feed throughput: a restart's initial drain of MM2's compacted sync topic. By hand:

    .venv/bin/python -m tests.bench.bench_feed --records 1000000 --partitions 10000 --runs 5

Writes --records offset syncs (MM2's wire format, formats.encode_offset_sync) for --partitions
source partitions into `mm2-offset-syncs.dst.internal` on a local tansu broker, then, side by
side in each run:
  - feed: a fresh OffsetSyncsFeed (its own assign-only consumer, from the beginning) and one
    `offsets()` call, i.e. what the sidecar's first poll does: metadata, assign, fetch every record,
    decode it, keep the newest per partition;
  - consume: a bare consumer (the feed's consumer settings) reading the same records without
    decoding, stopping at the last one (the floor the feed cannot beat: librdkafka, the broker and
    the Python message objects);
  - decode: the feed's `_apply` over the records already in memory (the Python part alone).
Prints medians of --runs as records/s; target >= 200,000 records/s for the feed. Then the CPU
split of the feed and the bare consume (medians, seconds and share of one core over the run's wall
time): the broker process (tansu, /proc/<pid>/stat), the client's main thread (Python and the
librdkafka work consume() does on it) and its other threads (librdkafka's).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from confluent_kafka import OFFSET_BEGINNING, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from mirrorlag.config import load_settings
from mirrorlag.embedded import EmbeddedBroker
from mirrorlag.feeds.offset_syncs import OffsetSyncsFeed
from mirrorlag.formats import OffsetSync, encode_offset_sync
from mirrorlag.kafka.topic_reader import assign_only_consumer

SYNC_TOPIC = "mm2-offset-syncs.dst.internal"


def write_syncs(bootstrap: str, records: int, partitions: int) -> list[tuple[bytes, bytes]]:
    """Round-robin over the partitions, offsets rising: the newest sync of each is the highest."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(SYNC_TOPIC, 1, 1)]).values():
        future.result(timeout=60)
    topics = [f"topic-{i:04d}" for i in range(max(1, partitions // 100))]
    encoded = [
        encode_offset_sync(OffsetSync(topics[(i % partitions) // 100], i % 100, i, i // 2))
        for i in range(records)
    ]
    # One partition, so batching is safe to read back (tansu's LEO quirk concerns the *source*
    # topics' ListOffsets, which this benchmark does not read).
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 10_000,
                         "queue.buffering.max.messages": 1_000_000})
    for key, value in encoded:
        producer.produce(SYNC_TOPIC, key=key, value=value, partition=0)
        producer.poll(0)
    assert producer.flush(300) == 0
    return encoded


def bare_consume(settings, records: int) -> Callable[[], None]:
    consumer = assign_only_consumer(settings.clusters["src"])
    consumer.incremental_assign([TopicPartition(SYNC_TOPIC, 0, OFFSET_BEGINNING)])  # as the feed does
    seen = 0
    while seen < records:
        seen += sum(1 for m in consumer.consume(num_messages=10_000, timeout=1.0) if m.error() is None)
    assert seen == records, (seen, records)
    return consumer.close


def process_cpu_s(pid: int) -> float:
    """User + system CPU of a whole process (all its threads) from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Run:
    wall_s: float
    broker_cpu_s: float
    main_cpu_s: float  # this thread: Python, and librdkafka's work inside consume()
    other_cpu_s: float  # the client's other threads: librdkafka's broker and main threads


def timed(broker_pid: int, read: Callable[[], Callable[[], None]]) -> Run:
    """Run `read`, then the close it returns: the close's wait is not timed, its CPU is (the
    process's CPU clock keeps what librdkafka's threads used after they exit)."""
    broker0, main0, proc0, t0 = process_cpu_s(broker_pid), time.thread_time(), time.process_time(), time.perf_counter()
    close = read()
    wall = time.perf_counter() - t0
    close()
    main = time.thread_time() - main0
    return Run(wall, process_cpu_s(broker_pid) - broker0, main, time.process_time() - proc0 - main)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with EmbeddedBroker("bench-feed") as broker, tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        encoded = write_syncs(broker.bootstrap_servers, args.records, args.partitions)
        print(f"wrote {args.records} syncs in {time.perf_counter() - t0:.1f} s", flush=True)
        config = Path(tmp) / "mm2.properties"
        config.write_text(
            f"clusters = src, dst\nsrc.bootstrap.servers = {broker.bootstrap_servers}\n"
            f"dst.bootstrap.servers = {broker.bootstrap_servers}\nsrc->dst.enabled = true\n"
            # The initial drain may take longer than one request timeout; the sidecar would go on
            # at the next poll, the benchmark wants it in one call.
            "mirrorlag.request.timeout.ms = 300000\n"
        )
        settings = load_settings([config])
        flow = settings.flows[0]
        feed_runs: list[Run] = []
        consume_runs: list[Run] = []
        decode_times: list[float] = []
        broker_pid = broker.process.pid  # setpriv execs tansu: the same process

        def feed_drain() -> Callable[[], None]:
            feed = OffsetSyncsFeed("src", assign_only_consumer(settings.clusters["src"]), {SYNC_TOPIC: flow},
                                   settings.request_timeout_s)
            offsets = feed.offsets()
            assert len(offsets) == min(args.partitions, args.records) and feed.bad_records == 0
            assert max(offsets.values()) == args.records - 1
            return feed.close

        for _ in range(args.runs):
            feed_runs.append(timed(broker_pid, feed_drain))
            consume_runs.append(timed(broker_pid, lambda: bare_consume(settings, args.records)))

            feed = OffsetSyncsFeed("src", None, {SYNC_TOPIC: flow})
            apply = feed._apply
            t0 = time.perf_counter()
            for key, value in encoded:
                apply(SYNC_TOPIC, key, value)
            decode_times.append(time.perf_counter() - t0)

        def rate(times: list[float]) -> float:
            return args.records / statistics.median(times)

        feed_s = statistics.median(r.wall_s for r in feed_runs)
        consume_s = statistics.median(r.wall_s for r in consume_runs)
        print(f"records={args.records} partitions={args.partitions} runs={args.runs} "
              f"feed_records_per_s={rate([r.wall_s for r in feed_runs]):.0f} feed_s={feed_s:.2f} "
              f"bare_consume_records_per_s={rate([r.wall_s for r in consume_runs]):.0f} "
              f"decode_apply_records_per_s={rate(decode_times):.0f} feed_over_bare={feed_s / consume_s:.2f}")
        for name, runs in (("feed", feed_runs), ("bare_consume", consume_runs)):
            wall = statistics.median(r.wall_s for r in runs)
            cpu = {part: statistics.median(getattr(r, f"{part}_cpu_s") for r in runs)
                   for part in ("broker", "main", "other")}
            print(f"cpu {name}: wall_s={wall:.2f} " + " ".join(
                f"{part}_cpu_s={s:.2f} ({s / wall:.0%})" for part, s in cpu.items()))


if __name__ == "__main__":
    main()
