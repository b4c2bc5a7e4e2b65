"""Reading a source cluster: which partitions each flow mirrors, and their log-end offsets."""

from __future__ import annotations

import concurrent.futures
import logging
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping, Sequence

from confluent_kafka import (OFFSET_BEGINNING, OFFSET_END, IsolationLevel, KafkaError, KafkaException, TopicCollection,
                             TopicPartition)
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import _AdminClientImpl

from mirrorlag.config.settings import ClusterSettings, FlowSettings, is_secret_key
from mirrorlag.errors import ConfigError
from mirrorlag.model import FlowId

# librdkafka logs every reconnect; the poller logs state changes once instead.
LIBRDKAFKA_LOGGER = logging.getLogger("mirrorlag.librdkafka")
log = logging.getLogger(__name__)

TopicPart = tuple[str, int]
# A flow's partitions as metadata lists them: per topic (sorted by name), its partition numbers
# (sorted), as `range(n)` for the usual 0..n-1. A few objects per topic, not a tuple per partition
# that every discovery would build again.
Topology = tuple[tuple[str, Sequence[int]], ...]


# What ListOffsets is asked for: anything whose last two items are a topic and a partition number,
# a TopicPart or the poller's PartitionKey; answers are keyed by the objects asked.
PartitionRef = Sequence[Any]


def partitions_of(topology: Topology) -> list[TopicPart]:
    """The topology's partitions as (topic, partition) pairs."""
    return [(topic, p) for topic, numbers in topology for p in numbers]


def _numbers(partitions: Iterable[int]) -> Sequence[int]:
    """Partition numbers, sorted: range(n) when they are 0..n-1 (distinct and never negative, so
    a largest of n - 1 says so)."""
    numbers = list(partitions)
    return range(len(numbers)) if not numbers or max(numbers) == len(numbers) - 1 else tuple(sorted(numbers))


class SourceUnavailable(Exception):
    """Metadata or offsets could not be read from a source cluster this poll."""


class SourceAdmin(AdminClient):
    """An admin client that remembers librdkafka's last error report. A failed request only
    says "Broker transport failure"; the cause ("SSL handshake failed: certificate verify
    failed", "SASL authentication error") reaches the error callback alone."""

    def __init__(self, config: dict[str, object], secrets: Sequence[str]) -> None:
        self.last_error: str | None = None
        self._secrets = tuple(secrets)
        super().__init__({**config, "error_cb": self._record})

    def _record(self, err: KafkaError) -> None:
        self.last_error = masked(err.str(), self._secrets)[:300]


def make_admin(cluster: ClusterSettings, timeout_s: float) -> SourceAdmin:
    config: dict[str, object] = dict(cluster.client)
    config.setdefault("socket.timeout.ms", str(int(timeout_s * 1000)))
    config["logger"] = LIBRDKAFKA_LOGGER
    with refused_config(cluster):
        return SourceAdmin(config, secret_values(cluster))


def secret_values(cluster: ClusterSettings) -> tuple[str, ...]:
    """The cluster's secret config values (passwords, JAAS config, keys): never in a message."""
    return tuple(value for key, value in cluster.client.items() if value and is_secret_key(key))


