"""MM2 replication policies: how source topics are named on the target (DefaultReplicationPolicy.java)."""

from __future__ import annotations

import re
from dataclasses import dataclass

DEFAULT_POLICY = "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"
IDENTITY_POLICY = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"


@dataclass(frozen=True, slots=True)
class ReplicationPolicy:
    """DefaultReplicationPolicy (`identity=False`) or IdentityReplicationPolicy (`identity=True`).

    IdentityReplicationPolicy keeps names except for topics that look like heartbeats (whose name
    ends with the heartbeats topic's): those it names, and reads back, as DefaultReplicationPolicy
    does, so A's `heartbeats` lands in B's `A.heartbeats`, never in the `heartbeats` MM2's
    heartbeat connector writes on B itself."""

    separator: str = "."
    internal_separator_enabled: bool = True
    heartbeats_topic: str = "heartbeats"
    identity: bool = False
    # MM2 3.x counts any topic ending in -internal or .internal as internal; 4.0 counts only its
    # own (mm2*.internal, *.checkpoints.internal) besides __* and .* (the real 4.0.0-4.3.1 jars).
    internal_suffixes: bool = True

    def _keeps_name(self, topic: str) -> bool:
        return self.identity and not topic.endswith(self.heartbeats_topic)

    def remote_topic(self, source_alias: str, topic: str) -> str:
        """Name of `topic` from cluster `source_alias` on the target."""
        if self._keeps_name(topic):
            return topic
        return f"{source_alias}{self.separator}{topic}"

    def local_topic(self, source_alias: str, remote: str) -> str | None:
        """The topic of cluster `source_alias` that `remote_topic` names `remote`, or None."""
        if self._keeps_name(remote):
            return remote
        prefix = f"{source_alias}{self.separator}"
        return remote[len(prefix):] if remote.startswith(prefix) and len(remote) > len(prefix) else None

    def topic_source(self, topic: str) -> str | None:
        """Alias of the cluster a remote topic came from, or None for a local topic."""
        if self._keeps_name(topic):
            return None  # identity names carry no source (MM2 then relies on its own config)
        parts = [p for p in re.split(re.escape(self.separator), topic)]
        while parts and parts[-1] == "":  # Java's String.split drops trailing empty strings
            parts.pop()
        return parts[0] if len(parts) >= 2 else None

    def upstream_topic(self, topic: str) -> str | None:
        source = self.topic_source(topic)
        return None if source is None else topic[len(source) + len(self.separator):]

    def original_topic(self, topic: str) -> str:
        """ReplicationPolicy.originalTopic: the name before every hop (`B.A.t` -> `t`)."""
        while True:
            upstream = self.upstream_topic(topic)
            if upstream is None or upstream == topic:
                return topic
            topic = upstream

    @property
    def _internal_separator(self) -> str:
        return self.separator if self.internal_separator_enabled else "."

    def offset_syncs_topic(self, cluster_alias: str) -> str:
        sep = self._internal_separator
        return f"mm2-offset-syncs{sep}{cluster_alias}{sep}internal"

    def checkpoints_topic(self, cluster_alias: str) -> str:
        sep = self._internal_separator
        return f"{cluster_alias}{sep}checkpoints{sep}internal"

    def is_mm2_internal_topic(self, topic: str) -> bool:
        sep = self._internal_separator
        if self.internal_suffixes:  # 3.x: any name with the internal suffix
            return topic.endswith(f"{sep}internal")
        # 4.0+: MM2's own (mm2-offset-syncs, mm2-offsets, ...) and the checkpoints topics only
        return (topic.startswith("mm2") and topic.endswith(f"{sep}internal")) or topic.endswith(
            f"{sep}checkpoints{sep}internal")

    def is_internal_topic(self, topic: str) -> bool:
        """ReplicationPolicy.isInternalTopic: Kafka's own, Connect's and MM2's internal topics."""
        return (
            self.is_mm2_internal_topic(topic)
            or topic.startswith("__")
            or topic.startswith(".")
            or (self.internal_suffixes and (topic.endswith("-internal") or topic.endswith(".internal")))
        )

    def is_heartbeats_topic(self, topic: str) -> bool:
        original = topic
        while (upstream := self.upstream_topic(original)) is not None and upstream != original:
            original = upstream
        return original == self.heartbeats_topic
