"""Differential tests: mirrorlag's replicas of MM2's rules against MM2's own classes, from the same
jars, at each pinned version.

The same seeded random scripts go to the Python replica and to tests/apache/java/MirrorRules.java,
which drives MM2's classes directly (their package-private test hooks; no Kafka): every answer,
one per operation, must be equal.

- writer: OffsetSyncWriter (PartitionState.update, the delayed and pending syncs, at most 10 in
  flight) against mirrorlag.mirror.sync_state;
- store: OffsetSyncStore (the 64 slots after every sync, translateDownstream), started both ways
  MirrorCheckpointTask starts it (initializationMustReadToEnd true and false), against
  mirrorlag.groups.sync_store;
- checkpoint: MirrorCheckpointTask (the topic filter and renaming, checkpointsForGroup with its
  CheckpointStore, syncGroupOffset) against mirrorlag.mirror.checkpointer;
- records: OffsetSync's and Checkpoint's record bytes against mirrorlag.formats.

One JVM per version per rule runs every case of the rule.
"""

from __future__ import annotations

import random
import re
import shutil
from pathlib import Path
from typing import Callable

import pytest

from mirrorlag.apache_kafka.jars import KafkaJars
from mirrorlag.config import load_settings
from mirrorlag.formats import Checkpoint, OffsetSync, encode_checkpoint, encode_offset_sync
from mirrorlag.groups.checkpoints import Checkpointed
from mirrorlag.groups.sync_store import SyncStore, translate
from mirrorlag.mirror.checkpointer import checkpoint_topic, converted_offsets, new_checkpoints, offsets_to_sync
from mirrorlag.mirror.sync_state import OffsetSyncWriter
from tests.apache.javac import compile_java, run_java

SEEDS = range(6)
MAIN = "org.apache.kafka.connect.mirror.MirrorRules"

Run = Callable[[str, list[str]], list[str]]


@pytest.fixture(scope="module")
def mm2(kafka_jars: KafkaJars, tmp_path_factory) -> Run:
    """Runs one script through MirrorRules on this version's jars: its answer lines."""
    if shutil.which("javac") is None:
        pytest.skip("javac not on PATH (MM2's classes are driven by a compiled driver: a JDK 17+ is needed)")
    classes = compile_java(kafka_jars, tmp_path_factory.mktemp(f"rules-{kafka_jars.version}"), "MirrorRules.java")

    def run(mode: str, script: list[str]) -> list[str]:
        return run_java(kafka_jars, classes, MAIN, mode, stdin="\n".join(script) + "\n").splitlines()
    return run


def assert_same(mode: str, script: list[str], java: list[str], python: list[str]) -> None:
    """Equal answers; else the first operation they differ at, with the script before it."""
    assert len(java) == len(python), f"{mode}: {len(java)} answers from MM2, {len(python)} from mirrorlag"
    for i, (j, p) in enumerate(zip(java, python)):
        if j != p:
            start = max(0, i - 12)
            context = "\n".join(f"  {n}: {line}" for n, line in enumerate(script[start:i + 1], start))
            pytest.fail(f"{mode}: operation {i} differs\n{context}\n  MM2:       {j}\n  mirrorlag: {p}")


# ---- OffsetSyncWriter ----------------------------------------------------------------------------

def writer_script(seed: int, ops: int = 400) -> list[str]:
    """Records copied on 3 partitions (mostly consecutive; source gaps, target gaps, upstream
    rewinds, target truncations), with offset commits and sends completing in between."""
    rnd = random.Random(seed)
    script = [f"case {rnd.choice([0, 1, 3, 10, 100])}"]
    parts = [("orders", 0), ("orders", 1), ("pay", 0)]
    pos = {tp: [rnd.randrange(0, 50), rnd.randrange(0, 50)] for tp in parts}
    for _ in range(ops):
        r = rnd.random()
        if r < 0.65:
            tp = rnd.choice(parts)
            up, down = pos[tp]
            k = rnd.random()
            up += 1 if k < 0.8 else rnd.randrange(2, 6) if k < 0.93 else -rnd.randrange(0, up + 1)
            k = rnd.random()
            down += 1 if k < 0.85 else rnd.randrange(2, 4) if k < 0.96 else -rnd.randrange(0, down + 1)
            pos[tp] = [up, down]
            script.append(f"q {tp[0]} {tp[1]} {up} {down}")
            if rnd.random() < 0.9:  # MirrorSourceTask.commitRecord fires at once
                script.append("f")
        elif r < 0.75:
            script += ["p", "f"]  # MirrorSourceTask.commit
        elif r < 0.97:  # sends complete (nothing happens where none is in flight)
            script += ["x" if rnd.random() < 0.05 else "a" for _ in range(rnd.choice([1, 1, 2, 6]))]
        else:
            script.append("f")
    return script