def masked(text: str, secrets: Iterable[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, "***")
    return text


@contextmanager
def refused_config(cluster: ClusterSettings) -> Iterator[None]:
    """Turns librdkafka refusing a client it is asked to build into a one-line config error.

    librdkafka reads TLS material when a client is built: a truststore that is not there, or a
    key its password does not open, fail then with _INVALID_ARG, which must not end the command
    in a traceback."""
    try:
        yield
    except KafkaException as exc:
        err = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
        if err is None or err.code() != KafkaError._INVALID_ARG:
            raise
        text = masked(err.str(), secret_values(cluster))
        raise ConfigError(f"librdkafka cannot build a client with this configuration: {text}",
                          key=f"cluster {cluster.alias}") from None


def submit_list_offsets(admin: AdminClient, request: list[TopicPartition], isolation: IsolationLevel,
                        timeout_s: float) -> concurrent.futures.Future:
    """One ListOffsets request (each TopicPartition's offset field is its OffsetSpec value) whose
    future's result maps each partition to a ListOffsetsResultInfo, or to its KafkaError.

    This is the C call behind `AdminClient.list_offsets`, made directly: the public wrapper adds a
    TopicPartition, an OffsetSpec, a Future and a callback per partition, client CPU that would
    outweigh the request itself on a large poll. tests/integration checks it answers exactly as
    the public wrapper does."""
    future: concurrent.futures.Future = concurrent.futures.Future()
    future.set_running_or_notify_cancel()  # as the wrapper's futures: running, never cancelled
    _AdminClientImpl.list_offsets(admin, request, future, isolation_level_value=isolation.value,
                                  request_timeout=timeout_s)
    return future


@dataclass
class PendingOffsets:
    """ListOffsets requests in flight: the partitions asked and, per chunk, those it asked, their
    TopicPartitions and its future.

    Answers are keyed by the partitions asked (PartitionRef: the poller asks with its own
    PartitionKeys, so it keeps no (topic, partition) pair per partition)."""

    partitions: Sequence[PartitionRef]
    chunks: list[tuple[Sequence[PartitionRef], list[TopicPartition], concurrent.futures.Future]]
    deadline: float  # time.monotonic() after which an unanswered chunk counts as failed
    collected: tuple[dict[PartitionRef, int | None], BaseException | KafkaError | None] | None = None

    def collect(self) -> tuple[dict[PartitionRef, int | None], BaseException | KafkaError | None]:
        """Every partition asked, its offset or None, and the first error seen (if any). Each
        chunk's answer is dropped as soon as it is read, so a poll's result objects (one per
        partition) are freed a chunk at a time, not in one long cascade that holds the GIL; the
        outcome is kept for a second call."""
        if self.collected is not None:
            return self.collected
        done, _ = concurrent.futures.wait([future for _, _, future in self.chunks],
                                          timeout=max(0.0, self.deadline - time.monotonic()))
        chunks, self.chunks = self.chunks, []
        offsets: dict[PartitionRef, int | None] = dict.fromkeys(self.partitions)
        first_error: BaseException | KafkaError | None = None
        while chunks:
            asked, request, future = chunks.pop()
            if future not in done:
                continue
            if (exc := future.exception()) is not None:
                first_error = first_error or exc
                continue
            result = future.result()
            for partition, info in zip(asked, map(result.get, request)):
                if isinstance(info, KafkaError):
                    first_error = first_error or info
                elif info is not None:
                    offsets[partition] = info.offset
            del result, future
        del done
        self.collected = (offsets, first_error)
        return self.collected


# Where metadata is read at every poll, a discovery reads the topic IDs of at most this many known
# partitions' topics (new topics' always): a topic recreated between two polls is told within
# ceil(partitions / this) polls.
TOPIC_ID_PARTITIONS_PER_DISCOVERY = 25_000


@dataclass
class SourceCluster:
    """One source cluster's admin client and the flows that read from it.

    Between discoveries it remembers each replicated topic's partitions and topic ID (KIP-516): a
    topic-level metadata error other than "does not exist" keeps the topic with the partitions it
    had, and a topic whose ID changed was deleted and created again (`recreated`)."""

    alias: str
    admin: AdminClient
    flows: Sequence[FlowSettings]
    timeout_s: float
    chunk_size: int
    isolation: IsolationLevel
    # Where the source's flows read at different levels (MM2's consumer of each flow has its own),
    # each flow's level by target alias; ListOffsets is then one request per level, each partition
    # asked as a key of a flow at that level. Empty: every flow reads at `isolation`.
    isolation_by_target: Mapping[str, IsolationLevel] = field(default_factory=dict)
    # Topics kept on a metadata answer that did not prove them gone, counted: a topic-level error
    # other than "does not exist", or a known topic absent from the listing and not said to be
    # gone by the request naming it (a flapping listing shows here).
    metadata_errors: int = 0
    # The replicated topics whose topic ID changed at the last discovery (deleted and created again).
    recreated: frozenset[str] = frozenset()
    # Topics the last discovery kept although the listing omitted them and the request naming them
    # did not answer whether they exist (an error, or no answer): the metadata is worth reading
    # again at the next poll rather than at its usual age.
    unresolved: frozenset[str] = frozenset()
    # Whether a discovery on the metadata cadence reads the known topics' IDs a capped slice at a
    # time (TOPIC_ID_PARTITIONS_PER_DISCOVERY: metadata read at every poll) or all of them (metadata
    # on a cadence of its own: a recreated topic is told within one max age).
    cap_id_reads: bool = True
    # The topics whose topic ID the last discovery read (answered).
    ids_read: frozenset[str] = frozenset()
    _partitions: dict[str, Sequence[int]] = field(default_factory=dict)  # topic -> partitions, last discovery
    _topic_ids: dict[str, str] = field(default_factory=dict)  # topic -> its topic ID, last seen
    _id_cursor: int = 0  # where the next discovery's topic-ID check starts among the known topics
    _absent: frozenset[str] = frozenset()  # topics kept while absent from the listing, last discovery

    def discover(self, ids_of: Iterable[str] | None = None) -> dict[FlowId, Topology]:
        """The partitions each flow replicates, from a fresh metadata request; `recreated` names
        the replicated topics whose topic ID changed since the previous discovery.

        The topic IDs read (DescribeTopics costs the client ~10 µs a partition): new topics'
        always; with `ids_of` None (a read on the metadata cadence) the known topics' (see
        `cap_id_reads`), else only those of the known topics in `ids_of` (a read that a poll's
        end offsets set off: the topics whose end offset failed or went back).

        Only an answer that a topic does not exist, to a request naming it, drops it (docs/design.md §3,
        GONE). A full listing that omits a known topic is no such answer (a lost Describe ACL, a
        broker whose metadata cache is still filling): the omitted topics are asked by name, in
        one DescribeTopics request, and are dropped only where it answers UNKNOWN_TOPIC_OR_PART;
        otherwise they keep the partitions of the previous discovery. Those, and any other
        topic-level error, count in `metadata_errors`."""
        # The topic IDs of the topics known so far are asked first, so that round trip overlaps
        # the metadata request; those of new topics, and the omitted ones, are asked after it.
        before = self._partitions
        known_ids = self._request_topic_ids(self._topics_to_check() if ids_of is None
                                            else sorted(set(ids_of).intersection(before)))
        try:
            metadata = self.admin.list_topics(timeout=self.timeout_s)
        except KafkaException as exc:
            raise SourceUnavailable(f"metadata from cluster {self.alias}: {exc.args[0]}{self._cause()}") from None
        if isinstance(self.admin, SourceAdmin):
            self.admin.last_error = None  # answered: an older error is no cause of a later failure
        numbers: dict[str, Sequence[int]] = {}
        for name, meta in metadata.topics.items():
            if meta.error is None:
                numbers[name] = _numbers(meta.partitions)
            elif meta.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                continue  # a listing's word: absent, asked by name below if it was known
            else:
                self.metadata_errors += 1
                if name in before:
                    numbers[name] = before[name]
                log.debug("metadata from cluster %s: topic %s: %s; keeping its partitions", self.alias, name, meta.error)
        listed = {t for t in numbers if any(flow.should_replicate(t) for flow in self.flows)}
        absent = sorted(t for t in before if t not in numbers)
        # One request names the new topics (their IDs) and the omitted ones (do they exist?).
        asked = self._request_topic_ids(sorted(t for t in listed if t not in before) + absent)
        futures = {**known_ids, **asked}
        concurrent.futures.wait(list(futures.values()), timeout=self.timeout_s + 1)
        kept, unresolved = self._settle_absent(absent, asked)
        numbers.update((t, before[t]) for t in kept)
        replicated = listed | kept
        self._partitions = {t: numbers[t] for t in replicated}
        self.unresolved = frozenset(unresolved)
        self.recreated = frozenset(self._check_topic_ids(futures, replicated))
        topics = sorted(replicated)
        return {flow.id: tuple((t, numbers[t]) for t in topics if flow.should_replicate(t)) for flow in self.flows}

    def _settle_absent(self, absent: list[str],
                       answers: Mapping[str, concurrent.futures.Future]) -> tuple[set[str], set[str]]:
        """Of the known topics the listing omitted, those kept (all but the ones the request naming
        them says do not exist) and, among them, those it did not answer about (an error other
        than "does not exist", or no answer). Each kept one counts as a metadata error."""
        kept: set[str] = set()
        unresolved: set[str] = set()
        for topic in absent:
            answer = _existence(answers.get(topic))
            if answer is False:
                continue  # the request naming it says it does not exist: GONE
            kept.add(topic)
            if answer is None:
                unresolved.add(topic)
        self.metadata_errors += len(kept)
        if kept and frozenset(kept) != self._absent:  # once per change, not at every discovery
            log.warning("metadata from cluster %s: %d known topic(s) absent from the listing (%s), kept: "
                        "the request naming them %s", self.alias, len(kept), ", ".join(sorted(kept)[:5]),
                        "did not answer for all of them" if unresolved else "says they exist")
        self._absent = frozenset(kept)
        return kept, unresolved

    def _topics_to_check(self) -> list[str]:
        """The known topics whose IDs a discovery on the cadence reads: all of them up to
        TOPIC_ID_PARTITIONS_PER_DISCOVERY partitions (or without `cap_id_reads`), else the next
        topics in turn up to that many, so that every topic is read within a few discoveries. DescribeTopics costs the
        client ~10 µs a partition (it builds an object for every partition and replica): 0.8 s
        a read at 100k partitions, more than the rest of the metadata read."""
        known = self._partitions
        if not self.cap_id_reads or sum(map(len, known.values())) <= TOPIC_ID_PARTITIONS_PER_DISCOVERY:
            return list(known)
        topics = sorted(known)
        start = self._id_cursor % len(topics)
        chosen: list[str] = []
        partitions = 0
        for topic in topics[start:] + topics[:start]:
            if partitions >= TOPIC_ID_PARTITIONS_PER_DISCOVERY:
                break
            chosen.append(topic)
            partitions += len(known[topic])
        self._id_cursor = start + len(chosen)
        return chosen

    def _request_topic_ids(self, topics: list[str]) -> dict[str, concurrent.futures.Future]:
        """DescribeTopics for `topics`, sent at once: per topic, a future of its description."""
        if not topics:
            return {}
        try:
            return self.admin.describe_topics(TopicCollection(topics), request_timeout=self.timeout_s)
        except (KafkaException, AttributeError, TypeError, ValueError) as exc:  # a stand-in admin, a refused request
            log.debug("topic IDs from cluster %s: %s", self.alias, exc)
            return {}

    def _check_topic_ids(self, futures: Mapping[str, concurrent.futures.Future], replicated: set[str]) -> set[str]:
        """Reads the topic IDs answered (discover has waited for them), keeps the newest of each
        replicated topic, and returns the topics whose ID differs from the one seen before. A topic
        whose ID could not be read this time keeps its last one (it is compared at the next
        discovery that reads it)."""
        changed: set[str] = set()
        ids = {t: i for t, i in self._topic_ids.items() if t in replicated}
        read: set[str] = set()
        for topic, future in futures.items():
            if topic not in replicated or not future.done() or future.exception() is not None:
                continue
            topic_id = str(future.result().topic_id)
            before = ids.get(topic)
            if before is not None and before != topic_id:
                changed.add(topic)
            ids[topic] = topic_id
            read.add(topic)
        self._topic_ids = ids
        self.ids_read = frozenset(read)
        return changed

    def request_end_offsets(self, partitions: Sequence[PartitionRef]) -> PendingOffsets:
        """Sends ListOffsets `latest` for `partitions` and returns at once: a poll asks for the
        partitions it already knows before the metadata request, so the round trips overlap."""
        return self._request(partitions, OFFSET_END)

    def end_offsets(self, partitions: Iterable[PartitionRef],
                    pending: PendingOffsets | None = None) -> dict[PartitionRef, int | None]:
        """ListOffsets `latest`: the offset the next record will get (the LEO, or the LSO).
        Partitions `pending` asked for are taken from its answer; only the others are asked now."""
        return self.list_offsets(partitions, OFFSET_END, "end offsets", pending)

    def start_offsets(self, partitions: Iterable[PartitionRef]) -> dict[PartitionRef, int | None]:
        """ListOffsets `earliest`: the log start, which retention moves forward."""
        return self.list_offsets(partitions, OFFSET_BEGINNING, "log-start offsets")

    def list_offsets(self, partitions: Iterable[PartitionRef], spec: int, what: str,
                     pending: PendingOffsets | None = None) -> dict[PartitionRef, int | None]:
        """ListOffsets (`spec`: OFFSET_END for latest, OFFSET_BEGINNING for earliest); a partition
        that fails maps to None. Raises SourceUnavailable when nothing at all came back."""
        partitions = list(partitions)
        if not partitions:
            return {}
        answered, error = pending.collect() if pending is not None else ({}, None)
        offsets = {tp: answered.get(tp) for tp in partitions}
        if missing := [tp for tp in partitions if tp not in answered]:
            more, more_error = self._request(missing, spec).collect()
            offsets.update(more)
            error = error or more_error
        if all(v is None for v in offsets.values()):
            reason = error or f"no answer within {int(self.timeout_s * 1000)} ms"
            raise SourceUnavailable(f"{what} from cluster {self.alias}: {reason}{self._cause()}")
        return offsets

    def _request(self, partitions: Sequence[PartitionRef], spec: int) -> PendingOffsets:
        """ListOffsets in concurrent chunks. Many small requests in flight beat a few big ones:
        librdkafka's CPU per request grows with the square of its partitions."""
        chunks = []
        for isolation, group in self._by_isolation(partitions):
            for i in range(0, len(group), self.chunk_size):
                asked = group[i:i + self.chunk_size]
                request = [TopicPartition(tp[-2], tp[-1], spec) for tp in asked]
                chunks.append((asked, request, submit_list_offsets(self.admin, request, isolation, self.timeout_s)))
        return PendingOffsets(partitions, chunks, time.monotonic() + self.timeout_s + 1)

    def _by_isolation(self, partitions: Sequence[PartitionRef]) -> list[tuple[IsolationLevel, Sequence[PartitionRef]]]:
        """The partitions per isolation level they are read at: a key's flow's (its target alias),
        `isolation` for anything else."""
        levels = self.isolation_by_target
        if not levels:
            return [(self.isolation, partitions)]
        groups: dict[IsolationLevel, list[PartitionRef]] = {}
        for ref in partitions:
            level = levels.get(getattr(ref, "target", None), self.isolation)  # type: ignore[arg-type]
            groups.setdefault(level, []).append(ref)
        return list(groups.items())

    def _cause(self) -> str:
        if not isinstance(self.admin, SourceAdmin):  # a stand-in (benchmarks, tests)
            return ""
        self.admin.poll(0)  # serves the error callbacks librdkafka has queued
        last = self.admin.last_error
        return f" (last client error: {last})" if last else ""


# What a request naming a topic answers when the topic does not exist, by name or by topic ID.
_DOES_NOT_EXIST = frozenset({KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.UNKNOWN_TOPIC_ID})


def _existence(answer: concurrent.futures.Future | None) -> bool | None:
    """What DescribeTopics said of a topic: True (described), False (it does not exist), None (no
    answer: not asked, not answered in time, or another error such as an authorization failure)."""
    if answer is None or not answer.done():
        return None
    exc = answer.exception()
    if exc is None:
        return True
    err = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
    return False if isinstance(err, KafkaError) and err.code() in _DOES_NOT_EXIST else None


def isolation_level(name: str) -> IsolationLevel:
    return IsolationLevel.READ_COMMITTED if name == "read_committed" else IsolationLevel.READ_UNCOMMITTED
