"""`Mirror`: a small replicator that behaves like MirrorMaker 2 on the wire (docs/design.md §6).

For every enabled flow A->B it copies each partition of each topic the flow replicates to
`policy.remote_topic(A, topic)` on B (same partition; keys, values, headers, timestamps kept), and
writes what MM2 writes around the copy, with MM2's codecs (mirrorlag.formats):

- offset syncs, by MM2's OffsetSyncWriter rule (mirror.sync_state), to the offset-syncs topic;
- Connect source offsets (last acknowledged source offset per partition) to `mm2-offsets.A.internal`
  on B every `<B>.offset.flush.interval.ms`, then the delayed syncs, as MirrorSourceTask.commit does;
- heartbeats: Heartbeat(A, B) into `heartbeats` on B and Heartbeat(B, A) into `heartbeats` on A
  (the A->B heartbeat connector and the B->A heartbeat-only pair of a dedicated MM2);
- checkpoints of the accepted consumer groups into `A.checkpoints.internal` on B, and their
  offsets synced into B where `sync.group.offsets.enabled` (mirror.checkpointer).

It resumes each partition from its committed Connect offset + 1, so a restart copies again whatever
was copied after the last commit, exactly like MM2. It is a stand-in for MM2 in tests and the demo:
the sidecar never imports it.

Threading: everything (consume, produce, delivery callbacks, commits, heartbeats) runs on the thread
that calls `run`; delivery callbacks fire inside that thread's producer.poll()/flush(), so partition
state needs no lock. `pause()`/`resume()` only flip an Event and are safe from signal handlers.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

import javaproperties
from confluent_kafka import (
    OFFSET_BEGINNING,
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from mirrorlag.config.settings import FlowSettings, Settings
from mirrorlag.errors import ConfigError, MirrorlagError
from mirrorlag.formats import (
    CONNECTOR_NAME,
    BadRecord,
    ConnectOffsetKey,
    Heartbeat,
    OffsetSync,
    decode_connect_offset_key,
    decode_connect_offset_value,
    encode_connect_offset,
    encode_heartbeat,
    encode_offset_sync,
)
from mirrorlag.kafka.source import LIBRDKAFKA_LOGGER
from mirrorlag.kafka.topic_reader import TopicReader, assign_only_consumer
from mirrorlag.mirror.checkpointer import CheckpointOptions, CheckpointTask
from mirrorlag.mirror.sync_state import OffsetSyncWriter
from mirrorlag.model import FlowId

log = logging.getLogger("mirrorlag.mirror")

TopicPart = tuple[str, int]

CONSUME_BATCH = 500  # records per consume() call and flow
LOOP_WAIT_S = 0.05  # longest a quiet loop sleeps: bounds heartbeat jitter and signal latency
SHUTDOWN_BUDGET_S = 4.0  # SIGTERM must end the process within 5 s
ADMIN_TIMEOUT_S = 5.0


class MirrorFailed(MirrorlagError):
    """A record could not be written to the target: the mirror stops, as a failed MM2 task does."""

    exit_status = 1


# --- options -----------------------------------------------------------------------------


@dataclass(frozen=True)
class HeartbeatEmitter:
    """Writes Heartbeat(source, target, now) into the heartbeats topic on `target`."""

    source: str
    target: str
    interval_s: float
    topic: str = "heartbeats"


@dataclass(frozen=True)
class MirrorOptions:
    """The MM2/Connect keys the sidecar's Settings do not carry, plus the mirror's own controls."""

    offset_flush_interval_s: float = 60.0  # offset.flush.interval.ms (Connect worker, default 60000)
    max_records_per_second: float | None = None  # total over all flows; None = unthrottled
    # refresh.topics.interval.seconds: MM2 defaults to 600; a test stand-in wants new topics fast.
    refresh_topics_interval_s: float = 5.0
    replication_factor: int = -1  # replication.factor for created topics; -1 = broker default
    heartbeat_emitters: tuple[HeartbeatEmitter, ...] = ()
    offset_syncs_disabled: frozenset[FlowId] = frozenset()  # emit.offset-syncs.enabled = false
    # Flows whose checkpoint connector runs (emit.checkpoints.enabled, MM2's default true)
    checkpoints: Mapping[FlowId, CheckpointOptions] = field(default_factory=dict)


def read_properties(settings: Settings) -> dict[str, str]:
    """The merged raw properties of the files `settings` came from (later files win)."""
    merged: dict[str, str] = {}
    for file in settings.files:
        with open(file, "rb") as fp:
            merged.update(javaproperties.load(fp))
    return merged


def mirror_options(
    settings: Settings,
    *,
    max_records_per_second: float | None = None,
    offset_flush_interval_ms: int | None = None,
    props: Mapping[str, str] | None = None,
) -> MirrorOptions:
    """Read the mirror's keys from the same .properties files; arguments override the files."""
    props = read_properties(settings) if props is None else props

    def flow_value(source: str, target: str, key: str) -> str | None:
        # MirrorMakerConfig's view of flow s->t: `s->t.key`, else the top-level `key`.
        return props.get(f"{source}->{target}.{key}", props.get(key))

    flush_ms = offset_flush_interval_ms
    if flush_ms is None:
        # A worker setting: MirrorMakerConfig.workerConfig builds each herder's worker config from
        # the target's `<target>.` keys, and a top-level offset.flush.interval.ms never reaches it.
        # One timer here for all flows: the shortest of their targets' intervals.
        keys = sorted({f"{flow.target}.offset.flush.interval.ms" for flow in settings.flows})
        flush_ms = min((_int(props.get(k), k, 60000, minimum=1) for k in keys), default=60000)
    if flush_ms <= 0:
        raise ConfigError("expected an offset flush interval > 0 ms", key="--offset-flush-interval-ms")
    if max_records_per_second is not None and max_records_per_second <= 0:
        raise ConfigError("expected a rate > 0", key="--max-records-per-second")

    emitters: dict[tuple[str, str], HeartbeatEmitter] = {}
    disabled_syncs: set[FlowId] = set()
    checkpoints: dict[FlowId, CheckpointOptions] = {}
    for flow in settings.flows:
        a, b = flow.source, flow.target
        if not _bool(flow_value(a, b, "emit.offset-syncs.enabled"), "emit.offset-syncs.enabled", True):
            disabled_syncs.add(flow.id)
        if flow.emit_checkpoints:
            key = "sync.group.offsets.interval.seconds"
            sync_interval = _int(flow_value(a, b, key), key, 60, minimum=1)
            # refresh.groups.*: the connector's group listing (MM2 600 s; a test stand-in wants 5 s)
            key = "refresh.groups.interval.seconds"
            refresh_groups = _int(flow_value(a, b, key), key, 5, minimum=1)
            key = "refresh.groups.enabled"
            listed_once = not _bool(flow_value(a, b, key), key, True)
            checkpoints[flow.id] = CheckpointOptions(flow.group_filter, flow.emit_checkpoints_interval_s,
                                                     None if listed_once else float(refresh_groups),
                                                     flow.sync_group_offsets, float(sync_interval))
        # The A->B heartbeat connector writes into B; the implied B->A heartbeat-only pair into A.
        for source, target in ((a, b), (b, a)):
            key = "emit.heartbeats.enabled"
            if not _bool(flow_value(source, target, key), key, True):
                continue
            key = "emit.heartbeats.interval.seconds"
            interval = _int(flow_value(source, target, key), key, 1)
            if interval < 0:
                continue  # MirrorHeartbeatTask emits nothing for a negative interval
            emitters.setdefault((source, target), HeartbeatEmitter(
                source, target, max(interval, 0.01), flow.policy.heartbeats_topic))

    refresh = _int(props.get("refresh.topics.interval.seconds"), "refresh.topics.interval.seconds", 5)
    return MirrorOptions(
        offset_flush_interval_s=flush_ms / 1000.0,
        max_records_per_second=max_records_per_second,
        refresh_topics_interval_s=max(refresh, 1),
        replication_factor=_int(props.get("replication.factor"), "replication.factor", -1),
        heartbeat_emitters=tuple(emitters.values()),
        offset_syncs_disabled=frozenset(disabled_syncs),
        checkpoints=checkpoints,
    )


