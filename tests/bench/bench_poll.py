"""Poll-cycle and scrape benchmark on a local tansu broker. Run by hand, never in the suite:

    .venv/bin/python -m tests.bench.bench_poll --partitions 1000 10000 --runs 5

For each size it creates topics of 100 partitions, puts one record in every partition, feeds a
ReplicationTracker for all of them, and measures side by side in one process:
  - bare: the chunked concurrent ListOffsets alone (the floor a poll cannot beat);
  - poll: one full poll (metadata + ListOffsets + feeds + engine + snapshot);
  - render: the Prometheus text rendered from that snapshot;
  - scrape: GET /metrics over loopback while nothing else runs (pre-rendered bytes).
Medians of --runs; the ratio poll/bare is the figure to watch.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import urllib.request
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from mirrorlag import ReplicationTracker
from mirrorlag.config import load_settings
from mirrorlag.embedded import EmbeddedBroker, free_port
from mirrorlag.sidecar import Sidecar

PARTITIONS_PER_TOPIC = 100


def prepare(bootstrap: str, total: int, prefix: str) -> list[str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [f"{prefix}{i:04d}" for i in range(total // PARTITIONS_PER_TOPIC)]
    for future in admin.create_topics([NewTopic(t, PARTITIONS_PER_TOPIC, 1) for t in topics]).values():
        future.result(timeout=120)
    producer = Producer({"bootstrap.servers": bootstrap, "batch.num.messages": 1, "linger.ms": 0})
    for topic in topics:
        for partition in range(PARTITIONS_PER_TOPIC):
            producer.produce(topic, value=b"x", partition=partition)
        producer.poll(0)
    producer.flush(120)
    return topics


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def bench_size(broker: EmbeddedBroker, total: int, runs: int, tmp: Path) -> dict[str, float]:
    prefix = f"b{total}-"
    topics = prepare(broker.bootstrap_servers, total, prefix)
    port = free_port()
    config = tmp / f"mm2-{total}.properties"
    config.write_text(
        f"clusters = src, dst\nsrc.bootstrap.servers = {broker.bootstrap_servers}\n"
        f"dst.bootstrap.servers = {broker.bootstrap_servers}\nsrc->dst.enabled = true\n"
        f"src->dst.topics = {prefix}.*\nmirrorlag.http.listener = 127.0.0.1:{port}\n"
        "mirrorlag.request.timeout.ms = 60000\n"
    )
    tracker = ReplicationTracker("src", "dst")
    for topic in topics:
        for partition in range(PARTITIONS_PER_TOPIC):
            tracker.replicated(topic, partition, 0, 1)
    sidecar = Sidecar(load_settings([config]), trackers=[tracker])
    sidecar.server.start()
    source = sidecar.poller.sources["src"]
    partitions = [(t, p) for t in topics for p in range(PARTITIONS_PER_TOPIC)]

    bare, poll, render, scrape = [], [], [], []
    snapshot = sidecar.poll()  # warm-up: connections, first metadata
    assert len(snapshot.rows) == total, len(snapshot.rows)
    assert all(r.record_lag == 0 for r in snapshot.rows)
    for _ in range(runs):
        t0 = time.perf_counter()
        offsets = source.end_offsets(partitions)
        bare.append(time.perf_counter() - t0)
        assert sum(1 for v in offsets.values() if v == 1) == total

        t0 = time.perf_counter()
        snapshot = sidecar.poller.poll_once()
        poll.append(time.perf_counter() - t0)

        t0 = time.perf_counter()
        sidecar._publish(snapshot)
        render.append(time.perf_counter() - t0)

        for _ in range(20):
            t0 = time.perf_counter()
            body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read()
            scrape.append(time.perf_counter() - t0)
    sidecar.stop()
    scrape.sort()
    return {
        "partitions": total,
        "bare_list_offsets_ms": median_ms(bare),
        "full_poll_ms": median_ms(poll),
        "poll_over_bare": statistics.median(poll) / statistics.median(bare),
        "render_ms": median_ms(render),
        "scrape_p50_ms": median_ms(scrape),
        "scrape_p99_ms": scrape[int(len(scrape) * 0.99) - 1] * 1000,
        "metrics_bytes": len(body),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with EmbeddedBroker("bench") as broker, tempfile.TemporaryDirectory() as tmp:
        for total in args.partitions:
            result = bench_size(broker, total, args.runs, Path(tmp))
            print(" ".join(f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={v}" for k, v in result.items()), flush=True)


if __name__ == "__main__":
    main()
