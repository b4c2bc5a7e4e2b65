"""Resident memory per tracked partition, all features on. Run by hand, never in the suite:

    .venv/bin/python -m tests.bench.bench_memory --partitions 10000 100000 --runs 3
    .venv/bin/python -m tests.bench.bench_memory --attribution 100000   # RSS by owner
    .venv/bin/python -m tests.bench.bench_memory --partitions 100000 --feed offset-syncs   # as deployed beside MM2
    .venv/bin/python -m tests.bench.bench_memory --partitions 100000 --feed target-progress   # the same, with target progress
    .venv/bin/python -m tests.bench.bench_memory --partitions 100000 --feed target-progress --stall-after 1   # an outage

Each measurement runs in a fresh child process (so one size's freed arenas never count for the
next) that builds a real Sidecar (the HTTP server bound but not started) for one flow fed by a
ReplicationTracker (or, with `--feed offset-syncs`, by offset-sync records through the real
OffsetSyncsFeed; with `--feed target-progress`, by syncs two polls behind the copy and the real
TargetProgressFeed over a stand-in target's end offsets), with a stand-in source cluster in place
of the admin client: no broker, so the figure is mirrorlag's own memory. It then runs `--polls` polls 15 s apart on a simulated clock
through the real `Poller.poll_once` (feeds, LRO cache, engine, snapshot), with every partition
appending and the mirror a little behind, so the record-lag windows, the rates, the retention
trackers (log starts every 60 s) and the freshness tables (60 points, the default) are all full.
The last poll goes through `Sidecar.poll`, which also renders /metrics and /status, and one
gzip copy is made as the first Prometheus scrape would.

RSS (VmRSS from /proc/self/status) is read:
  - base: after imports and the sidecar are built, before any partition exists;
  - polled: after all polls but the last, none of which rendered anything: the engine and poller
    alone (engine state, LRO cache, tracker, the latest snapshot);
  - state: after the last poll, which also rendered /metrics (as every sidecar poll does), with
    the exposition dropped: what rendering leaves resident (freed memory the allocator could not
    return);
  - served: after /metrics was published again and the first GET /status rendered (what a
    serving sidecar holds; with run's settings the heap is trimmed after the publish, as at the
    end of each poll, and not after the /status render, which waits for the next poll's trim);
The served sidecar renders with `--detail` (default: auto, as deployed). With `--stall-after N`
the mirror copies nothing after poll N, so every freshness table holds its full 60 points (a
healthy estate's keep two or three: a table drops the points older than the oldest uncopied
record). And VmHWM, the peak. Per-partition growth is (X - base) / partitions for each. Medians over --runs children.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from mirrorlag.feeds.offset_syncs import OffsetSyncsFeed, sync_topic_location
from mirrorlag.feeds.target_progress import TargetProgressFeed
from mirrorlag.formats import OffsetSync, encode_offset_sync
from mirrorlag.interfaces import LroFeed

POLL_S = 15.0
TOPIC_PARTITIONS = 100


def _status_kib() -> dict[str, int]:
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            fields[name] = int(value.split()[0])
    return fields


class StandInSource:
    """What the poller asks of a SourceCluster, answered from memory: every partition appends a
    few records per poll, and retention moves each log start a little."""

    def __init__(self, alias: str, flows, topics: list[str]) -> None:
        self.alias = alias
        self.flows = flows
        self.topics = topics
        self.polls = 0
        self.metadata_errors = 0  # as SourceCluster's
        self.recreated: frozenset[str] = frozenset()
        self.unresolved: frozenset[str] = frozenset()
        self.ids_read: frozenset[str] = frozenset()  # topic IDs: none here (no topic is recreated)

    def partitions(self) -> list[tuple[str, int]]:
        """Every partition, as the simulated mirror walks them."""
        return [(t, p) for t in self.topics for p in range(TOPIC_PARTITIONS)]

    def discover(self, ids_of=None):
        # A new topology at every call, as SourceCluster.discover builds it from fresh metadata
        # (the poller must not keep a copy per poll).
        return {flow.id: tuple((t, range(TOPIC_PARTITIONS)) for t in self.topics) for flow in self.flows}

    def request_end_offsets(self, partitions):
        return None  # answered at once by end_offsets

    def end_offsets(self, partitions, pending=None):
        n = self.polls = self.polls + 1
        # Offsets past 2**30 (as on a long-lived topic): ints that are not small cached objects.
        return {tp: (1 << 30) + n * (3 + i % 5) for i, tp in enumerate(partitions)}

    def start_offsets(self, partitions):
        return {tp: (1 << 30) + self.polls * (i % 3) for i, tp in enumerate(partitions)}


class StandInTarget:
    """What TargetProgressFeed asks of RemoteEndOffsets, answered from memory: each remote
    partition's end offset is one past the record the simulated mirror copied last (the source
    offset of partition i at poll n is the target's too: the syncs say U = D)."""

    missing: frozenset[str] = frozenset()
    error: str | None = None

    def __init__(self) -> None:
        self.poll = 1

    def read(self, topics, topic_of, partitions):
        firsts = np.array([int(remote.rsplit("-", 1)[1]) * TOPIC_PARTITIONS for remote in topics])  # "src.bench.topic-00012"
        i = firsts[topic_of] + partitions
        return (1 << 30) + (self.poll - 1) * (3 + i % 5)