def _int(text: str | None, key: str, default: int, minimum: int | None = None) -> int:
    if text is None:
        return default
    try:
        value = int(text.strip())
    except ValueError:
        raise ConfigError(f"expected an integer, got {text!r}", key=key) from None
    if minimum is not None and value < minimum:
        raise ConfigError(f"expected an integer >= {minimum}, got {value}", key=key)
    return value


def _bool(text: str | None, key: str, default: bool) -> bool:
    if text is None:
        return default
    value = text.strip().lower()
    if value not in ("true", "false"):
        raise ConfigError(f"expected true or false, got {text!r}", key=key)
    return value == "true"


# --- small parts ---------------------------------------------------------------------------


@dataclass
class TokenBucket:
    """Records per second over all flows; holds at most a tenth of a second's worth (small bursts)."""

    rate: float
    tokens: float = 0.0
    stamp: float = field(default_factory=time.monotonic)

    @property
    def capacity(self) -> float:
        return max(1.0, self.rate / 10)

    def available(self) -> int:
        now = time.monotonic()
        self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        return int(self.tokens)

    def take(self, n: int) -> None:
        self.tokens -= n

    def wait_s(self) -> float:
        """Seconds until one token is available."""
        return max(0.0, (1 - self.tokens) / self.rate)


@dataclass
class _FlowTask:
    """One flow's MirrorSourceTask: its consumer, offsets and offset-sync writer."""

    flow: FlowSettings
    consumer: Consumer
    producer: Producer  # data into the target
    offsets_producer: Producer  # Connect offsets into the target
    offsets_topic: str
    syncs: OffsetSyncWriter | None  # None when emit.offset-syncs.enabled = false
    committed: dict[TopicPart, int]  # Connect offsets: loaded at start, then ours
    acked: dict[TopicPart, int] = field(default_factory=dict)  # last acknowledged, since the last commit
    assigned: set[TopicPart] = field(default_factory=set)
    frozen: set[TopicPart] = field(default_factory=set)  # a write failed: record no more progress
    remote: dict[str, str] = field(default_factory=dict)  # source topic -> remote topic
    copied: int = 0
    failure: str | None = None

    def delivered(self, topic: str, partition: int, upstream: int, err: KafkaError | None, msg: Message) -> None:
        """Delivery report of one copied record: MirrorSourceTask.commitRecord."""
        key = (topic, partition)
        if key in self.frozen:
            return
        if err is not None:
            # Connect fails the task and never commits past an unacknowledged record.
            self.frozen.add(key)
            self.failure = self.failure or (
                f"{self.flow.id}: copying {topic}-{partition} offset {upstream} to {msg.topic()} failed: {err.str()}")
            return
        self.acked[key] = upstream
        self.copied += 1
        if self.syncs is not None:
            self.syncs.maybe_queue(topic, partition, upstream, msg.offset())
            self.syncs.fire_pending()  # "we may be able to immediately publish" (commitRecord)

    def offset_written(self, key: TopicPart, offset: int, err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            log.warning("%s: committing offset %d of %s-%d failed: %s", self.flow.id, offset, *key, err.str())
            self.acked.setdefault(key, offset)  # retried at the next commit unless superseded


# --- the mirror --------------------------------------------------------------------------


class Mirror:
    """Replicates every enabled flow of `settings` like MM2. Call `run(stop_event)` on one thread."""

    def __init__(self, settings: Settings, options: MirrorOptions | None = None) -> None:
        self.settings = settings
        self.options = options if options is not None else mirror_options(settings)
        self._paused = threading.Event()
        self._bucket = TokenBucket(self.options.max_records_per_second) if self.options.max_records_per_second else None
        self._admins: dict[str, AdminClient] = {}
        self._data_producers: dict[str, Producer] = {}
        self._internal_producers: dict[str, Producer] = {}
        self._tasks: list[_FlowTask] = []
        self._checkpoint_tasks: list[CheckpointTask] = []
        self._next_heartbeat: dict[HeartbeatEmitter, float] = {}
        self._warned: dict[str, str] = {}
        self._copied_at_commit = 0
        self._commit_stamp = time.monotonic()

    # -- controls (safe from signal handlers: they only flip an Event) --

    def pause(self) -> None:
        """Stop copying; heartbeats and offset commits go on."""
        self._paused.set()

    def resume(self) -> None:
        self._paused.clear()

    @property
    def copied(self) -> int:
        """Records acknowledged by the targets since start."""
        return sum(task.copied for task in self._tasks)

    # -- main loop --

    def run(self, stop_event: threading.Event) -> None:
        """Copy until `stop_event` is set, then commit offsets and delayed syncs and return.

        Raises MirrorFailed if a record could not be written to a target (after that commit)."""
        started = time.monotonic()
        try:
            self._start(stop_event)
            now = time.monotonic()
            next_discovery = now
            next_flush = now + self.options.offset_flush_interval_s
            self._next_heartbeat = {e: now + e.interval_s for e in self.options.heartbeat_emitters}
            was_paused = False
            while not stop_event.is_set() and self._failure() is None:
                now = time.monotonic()
                if now >= next_discovery:
                    self._discover()
                    next_discovery = time.monotonic() + self.options.refresh_topics_interval_s
                self._emit_heartbeats(now)
                for checkpointer in self._checkpoint_tasks:
                    checkpointer.tick(now)
                if now >= next_flush:
                    self._commit(timeout_s=5.0)
                    next_flush = time.monotonic() + self.options.offset_flush_interval_s
                if self._paused.is_set() != was_paused:
                    was_paused = not was_paused
                    log.info("copying %s", "paused" if was_paused else "resumed")
                if was_paused:
                    self._poll_producers()
                    stop_event.wait(LOOP_WAIT_S)
                    continue
                self._copy(stop_event)
                self._poll_producers()
        finally:
            self._shutdown()
            elapsed = time.monotonic() - started
            log.info("stopped after copying %d records in %.1f s", self.copied, elapsed)
        if (failure := self._failure()) is not None:
            raise MirrorFailed(failure)

    def _failure(self) -> str | None:
        return next((t.failure for t in self._tasks if t.failure), None)

    # -- start --

    def _client(self, alias: str) -> dict[str, Any]:
        return {**self.settings.clusters[alias].client, "logger": LIBRDKAFKA_LOGGER}

    def _admin(self, alias: str) -> AdminClient:
        # Kept for the whole run: an AdminClient must outlive the futures it hands out.
        if alias not in self._admins:
            self._admins[alias] = AdminClient({**self._client(alias), "socket.timeout.ms": int(ADMIN_TIMEOUT_S * 1000)})
        return self._admins[alias]

    def _data_producer(self, alias: str) -> Producer:
        if alias not in self._data_producers:
            self._data_producers[alias] = Producer({
                **self._client(alias), "acks": "all", "enable.idempotence": True,
                # The tansu test broker's `latest` is wrong after a multi-record batch (docs/design.md §8),
                # and the sidecar reads `latest` on both sides (source LEOs, target progress).
                "batch.num.messages": 1, "linger.ms": 0})
        return self._data_producers[alias]

    def _internal_producer(self, alias: str) -> Producer:
        """Offset syncs, Connect offsets and heartbeats: low volume, one record per batch everywhere,
        and Java's murmur2 partitioner so a keyed Connect offset lands where Connect would put it."""
        if alias not in self._internal_producers:
            self._internal_producers[alias] = Producer({
                **self._client(alias), "acks": "all", "batch.num.messages": 1, "linger.ms": 0,
                "partitioner": "murmur2_random"})
        return self._internal_producers[alias]

    def _start(self, stop_event: threading.Event) -> None:
        compact = {"cleanup.policy": "compact"}
        wanted: dict[str, dict[str, NewTopic]] = {}  # alias -> topic -> spec
        rf = self.options.replication_factor

        def want(alias: str, topic: str, config: dict[str, str] | None = None) -> None:
            wanted.setdefault(alias, {})[topic] = NewTopic(topic, 1, rf, config=config or {})

        for emitter in self.options.heartbeat_emitters:
            want(emitter.target, emitter.topic, compact)  # MirrorHeartbeatConnector: 1 partition, compacted
        for flow in self.settings.flows:
            want(flow.target, self._offsets_topic(flow), compact)  # MM2 uses 25 partitions; 1 does here
            if flow.id not in self.options.offset_syncs_disabled:
                alias, topic = self._sync_location(flow)
                want(alias, topic, compact)
            if flow.id in self.options.checkpoints:
                want(flow.target, flow.policy.checkpoints_topic(flow.source), compact)
        for alias, specs in wanted.items():
            if stop_event.is_set():
                return
            self._create_topics(alias, list(specs.values()), required=True)

        for flow in self.settings.flows:
            if stop_event.is_set():
                return
            self._tasks.append(self._make_task(flow))
            if (checkpointing := self.options.checkpoints.get(flow.id)) is not None:
                self._checkpoint_tasks.append(self._checkpoint_task(flow, checkpointing))
        log.info("mirroring %s (offset flush every %.1f s%s)", ", ".join(str(f.id) for f in self.settings.flows),
                 self.options.offset_flush_interval_s,
                 f", at most {self.options.max_records_per_second:g} records/s" if self._bucket else "")

    @staticmethod
    def _offsets_topic(flow: FlowSettings) -> str:
        return f"mm2-offsets.{flow.source}.internal"  # dedicated MM2's offset.storage.topic

    @staticmethod
    def _sync_location(flow: FlowSettings) -> tuple[str, str]:
        """(cluster alias, topic) of the flow's offset syncs (MirrorSourceConfig.offsetSyncsTopic)."""
        if flow.offset_syncs_topic_location == "source":
            return flow.source, flow.policy.offset_syncs_topic(flow.target)
        return flow.target, flow.policy.offset_syncs_topic(flow.source)

    def _make_task(self, flow: FlowSettings) -> _FlowTask:
        offsets_topic = self._offsets_topic(flow)
        committed = self._load_committed(flow, offsets_topic)
        log.info("%s: %d partitions have committed offsets in %s", flow.id, len(committed), offsets_topic)
        consumer = Consumer({
            **self._client(flow.source),
            "group.id": f"mirrorlag-mirror-{flow.source}-{flow.target}",  # never joined: assign() only
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",  # MM2's source consumer default
            # As MM2's consumer of the flow (its <source>.consumer. / A->B. keys); Java's default is
            # read_uncommitted, librdkafka's read_committed, so it is always set.
            "isolation.level": flow.consumer_isolation_level,
        })
        task = _FlowTask(
            flow=flow, consumer=consumer, producer=self._data_producer(flow.target),
            offsets_producer=self._internal_producer(flow.target), offsets_topic=offsets_topic,
            syncs=None, committed=committed)
        if flow.id not in self.options.offset_syncs_disabled:
            alias, sync_topic = self._sync_location(flow)
            sync_producer = self._internal_producer(alias)

            def send(sync: OffsetSync) -> None:
                key, value = encode_offset_sync(sync)
                sync_producer.produce(sync_topic, key=key, value=value, partition=0, on_delivery=sync_done)

            def sync_done(err: KafkaError | None, _msg: Message) -> None:
                if err is not None:
                    self._warn(f"sync:{flow.id}", f"{flow.id}: writing an offset sync to {sync_topic} failed: {err.str()}")
                assert task.syncs is not None
                task.syncs.completed()

            task.syncs = OffsetSyncWriter(flow.offset_lag_max, send)
        return task

    def _checkpoint_task(self, flow: FlowSettings, options: CheckpointOptions) -> CheckpointTask:
        alias, sync_topic = self._sync_location(flow)
        reader = TopicReader("offset-syncs", alias, assign_only_consumer(self.settings.clusters[alias]),
                             [sync_topic], ADMIN_TIMEOUT_S)
        checkpoints = TopicReader("checkpoints", flow.target, assign_only_consumer(self.settings.clusters[flow.target]),
                                  [flow.policy.checkpoints_topic(flow.source)], ADMIN_TIMEOUT_S, timed=True)
        task = CheckpointTask(flow, options, self._admin(flow.source), self._admin(flow.target),
                              self._internal_producer(flow.target), reader, checkpoints, warn=self._warn)
        task.start()
        return task

    def _load_committed(self, flow: FlowSettings, topic: str) -> dict[TopicPart, int]:
        """Read the Connect offsets topic from the beginning: newest record per key wins, a
        tombstone removes it. Only this flow's source cluster and MirrorSourceConnector count."""
        consumer = Consumer({**self._client(flow.target), "group.id": f"mirrorlag-mirror-offsets-{flow.source}",
                             "enable.auto.commit": False, "isolation.level": "read_uncommitted"})
        try:
            metadata = consumer.list_topics(topic, timeout=ADMIN_TIMEOUT_S)
            partitions = sorted(metadata.topics[topic].partitions) if topic in metadata.topics else []
            ends: dict[int, int] = {}
            for p in partitions:
                low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=ADMIN_TIMEOUT_S)
                if high > low:
                    ends[p] = high
            committed: dict[TopicPart, int] = {}
            if not ends:
                return committed
            consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
            deadline = time.monotonic() + 15.0
            bad = 0
            while ends and time.monotonic() < deadline:
                for msg in consumer.consume(500, timeout=0.2):
                    if msg.error():
                        continue
                    if msg.offset() >= ends.get(msg.partition(), 0) - 1:
                        ends.pop(msg.partition(), None)
                    try:
                        key = decode_connect_offset_key(msg.key())
                        offset = decode_connect_offset_value(msg.value())
                    except BadRecord:
                        bad += 1
                        continue
                    # None: another connector's key (checkpoints, heartbeats share the topic).
                    if key is None or key.connector != CONNECTOR_NAME or key.cluster != flow.source:
                        continue
                    if offset is None:
                        committed.pop((key.topic, key.partition), None)
                    else:
                        committed[(key.topic, key.partition)] = offset
            if ends:
                raise MirrorlagError(f"{flow.id}: could not read {topic} on cluster {flow.target} to its end")
            if bad:
                log.warning("%s: skipped %d undecodable records in %s", flow.id, bad, topic)
            return committed
        except KafkaException as exc:
            raise MirrorlagError(f"{flow.id}: reading {topic} on cluster {flow.target}: {exc.args[0]}") from None
        finally:
            consumer.close()

    def _create_topics(self, alias: str, specs: list[NewTopic], required: bool = False) -> set[str]:
        """Create `specs` on `alias`; an existing topic is fine. Returns the names now present."""
        if not specs:
            return set()
        admin = self._admin(alias)
        futures = admin.create_topics(specs, operation_timeout=ADMIN_TIMEOUT_S, request_timeout=ADMIN_TIMEOUT_S)
        present: set[str] = set()
        for name, future in futures.items():
            try:
                future.result(timeout=ADMIN_TIMEOUT_S + 1)
                log.info("created topic %s on cluster %s", name, alias)
                present.add(name)
            except KafkaException as exc:
                error = exc.args[0]
                if isinstance(error, KafkaError) and error.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                    present.add(name)
                    continue
                message = f"cannot create topic {name} on cluster {alias}: {error}"
                if required:
                    raise MirrorlagError(message) from None
                self._warn(f"create:{alias}:{name}", message)
            except Exception as exc:  # a future that timed out
                if required:
                    raise MirrorlagError(f"cannot create topic {name} on cluster {alias}: {exc}") from None
                self._warn(f"create:{alias}:{name}", f"cannot create topic {name} on cluster {alias}: {exc}")
        return present

    # -- topic discovery (MirrorSourceConnector's refresh) --

    def _partition_counts(self, alias: str) -> dict[str, int] | None:
        try:
            metadata = self._admin(alias).list_topics(timeout=ADMIN_TIMEOUT_S)
        except KafkaException as exc:
            self._warn(f"meta:{alias}", f"cannot read topics of cluster {alias}: {exc.args[0]}")
            return None
        self._warned.pop(f"meta:{alias}", None)
        return {name: len(meta.partitions) for name, meta in metadata.topics.items() if meta.error is None}

    def _discover(self) -> None:
        sources: dict[str, dict[str, int] | None] = {}
        targets: dict[str, dict[str, int] | None] = {}
        for task in self._tasks:
            flow = task.flow
            if flow.source not in sources:
                sources[flow.source] = self._partition_counts(flow.source)
            if flow.target not in targets:
                targets[flow.target] = self._partition_counts(flow.target)
            source_topics, target_topics = sources[flow.source], targets[flow.target]
            if source_topics is None or target_topics is None:
                continue
            replicated = {t: n for t, n in source_topics.items() if flow.should_replicate(t)}
            for topic in replicated:
                task.remote.setdefault(topic, flow.policy.remote_topic(flow.source, topic))
            missing = [NewTopic(task.remote[t], n, self.options.replication_factor)
                       for t, n in sorted(replicated.items()) if task.remote[t] not in target_topics]
            for name in self._create_topics(flow.target, missing):
                target_topics[name] = next(s.num_partitions for s in missing if s.topic == name)
            copyable: set[TopicPart] = set()
            for topic, count in replicated.items():
                remote_count = target_topics.get(task.remote[topic])
                if remote_count is None:
                    continue  # creation failed; retried at the next refresh
                if remote_count < count:
                    # MM2 would add partitions; tansu has no CreatePartitions. Copy what fits.
                    self._warn(f"parts:{flow.id}:{topic}", (
                        f"{flow.id}: {task.remote[topic]} has {remote_count} partitions, {topic} has {count}; "
                        f"partitions {remote_count}..{count - 1} are not copied"))
                copyable.update((topic, p) for p in range(min(count, remote_count)))
            self._reassign(task, copyable)

    def _reassign(self, task: _FlowTask, wanted: set[TopicPart]) -> None:
        new, gone = wanted - task.assigned, task.assigned - wanted
        if gone:
            task.consumer.incremental_unassign([TopicPartition(t, p) for t, p in sorted(gone)])
            task.assigned -= gone
            log.info("%s: stopped copying %d partitions", task.flow.id, len(gone))
        if new:
            # MirrorSourceTask.initializeConsumer: committed offset + 1, else from the beginning.
            starts = [TopicPartition(t, p, task.committed[(t, p)] + 1 if (t, p) in task.committed else OFFSET_BEGINNING)
                      for t, p in sorted(new)]
            task.consumer.incremental_assign(starts)
            task.assigned |= new
            resumed = sum(1 for tp in new if tp in task.committed)
            log.info("%s: copying %d new partitions (%d resumed from committed offsets)", task.flow.id, len(new), resumed)

    # -- copying --

    def _copy(self, stop_event: threading.Event) -> None:
        if not any(task.assigned for task in self._tasks):
            stop_event.wait(LOOP_WAIT_S)
            return
        timeout = LOOP_WAIT_S / max(1, len(self._tasks))
        for task in self._tasks:
            if not task.assigned:
                continue
            budget = CONSUME_BATCH
            if self._bucket is not None:
                budget = min(budget, self._bucket.available())
                if budget < 1:
                    stop_event.wait(min(LOOP_WAIT_S, self._bucket.wait_s()))
                    continue
            records = task.consumer.consume(budget, timeout=timeout)
            if records and self._paused.is_set():
                # Paused while consume() waited: copy none of them (a paused mirror copies
                # nothing more), and fetch them again on resume.
                self._put_back(task, records)
                return
            if self._bucket is not None:
                self._bucket.take(len(records))
            for record in records:
                self._forward(task, record)

    @staticmethod
    def _put_back(task: _FlowTask, records: list[Message]) -> None:
        first: dict[tuple[str, int], int] = {}
        for record in records:
            if record.error() is None:
                first.setdefault((record.topic(), record.partition()), record.offset())
        for (topic, partition), offset in first.items():
            task.consumer.seek(TopicPartition(topic, partition, offset))

    def _forward(self, task: _FlowTask, record: Message) -> None:
        if (error := record.error()) is not None:
            self._warn(f"consume:{task.flow.id}", f"{task.flow.id}: consuming: {error.str()}")
            return
        topic, partition, offset = record.topic(), record.partition(), record.offset()
        if (topic, partition) not in task.assigned:
            return  # fetched just before an unassign
        ts_type, timestamp = record.timestamp()
        kwargs: dict[str, Any] = {
            "key": record.key(), "value": record.value(), "partition": partition,
            "on_delivery": functools.partial(task.delivered, topic, partition, offset),
        }
        if (headers := record.headers()) is not None:
            kwargs["headers"] = headers
        if ts_type != TIMESTAMP_NOT_AVAILABLE:
            kwargs["timestamp"] = timestamp  # MM2 keeps the source timestamp (as CreateTime)
        while True:
            try:
                task.producer.produce(task.remote[topic], **kwargs)
                return
            except BufferError:  # local queue full: serve delivery reports, then retry
                task.producer.poll(0.05)

    def _poll_producers(self) -> None:
        for producer in (*self._data_producers.values(), *self._internal_producers.values()):
            producer.poll(0)

    # -- heartbeats --

    def _emit_heartbeats(self, now: float) -> None:
        for emitter, due in self._next_heartbeat.items():
            if now < due:
                continue
            # Catch up by one interval, not a burst, after a stall.
            self._next_heartbeat[emitter] = max(due + emitter.interval_s, now)
            now_ms = int(time.time() * 1000)
            key, value = encode_heartbeat(Heartbeat(emitter.source, emitter.target, now_ms))
            producer = self._internal_producer(emitter.target)
            try:
                producer.produce(emitter.topic, key=key, value=value, partition=0, timestamp=now_ms,
                                 on_delivery=functools.partial(self._heartbeat_done, emitter))
            except (BufferError, KafkaException) as exc:
                self._warn(f"hb:{emitter.target}", f"heartbeat into {emitter.target}: {exc}")

    def _heartbeat_done(self, emitter: HeartbeatEmitter, err: KafkaError | None, _msg: Message) -> None:
        key = f"hb:{emitter.source}->{emitter.target}"
        if err is not None:
            self._warn(key, f"heartbeat {emitter.source}->{emitter.target} into {emitter.topic}: {err.str()}")
        else:
            self._warned.pop(key, None)

    # -- offset commit (WorkerSourceTask.commitOffsets, then MirrorSourceTask.commit) --

    def _commit(self, timeout_s: float) -> None:
        written: set[int] = set()
        producers: list[Producer] = []
        for task in self._tasks:
            for (topic, partition), offset in task.acked.items():
                key, value = encode_connect_offset(ConnectOffsetKey(CONNECTOR_NAME, task.flow.source, topic, partition), offset)
                task.offsets_producer.produce(
                    task.offsets_topic, key=key, value=value,
                    on_delivery=functools.partial(task.offset_written, (topic, partition), offset))
            task.committed.update(task.acked)
            task.acked.clear()
            if id(task.offsets_producer) not in written:
                written.add(id(task.offsets_producer))
                producers.append(task.offsets_producer)
        deadline = time.monotonic() + timeout_s
        unconfirmed = sum(p.flush(max(0.0, deadline - time.monotonic())) for p in producers)
        if unconfirmed:
            # Connect only calls task.commit() after the offsets are flushed.
            self._warn("commit", f"{unconfirmed} offset commits not acknowledged in {timeout_s:g} s; syncs held back")
            return
        self._warned.pop("commit", None)
        for task in self._tasks:
            if task.syncs is not None:
                task.syncs.promote_delayed()
                task.syncs.fire_pending()
        copied = self.copied
        now = time.monotonic()
        if copied != self._copied_at_commit:
            rate = (copied - self._copied_at_commit) / max(1e-3, now - self._commit_stamp)
            log.info("committed offsets; %d records copied so far (%.0f/s since the last commit)", copied, rate)
        self._copied_at_commit, self._commit_stamp = copied, now

    # -- shutdown --

    def _shutdown(self) -> None:
        deadline = time.monotonic() + SHUTDOWN_BUDGET_S

        def left(share: float = 1.0) -> float:
            return max(0.0, (deadline - time.monotonic()) * share)

        try:
            # Let in-flight copies be acknowledged, so the final commit covers them.
            for producer in self._data_producers.values():
                if producer.flush(left(0.4)):
                    log.warning("stopping with records not acknowledged by the target; they will be copied again")
            if self._tasks:
                self._commit(timeout_s=left(0.6))
            for producer in self._internal_producers.values():
                producer.flush(left())
        finally:
            for task in self._tasks:
                try:
                    task.consumer.close()
                except (KafkaException, RuntimeError):
                    pass
            for checkpointer in self._checkpoint_tasks:
                try:
                    checkpointer.close()
                except (KafkaException, RuntimeError):
                    pass

    def _warn(self, key: str, message: str) -> None:
        """Log a problem once until it changes: a retrying loop must not flood the log."""
        if self._warned.get(key) != message:
            self._warned[key] = message
            log.warning("%s", message)


def describe(options: MirrorOptions) -> Iterable[str]:
    """Human-readable lines for --log-level DEBUG."""
    yield f"offset flush interval {options.offset_flush_interval_s:g} s"
    for emitter in options.heartbeat_emitters:
        yield f"heartbeat {emitter.source}->{emitter.target} into {emitter.topic} on {emitter.target} every {emitter.interval_s:g} s"