def writer_python(script: list[str]) -> list[str]:
    out: list[str] = []
    sent: list[OffsetSync] = []
    writer: OffsetSyncWriter | None = None

    def fmt(syncs) -> str:
        return "[" + ",".join(f"{s.topic}:{s.partition}:{s.upstream_offset}:{s.downstream_offset}" for s in syncs) + "]"

    for line in script:
        op, *a = line.split()
        if op == "case":
            writer = OffsetSyncWriter(int(a[0]), sent.append)
            out.append("case")
            continue
        assert writer is not None
        state = "-"
        if op == "q":
            tp = (a[0], int(a[1]))
            writer.maybe_queue(tp[0], tp[1], int(a[2]), int(a[3]))
            s = writer.partition_states[tp]
            state = (f"{s.previous_upstream_offset},{s.previous_downstream_offset},"
                     f"{s.last_sync_downstream_offset},{int(s.should_sync_offsets)}")
        elif op == "f":
            writer.fire_pending()
        elif op == "p":
            writer.promote_delayed()
        elif op in ("a", "x"):
            writer.completed()
        out.append(f"sent={fmt(sent)} pending={fmt(writer.pending.values())} delayed={fmt(writer.delayed.values())}"
                   f" out={writer.outstanding} st={state}")
        sent.clear()
    return out


def test_offset_sync_writer(mm2):
    script = [line for seed in SEEDS for line in writer_script(seed)]
    assert_same("writer", script, mm2("writer", script), writer_python(script))


# ---- OffsetSyncStore -----------------------------------------------------------------------------

def _step(rnd: random.Random, scale: int) -> int:
    """An offset step: mostly small, sometimes far (the slots are exponentially spaced)."""
    k = rnd.random()
    if k < 0.45:
        return rnd.randrange(1, 4)
    if k < 0.7:
        return rnd.randrange(4, 200)
    if k < 0.8:
        return rnd.randrange(200, 100_000)
    if k < 0.98:
        return 2 ** rnd.randrange(0, 36) + rnd.randrange(0, 3)
    return rnd.randrange(1, scale)


def store_script(seed: int, must_read_to_end: bool, syncs: int = 500) -> list[str]:
    """Syncs on two partitions (upstream and downstream mostly growing, sometimes rewinding), the
    initial read's end somewhere in them (or nowhere), translations of offsets around the syncs."""
    rnd = random.Random(seed * 2 + must_read_to_end)
    script = [f"case {int(must_read_to_end)}"]
    parts = [("orders", 0), ("orders", 3)]
    pos = {tp: [rnd.randrange(0, 1000), rnd.randrange(0, 1000)] for tp in parts}
    seen: dict[tuple[str, int], list[int]] = {tp: [] for tp in parts}
    end_at = rnd.choice([0, rnd.randrange(syncs), syncs + 1])  # at once, somewhere, never
    scale = rnd.choice([10**6, 10**12, 2**61])
    for i in range(syncs):
        if i == end_at:
            script.append("end")
        tp = rnd.choice(parts)
        up, down = pos[tp]
        if rnd.random() < 0.005:
            up = rnd.randrange(0, up + 1)  # an upstream rewind: every older sync goes
        else:
            up += _step(rnd, scale)
        down = rnd.randrange(0, down + 1) if rnd.random() < 0.01 else down + _step(rnd, scale)
        if up >= 2**62 or down >= 2**62:  # past MM2's long arithmetic's safe range: start over low
            up, down = rnd.randrange(0, 1000), rnd.randrange(0, 1000)
        pos[tp] = [up, down]
        seen[tp].append(up)
        script.append(f"s {tp[0]} {tp[1]} {up} {down}")
        for _ in range(rnd.choice([0, 0, 1, 3])):
            qtp = rnd.choice(parts + [("other", 0)])
            known = seen.get(qtp) or [0]
            base = rnd.choice(known)
            offset = max(0, base + rnd.choice([-2, -1, 0, 0, 1, 2, rnd.randrange(-base - 1, 1000)]))
            script.append(f"t {qtp[0]} {qtp[1]} {offset}")
    return script


