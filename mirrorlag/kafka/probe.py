"""The source probe at LRO + 1 (docs/design.md §3, issue 23): one fetch from the source answers two rules.

- Transactions: after a committed transaction the last offset of a partition is a commit marker
  MM2 never copies, so LRO + 1 = LEO - 1 for ever. When `[LRO + 1, LEO)` holds no data record at
  the mirror's isolation level (only control records, or aborted records under read_committed),
  the partition is caught up.
- No history is no excuse: at a partition's first look, when it is not caught up, its time lag
  starts from the timestamp of record LRO + 1, the oldest record not copied yet.

`SourceProbe.probe` takes `(key, from_offset, leo)` requests (from_offset = LRO + 1) and answers,
per key, the timestamp (s) of the first data record at an offset in `[from_offset, leo)`, or None
when that range holds no data record. A key left out of the answer is unknown this call (rate
limit, timeout, broker error, a data record without a timestamp): never an exception.

What one fetch learns is a fact about the log that no later append changes, and it answers every
LEO, not only the one asked with: "the first data record at or after `from_offset` is at offset
o, appended at ts" answers any `leo` (ts when o < leo, else None), and "no data record in
`[from_offset, e)`" answers any `leo <= e`. The records a fetch already received past o prove
more at no cost: offsets o, o + 1, ..., r - 1 all handed over, no gap, are all data records (a
gap is a control record, an aborted record under read_committed, or compaction), which is what
retention's "lost means data" counts (docs/design.md §3). So the cache is keyed by `(topic, partition,
from_offset)`: a stalled mirror (LRO fixed, LEO growing) costs one fetch, not one per poll. A
topic deleted and created again starts a new log at the same offsets: `forget(topics)` drops what
was learnt about the old one.

The fetch assigns (never subscribes: no group to join, nothing committed) all the partitions of
one call at once at their start offsets and reads until each has its first data record or its
end (librdkafka skips control records and, under read_committed, aborted ones; with
`enable.partition.eof` it says when a partition's end is reached), or the call's timeout.
"""

from __future__ import annotations

import logging
import math
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Hashable, Iterable, Mapping, Protocol, Sequence

from cachetools import LRUCache
from confluent_kafka import (TIMESTAMP_NOT_AVAILABLE, Consumer, IsolationLevel, KafkaError, KafkaException,
                             TopicPartition)

from mirrorlag.config.settings import ClusterSettings, is_secret_key
from mirrorlag.kafka.source import LIBRDKAFKA_LOGGER, refused_config
from mirrorlag.kafka.topic_reader import ClientErrors

log = logging.getLogger(__name__)

TopicPart = tuple[str, int]
# What a fetch learnt about one partition from its start offset s:
#   (o, ts, r): the first data record at or after s is at offset o, appended at ts (seconds; NaN
#            when the record carries no timestamp), and every offset in [o, r) is a data record
#            (those the fetch received, consecutive from o; r = o + 1 when it saw only o; a
#            finding of two items says no more than that);
#   (e, None): no data record in [s, e) (e: where the partition's end was reached).
Finding = tuple[int, float | None] | tuple[int, float, int]
Request = tuple[Any, int, int]  # (the caller's key, from_offset, leo)

# Partitions one call fetches at most. One consumer fetches them all at once (a Fetch request
# per broker carrying many partitions, FETCH_BYTES_PER_PARTITION each): 100k partitions behind at
# start are proved in a poll or two (issue 30), where 1,000 a call took 100 polls.
DEFAULT_MAX_FETCHES = 100_000
DEFAULT_CACHE_SIZE = 100_000
DEFAULT_TIMEOUT_S = 5.0

# Why a request was or was not answered (mirrorlag_probe_outcomes_total{cluster,reason}).
ANSWERED = "answered"  # fetched this call and answered
CACHED = "cached"  # answered from what an earlier fetch learnt, no fetch
DEFERRED = "deferred"  # left for a later call by the per-call bound, or not reached in the call's time
NOT_AUTHORIZED = "not_authorized"  # the principal lacks Read on the topic (TOPIC_AUTHORIZATION_FAILED)
TIMEOUT = "timeout"  # no answer within the call's timeout
OUT_OF_RANGE = "out_of_range"  # LRO + 1 below the log start (retention deleted it) or past the end
ERROR = "error"  # any other broker or client error
REASONS = (ANSWERED, CACHED, DEFERRED, NOT_AUTHORIZED, TIMEOUT, OUT_OF_RANGE, ERROR)

