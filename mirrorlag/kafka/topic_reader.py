"""Reading MM2's internal topics with assign(): wait for missing topics, then drain to the end.

Every feed reads the same way: no consumer group (joining one is slow and MM2's topics are not
ours to commit in), topics that may not exist yet, and "read up to the end" on each poll without
blocking for a timeout when nothing is new. Feeds only decode and keep what they read.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import Callable, Sequence

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, ClusterMetadata, TopicMetadata

from mirrorlag.config.settings import ClusterSettings
from mirrorlag.kafka.source import LIBRDKAFKA_LOGGER, masked, refused_config, secret_values

log = logging.getLogger(__name__)

# Consumer errors that mean an assigned topic (or partition) no longer exists.
GONE_ERRORS = frozenset({KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC})

Apply = Callable[[str, bytes | None, bytes | None], None]  # (topic, key, value)
# (topic, key, value, record timestamp in ms): what a reader made with `timed` applies
ApplyTimed = Callable[[str, bytes | None, bytes | None, int], None]

# How long the per-poll "does it still exist" question may take: a healthy cluster answers in
# milliseconds, and a down one must not hold every poll for the whole request timeout (a slower
# cluster only loses the check: the topic stays assigned).
EXISTS_TIMEOUT_S = 0.25


@dataclass
class ClientErrors:
    """What a feed's consumer ran into (librdkafka's error callback, failed requests), for
    FeedHealth: without it a feed on an unreachable cluster just looks quiet."""

    secrets: tuple[str, ...] = ()  # the cluster's secret config values: never in `last`
    total: int = 0
    last: str | None = None  # the newest error, short, e.g. "_TRANSPORT: ...: Connection refused"
    up: bool = True  # False from an error until the cluster answers again

    def record(self, err: KafkaError) -> None:
        self.total += 1
        self.up = False
        self.last = masked(f"{err.name()}: {err.str()}", self.secrets)[:200]

    def answered(self) -> None:
        self.up = True


class FeedConsumer(Consumer):
    """A Consumer whose librdkafka errors (connection failures, authentication, all brokers
    down) land in `errors`; they are never raised to the reader.

    Its metadata comes from an admin client over a connection of its own: on the consumer's, a
    Metadata request waits behind the long-polling Fetch (up to fetch.wait.max.ms, 0.5 s) that an
    idle assigned partition always has in flight, and so would each poll's existence check."""

    def __init__(self, client: dict[str, str], config: dict[str, object], errors: ClientErrors) -> None:
        self.errors = errors
        super().__init__({**client, **config, "error_cb": errors.record})
        self._admin = AdminClient({**client, "logger": config["logger"], "error_cb": errors.record,
                                   "allow.auto.create.topics": False})  # a lookup must not create it

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> ClusterMetadata:
        return self._admin.list_topics(topic, timeout=timeout)

    def serve_errors(self) -> None:
        """Hand its metadata client's queued error reports to `errors`: librdkafka calls the error
        callback only when asked, and nothing else asks that client (the sidecar's cluster watch
        does, between polls, so that a refused or unresolvable cluster is named at once)."""
        self._admin.poll(0)

    def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        """Assign after the consumer itself learnt the topics' leaders: a partition assigned at
        OFFSET_BEGINNING before that waits librdkafka's fixed 500 ms "no current leader" retry
        before it asks for the offset, half a second added to each first read. A slow answer
        only loses that head start."""
        for topic in {tp.topic for tp in partitions}:
            try:
                super().list_topics(topic, timeout=EXISTS_TIMEOUT_S)
            except KafkaException:
                pass
        super().incremental_assign(partitions)


def assign_only_consumer(cluster: ClusterSettings) -> Consumer:
    config: dict[str, object] = {
        "group.id": f"mirrorlag-{uuid.uuid4().hex[:12]}",  # never joins: we assign()
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        # Out of range (a topic that came back shorter, see TopicReader._restart_shrunk): read
        # the new log from its start; librdkafka's default, latest, would skip what it holds.
        "auto.offset.reset": "earliest",
        # librdkafka <= 2.16 dereferences a NULL topic name (SIGSEGV in rd_kafka_metadata_update_op
        # -> rd_kafka_metadata_cache_find -> strcmp) when a Fetch answer carries a CurrentLeader
        # tag for a topic id it cannot name, as tansu sends for a deleted topic; the lookup only
        # compares names when the metadata cache holds an entry. Expiring entries at once keeps it
        # empty; the consumer needs none (leaders live in its topic handles; a lookup refetches).
        "metadata.max.age.ms": 1,
        # When more than queued.min.messages (100k) wait for the application, the next fetch is
        # put off by this much (default 1 s), however soon the queue drains: a restart's drain of
        # a large sync topic would sleep a second after every big fetch. Against Kafka (1 MB per
        # partition per fetch) the same happens whenever the reader is slower than its fetches,
        # as a Python reader is. 10 ms only checks the local queue more often; no extra requests.
        "fetch.queue.backoff.ms": 10,
        "logger": LIBRDKAFKA_LOGGER,
    }
    with refused_config(cluster):
        return FeedConsumer(cluster.client, config, ClientErrors(secret_values(cluster)))


