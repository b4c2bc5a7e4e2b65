"""Failover readiness at scale (issue 33): 1,000 groups × 100 partitions on one flow. Run by hand:

    .venv/bin/python -m tests.bench.bench_groups --groups 1000 --group-partitions 100 --poll-partitions 20000 --runs 5

On two local tansu brokers: a topic of --group-partitions partitions, one record each, one offset
sync a partition ((0,0), as MM2 writes it); --groups groups that committed offset 1 on every
partition (a commit without a join, docs/design.md §8), and MM2's checkpoint for each group partition on
the target (upstream 1, downstream 1, dated now). Every group is READY. Beside them, a LEO estate
of --poll-partitions partitions (topics of 100, one record each, a callback feed), as bench_poll.

Measured, in one process:
  - the groups cadence (GroupsService.run: list the source's groups, their committed offsets at
    mirrorlag.failover.groups.max.in.flight, the checkpoints topic drained, the target's members,
    every group partition assessed, /status's rows encoded): its first run (the checkpoints topic
    read from the start) and --runs steady ones, wall time and the thread's CPU time;
  - the LEO poll beside it: (poll + publish) / bare (the chunked ListOffsets alone), --runs each,
    alternating runs with no groups read going and with groups runs back to back on their own
    thread (the worst case: the cadence is once a minute by default);
  - memory: Python heap retained by the groups service after a run (tracemalloc), per group partition;
  - the series a healthy estate of groups adds to /metrics.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client import CollectorRegistry, generate_latest

from mirrorlag import ReplicationTracker
from mirrorlag.config import load_settings
from mirrorlag.embedded import EmbeddedBroker, free_port
from mirrorlag.formats import Checkpoint, OffsetSync, encode_checkpoint, encode_offset_sync
from mirrorlag.groups.readiness import GroupState
from mirrorlag.groups.service import GroupsService
from mirrorlag.sidecar.service import Sidecar
from tests.bench.bench_poll import PARTITIONS_PER_TOPIC, SYNC_TOPIC, prepare

GROUP_TOPIC = "grp"


def prepare_groups(source: str, target: str, groups: int, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": source})
    for future in admin.create_topics([NewTopic(GROUP_TOPIC, partitions, 1), NewTopic(SYNC_TOPIC, 1, 1)]).values():
        future.result(timeout=120)
    producer = Producer({"bootstrap.servers": source, "batch.num.messages": 1, "linger.ms": 5})
    for partition in range(partitions):
        producer.produce(GROUP_TOPIC, value=b"x", partition=partition)
        key, value = encode_offset_sync(OffsetSync(GROUP_TOPIC, partition, 0, 0))
        producer.produce(SYNC_TOPIC, key=key, value=value, partition=0)
    assert producer.flush(120) == 0
    started = time.perf_counter()
    offsets = [TopicPartition(GROUP_TOPIC, p, 1) for p in range(partitions)]
    for g in range(groups):
        consumer = Consumer({"bootstrap.servers": source, "group.id": f"g{g:05d}", "enable.auto.commit": False})
        consumer.commit(offsets=offsets, asynchronous=False)
        consumer.close()
    print(f"prepared: {groups} groups committed in {time.perf_counter() - started:.1f} s", flush=True)
    checkpoints = "src.checkpoints.internal"
    target_admin = AdminClient({"bootstrap.servers": target})  # kept: a collected client fails its futures
    for future in target_admin.create_topics([NewTopic(checkpoints, 1, 1)]).values():
        future.result(timeout=120)
    started = time.perf_counter()
    # One record a batch: tansu's end offset is wrong after a multi-record batch (docs/design.md §8).
    producer = Producer({"bootstrap.servers": target, "batch.num.messages": 1, "linger.ms": 5,
                         "queue.buffering.max.messages": 1_000_000})
    now_ms = int(time.time() * 1000)
    for g in range(groups):
        for partition in range(partitions):
            key, value = encode_checkpoint(Checkpoint(f"g{g:05d}", f"src.{GROUP_TOPIC}", partition, 1, 1, ""))
            producer.produce(checkpoints, key=key, value=value, partition=0, timestamp=now_ms)
        producer.poll(0)
    assert producer.flush(600) == 0
    print(f"prepared: {groups * partitions} checkpoints written in {time.perf_counter() - started:.1f} s", flush=True)


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--group-partitions", type=int, default=100)
    parser.add_argument("--poll-partitions", type=int, default=20000, help="the LEO estate beside the groups")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with (EmbeddedBroker("bench-src") as source, EmbeddedBroker("bench-dst") as target,
          tempfile.TemporaryDirectory() as tmp):
        topics = prepare(source.bootstrap_servers, args.poll_partitions, "lag-")
        prepare_groups(source.bootstrap_servers, target.bootstrap_servers, args.groups, args.group_partitions)
        config = Path(tmp) / "mm2.properties"
        config.write_text(
            f"clusters = src, dst\nsrc.bootstrap.servers = {source.bootstrap_servers}\n"
            f"dst.bootstrap.servers = {target.bootstrap_servers}\nsrc->dst.enabled = true\n"
            f"src->dst.topics = lag-.*, {GROUP_TOPIC}\nmirrorlag.http.listener = 127.0.0.1:{free_port()}\n"
            "mirrorlag.request.timeout.ms = 60000\n")
        settings = load_settings([config])
        tracker = ReplicationTracker("src", "dst")
        for topic in [*topics, GROUP_TOPIC]:
            for partition in range(PARTITIONS_PER_TOPIC if topic != GROUP_TOPIC else args.group_partitions):
                tracker.replicated(topic, partition, 0, 1)
        sidecar = Sidecar(settings, trackers=[tracker])
        sidecar.server.start()  # publish renders and compresses /metrics, as in `mirrorlag run`
        total = len(topics) * PARTITIONS_PER_TOPIC + args.group_partitions
        for _ in range(10):
            snapshot = sidecar.poll()
            if len(snapshot) == total and snapshot.columns.column("record_lag")[1].all():
                break
        assert len(snapshot) == total, len(snapshot)
        source_cluster = sidecar.poller.sources["src"]
        partitions = [(t, p) for t in topics for p in range(PARTITIONS_PER_TOPIC)]
        partitions += [(GROUP_TOPIC, p) for p in range(args.group_partitions)]

        # The groups cadence.
        service = GroupsService.build(settings, lambda: sidecar.latest, [])
        cpu, t0 = time.thread_time(), time.perf_counter()
        groups = service.run()
        first = (time.perf_counter() - t0, time.thread_time() - cpu)
        (flow,) = groups.flows
        assert flow.error is None, flow.error
        states = {g.state for g in flow.groups}
        read = sum(len(g.partitions) for g in flow.groups)
        print(f"first groups run: {len(flow.groups)} groups, {read} group partitions, states {sorted(s.value for s in states)}: "
              f"wall {first[0]:.2f} s, cpu {first[1]:.2f} s", flush=True)
        assert len(flow.groups) == args.groups and read == args.groups * args.group_partitions
        assert states == {GroupState.READY}, states
        steady_wall, steady_cpu = [], []
        for _ in range(args.runs):
            cpu, t0 = time.thread_time(), time.perf_counter()
            service.run()
            steady_wall.append(time.perf_counter() - t0)
            steady_cpu.append(time.thread_time() - cpu)
        print(f"steady groups runs: wall median {median_ms(steady_wall):.0f} ms (min {min(steady_wall) * 1000:.0f}, "
              f"max {max(steady_wall) * 1000:.0f}), cpu median {median_ms(steady_cpu):.0f} ms; "
              f"/status groups {len(service.status_json) / 1e6:.1f} MB", flush=True)

        # The LEO poll beside it.
        busy = threading.Event()
        stop = threading.Event()
        idle = threading.Event()  # no groups run under way
        idle.set()

        def groups_loop() -> None:
            while not stop.is_set():
                if busy.is_set():
                    idle.clear()
                    service.run()
                    idle.set()
                else:
                    stop.wait(0.05)

        thread = threading.Thread(target=groups_loop, daemon=True)
        thread.start()
        ratios: dict[str, list[float]] = {"alone": [], "beside groups": []}
        polls: dict[str, list[float]] = {"alone": [], "beside groups": []}
        bares: dict[str, list[float]] = {"alone": [], "beside groups": []}
        for run in range(2 * args.runs):
            mode = "alone" if run % 2 == 0 else "beside groups"
            if mode == "alone":  # the run under way ends first: a run takes seconds at this size
                busy.clear()
                for _ in range(2):  # the loop may have taken the last turn just before the clear
                    idle.wait()
                    time.sleep(0.1)
            else:
                busy.set()
                time.sleep(0.2)  # a groups run under way
            t0 = time.perf_counter()
            source_cluster.end_offsets(partitions)
            bare = time.perf_counter() - t0
            t0 = time.perf_counter()
            snap = sidecar.poller.poll_once()
            sidecar._publish(snap)
            poll = time.perf_counter() - t0
            bares[mode].append(bare)
            polls[mode].append(poll)
            ratios[mode].append(poll / bare)
        busy.clear()
        stop.set()
        thread.join(timeout=120)
        for mode in ratios:
            print(f"LEO poll {mode}: bare median {median_ms(bares[mode]):.0f} ms, poll+publish median "
                  f"{median_ms(polls[mode]):.0f} ms, (poll+publish)/bare median {statistics.median(ratios[mode]):.2f} "
                  f"(runs {', '.join(f'{r:.2f}' for r in ratios[mode])})", flush=True)

        # The series a healthy estate adds.
        registry = CollectorRegistry()
        registry.register(service.collector)
        lines = [line for line in generate_latest(registry).decode().splitlines() if line and not line.startswith("#")]
        print(f"series: {len(lines)} for {args.groups} READY groups ({len(lines) / args.groups:.2f} a group)", flush=True)

        # Memory: the Python heap a groups service holds after a run, per group partition.
        service.close()
        del service
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        held = GroupsService.build(settings, lambda: sidecar.latest, [])
        held.run()
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        group_partitions = args.groups * args.group_partitions
        print(f"memory: {(after - before) / 1e6:.1f} MB retained by the groups service, "
              f"{(after - before) / group_partitions:.0f} B a group partition (Python heap, tracemalloc)", flush=True)
        held.close()
        sidecar.stop()


if __name__ == "__main__":
    main()