_MISS = object()  # the cache cannot answer this leo: fetch


class Fetcher(Protocol):
    def fetch(self, starts: Mapping[TopicPart, int], timeout_s: float) -> dict[TopicPart, Finding]:
        """For each partition, what a read from its start offset found; a partition left out
        was not answered (error, timeout). Never raises for a broker's failure. A fetcher may
        say why in `failures` (TopicPart -> one of REASONS) for its last call; one left out of
        both is a TIMEOUT. It may say in `reached` how many of `starts` (in order) it got to
        before its time ran out: the rest are DEFERRED."""

    def close(self) -> None: ...


@dataclass
class ProbeStats:
    """Counters for the exporter (monotonic)."""

    probes_total: int = 0  # partition fetches started (one per source partition per call at most)
    cache_hits_total: int = 0  # requests answered from the cache, no fetch
    deferred_total: int = 0  # requests left for a later call: the per-call fetch limit, or the call's time ran out
    errors_total: int = 0  # requests fetched for but left unanswered (broker error, timeout)
    outcomes: dict[str, int] = field(default_factory=dict)  # requests by outcome (REASONS)

    def count(self, reason: str, n: int = 1) -> None:
        self.outcomes[reason] = self.outcomes.get(reason, 0) + n


def answer(finding: Finding, leo: int) -> Any:
    """What `finding` (from a start at or below from_offset, valid for it) says of
    `[from_offset, leo)`: a timestamp, None (no data record), or _MISS."""
    offset, ts = finding[0], finding[1]
    if ts is None:
        return None if leo <= offset else _MISS
    return ts if offset < leo else None


def data_end(finding: Finding) -> int:
    """The end of the run of data records a data finding proved from its first one."""
    return finding[2] if len(finding) > 2 else finding[0] + 1  # type: ignore[misc]


def covers(finding: Finding, start: int, from_offset: int) -> bool:
    """Whether a finding read from `start` also holds for a read from `from_offset`: the first
    data record at or after `start` is the first at or after any offset up to it, and an empty
    range stays empty in its sub-ranges."""
    return start <= from_offset <= finding[0]