@dataclass
class DrainedSyncs(LroFeed):
    """An OffsetSyncsFeed without a consumer: the records queued since the last poll are applied
    when the poller reads the feed, as its drain would (after the poll's metadata), and
    `offsets()` returns what OffsetSyncsFeed.offsets would."""

    syncs: OffsetSyncsFeed
    name: str = "offset-syncs"
    bad_records: int = 0
    reader: None = None
    queued: list = field(default_factory=list)  # (sync topic, key, value) as a consumer hands them over

    def offsets(self):
        apply = self.syncs._apply
        for record in self.queued:
            apply(*record)
        self.queued = []
        return self.syncs.latest()

    def forget(self, keys) -> None:
        self.syncs.forget(keys)

    def use_topic_keys(self, topic_keys) -> None:
        self.syncs.use_topic_keys(topic_keys)


class StandIn:
    """A real Sidecar over a StandInSource, one flow fed by a ReplicationTracker (feed "callback",
    a replicator beside mirrorlag in one process) or by MM2's offset-syncs topic (feed
    "offset-syncs", the sidecar as deployed next to MirrorMaker 2: its records go through the real
    OffsetSyncsFeed's decode and store, as a consumer would hand them over), on a simulated clock:
    `poll(n, publish)` reports the mirror's progress for poll n and runs it."""

    def __init__(self, partitions: int, freshness_points: int | None = None, feed: str = "callback",
                 new_topic_every: int = 0, detail: str = "full", stall_after: int = 0) -> None:
        from mirrorlag import ReplicationTracker
        from mirrorlag.config import load_settings
        from mirrorlag.sidecar.service import Sidecar

        with tempfile.TemporaryDirectory() as tmp:
            config = Path(tmp) / "mm2.properties"
            config.write_text(
                "clusters = src, dst\nsrc.bootstrap.servers = 127.0.0.1:9\ndst.bootstrap.servers = 127.0.0.1:9\n"
                "src->dst.enabled = true\nmirrorlag.http.listener = 127.0.0.1:0\n"
                f"mirrorlag.metrics.detail = {detail}\n"
                + (f"mirrorlag.freshness.table.points = {freshness_points}\n" if freshness_points else "")
            )
            settings = load_settings([config])
        topics = [f"bench.topic-{i:05d}" for i in range(partitions // TOPIC_PARTITIONS)]
        self.tracker: ReplicationTracker | None = None
        self.syncs: OffsetSyncsFeed | None = None
        self.target: StandInTarget | None = None
        if feed == "callback":
            self.tracker = ReplicationTracker("src", "dst")
            self.sidecar = Sidecar(settings, trackers=[self.tracker])
        else:
            (flow,) = settings.flows
            self.sync_topic = sync_topic_location(flow)[1]
            self.syncs = OffsetSyncsFeed("src", None, {self.sync_topic: flow})
            self.drained = DrainedSyncs(self.syncs)
            feeds: list[LroFeed] = [self.drained]
            if feed == "target-progress":
                self.target = StandInTarget()
                feeds.append(TargetProgressFeed("dst", self.target, [flow], {flow.id: self.syncs}))  # type: ignore[arg-type]
            self.sidecar = Sidecar(settings, feeds=feeds)
        self.poller = self.sidecar.poller
        self.source = StandInSource("src", self.poller.sources["src"].flows, topics)
        self.poller.sources = {"src": self.source}
        self.now = 1_700_000_000.0
        self.poller.clock = lambda: self.now
        self.new_topic_every = new_topic_every  # polls between topics created on the source (0: never)
        self.stall_after = stall_after  # the mirror copies nothing after this poll (0: never stalls)

    def poll(self, n: int, publish: bool):
        """Poll n (from 1): the mirror has copied all but the last poll's appends (a lag of a few
        records), so freshness interpolates inside the table and the rates are non-zero."""
        if self.new_topic_every and n % self.new_topic_every == 0:
            self.source.topics.append(f"bench.new-{n:05d}")  # the topology changes: every view is rebuilt
        copy = min(n, self.stall_after) if self.stall_after else n  # the poll whose progress the mirror reports
        if self.tracker is not None:
            replicated = self.tracker.replicated
            for i, (topic, partition) in enumerate(self.source.partitions()):
                replicated(topic, partition, (1 << 30) + (copy - 1) * (3 + i % 5) - 1, 200 + i % 50)
        else:  # with target progress, the syncs trail the copy by two polls (target progress proves the rest)
            queue, sync_topic = self.drained.queued.append, self.sync_topic
            copied = copy - 1 if self.target is None else max(copy - 3, 0)
            for i, (topic, partition) in enumerate(self.source.partitions()):
                offset = (1 << 30) + copied * (3 + i % 5) - 1
                queue((sync_topic, *encode_offset_sync(OffsetSync(topic, partition, offset, offset))))
        if self.target is not None:
            self.target.poll = copy
        self.now += POLL_S
        return self.sidecar.poll() if publish else self.poller.poll_once()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sidecar.server.httpd.server_close()


def _get_plain(server, path: str) -> int:
    """GET `path` from the sidecar's server without gzip, the body read and dropped a piece at a
    time; its length."""
    import http.client

    server.start()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=600)
        conn.request("GET", path)
        response = conn.getresponse()
        size = 0
        while piece := response.read(1 << 20):
            size += len(piece)
        conn.close()
        time.sleep(0.5)  # the server hands the heap back after the last byte left
        return size
    finally:
        server.stop()


def child(partitions: int, polls: int, freshness_points: int | None, arrow_pool: str, feed: str,
          new_topic_every: int = 0, detail: str = "auto", stall_after: int = 0) -> dict[str, float]:
    pacing = None
    if arrow_pool == "run":
        from mirrorlag.cli import run_pacing, tune_process

        tune_process()
        pacing = run_pacing()
    bench = StandIn(partitions, freshness_points, feed, new_topic_every, detail, stall_after)
    sidecar, poller = bench.sidecar, bench.poller
    sidecar.gc_pacing = pacing  # the published poll below paces as `mirrorlag run` does
    gc.collect()
    base = _status_kib()
    for n in range(1, polls):
        with pacing.around_poll() if pacing is not None else contextlib.nullcontext():
            bench.poll(n, publish=False)
    gc.collect()
    polled = _status_kib()  # engine + poller (+ the last snapshot), nothing rendered yet
    polled_partitions = len(bench.source.partitions())  # with the topics created so far
    snapshot = bench.poll(polls, publish=True)
    partitions = len(bench.source.partitions())  # with the topics created meanwhile
    assert len(snapshot) == partitions
    row = snapshot.columns[-1:].rows()[0]
    assert row.freshness_lag_s is not None and row.record_lag_avg is not None and row.log_start is not None
    table_points = int(poller.engine._c.f_count[-1])
    exposition = sidecar.server.current
    # /metrics is held as gzip only (GzipBody); `size` is the text's length.
    metrics_bytes = exposition.metrics.size
    # What lives between polls without the exposition: drop it, measure, then build it again.
    sidecar.server.current = None
    del exposition
    gc.collect()
    if pacing is not None and pacing.release_memory is not None:
        pacing.release_memory()  # as the end of the poll that published would
    state = _status_kib()
    with pacing.around_poll() if pacing is not None else contextlib.nullcontext():
        sidecar._publish(snapshot)  # a publish is part of its poll
    gzip_bytes = len(sidecar.server.current.metrics.gzipped)
    # The first GET /status, from a client without gzip (curl): rendered, then sent plain a piece
    # at a time by the real server (before issue 31 this bench joined the whole text, tens of MB
    # at 100k that the heap kept resident until the next poll's trim).
    status_bytes = _get_plain(sidecar.server, "/status")
    gc.collect()
    served = _status_kib()
    bench.close()
    kib = 1024
    return {
        "partitions": partitions,
        "polls": polls,
        "table_points": table_points,
        "base_mib": base["VmRSS"] / kib,
        "polled_mib": polled["VmRSS"] / kib,
        "state_mib": state["VmRSS"] / kib,
        "served_mib": served["VmRSS"] / kib,
        "peak_mib": served["VmHWM"] / kib,
        "polled_bytes_per_partition": (polled["VmRSS"] - base["VmRSS"]) * kib / polled_partitions,
        "state_bytes_per_partition": (state["VmRSS"] - base["VmRSS"]) * kib / partitions,
        "served_bytes_per_partition": (served["VmRSS"] - base["VmRSS"]) * kib / partitions,
        "metrics_mib": metrics_bytes / kib / kib,
        "metrics_gzip_mib": gzip_bytes / kib / kib,
        "status_mib": status_bytes / kib / kib,
    }


def breakdown(partitions: int, polls: int, freshness_points: int | None) -> None:
    """Live bytes per partition: the engine's state by part (getsizeof, each object counted once),
    then tracemalloc's view of everything the polls left alive, by allocating line."""
    import tracemalloc

    bench = StandIn(partitions, freshness_points)
    gc.collect()
    tracemalloc.start()
    for n in range(1, polls + 1):
        snapshot = bench.poll(n, publish=False)
    gc.collect()
    traced = tracemalloc.take_snapshot()
    tracemalloc.stop()
    columns = bench.poller.engine._c
    print(f"partitions={partitions} polls={polls} table_points={int(columns.f_count[-1])}")
    print("engine columns, bytes per partition (array sizes; the table and window arrays at their widths):")
    by_name = {name: a.nbytes + (sum(map(sys.getsizeof, a)) if a.dtype == object else 0)
               for name, a in columns.a.items()}
    for name, size in sorted(by_name.items(), key=lambda item: -item[1]):
        print(f"  {size / partitions:8.1f}  {name}")
    print(f"  {sum(by_name.values()) / partitions:8.1f}  total (object columns count their objects, which the LRO cache shares)")
    cols = snapshot.columns
    arrays = [cols.state, cols.feed_code, cols.freshness_lower_bound, *cols.ints.values(), *cols.valid.values(),
              *cols.floats.values()]
    print(f"  {sum(a.nbytes for a in arrays) / partitions:8.1f}  snapshot columns (the keys list and feed names aside)")
    print("tracemalloc, everything the polls left alive, bytes per partition, by line:")
    stats = traced.statistics("lineno")
    total = sum(stat.size for stat in stats)
    for stat in stats[:20]:
        frame = stat.traceback[0]
        print(f"  {stat.size / partitions:8.1f}  {frame.filename.split('/work/main/')[-1]}:{frame.lineno}")
    print(f"  {total / partitions:8.1f}  total")
    bench.close()


def floor_layout(partitions: int, freshness_points: int | None) -> dict[str, float]:
    """RSS growth per partition of the leanest layout the same state could have: every number
    the engine, the LRO cache and the snapshot keep per partition in flat typed columns (no
    Python object per partition), the freshness table packed at exactly its points (4-byte
    offsets, no slack), a partition named by a topic index and its number (slots contiguous per
    topic, so no key object and no per-partition dictionary). What a columnar redesign could
    reach, not what any code here does. Field counts come from the code, so they stay true:
    the engine's per-partition slots, the window's samples, the snapshot row's fields."""
    from array import array

    from mirrorlag.config.settings import EngineParams
    from mirrorlag.engine.columns import FLOATS, INTS
    from mirrorlag.model import PartitionRow, State

    points = freshness_points or EngineParams.__dataclass_fields__["freshness_points"].default
    num_samples = EngineParams.__dataclass_fields__["num_samples"].default
    # The engine's per-partition numbers, the table's count and the window's current sample (the
    # table, the LRO columns and the samples are counted below; flows and shapes are per flow).
    engine_numbers = [*INTS, *FLOATS, "f_count", "w_cur"]
    one_byte = {"state", "lro_feed", "freshness_lower_bound"}  # codes and flags
    row_fields = [name for name in PartitionRow._fields if name != "key"]
    layout = {  # column name -> bytes per partition
        "engine numbers (%d slots x 8 B)" % len(engine_numbers): 8 * len(engine_numbers),
        "record-lag window (%d samples x 5 x 8 B)" % num_samples: 8 * 5 * num_samples,
        "freshness table (%d points x 2 x 4 B)" % points: 8 * points,
        "LRO (offset, time 8 B; feed, stale 1 B)": 18,
        "feed's offset (8 B)": 8,
        "snapshot (%d fields, 8 B or 1 B codes)" % len(row_fields):
            sum(1 if name in one_byte else 8 for name in row_fields),
        "key (topic index, partition: 2 x 4 B)": 8,
    }
    assert len(State) < 256
    gc.collect()
    base = _status_kib()["VmRSS"]
    columns = [array("B", bytes(size * partitions)) for size in layout.values()]  # zeroed: pages touched
    grown = (_status_kib()["VmRSS"] - base) * 1024 / partitions
    assert sum(map(len, columns)) == partitions * sum(layout.values())
    return {"partitions": partitions, "points": points, "layout": layout,
            "bytes_per_partition": sum(layout.values()), "rss_bytes_per_partition": grown}


def attribution(partitions: int, polls: int, freshness_points: int | None, feed: str, stall_after: int = 0) -> None:
    """RSS per partition by owner: after the polls (with `run`'s settings), each part is dropped
    in turn, the heap trimmed, and what the RSS fell by is that part's share. Unlike --breakdown
    (live objects), this is what the process really holds, fragmentation and allocator slack
    included."""
    from mirrorlag.cli import run_pacing, tune_process

    tune_process()
    pacing = run_pacing()
    bench = StandIn(partitions, freshness_points, feed, stall_after=stall_after)
    gc.collect()
    base = _status_kib()["VmRSS"]
    snapshot = None
    for n in range(1, polls + 1):
        with pacing.around_poll():
            snapshot = bench.poll(n, publish=False)

    def rss() -> float:
        gc.collect()
        if pacing.release_memory is not None:
            pacing.release_memory()
        return (_status_kib()["VmRSS"] - base) * 1024 / partitions

    engine = bench.poller.engine
    arrays = sum(a.nbytes for a in engine._c.a.values()) / partitions
    print(f"partitions={partitions} polls={polls}; RSS bytes per partition, each part dropped in turn:")
    total = rss()

    def dropped(name: str, drop: Callable[[], None]) -> None:
        nonlocal total
        drop()
        now = rss()
        print(f"  {total - now:8.0f}  {name}")
        total = now

    def drop_snapshot() -> None:
        nonlocal snapshot
        snapshot = None

    def drop_engine() -> None:
        nonlocal engine
        bench.poller.engine = engine = None  # type: ignore[assignment]

    dropped("the last snapshot (its columns)", drop_snapshot)
    dropped(f"the engine (its arrays: {arrays:.0f})", drop_engine)
    dropped("the LRO cache", lambda: setattr(bench.poller, "cache", None))

    def drop_probes() -> None:
        for probe in bench.poller._probes.values():
            probe.close()
        bench.poller._probes.clear()

    dropped("the source probe (partitions waiting, answers remembered, its consumer)", drop_probes)
    if bench.tracker is not None:
        dropped("the tracker's store (an entry in its topic's dict and an offset each)", bench.tracker._topics.clear)
    else:
        syncs = bench.syncs
        assert syncs is not None
        dropped("the offset-syncs feed's store (an offset a partition in its topic's array)", syncs._topics.clear)
        dropped("the offset-syncs feed's key parts (one a topic)", syncs._prefixes.clear)
    dropped("the poller's keys by topic and partition (for the feeds)", bench.poller._keys_by_topic.clear)
    dropped("the poller's source view (a PartitionKey a partition, in a tuple)", bench.poller._views.clear)
    dropped("the discovered topology (per flow: each topic and its partition numbers)", bench.poller._topology.clear)
    print(f"  {total:8.0f}  the rest (pymalloc pools still holding a survivor, and what was left alive)")
    bench.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--polls", type=int, default=72, help="enough to fill 60-point freshness tables")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--freshness-points", type=int, help="mirrorlag.freshness.table.points (default: 60)")
    parser.add_argument("--breakdown", type=int, metavar="PARTITIONS",
                        help="instead: live bytes per partition by part (getsizeof and tracemalloc)")
    parser.add_argument("--arrow-pool", choices=["run", "default"], default="run",
                        help="run: mirrorlag run's process settings (Arrow on the system allocator, the collector paused "
                             "during polls and the heap trimmed after each); default: none of them")
    parser.add_argument("--floor", action="store_true",
                        help="instead: RSS per partition of the leanest flat layout of the same state (see floor_layout)")
    parser.add_argument("--attribution", type=int, metavar="PARTITIONS",
                        help="instead: RSS per partition by owner (snapshot, engine, LRO cache, the rest)")
    parser.add_argument("--feed", choices=["callback", "offset-syncs", "target-progress"], default="callback",
                        help="the LRO feed: an in-process ReplicationTracker, or MM2's offset syncs (the sidecar as "
                             "deployed), or those and target progress")
    parser.add_argument("--new-topic-every", type=int, default=0, metavar="POLLS",
                        help="a topic of 100 partitions is created on the source every POLLS polls (0: a static estate)")
    parser.add_argument("--detail", choices=["auto", "full", "lag"], default="auto",
                        help="mirrorlag.metrics.detail of the served sidecar (auto: the default)")
    parser.add_argument("--stall-after", type=int, default=0, metavar="POLLS",
                        help="the mirror copies nothing after this poll: an outage (0: it never stalls)")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.attribution:
        attribution(args.attribution, args.polls, args.freshness_points, args.feed, args.stall_after)
        return
    if args.floor and args.child:
        print(json.dumps(floor_layout(args.child, args.freshness_points)))
        return
    if args.breakdown:
        breakdown(args.breakdown, args.polls, args.freshness_points)
        return
    if args.child:
        print(json.dumps(child(args.child, args.polls, args.freshness_points, args.arrow_pool, args.feed,
                               args.new_topic_every, args.detail, args.stall_after)))
        return
    for total in args.partitions:
        results = []
        for _ in range(args.runs):
            out = subprocess.run(
                [sys.executable, "-m", "tests.bench.bench_memory", "--child", str(total), "--polls", str(args.polls),
                 "--arrow-pool", args.arrow_pool, "--feed", args.feed, "--new-topic-every", str(args.new_topic_every),
                 "--detail", args.detail, "--stall-after", str(args.stall_after)]
                + (["--freshness-points", str(args.freshness_points)] if args.freshness_points else [])
                + (["--floor"] if args.floor else []),
                check=True, capture_output=True, text=True,
            ).stdout
            results.append(json.loads(out.strip().splitlines()[-1]))
        if args.floor:
            for name, size in results[0]["layout"].items():
                print(f"  {size:5d}  {name}")
            results = [{k: v for k, v in r.items() if k != "layout"} for r in results]
        medians = {k: statistics.median(r[k] for r in results) for k in results[0]}
        print(" ".join(f"{k}={v:.1f}" if isinstance(v, float) and not v.is_integer() else f"{k}={int(v)}"
                       for k, v in medians.items()), flush=True)


if __name__ == "__main__":
    main()
