"""MM2 keys for a pair of single-node clusters on loopback, and intervals small enough to watch.

MirrorMaker's defaults suit production: topics found every 10 minutes, checkpoints every minute,
offsets flushed every minute, internal topics replicated three times. On one broker per cluster
the replication factors must be 1, and a test or a demo wants things to happen within seconds.
"""

from __future__ import annotations

from typing import Mapping

SINGLE_NODE = {
    "replication.factor": 1,
    "config.storage.replication.factor": 1,
    "offset.storage.replication.factor": 1,
    "status.storage.replication.factor": 1,
    "offset-syncs.topic.replication.factor": 1,
    "heartbeats.topic.replication.factor": 1,
    "checkpoints.topic.replication.factor": 1,
    "sync.topic.acls.enabled": "false",  # the test brokers have no authorizer to read ACLs from
}

# Seconds, not minutes. offset.flush.interval.ms is a worker key: MM2 reads it with the target's prefix.
FAST = {
    "refresh.topics.interval.seconds": 1,
    "refresh.groups.interval.seconds": 1,
    "emit.checkpoints.interval.seconds": 1,
    "emit.heartbeats.interval.seconds": 1,
    "sync.group.offsets.interval.seconds": 1,
}


def mm2_properties(clusters: Mapping[str, str], flows: list[str], extra: Mapping[str, object] | None = None,
                   flush_ms: int = 1000) -> str:
    """An mm2.properties text: `clusters` maps alias -> bootstrap servers, `flows` are `A->B`
    names to enable, `extra` any further keys (later keys win, as MM2 reads them)."""
    values: dict[str, object] = {"clusters": ", ".join(clusters)}
    for alias, bootstrap in clusters.items():
        values[f"{alias}.bootstrap.servers"] = bootstrap
        values[f"{alias}.offset.flush.interval.ms"] = flush_ms
    for flow in flows:
        values[f"{flow}.enabled"] = "true"
    values.update(SINGLE_NODE)
    values.update(FAST)
    values.update(extra or {})
    return "".join(f"{key} = {value}\n" for key, value in values.items())