class SourceProbe:
    """Answers `(key, from_offset, leo)` requests from a cache of facts, fetching the rest from
    the source, at most `max_fetches` partitions per call, oldest request first."""

    def __init__(self, client_config: Mapping[str, str] | None, isolation: str | IsolationLevel = "read_uncommitted",
                 max_fetches: int = DEFAULT_MAX_FETCHES, cache_size: int = DEFAULT_CACHE_SIZE,
                 timeout_s: float = DEFAULT_TIMEOUT_S, *, fetcher: Fetcher | None = None, cluster: str = "") -> None:
        if max_fetches < 0 or cache_size < 1 or timeout_s <= 0:
            raise ValueError("max_fetches >= 0, cache_size >= 1 and timeout_s > 0")
        if fetcher is None:
            if client_config is None:
                raise ValueError("a client configuration or a fetcher")
            fetcher = KafkaFetcher(client_config, isolation)
        self.fetcher = fetcher
        self.max_fetches = max_fetches
        self.timeout_s = timeout_s
        self.stats = ProbeStats()
        self.cluster = cluster  # its alias, for the log
        self._denied = False  # the last fetch met a topic the principal may not Read
        self._cache: LRUCache[tuple[str, int, int], Finding] = LRUCache(maxsize=cache_size)
        # The keys of requests waiting for a fetch, oldest first (a dict keeps insertion order):
        # a partition fetched goes to the back if it is asked again, so none waits for ever. The
        # callers' own key objects, not (topic, partition) tuples made here: in an outage nearly
        # every partition waits, and a new tuple each would outlive its poll's garbage and pin
        # the allocator's pools (~500 B a partition at 100k).
        self._waiting: dict[Hashable, None] = {}

    @classmethod
    def for_cluster(cls, cluster: ClusterSettings, isolation: str | IsolationLevel = "read_uncommitted",
                    **kwargs: Any) -> "SourceProbe":
        """A probe on `cluster` (its librdkafka client config); a configuration librdkafka
        refuses (TLS material it cannot read) is a ConfigError, as for every other client."""
        with refused_config(cluster):
            return cls(cluster.client, isolation, cluster=cluster.alias, **kwargs)

    def probe(self, requests: Iterable[Request], offsets: dict[Hashable, int] | None = None,
              runs: dict[Hashable, int] | None = None) -> dict[Hashable, float | None]:
        """Per key answered: the timestamp (s) of the first data record in [from_offset, leo),
        or None when that range holds none (caught up). Keys left out are unknown this call.
        `offsets`, when given, gets per key whose range holds a data record that record's offset
        (what retention deletes below it is no data: docs/design.md §3, "Lost means data"), and `runs`
        the end r of the run of data records proved from it: every offset in [that, r) is one."""
        out: dict[Hashable, float | None] = {}
        stats = self.stats
        cache = self._cache
        misses: dict[TopicPart, list[Request]] = {}
        cached = 0
        for request in requests:
            key, from_offset, leo = request
            if from_offset >= leo:  # an empty range: nothing to read
                out[key] = None
                continue
            topic, partition = key[-2], key[-1]
            finding = cache.get((topic, partition, from_offset))
            if finding is not None and (result := answer(finding, leo)) is not _MISS:
                cached += 1
                self._answer(key, finding, result, out, offsets, runs)
                continue
            misses.setdefault((topic, partition), []).append(request)
        if cached:
            stats.cache_hits_total += cached
            stats.count(CACHED, cached)
        if not misses:
            self._waiting.clear()
            return out

        chosen = self._choose(misses)
        for tp, asked in misses.items():
            if tp not in chosen:
                stats.deferred_total += len(asked)
                stats.count(DEFERRED, len(asked))
        if not chosen:
            return out
        starts = {tp: min(r[1] for r in misses[tp]) for tp in chosen}
        try:
            findings = self.fetcher.fetch(starts, self.timeout_s)
            reached = getattr(self.fetcher, "reached", len(starts))
        except Exception:  # a client's failure is a poll without answers, never the caller's
            log.warning("source probe failed", exc_info=True)
            findings, reached = {}, len(starts)
        stats.probes_total += reached
        failures: Mapping[TopicPart, str] = getattr(self.fetcher, "failures", None) or {}
        denied: list[str] = []
        unreached: dict[Hashable, None] = {}
        for i, (tp, start) in enumerate(starts.items()):
            finding = findings.get(tp)
            if finding is None:
                reason = failures.get(tp, TIMEOUT) if i < reached else DEFERRED
                stats.count(reason, len(misses[tp]))
                if reason == DEFERRED:  # the call's time ran out before its turn: never fetched
                    stats.deferred_total += len(misses[tp])
                    unreached.update((r[0], None) for r in misses[tp])
                    continue
                stats.errors_total += len(misses[tp])
                if reason == NOT_AUTHORIZED:
                    denied.append(tp[0])
                continue
            topic, partition = tp
            for key, from_offset, leo in misses[tp]:
                if not covers(finding, start, from_offset):
                    # Another flow's LRO further on than the first data record read: its own
                    # fetch, at a later call.
                    stats.deferred_total += 1
                    stats.count(DEFERRED)
                    self._waiting[key] = None
                    continue
                cache[(topic, partition, from_offset)] = finding
                result = answer(finding, leo)
                if result is _MISS:  # the end was reached below leo (e.g. LSO below the HWM)
                    stats.errors_total += 1
                    stats.count(OUT_OF_RANGE)
                else:
                    stats.count(ANSWERED)
                    self._answer(key, finding, result, out, offsets, runs)
        if unreached:  # first in line next call: partitions tried and failed go behind them
            self._waiting = {**unreached, **self._waiting}
        self._say_denied(denied)
        return out

    @staticmethod
    def _answer(key: Hashable, finding: Finding, result: Any, out: dict[Hashable, float | None],
                offsets: dict[Hashable, int] | None, runs: dict[Hashable, int] | None) -> None:
        if result is not None and offsets is not None:
            offsets[key] = finding[0]  # a data record, with or without a timestamp
            if runs is not None:
                runs[key] = data_end(finding)
        if result == result:  # not NaN (a data record without a timestamp: its time unknown)
            out[key] = result

    def _say_denied(self, topics: list[str]) -> None:
        """Log a probe the cluster refuses for want of Read once per change, naming the ACL."""
        if bool(topics) == self._denied:
            return
        self._denied = bool(topics)
        if topics:
            names = sorted(set(topics))
            log.warning("source probe on cluster %s: not authorized to read %d partition(s) of %s%s: grant the "
                        "principal Read on the source topics (ACL: Read on Topic). Until then partitions whose "
                        "claim needs the probe read a flagged lower bound of their time lag "
                        "(mirrorlag_probe_outcomes_total{reason=\"not_authorized\"})",
                        self.cluster, len(topics), ", ".join(names[:3]), " ..." if len(names) > 3 else "")
        else:
            log.info("source probe on cluster %s: authorized again", self.cluster)

    def _choose(self, misses: Mapping[TopicPart, list[Request]]) -> dict[TopicPart, None]:
        """Up to max_fetches partitions, those waiting longest first (in that order); the rest
        wait on."""
        waiting = self._waiting
        asked = {request[0]: None for requests in misses.values() for request in requests}
        for key in asked:
            if key not in waiting:
                waiting[key] = None  # new: at the back
        chosen: dict[TopicPart, None] = {}
        if self.max_fetches:
            for key in waiting:
                tp = (key[-2], key[-1])
                if tp in misses and tp not in chosen:
                    chosen[tp] = None
                    if len(chosen) >= self.max_fetches:
                        break
        # Keys no longer asked (answered from the cache, or gone) stop waiting.
        self._waiting = {key: None for key in waiting if key in asked and (key[-2], key[-1]) not in chosen}
        return chosen

    def forget(self, topics: Iterable[str]) -> int:
        """Drops what was learnt about `topics` (deleted and created again: a new log at the same
        offsets); returns how many facts went. Scans the cache: for rare events."""
        names = set(topics)
        stale = [k for k in self._cache if k[0] in names]
        for k in stale:
            del self._cache[k]
        self._waiting = {key: None for key in self._waiting if key[-2] not in names}
        return len(stale)

    @property
    def cached(self) -> int:
        return len(self._cache)

    def close(self) -> None:
        self.fetcher.close()