def from_beginning(consumer: Consumer, topic: str, partition: int) -> int:
    return OFFSET_BEGINNING


def tail(records: int, timeout_s: float) -> Callable[[Consumer, str, int], int]:
    """Start `records` before the end: for topics that only ever grow (heartbeats)."""
    def start(consumer: Consumer, topic: str, partition: int) -> int:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout_s, cached=False)
        return max(low, high - records)
    return start


@dataclass
class TopicReader:
    """Drains `topics` on one cluster; `drain(apply)` calls `apply` for each record in order."""

    label: str  # what the topics are, for log lines ("offset-syncs")
    cluster_alias: str
    consumer: Consumer
    topics: Sequence[str]
    timeout_s: float
    start: Callable[[Consumer, str, int], int] = from_beginning
    on_gone: Callable[[str], None] = lambda topic: None
    _assigned: dict[str, list[int]] = field(default_factory=dict)  # topic -> partitions
    _missing_logged: set[str] = field(default_factory=set)
    _at_eof: set[tuple[str, int]] = field(default_factory=set)
    _read_through: set[str] = field(default_factory=set)  # topics read to their end at least once
    errors: ClientErrors = field(default_factory=ClientErrors)
    timed: bool = False  # apply gets each record's own timestamp too (ApplyTimed)

    def __post_init__(self) -> None:
        if isinstance(self.consumer, FeedConsumer):
            self.errors = self.consumer.errors  # one record for librdkafka's errors and ours

    @property
    def missing(self) -> list[str]:
        """Topics not found yet: the feed knows nothing from them."""
        return [t for t in self.topics if t not in self._assigned]

    def read_through(self, topic: str) -> bool:
        """Whether `topic` has been read to its end (since it was last found or restarted)."""
        return topic in self._read_through

    def unread(self, topic: str) -> str | None:
        """Why `topic` has not been read to its end yet (None once it has been): until then a
        partition with nothing in it may only not have been reached."""
        if topic in self._read_through:
            return None
        state = "not read to its end yet" if topic in self._assigned else "not found"
        return f"{self.label} topic {topic} on cluster {self.cluster_alias}: {state}"

    def drain(self, apply: Apply | ApplyTimed) -> None:
        self._sync_topics()
        if self._assigned:
            self._read_to_end(apply)

    def _sync_topics(self) -> None:
        """Forget assigned topics the cluster no longer has, assign the ones that appeared.

        Asked every poll, not left to the consumer: librdkafka drops the fetch errors of a deleted
        topic ("unknown topic: ignoring") without ever reporting them, and keeps fetching it.
        One topic per request: a full listing of a large cluster costs more than the poll."""
        new: list[TopicPartition] = []
        for topic in self.topics:
            assigned = topic in self._assigned
            try:
                metadata = self.consumer.list_topics(
                    topic, timeout=min(self.timeout_s, EXISTS_TIMEOUT_S) if assigned else self.timeout_s)
            except KafkaException as exc:
                # No answer: keep what we have and retry next poll. The short check timing out
                # says nothing (a slow cluster); anything else is the cluster failing us.
                if not (assigned and exc.args[0].code() == KafkaError._TIMED_OUT):
                    self.errors.record(exc.args[0])
                break
            self.errors.answered()
            meta = metadata.topics.get(topic)
            if assigned:
                if meta is None or (meta.error is not None and meta.error.code() in GONE_ERRORS):
                    self._forget(topic)
            elif (starts := self._starts(topic, meta)) is not None:
                self._assigned[topic] = [tp.partition for tp in starts]
                new += starts
        if new:
            self.consumer.incremental_assign(new)

    def _starts(self, topic: str, meta: TopicMetadata | None) -> list[TopicPartition] | None:
        """Where to start reading a topic that was missing; None while it still is."""
        if meta is None or meta.error is not None:
            if topic not in self._missing_logged:
                self._missing_logged.add(topic)
                log.warning("%s topic %s not found on cluster %s; waiting for it",
                            self.label, topic, self.cluster_alias)
            return None
        try:
            starts = [TopicPartition(topic, p, self.start(self.consumer, topic, p)) for p in sorted(meta.partitions)]
        except KafkaException as exc:
            log.debug("start offsets of %s on %s: %s; retrying next poll", topic, self.cluster_alias, exc)
            return None
        if topic in self._missing_logged:
            self._missing_logged.discard(topic)
            log.info("%s topic %s found on cluster %s", self.label, topic, self.cluster_alias)
        return starts

    def _read_to_end(self, apply: Apply | ApplyTimed) -> None:
        """Drain what has arrived; on a topic's first read, go on until each partition hit its end.

        A partition stays "at end" until a newer record arrives (librdkafka reports EOF once per
        arrival at the end), so a quiet topic costs one short consume per poll, not a timeout.
        A partition read up to the high watermark of its last fetch is at its end as well: the
        EOF for it comes only with the next fetch, which the broker holds for fetch.wait.max.ms
        (0.5 s) when nothing is new.
        """
        deadline = time.monotonic() + self.timeout_s
        timed = self.timed
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            messages = self.consumer.consume(num_messages=10_000, timeout=min(remaining, 0.1))
            gone: set[str] = set()
            at_eof = self._at_eof
            for msg in messages:  # the per-record loop of a restart's drain: keep it lean
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        at_eof.add((msg.topic(), msg.partition()))
                    elif err.code() in GONE_ERRORS:
                        if msg.topic() in self._assigned:
                            gone.add(msg.topic())
                    else:
                        self.errors.record(err)
                    continue
                if at_eof:  # empty while draining: no tuple per record
                    at_eof.discard((msg.topic(), msg.partition()))
                if timed:
                    apply(msg.topic(), msg.key(), msg.value(), msg.timestamp()[1])  # type: ignore[call-arg]
                else:
                    apply(msg.topic(), msg.key(), msg.value())  # type: ignore[call-arg]
            for topic in gone:
                self._forget(topic)
            assigned = {(t, p) for t, parts in self._assigned.items() for p in parts}
            if messages:
                self._mark_fetched_ends(assigned - at_eof)
            if not assigned or assigned <= self._at_eof:
                break
        self._read_through.update(topic for topic, partitions in self._assigned.items()
                                  if all((topic, p) in self._at_eof for p in partitions))
        self._restart_shrunk()

    def _mark_fetched_ends(self, partitions: set[tuple[str, int]]) -> None:
        """Add to `_at_eof` the partitions whose position reached the high watermark their last
        fetch brought (cached: no request). One that never reaches it (a transaction marker last,
        an open transaction) still gets librdkafka's EOF."""
        if not partitions:
            return
        for tp in self.consumer.position([TopicPartition(t, p) for t, p in partitions]):
            _, high = self.consumer.get_watermark_offsets(tp, cached=True)
            if 0 <= high <= tp.offset:
                self._at_eof.add((tp.topic, tp.partition))

    def _restart_shrunk(self) -> None:
        """A partition whose end is now below our position is a new log (the topic was deleted
        and recreated, or the broker came back empty): some brokers just return nothing for a
        fetch there, never "out of range", so compare with the high watermark the last fetch
        brought (cached: no request) and read the partition again from its start."""
        for topic, partitions in self._assigned.items():
            for partition, position in zip(partitions, self.consumer.position(
                    [TopicPartition(topic, p) for p in partitions])):
                if position.offset < 0:
                    continue  # nothing fetched yet
                _, high = self.consumer.get_watermark_offsets(TopicPartition(topic, partition), cached=True)
                if 0 <= high < position.offset:
                    log.warning("%s topic %s partition %d on cluster %s now ends at %d, before %d: "
                                "a new log; reading it from the start", self.label, topic, partition,
                                self.cluster_alias, high, position.offset)
                    self.consumer.seek(TopicPartition(topic, partition, OFFSET_BEGINNING))
                    self._at_eof.discard((topic, partition))

    def _forget(self, topic: str) -> None:
        """The topic was deleted: unassign it and wait for it to exist again."""
        log.warning("%s topic %s disappeared from cluster %s", self.label, topic, self.cluster_alias)
        partitions = self._assigned.pop(topic)
        self._read_through.discard(topic)
        self.consumer.incremental_unassign([TopicPartition(topic, p) for p in partitions])
        self._at_eof -= {(topic, p) for p in partitions}
        self.on_gone(topic)

    def close(self) -> None:
        self.consumer.close()
