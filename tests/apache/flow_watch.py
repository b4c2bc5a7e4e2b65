"""Helpers for scenarios with several flows, several MM2 processes or transactional data: a poll
watch keyed by flow as well as partition (one topic can be mirrored by two flows), a producer of
numbered records in committed and aborted transactions, and an MM2 of a test's own clusters."""

from __future__ import annotations

import itertools
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Mapping

from confluent_kafka import Producer

from mirrorlag.apache_kafka.jars import KafkaJars
from mirrorlag.apache_kafka.mm2_config import mm2_properties
from mirrorlag.apache_kafka.processes import MirrorMaker2
from tests.apache.truth import read_partition
from tests.helpers import mirrorlag, status

Key = tuple[str, int]  # (flow "A->B", partition)


@dataclass
class FlowPoll:
    taken_at: float
    rows: dict[Key, dict]  # of the watched topic
    feeds: list[dict]


@dataclass
class FlowWatch:
    """Every poll the sidecar publishes of `topic`, each once, rows keyed by (flow, partition)."""

    port: int
    topic: str
    polls: list[FlowPoll] = field(default_factory=list)

    def next(self, timeout: float = 15.0) -> FlowPoll:
        deadline = time.monotonic() + timeout
        last = self.polls[-1].taken_at if self.polls else 0.0
        while time.monotonic() < deadline:
            doc = status(self.port)
            taken_at = doc.get("taken_at")
            if taken_at is not None and taken_at > last:
                rows = {(r["flow"], r["partition"]): r for r in doc["partitions"] if r["topic"] == self.topic}
                if rows:
                    poll = FlowPoll(taken_at, rows, doc.get("feeds", []))
                    self.polls.append(poll)
                    return poll
            time.sleep(0.1)
        raise AssertionError(f"no new poll of {self.topic} within {timeout} s: "
                             + "; ".join(map(self.describe, self.polls[-3:])))

    def until(self, done: Callable[[FlowPoll], bool], timeout: float, what: str) -> FlowPoll:
        deadline = time.monotonic() + timeout
        start = len(self.polls)
        while time.monotonic() < deadline:
            poll = self.next()
            if done(poll):
                return poll
        raise AssertionError(f"{what}: not within {timeout} s; polls seen: "
                             + "; ".join(self.describe(p) for p in self.polls[start:][-8:]))

    @staticmethod
    def describe(poll: FlowPoll) -> str:
        return f"{poll.taken_at:.1f} " + ", ".join(
            f"{f}[{p}] {r['state']} leo={r['leo']} lro={r['lro']}({r['lro_feed']}) lag={r['record_lag']} "
            f"t={r['time_lag_s']}" for (f, p), r in sorted(poll.rows.items()))


def check_rows(*configs: Path, topic: str) -> tuple[int, dict[Key, dict], str]:
    """`mirrorlag check --json` on the configs: exit code, the topic's rows by (flow, partition), output."""
    args = [a for c in configs for a in ("--config", str(c))]
    result = mirrorlag("check", *args, "--json", "--timeout", "8")
    try:
        rows = {(r["flow"], r["partition"]): r for r in json.loads(result.stdout) if r["topic"] == topic}
    except json.JSONDecodeError:
        raise AssertionError(result.stdout + result.stderr) from None
    return result.returncode, rows, result.stdout + result.stderr


def last_data_offset(bootstrap: str, topic: str, partition: int, isolation: str) -> int:
    """The offset of the last record a consumer at `isolation` reads (-1: none): what an MM2 whose
    consumer reads at that level copies last."""
    return max((offset for offset, _ in read_partition(bootstrap, topic, partition, isolation)), default=-1)


@dataclass
class TxnProducer:
    """Numbered records (values unique per partition, as truth.NumberedProducer's) in transactions,
    committed or aborted: on Kafka each transaction's records and its marker take offsets."""

    bootstrap: str
    topic: str
    counter: Iterator[int] = field(default_factory=itertools.count)

    def __post_init__(self) -> None:
        self.producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 0, "log_level": 0,
                                  "transactional.id": f"mirrorlag-txn-{self.topic}-{time.monotonic_ns()}"})
        self.producer.init_transactions(30)

    def transaction(self, records: int, partition: int = 0, commit: bool = True) -> None:
        self.begin(records, partition)
        if commit:
            self.producer.commit_transaction(30)
        else:
            self.producer.abort_transaction(30)

    def begin(self, records: int, partition: int = 0) -> None:
        """A transaction left open with `records` written (in the log, above the LSO)."""
        self.producer.begin_transaction()
        for _ in range(records):
            self.producer.produce(self.topic, value=f"{partition}:{next(self.counter)}".encode(), partition=partition)
        assert self.producer.flush(30) == 0

    def commit(self) -> None:
        self.producer.commit_transaction(30)


def start_mm2(jars: KafkaJars, directory: Path, clusters: Mapping[str, str], flows: list[str],
              extra: Mapping[str, object], targets: tuple[str, ...], name: str = "mm2",
              without: tuple[str, ...] = ()) -> MirrorMaker2:
    """An mm2.properties of the test's own clusters and flows in `directory`, and MM2 started on it
    (the caller stops it)."""
    config = write_config(directory / f"{name}.properties", clusters, flows, extra, without)
    return MirrorMaker2(jars, directory, name, properties=config, targets=targets).start()


def write_config(path: Path, clusters: Mapping[str, str], flows: list[str], extra: Mapping[str, object],
                 without: tuple[str, ...] = ()) -> Path:
    """mm2_properties' text less the top-level keys in `without`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = mm2_properties(clusters, flows, extra).splitlines(keepends=True)
    path.write_text("".join(line for line in lines if line.split("=", 1)[0].strip() not in without))
    return path
