"""Reading the target cluster: the end offsets of the remote partitions MM2 writes."""

from __future__ import annotations

import concurrent.futures
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
from confluent_kafka import OFFSET_END, IsolationLevel, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from mirrorlag.kafka.source import masked, submit_list_offsets

UNREAD = -1  # an end offset that did not come back


@dataclass
class RemoteEndOffsets:
    """ListOffsets `latest` on one target cluster, for partitions named a topic at a time (remote
    topic, partition numbers): no object is kept per partition between polls. Chunked and sent at
    once, as the source's LEOs are. Read uncommitted: MM2 writes the target without transactions
    wherever these offsets count copied records (with exactly-once on, they are not read)."""

    alias: str
    admin: AdminClient
    timeout_s: float
    chunk_size: int
    secrets: tuple[str, ...] = ()  # the cluster's secret config values, never in `error`
    # From the last read: remote topics the target says do not exist, and its first error.
    missing: frozenset[str] = frozenset()
    error: str | None = None
    _isolation: IsolationLevel = field(default=IsolationLevel.READ_UNCOMMITTED)

    def read(self, topics: Sequence[str], topic_of: np.ndarray, partitions: np.ndarray) -> np.ndarray:
        """The end offsets of partitions (`topics[topic_of[i]]`, `partitions[i]`), in that order
        (UNREAD where one did not answer). Sets `missing` and `error` from this read.

        A partition named more than once is asked once: librdkafka refuses a whole ListOffsets
        request that names one twice ("Partitions must not contain duplicates")."""
        topic_of, partitions = np.asarray(topic_of, np.int64), np.asarray(partitions, np.int64)
        if len(set(topics)) < len(topics):  # one name at two indices: fold them into its first
            first = {name: i for i, name in reversed(list(enumerate(topics)))}
            topic_of = np.fromiter((first[name] for name in topics), np.int64, len(topics))[topic_of]
        if not partitions.size:
            return self._read(topics, topic_of, partitions)
        pair = topic_of * (int(partitions.max()) + 1) + partitions
        if (np.diff(pair) > 0).all():  # ascending, as the feed asks: distinct without a sort
            return self._read(topics, topic_of, partitions)
        unique, inverse = np.unique(pair, return_inverse=True)
        if unique.size == pair.size:
            return self._read(topics, topic_of, partitions)
        at = np.zeros(unique.size, np.int64)
        at[inverse] = np.arange(pair.size)  # a position of each distinct pair
        return self._read(topics, topic_of[at], partitions[at])[inverse]

    def _read(self, topics: Sequence[str], topic_of: np.ndarray, partitions: np.ndarray) -> np.ndarray:
        request = [TopicPartition(topics[t], p, OFFSET_END) for t, p in zip(topic_of.tolist(), partitions.tolist())]
        futures = [submit_list_offsets(self.admin, request[i:i + self.chunk_size], self._isolation, self.timeout_s)
                   for i in range(0, len(request), self.chunk_size)]
        done, _ = concurrent.futures.wait(futures, timeout=self.timeout_s + 1)
        found = np.full(len(request), UNREAD, np.int64)
        missing: set[str] = set()
        leaderless: set[str] = set()  # topics of chunks that failed whole for want of leaders
        error: str | None = None
        for n, future in enumerate(futures):
            chunk = request[n * self.chunk_size:(n + 1) * self.chunk_size]
            if future not in done:
                error = error or f"no answer within {int(self.timeout_s * 1000)} ms"
                continue
            if (exc := future.exception()) is not None:
                # librdkafka fails a whole request with _NOENT when none of its partitions has a
                # leader it knows, which is what a request naming only missing topics gets.
                if isinstance(exc.args[0] if exc.args else None, KafkaError) and exc.args[0].code() == KafkaError._NOENT:
                    leaderless.update(tp.topic for tp in chunk)
                else:
                    error = error or str(exc)
                continue
            for k, info in enumerate(map(future.result().get, chunk), n * self.chunk_size):
                if info is None:
                    continue
                if isinstance(info, KafkaError):
                    if info.code() in _ABSENT:
                        missing.add(request[k].topic)
                    elif info.code() != KafkaError._UNKNOWN_PARTITION:  # MM2 adds partitions later
                        error = error or info.str()
                else:
                    found[k] = info.offset
        if leaderless:
            missing |= self._absent(leaderless)
            if leaderless - missing:
                error = error or f"no partition leader for {', '.join(sorted(leaderless - missing))}"
        self.missing, self.error = frozenset(missing), masked(error, self.secrets)[:300] if error else None
        return found

    def _absent(self, topics: set[str]) -> set[str]:
        """Of `topics`, those the cluster's metadata does not list."""
        try:
            listed = self.admin.list_topics(timeout=self.timeout_s).topics
        except KafkaException:
            return set()
        return {t for t in topics if t not in listed or listed[t].error is not None}


# What a partition of a remote topic that does not exist answers.
_ABSENT = frozenset({KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC})