def _runs(slots) -> str:
    parts, previous, run = [], None, 0
    for s in slots:
        if previous is not None and s is not previous:
            parts.append(f"{previous.upstream}:{previous.downstream}*{run}")
            run = 0
        previous, run = s, run + 1
    parts.append(f"{previous.upstream}:{previous.downstream}*{run}")
    return ",".join(parts)


def _translation(store: SyncStore, topic: str, partition: int, offset: int) -> str:
    """translateDownstream's answer from the replica: empty before the initial read's end and
    without syncs, -1 where every kept sync is above the offset."""
    if not store.ready:
        return "empty"
    slots = store.slots(topic, partition)
    if slots is None:
        return "empty"
    downstream = translate(slots, offset).downstream
    return "-1" if downstream is None else str(downstream)


def store_python(script: list[str]) -> list[str]:
    out: list[str] = []
    store: SyncStore | None = None
    for line in script:
        op, *a = line.split()
        if op == "case":
            store = SyncStore(must_read_to_end=a[0] == "1")
            out.append("case")
            continue
        assert store is not None
        if op == "s":
            store.apply(a[0], int(a[1]), int(a[2]), int(a[3]))
            out.append(_runs(store.slots(a[0], int(a[1]))))
        elif op == "end":
            store.read_to_end()
            out.append("end")
        elif op == "t":
            out.append(_translation(store, a[0], int(a[1]), int(a[2])))
    return out


def test_offset_sync_store(mm2):
    script = [line for seed in SEEDS for must in (True, False) for line in store_script(seed, must)]
    assert_same("store", script, mm2("store", script), store_python(script))


# ---- MirrorCheckpointTask ------------------------------------------------------------------------

# DefaultTopicFilter's default topics.exclude in Kafka 4.1.0 and later (their jars; topics named
# *.internal or *-internal are mirrored); in 3.9.x and in mirrorlag `.*[\-\.]internal, .*\.replica, __.*`.
TOPICS_EXCLUDE_DEFAULT_4_1 = r"mm2.*\.internal, .*\.replica, __.*"

FILTERS = [  # (topics, topics.exclude); None: the key is not set
    (None, None),
    (".*", None),
    ("orders.*|.*heartbeats", None),
    (None, ""),
    (".*", ".*\\.replica, .*orders"),
    ("pay.*, .*orders", "__.*"),
]