def failure_reason(code: int) -> str:
    """The outcome a fetch error stands for."""
    if code == KafkaError.TOPIC_AUTHORIZATION_FAILED:
        return NOT_AUTHORIZED
    if code in (KafkaError.OFFSET_OUT_OF_RANGE, KafkaError._AUTO_OFFSET_RESET):  # auto.offset.reset=error
        return OUT_OF_RANGE
    return ERROR


class KafkaFetcher:
    """Reads the source from given offsets with one reused, assign-only consumer."""

    # Per partition and fetch, what the broker may return: only the first data record is wanted
    # (a broker returns at least one whole batch however small this is, KIP-74), and 1,000
    # partitions at 1 MB each (the default) would be a gigabyte read for 1,000 timestamps.
    FETCH_BYTES_PER_PARTITION = 1024
    # While nothing arrives, how often the partitions still open are checked for a start past
    # their end.
    IDLE_CHECK_S = 0.1
    # librdkafka keeps the high watermark of a partition's last fetch across assignments: one
    # from an earlier call may be below a start the log has grown past since. Only a watermark
    # this old after the assign comes from this call's fetches on a broker that answers at all.
    PAST_END_AFTER_S = 0.5
    # How often that check runs at most: it asks librdkafka for every open partition's watermark
    # (~4 µs each), 0.4 s at 100k partitions.
    PAST_END_EVERY_S = 1.0
    # What one fetch response may carry, and what librdkafka may hold queued: a bound on the
    # probe's memory however many partitions a call reads (each gets at least its first batch).
    FETCH_MAX_BYTES = 16 * 1024 * 1024
    # Partitions one assignment reads (see fetch), and how long a chunk with partitions still
    # open may go without an answer before the next chunk's turn.
    CHUNK_PARTITIONS = 5000
    CHUNK_IDLE_S = 1.0
    # librdkafka keeps ~2 KB of state per partition ever assigned, and more with each assignment
    # a broker does not answer; only closing the consumer frees it. So after this many partitions
    # (a start with every partition behind, an outage) the next call gets a new consumer.
    RENEW_AFTER_PARTITIONS = CHUNK_PARTITIONS

    def __init__(self, client_config: Mapping[str, str], isolation: str | IsolationLevel = "read_uncommitted") -> None:
        name = isolation.name.lower() if isinstance(isolation, IsolationLevel) else str(isolation)
        if name not in ("read_uncommitted", "read_committed"):
            raise ValueError(f"isolation level {isolation!r}: read_uncommitted or read_committed")
        self.isolation = name
        self.errors = ClientErrors(tuple(v for k, v in client_config.items() if v and is_secret_key(k)))
        config: dict[str, object] = {
            **client_config,
            "group.id": f"mirrorlag-probe-{uuid.uuid4().hex[:12]}",  # never joins: we assign()
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,  # the end of a partition is an answer: no data record
            "isolation.level": name,
            # A start offset below the log start (retention deleted it) or past the end: an
            # error for that partition, never a read from somewhere else.
            "auto.offset.reset": "error",
            # The broker holds an empty fetch this long: at the default (500 ms) a call whose
            # partitions are all at their end, or the next call's assign, waits behind it.
            "fetch.wait.max.ms": 10,
            "max.partition.fetch.bytes": self.FETCH_BYTES_PER_PARTITION,
            "fetch.max.bytes": self.FETCH_MAX_BYTES,
            "queued.max.messages.kbytes": self.FETCH_MAX_BYTES // 1024,
            # See topic_reader.assign_only_consumer: librdkafka <= 2.16 crashes on a Fetch answer
            # naming a deleted topic's id while its metadata cache holds entries.
            "metadata.max.age.ms": 1,
            "fetch.queue.backoff.ms": 10,
            "logger": LIBRDKAFKA_LOGGER,
            "error_cb": self.errors.record,
        }
        self._config = config
        self._consumer: Consumer | None = Consumer(config)
        self._assigned = 0  # partitions the consumer was handed since it was made
        self.failures: dict[TopicPart, str] = {}  # the last call's unanswered partitions, and why
        self.reached = 0  # of the last call's partitions (in order), how many it got to in its time

    def fetch(self, starts: Mapping[TopicPart, int], timeout_s: float) -> dict[TopicPart, Finding]:
        consumer = self._consumer
        if consumer is None:
            raise RuntimeError("the probe is closed")
        found: dict[TopicPart, Finding] = {}
        self.failures = {}
        deadline = time.monotonic() + timeout_s
        items = list(starts.items())
        # A chunk at a time, until the call's deadline: librdkafka's assign and unassign cost
        # grows faster than the partitions they name (a wakeup of the broker thread per
        # partition), 100k at once took minutes; CHUNK_PARTITIONS still go out as one Fetch
        # request per broker.
        lo = 0
        while lo < len(items) and time.monotonic() < deadline:
            errors_before = self.errors.total
            last = lo + self.CHUNK_PARTITIONS >= len(items)
            heard = self._read(consumer, dict(items[lo:lo + self.CHUNK_PARTITIONS]), deadline, found, last)
            lo += self.CHUNK_PARTITIONS
            if not heard and self.errors.total > errors_before:
                break  # a cluster that refuses connections: the next chunks would wait the same
        self.reached = min(lo, len(items))
        self._assigned += self.reached
        if self._assigned >= self.RENEW_AFTER_PARTITIONS:
            self._consumer = None
            consumer.close()
            self._consumer, self._assigned = Consumer(self._config), 0
        return found

    def _read(self, consumer: Consumer, starts: Mapping[TopicPart, int], deadline: float,
              found: dict[TopicPart, Finding], last: bool) -> bool:
        """One assignment of `starts`, read until each has its answer or the deadline; a chunk
        that is not the `last` is left once nothing arrived for CHUNK_IDLE_S (a partition that
        does not answer must not hold up the chunks after it). Whether any partition answered."""
        failures = self.failures
        open_: dict[TopicPart, int] = dict(starts)
        paused: list[TopicPartition] = []
        consumer.assign([TopicPartition(t, p, s) for (t, p), s in starts.items()])
        assigned_at = progress_at = time.monotonic()
        past_end_due = assigned_at + self.PAST_END_AFTER_S
        try:
            while open_:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                first = consumer.poll(min(remaining, self.IDLE_CHECK_S))
                if first is None:
                    if time.monotonic() >= past_end_due:
                        self._give_up_past_the_end(consumer, open_)
                        past_end_due = time.monotonic() + self.PAST_END_EVERY_S
                    if not last and time.monotonic() - progress_at >= self.CHUNK_IDLE_S:
                        break
                    continue
                progress_at = time.monotonic()
                done: list[TopicPartition] = []
                for message in (first, *consumer.consume(10_000, 0)):
                    topic = message.topic()
                    tp = (topic, message.partition())
                    start = open_.get(tp)
                    if start is None:  # answered already, or not a partition's event
                        # A record received already, right after the run proved so far, extends
                        # it: records come in offset order, so after a gap (a marker, an aborted
                        # record, compaction) none is ever at the run's end again.
                        f = found.get(tp)
                        if f is not None and len(f) > 2 and message.error() is None and message.offset() == f[2]:
                            found[tp] = (f[0], f[1], f[2] + 1)  # type: ignore[misc]
                        continue
                    error = message.error()
                    if error is None:
                        offset = message.offset()
                        if offset < start:  # left over from an earlier assignment
                            continue
                        kind, ms = message.timestamp()
                        found[tp] = (offset, ms / 1000 if kind != TIMESTAMP_NOT_AVAILABLE and ms >= 0 else math.nan,
                                     offset + 1)
                    elif error.code() == KafkaError._PARTITION_EOF:
                        found[tp] = (max(message.offset(), start), None)
                    else:  # out of range, unknown partition, not authorized: unanswered
                        self.errors.record(error)
                        failures[tp] = failure_reason(error.code())
                        log.debug("source probe of %s[%d] from %d: %s", topic, tp[1], start, error)
                    del open_[tp]
                    done.append(TopicPartition(topic, tp[1]))
                if done and open_:
                    consumer.pause(done)  # answered: no more fetches for them this call
                    paused += done
        finally:
            if paused:  # a pause outlives unassign(): the next assign of them would never fetch
                consumer.resume(paused)
            consumer.unassign()
        if not open_:
            self.errors.answered()
        return len(open_) < len(starts)

    def _give_up_past_the_end(self, consumer: Consumer, open_: dict[TopicPart, int]) -> None:
        """Drops partitions whose start is past the end their fetches report (a log that came
        back shorter than the LEO asked with): Kafka answers OFFSET_OUT_OF_RANGE (an error event,
        with auto.offset.reset=error), but a broker that answers such a fetch with an empty set
        (tansu) would hold the whole call to its timeout."""
        for (topic, partition), start in list(open_.items()):
            try:
                _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), cached=True)
            except KafkaException:
                continue
            if 0 <= high < start:
                del open_[(topic, partition)]
                self.failures[(topic, partition)] = OUT_OF_RANGE
                log.debug("source probe of %s[%d] from %d: past the end (%d)", topic, partition, start, high)

    def close(self) -> None:
        if self._consumer is not None:
            consumer, self._consumer = self._consumer, None
            consumer.close()


__all__: Sequence[str] = ("SourceProbe", "ProbeStats", "KafkaFetcher", "Fetcher", "Finding")
