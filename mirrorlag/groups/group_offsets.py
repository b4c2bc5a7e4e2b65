"""Consumer groups' committed offsets and members, read with the admin API as MM2's checkpoint task
reads them (ListConsumerGroups, then ListConsumerGroupOffsets one group a request), with a bound
on requests in flight and on the whole read's time. I/O only: what to make of them is
readiness.py's.
"""

from __future__ import annotations

import time
from concurrent.futures import Future, wait
from dataclasses import dataclass, field
from typing import Callable, Iterable

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException
from confluent_kafka.admin import AdminClient

TopicPartitionKey = tuple[str, int]


@dataclass
class GroupsRead:
    """One read of a cluster's groups. `offsets`: per group, the committed offset of each partition
    (only partitions with one); `failed`: per group, why its offsets could not be read this time;
    `unread`: groups the read's time ran out before (read first next time)."""
    offsets: dict[str, dict[TopicPartitionKey, int]] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    unread: list[str] = field(default_factory=list)
    # Per group, the commit metadata of the partitions that have any (most have none), and when
    # its offsets were asked for (ms since the epoch: what MM2 stamps its checkpoints with).
    metadata: dict[str, dict[TopicPartitionKey, str]] = field(default_factory=dict)
    asked_at_ms: dict[str, int] = field(default_factory=dict)


def _error_text(exc: BaseException) -> str:
    if isinstance(exc, KafkaException) and exc.args:
        err = exc.args[0]
        return f"{err.name()}: {err.str()}" if hasattr(err, "name") else str(err)
    return str(exc) or type(exc).__name__


def list_groups(admin: AdminClient, timeout_s: float) -> list[str]:
    """Every group the cluster lists (raises KafkaException when the cluster does not answer)."""
    result = admin.list_consumer_groups(request_timeout=timeout_s).result(timeout=timeout_s + 1)
    return sorted(g.group_id for g in result.valid)


def read_offsets(admin: AdminClient, groups: Iterable[str], max_in_flight: int, timeout_s: float,
                 wanted: Callable[[str], bool] = lambda topic: True) -> GroupsRead:
    """The committed offsets of `groups` on topics `wanted` accepts, at most `max_in_flight`
    requests at once, within `timeout_s` in all."""
    out = GroupsRead()
    queue = list(groups)
    deadline = time.monotonic() + timeout_s
    running: dict[Future, str] = {}
    while queue or running:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        while queue and len(running) < max_in_flight:
            group = queue.pop(0)
            request = [ConsumerGroupTopicPartitions(group)]
            out.asked_at_ms[group] = int(time.time() * 1000)
            (future,) = admin.list_consumer_group_offsets(request, request_timeout=max(0.1, left)).values()
            running[future] = group
        done, _ = wait(list(running), timeout=left, return_when="FIRST_COMPLETED")
        for future in done:
            group = running.pop(future)
            try:
                answer = future.result()
            except Exception as exc:  # one group's failure is that group's, not the read's
                out.failed[group] = _error_text(exc)
                continue
            read = [tp for tp in answer.topic_partitions or () if tp.offset >= 0 and tp.error is None and wanted(tp.topic)]
            out.offsets[group] = {(tp.topic, tp.partition): tp.offset for tp in read}
            if metadata := {(tp.topic, tp.partition): tp.metadata for tp in read if tp.metadata}:
                out.metadata[group] = metadata
    out.unread = [*running.values(), *queue]
    return out


def members(admin: AdminClient, groups: list[str], timeout_s: float) -> dict[str, int]:
    """The number of members of each group (DescribeConsumerGroups); groups it could not describe
    are left out."""
    if not groups:
        return {}
    futures = admin.describe_consumer_groups(groups, request_timeout=timeout_s)
    out: dict[str, int] = {}
    for group, future in futures.items():
        try:
            out[group] = len(future.result(timeout=timeout_s + 1).members)
        except Exception:  # described next time; a group's members only qualify its state
            continue
    return out
