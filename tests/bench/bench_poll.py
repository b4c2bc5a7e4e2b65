"""Poll-cycle and scrape benchmark on a local broker. Run by hand, never in the suite:

    .venv/bin/python -m tests.bench.bench_poll --partitions 1000 10000 --runs 5
    .venv/bin/python -m tests.bench.bench_poll --partitions 100000 --runs 5 --scrapes 200
    .venv/bin/python -m tests.bench.bench_poll --partitions 100000 --runs 3 --feed target-progress
    .venv/bin/python -m tests.bench.bench_poll --partitions 10000 --runs 5 --broker apache

One broker (`--broker tansu`, the default, or `apache`: Apache Kafka's own KRaft broker, its jars
fetched with Maven on first use) holds the partitions.

For each size it creates topics of 100 partitions, puts one record in every partition, feeds a
ReplicationTracker for all of them, and measures side by side in one process:
(With `--feed target-progress`, the sidecar as deployed beside MM2 instead: a second broker holds
the remote topics, two records a partition on each side, and an offset sync per partition for the
first record; the feeds are offset-syncs and target progress, which proves the second record
copied. bare is then the chunked ListOffsets of both clusters, one after the other.)
  - bare: the chunked concurrent ListOffsets alone (the floor a poll cannot beat);
  - poll: one full poll (ListOffsets + feeds + engine + snapshot, and metadata where it is due:
    at every poll with `--metadata-max-age-ms 0`, else once a max age, which the runs do not reach;
    metadata_poll_over_bare is then a poll that reads it on its cadence, over a bare read beside it);
  - publish: what Sidecar.poll adds to a poll: /metrics rendered and compressed a family at a
    time (/status is rendered only when asked for); poll_publish_over_bare is the issue's ratio,
    (poll + publish) / bare, per run, median; then gc_pacing, the young collection and freeze
    `mirrorlag run` does after each poll (--gc-pacing on off measures with and without it, in turn);
    --switch-interval-ms measures with other GIL switch intervals (`mirrorlag run` sets 1 ms);
  - render: the Prometheus text again, joined into one bytes as the tests read it (the sidecar
    never does: at `--detail full` the whole text is ~170 MB at 100k); poll_render_over_bare, the ratio with it;
  - scrape: GET /metrics over loopback while nothing else runs (pre-rendered bytes);
  - scrape under polls: --scrapes GETs on one keep-alive connection from a separate process (as
    Prometheus scrapes) while a thread runs Sidecar.poll back to back (poll, render and compress
    /metrics, publish), taking turns between --encodings (default: gzip, as Prometheus asks,
    and identity; `--encodings gzip` for Prometheus's scrapes alone).
--holds-ms 15 also prints where the poll thread held the GIL longer (HoldWatch).
Medians of --runs; the ratio poll/bare is the figure to watch. Scrape times are to the last byte
of the body, not decompressed or parsed.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import http.client
import itertools
import json
import math
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.request
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from mirrorlag import ReplicationTracker
from mirrorlag.config import load_settings
from mirrorlag.feeds.external import build_feeds
from mirrorlag.apache_kafka.jars import KAFKA_4, resolve
from mirrorlag.apache_kafka.processes import KRaftBroker
from mirrorlag.embedded import EmbeddedBroker, free_port
from mirrorlag.formats import OffsetSync, encode_offset_sync
from mirrorlag.kafka.source import SourceCluster, isolation_level, make_admin
from mirrorlag.cli import SWITCH_INTERVAL_S, run_pacing, tune_process
from mirrorlag.sidecar.service import Sidecar
from tests.exposition import metrics_text

PARTITIONS_PER_TOPIC = 100
# librdkafka's producer walks all its partitions per wakeup, so one producer over 100k partitions
# is quadratic (minutes); a fresh producer per 1,000 partitions takes seconds.
PARTITIONS_PER_PRODUCER = 1000
SYNC_TOPIC = "mm2-offset-syncs.dst.internal"
TOPICS_PER_CREATE = 50


def prepare(bootstrap: str, total: int, prefix: str, records: int = 1) -> list[str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [f"{prefix}{i:04d}" for i in range(total // PARTITIONS_PER_TOPIC)]
    # A KRaft controller refuses one request that creates more than 10,000 records.
    for start in range(0, len(topics), TOPICS_PER_CREATE):
        batch = topics[start:start + TOPICS_PER_CREATE]
        for future in admin.create_topics([NewTopic(t, PARTITIONS_PER_TOPIC, 1) for t in batch]).values():
            future.result(timeout=120)
    per = PARTITIONS_PER_PRODUCER // PARTITIONS_PER_TOPIC
    for _ in range(records):
        for start in range(0, len(topics), per):
            producer = Producer({"bootstrap.servers": bootstrap, "batch.num.messages": 1, "linger.ms": 5})
            for topic in topics[start:start + per]:
                for partition in range(PARTITIONS_PER_TOPIC):
                    producer.produce(topic, value=b"x", partition=partition)
                producer.poll(0)
            assert producer.flush(120) == 0, "records left unsent"
    return topics


def prepare_target(source: str, target: str, topics: list[str]) -> None:
    """The remote topics on the target, two records a partition, and an offset sync per partition
    on the source saying upstream record 0 became target record 0: target progress proves 1."""
    prepare(target, len(topics) * PARTITIONS_PER_TOPIC, "src." + topics[0].rsplit("-", 1)[0] + "-", records=2)
    admin = AdminClient({"bootstrap.servers": source})
    for future in admin.create_topics([NewTopic(SYNC_TOPIC, 1, 1)]).values():
        future.result(timeout=120)
    producer = Producer({"bootstrap.servers": source, "batch.num.messages": 1, "linger.ms": 5})
    for topic in topics:
        for partition in range(PARTITIONS_PER_TOPIC):
            key, value = encode_offset_sync(OffsetSync(topic, partition, 0, 0))
            producer.produce(SYNC_TOPIC, key=key, value=value, partition=0)
        producer.poll(0)
    assert producer.flush(300) == 0, "syncs left unsent"


def bench_broker(kind: str, name: str, directory: Path) -> EmbeddedBroker | KRaftBroker:
    """One broker for a benchmark: tansu (the embedded broker) or Apache Kafka's own KRaft broker
    (the newest pinned version's jars, fetched on first use; storage under `directory`)."""
    if kind == "tansu":
        return EmbeddedBroker(name)
    return KRaftBroker(resolve(KAFKA_4), directory / name, name)


def percentile(samples: list[float], q: float) -> float:
    """Nearest rank; NaN without samples (every scrape of an encoding failed)."""
    if not samples:
        return math.nan
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


def scrape_client(port: int, scrapes: int, encodings: list[str]) -> dict:
    """The scraper, run in its own process as Prometheus is (in the sidecar's process it would
    wait for the GIL the polls hold): `scrapes` GETs of /metrics on one keep-alive connection,
    the `encodings` taking turns (gzip is what Prometheus asks for; identity is inflated per
    request, ~0.5 s of CPU at 100k, which the other processes on a small machine feel). A failed
    scrape (e.g. the server dropped a slow transfer) is counted and the connection reopened."""
    times: dict[str, list[float]] = {encoding: [] for encoding in encodings}
    sizes: dict[str, int] = {}
    failures = 0
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    for i in range(scrapes):
        encoding = encodings[i % len(encodings)]
        t0 = time.perf_counter()
        try:
            conn.request("GET", "/metrics", headers={"Accept-Encoding": encoding})
            response = conn.getresponse()
            body = response.read()
        except (http.client.HTTPException, OSError):
            failures += 1
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            continue
        times[encoding].append(time.perf_counter() - t0)
        assert response.status == 200 and (response.getheader("Content-Encoding") == "gzip") == (encoding == "gzip")
        sizes[encoding] = len(body)
        time.sleep(0.02)
    conn.close()
    return {"times": times, "sizes": sizes, "failures": failures}


class HoldWatch:
    """Where a thread holds the GIL long: a watchdog sleeps 1 ms at a time and, when it wakes more
    than `threshold_s` late, records where the watched thread is (the line right after the hold:
    a long C call, or a collection it set off). It competes for the GIL itself, so measure
    scrapes without it."""

    def __init__(self, threshold_s: float) -> None:
        self.threshold_s = threshold_s
        self.thread_id: int | None = None
        self.worst: dict[str, float] = {}
        self.count: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-holdwatch", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            t0 = time.perf_counter()
            time.sleep(0.001)
            late = time.perf_counter() - t0
            frame = sys._current_frames().get(self.thread_id) if late > self.threshold_s else None
            if frame is not None:
                where = " <- ".join(f"{f.f_code.co_filename.rsplit('/', 1)[-1]}:{line}:{f.f_code.co_name}"
                                    for f, line in itertools.islice(traceback.walk_stack(frame), 3))
                self.worst[where] = max(self.worst.get(where, 0.0), late)
                self.count[where] = self.count.get(where, 0) + 1

    def __enter__(self) -> HoldWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def report(self, top: int = 12) -> str:
        lines = [f"GIL holds > {self.threshold_s * 1000:.0f} ms on the poll thread (worst, count, where it was after):"]
        for where, late in sorted(self.worst.items(), key=lambda kv: -kv[1])[:top]:
            lines.append(f"  {late * 1000:7.1f} ms x{self.count[where]:3d}  {where}")
        return "\n".join(lines)


def scrape_under_polls(sidecar: Sidecar, port: int, scrapes: int, encodings: list[str],
                       holds_ms: float = 0.0) -> dict[str, float]:
    """scrape_client in a child process while this one runs polls (with publish) back to back;
    with `holds_ms`, a HoldWatch on the poll thread prints where it held the GIL longer."""
    stop = threading.Event()
    polls = []
    watch = HoldWatch(holds_ms / 1000) if holds_ms else None

    def poll_loop() -> None:
        if watch is not None:
            watch.thread_id = threading.get_ident()
        while not stop.is_set():
            t0 = time.perf_counter()
            sidecar.poll()
            polls.append(time.perf_counter() - t0)

    poller = threading.Thread(target=poll_loop, name="bench-polls")
    if watch is not None:
        watch.__enter__()
    poller.start()
    try:
        while not polls:  # the scrapes must see polls running
            time.sleep(0.01)
        out = subprocess.run(
            [sys.executable, "-m", "tests.bench.bench_poll", "--scrape-client", str(port), "--scrapes", str(scrapes),
             "--encodings", *encodings],
            check=True, capture_output=True, text=True,
        ).stdout
    finally:
        stop.set()
        poller.join()
        if watch is not None:
            watch.__exit__()
            print(watch.report(), flush=True)
    client = json.loads(out.strip().splitlines()[-1])
    label = "under_polls"
    result = {}
    for encoding, samples in client["times"].items():
        result[f"{label}_{encoding}_p50_ms"] = percentile(samples, 0.5) * 1000
        result[f"{label}_{encoding}_p99_ms"] = percentile(samples, 0.99) * 1000
        result[f"{label}_{encoding}_max_ms"] = max(samples, default=math.nan) * 1000
        result[f"{encoding}_bytes"] = client["sizes"].get(encoding, 0)
    result[f"{label}_failed_scrapes"] = client["failures"]
    result[f"{label}_polls_during"] = len(polls)
    result[f"{label}_poll_publish_ms"] = statistics.median(polls) * 1000
    return result


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def bench_size(broker: EmbeddedBroker | KRaftBroker, topics: list[str], runs: int, scrapes: int, detail: str, tmp: Path,
               gc_pacing: bool, encodings: list[str], holds_ms: float = 0.0, metadata_max_age_ms: int | None = None,
               target: EmbeddedBroker | KRaftBroker | None = None) -> dict[str, float]:
    total = len(topics) * PARTITIONS_PER_TOPIC
    prefix = topics[0].rsplit("-", 1)[0] + "-"
    port = free_port()
    config = tmp / f"mm2-{total}.properties"
    config.write_text(
        f"clusters = src, dst\nsrc.bootstrap.servers = {broker.bootstrap_servers}\n"
        f"dst.bootstrap.servers = {(target or broker).bootstrap_servers}\nsrc->dst.enabled = true\n"
        f"src->dst.topics = {prefix}.*\nmirrorlag.http.listener = 127.0.0.1:{port}\n"
        "mirrorlag.request.timeout.ms = 60000\n"
        f"mirrorlag.metrics.detail = {detail}\n"
        + (f"mirrorlag.metadata.max.age.ms = {metadata_max_age_ms}\n" if metadata_max_age_ms is not None else "")
        + ("mirrorlag.lro.feeds = offset-syncs, target-progress\n" if target is not None else "")
    )
    settings = load_settings([config])
    pacing = run_pacing() if gc_pacing else None
    if target is None:
        tracker = ReplicationTracker("src", "dst")
        for topic in topics:
            for partition in range(PARTITIONS_PER_TOPIC):
                tracker.replicated(topic, partition, 0, 1)
        sidecar = Sidecar(settings, trackers=[tracker], gc_pacing=pacing)
    else:
        sidecar = Sidecar(settings, feeds=build_feeds(settings), gc_pacing=pacing)
    sidecar.server.start()
    source = sidecar.poller.sources["src"]
    partitions = [(t, p) for t in topics for p in range(PARTITIONS_PER_TOPIC)]
    remote: SourceCluster | None = None  # the target's ListOffsets, for bare
    if target is not None:
        remote = SourceCluster("dst", make_admin(settings.clusters["dst"], settings.request_timeout_s), [],
                               settings.request_timeout_s, settings.leo_chunk_size, isolation_level("read_uncommitted"))
    remote_partitions = [(f"src.{t}", p) for t, p in partitions]
    leo = 1 if target is None else 2

    bare, poll, render, publish, collect, scrape, ratios, render_ratios = [], [], [], [], [], [], [], []
    # Warm-up: connections, first metadata, and the syncs' first drain (on a loaded machine, the
    # feeds may take a few polls to read 100k partitions' evidence through).
    for _ in range(10):
        snapshot = sidecar.poll()
        assert len(snapshot) == total, len(snapshot)
        lag, known = snapshot.columns.column("record_lag")
        if known.all() and not lag.any():
            break
    assert known.all() and not lag.any(), (int(known.sum()), int(lag.sum()))
    if target is not None:
        assert set(snapshot.columns.lro_feed.tolist()) == {"target-progress"}
    for _ in range(runs):
        t0 = time.perf_counter()
        offsets = source.end_offsets(partitions)
        if remote is not None:
            assert sum(1 for v in remote.end_offsets(remote_partitions).values() if v == 2) == total
        bare.append(time.perf_counter() - t0)
        assert sum(1 for v in offsets.values() if v == leo) == total

        pacing = sidecar.gc_pacing
        with pacing.around_poll() if pacing is not None else contextlib.nullcontext():  # as Sidecar.poll
            t0 = time.perf_counter()
            snapshot = sidecar.poller.poll_once()
            poll.append(time.perf_counter() - t0)

            t0 = time.perf_counter()
            sidecar._publish(snapshot)  # /metrics rendered and compressed a family at a time
            publish.append(time.perf_counter() - t0)
            ratios.append((poll[-1] + publish[-1]) / bare[-1])

            t0 = time.perf_counter()
            metrics_text(sidecar.renderer, snapshot, sidecar.poller.stats)  # the text again, joined into one bytes
            render.append(time.perf_counter() - t0)
            render_ratios.append((poll[-1] + render[-1]) / bare[-1])
            t0 = time.perf_counter()
        if pacing is not None:
            collect.append(time.perf_counter() - t0)  # the freeze (and the hourly full collection)

        for _ in range(20):
            t0 = time.perf_counter()
            body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read()
            scrape.append(time.perf_counter() - t0)
    # With a max age, the runs above read no metadata (it is read on its cadence: once a max age,
    # ~4 polls at the default interval): the poll that does, and its ratio to a bare read beside it.
    metadata_ratios = []
    for _ in range(min(runs, 3) if settings.metadata_max_age_s else 0):
        t0 = time.perf_counter()
        source.end_offsets(partitions)
        if remote is not None:
            remote.end_offsets(remote_partitions)
        bare_s = time.perf_counter() - t0
        sidecar.poller._metadata_due["src"] = 0.0  # due now
        t0 = time.perf_counter()
        sidecar.poller.poll_once()
        metadata_ratios.append((time.perf_counter() - t0) / bare_s)
    under_polls: dict[str, float] = {}
    if metadata_ratios:
        under_polls["metadata_poll_over_bare"] = statistics.median(metadata_ratios)
    if scrapes:
        under_polls.update(scrape_under_polls(sidecar, port, scrapes, encodings, holds_ms))
    sidecar.stop()
    gc.unfreeze()  # the next variant starts with the collector as the process had it
    scrape.sort()
    return {
        "partitions": total,
        "detail": detail,
        "metadata_max_age_ms": int(settings.metadata_max_age_s * 1000),
        "gc_pacing": "on" if gc_pacing else "off",
        "bare_list_offsets_ms": median_ms(bare),
        "full_poll_ms": median_ms(poll),
        "poll_over_bare": statistics.median(poll) / statistics.median(bare),
        "publish_ms": median_ms(publish),  # render + compress /metrics, as Sidecar.poll does
        # The "full poll" includes rendering /metrics; the sidecar renders it into gzip a
        # family at a time (publish), never into one text: the median of each run's ratio.
        "poll_publish_over_bare": statistics.median(ratios),
        "render_ms": median_ms(render),  # the text joined into one bytes (tests' form; ~170 MB at 100k)
        "poll_render_over_bare": statistics.median(render_ratios),
        "gc_pacing_ms": median_ms(collect) if collect else 0.0,
        "scrape_p50_ms": median_ms(scrape),
        "scrape_p99_ms": scrape[int(len(scrape) * 0.99) - 1] * 1000,
        "metrics_bytes": len(body),
        **under_polls,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--detail", choices=["auto", "full", "lag"], nargs="+", default=["auto"],
                        help="mirrorlag.metrics.detail, each measured in turn")
    parser.add_argument("--gc-pacing", choices=["on", "off"], nargs="+", default=["on"],
                        help="mirrorlag run's GcPacing after each poll, each measured in turn")
    parser.add_argument("--switch-interval-ms", type=float, nargs="+", default=[SWITCH_INTERVAL_S * 1000],
                        help="sys.setswitchinterval during the scrapes, each measured in turn")
    parser.add_argument("--scrapes", type=int, default=0, help="scrapes under running polls, per variant (0: skip)")
    parser.add_argument("--encodings", choices=["gzip", "identity"], nargs="+", default=["gzip", "identity"],
                        help="the scrapes' Accept-Encoding, taking turns (Prometheus asks for gzip)")
    parser.add_argument("--holds-ms", type=float, default=0.0,
                        help="with --scrapes: also print where the poll thread held the GIL longer than this")
    parser.add_argument("--metadata-max-age-ms", type=int, nargs="+", default=[None],
                        help="mirrorlag.metadata.max.age.ms, each measured in turn (0: metadata at every poll; "
                             "default: the configuration's default)")
    parser.add_argument("--feed", choices=["callback", "target-progress"], default="callback",
                        help="callback: a ReplicationTracker; target-progress: offset syncs and the target's end offsets "
                             "on a second broker, as deployed beside MM2")
    parser.add_argument("--broker", choices=["tansu", "apache"], default="tansu",
                        help="tansu (the embedded broker) or Apache Kafka's KRaft broker (%s)" % KAFKA_4)
    parser.add_argument("--scrape-client", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.scrape_client:
        print(json.dumps(scrape_client(args.scrape_client, args.scrapes, args.encodings)))
        return
    tune_process()  # as `mirrorlag run`; --switch-interval-ms then overrides its interval
    with (tempfile.TemporaryDirectory() as tmp, bench_broker(args.broker, "bench", Path(tmp)) as broker,
          bench_broker(args.broker, "bench-target", Path(tmp)) if args.feed == "target-progress"
          else contextlib.nullcontext() as target):
        for total in args.partitions:
            topics = prepare(broker.bootstrap_servers, total, f"b{total}-", records=1 if target is None else 2)
            if target is not None:
                prepare_target(broker.bootstrap_servers, target.bootstrap_servers, topics)
            for detail, pacing, switch_ms, max_age in itertools.product(args.detail, args.gc_pacing,
                                                                        args.switch_interval_ms, args.metadata_max_age_ms):
                sys.setswitchinterval(switch_ms / 1000)
                result = bench_size(broker, topics, args.runs, args.scrapes, detail, Path(tmp), pacing == "on", args.encodings,
                                    args.holds_ms, max_age, target)
                result["switch_interval_ms"] = switch_ms
                print(" ".join(f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={v}" for k, v in result.items()), flush=True)


if __name__ == "__main__":
    main()