def checkpoint_script(seed: int, ops: int = 400) -> tuple[list[str], dict[str, str]]:
    """A flow's syncs, groups committing on its topics (local, remote, heartbeats, internal,
    the target's own topics mirrored back), prior checkpoints read at start, idle groups on the
    target and group offset syncs. Returns the script and the case's mm2.properties keys."""
    rnd = random.Random(seed)
    source, target = rnd.choice([("S", "T"), ("us-west", "eu"), ("a1", "b2")])
    identity = rnd.random() < 0.3
    sep = rnd.choice([".", ".", "_"])
    loaded = rnd.random() < 0.5  # CheckpointStore read its topic: start(false), prior checkpoints
    include, exclude = rnd.choice(FILTERS)
    topics = ["orders", f"pay{sep}ments", f"{source}{sep}orders", f"{target}{sep}orders", "heartbeats",
              f"{target}{sep}heartbeats", f"{source}{sep}heartbeats", "x.internal", "__x", "y-internal",
              "a.replica", f"mm2-offset-syncs.{target}.internal", f"{target}{sep}pay{sep}ments", "ordersreplica"]
    props = {"replication.policy.separator": sep}
    if identity:
        props["replication.policy.class"] = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"
    script = [f"case {source} {target} {'identity' if identity else 'default'} {sep} {int(not loaded)}"]
    script.append(f"include {include if include is not None else '.*'}")
    if include is not None:
        props["topics"] = include
    if exclude is not None:
        script.append(f"exclude {exclude}")
        props["topics.exclude"] = exclude
    parts = [(t, p) for t in topics for p in (0, 1)]
    pos = {tp: [rnd.randrange(0, 100), rnd.randrange(0, 100)] for tp in parts}
    groups = ["g1", "g2", "g3"]
    committed = {g: {} for g in groups}
    if loaded:
        for _ in range(rnd.randrange(0, 8)):
            t, p = rnd.choice(parts)
            script.append(f"prior {rnd.choice(groups)} {checkpoint_name_guess(t, source, sep, identity)} {p} "
                          f"{rnd.randrange(0, 400)} {rnd.randrange(0, 400)}")
    end_at = rnd.choice([0, rnd.randrange(ops // 4), ops + 1])
    for i in range(ops):
        if i == end_at:
            script.append("end")
        r = rnd.random()
        if r < 0.5:
            tp = rnd.choice(parts)
            up, down = pos[tp]
            up = rnd.randrange(0, up + 1) if rnd.random() < 0.02 else up + rnd.choice([1, 1, 2, 5, 40])
            down += rnd.choice([1, 1, 2, 5, 40])
            pos[tp] = [up, down]
            script.append(f"s {tp[0]} {tp[1]} {up} {down}")
        elif r < 0.85:
            g = rnd.choice(groups)
            mine = committed[g]
            for _ in range(rnd.randrange(1, 4)):
                tp = rnd.choice(parts)
                head = pos[tp][0]
                mine[tp] = rnd.randrange(0, head + 10) if rnd.random() < 0.3 else max(0, head - rnd.randrange(0, 30))
            script.append(f"g {g} " + " ".join(f"{t} {p} {o}" for (t, p), o in sorted(mine.items())))
        elif r < 0.93:
            g = rnd.choice(groups)
            on_target = {}
            for _ in range(rnd.randrange(0, 4)):
                t, p = rnd.choice(parts)
                name = checkpoint_name_guess(t, source, sep, identity)
                down = pos[(t, p)][1]  # near the checkpoints' downstream offsets: at, before, after
                on_target[(name, p)] = rnd.choice([rnd.randrange(0, 400), down - 1, down, down + 1, down + 2])
            script.append(f"idle {g} " + " ".join(f"{t} {p} {o}" for (t, p), o in sorted(on_target.items())))
        else:
            script.append("sync")
    return script, props


def checkpoint_name_guess(topic: str, source: str, sep: str, identity: bool) -> str:
    """A plausible remote name for a target group's offsets (exactness is not needed: a name
    that matches no checkpoint only adds a partition the sync ignores)."""
    return topic if identity else f"{source}{sep}{topic}"


def _flow(tmp_path: Path, source: str, target: str, props: dict[str, str]):
    path = tmp_path / f"mm2-{source}-{target}-{len(list(tmp_path.iterdir()))}.properties"
    lines = [f"clusters = {source}, {target}", f"{source}.bootstrap.servers = s:9092",
             f"{target}.bootstrap.servers = t:9092", f"{source}->{target}.enabled = true",
             *(f"{k} = {v}".replace("\\", "\\\\") for k, v in props.items())]  # a properties file unescapes
    path.write_text("\n".join(lines) + "\n")
    (flow,) = load_settings([path]).flows
    return flow


def _checkpoint_text(c: Checkpoint) -> str:
    key, value = encode_checkpoint(c)
    return f"{c.topic}:{c.partition}:{c.upstream_offset}:{c.downstream_offset}:{key.hex()}:{value.hex()}"


def _offsets(a: list[str]) -> dict[tuple[str, int], int]:
    return {(a[i], int(a[i + 1])): int(a[i + 2]) for i in range(0, len(a) - 2, 3)}


def checkpoint_python(script: list[str], flows: list) -> list[str]:
    out: list[str] = []
    cases = iter(flows)
    for line in script:
        op, *a = line.split()
        if op == "case":
            flow = next(cases)
            store = SyncStore(must_read_to_end=a[4] == "1")
            last: dict[tuple[str, str, int], Checkpointed] = {}
            idle: dict[str, dict[tuple[str, int], int]] = {}
            out.append("case")
        elif op in ("include", "exclude", "idle", "prior", "s", "end"):
            if op == "prior":
                last[(a[0], a[1], int(a[2]))] = Checkpointed(int(a[3]), int(a[4]), 0)
            elif op == "s":
                store.apply(a[0], int(a[1]), int(a[2]), int(a[3]))
            elif op == "end":
                store.read_to_end()
            elif op == "idle":
                idle[a[0]] = _offsets(a[1:])
            out.append("-")
        elif op == "g":
            group = a[0]
            made = new_checkpoints(group, _offsets(a[1:]), store, last, lambda t, f=flow: checkpoint_topic(f, t))
            for c in made:
                last[(group, c.topic, c.partition)] = Checkpointed(c.upstream_offset, c.downstream_offset, 0)
            out.append("[" + ",".join(sorted(_checkpoint_text(c) for c in made)) + "]")
        elif op == "sync":
            by_group = converted_offsets(last)
            written = []
            for group in sorted(by_group):
                wanted = offsets_to_sync(by_group[group], idle.get(group))
                if wanted:
                    written.append(group + "{" + ",".join(sorted(f"{t}:{p}:{o}" for (t, p), o in wanted.items())) + "}")
            idle.clear()
            out.append("[" + ",".join(written) + "]")
    return out


def _without_empty_syncs(lines: list[str], script: list[str]) -> list[str]:
    """MM2's syncGroupOffset also "syncs" a group none of whose partitions has a checkpoint, with
    no offsets (alterConsumerGroupOffsets of nothing: no change); mirrorlag makes no such call."""
    out = []
    for line, op in zip(lines, script):
        if op == "sync":
            line = "[" + ",".join(m.group(0) for m in re.finditer(r"[^,\[\]{}]+\{[^}]*\}", line)
                                  if not m.group(0).endswith("{}")) + "]"
        out.append(line)
    return out


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def test_checkpoint_task(mm2, kafka_jars, tmp_path):
    script: list[str] = []
    flows = []
    for seed in SEEDS:
        lines, props = checkpoint_script(seed)
        _, source, target, *_ = lines[0].split()
        if _version(kafka_jars.version) >= (4, 1) and "topics.exclude" not in props:
            # The version difference mirrorlag.mirror.checkpointer documents: its default is 3.x's.
            props["topics.exclude"] = TOPICS_EXCLUDE_DEFAULT_4_1
        flows.append(_flow(tmp_path, source, target, props))
        script += lines
    java = _without_empty_syncs(mm2("checkpoint", script), script)
    assert_same("checkpoint", script, java, checkpoint_python(script, flows))


# ---- record formats ------------------------------------------------------------------------------

def test_record_bytes(mm2):
    rnd = random.Random(7)
    strings = ["", "orders", "pay.ments", "ünïcødé-topic", "a" * 300, "g😀", "x y"]
    script, expected = [], []

    def h(s: str) -> str:
        return s.encode().hex() or "-"

    for _ in range(200):
        topic, partition = rnd.choice(strings[1:]), rnd.randrange(0, 2**31)
        up, down = rnd.randrange(0, 2**63), rnd.randrange(0, 2**63)
        if rnd.random() < 0.5:
            script.append(f"sync {h(topic)} {partition} {up} {down}")
            key, value = encode_offset_sync(OffsetSync(topic, partition, up, down))
        else:
            group, metadata = rnd.choice(strings), rnd.choice(strings)
            script.append(f"checkpoint {h(group)} {h(topic)} {partition} {up} {down} {h(metadata)}")
            key, value = encode_checkpoint(Checkpoint(group, topic, partition, up, down, metadata))
        expected.append(f"{key.hex()} {value.hex()}")
    assert_same("records", script, mm2("records", script), expected)
