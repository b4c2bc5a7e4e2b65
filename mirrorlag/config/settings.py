"""The configuration the rest of mirrorlag reads: resolved, validated, typed.

`mirrorlag.config.loader.load_settings(paths)` builds a `Settings` from one or more Java
`.properties` files (the same mm2.properties MirrorMaker runs with). Durations are seconds here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from mirrorlag.config.group_filter import GROUPS_DEFAULT, GROUPS_EXCLUDE_DEFAULT, GroupFilter, compile_patterns
from mirrorlag.config.policy import ReplicationPolicy
from mirrorlag.model import FlowId

# MM2's DefaultTopicFilter default for `topics.exclude`: 3.x's, and from 4.0 on (the real 4.0.0 to
# 4.3.1 jars), where topics ending in -internal or .internal other than MM2's own are copied.
DEFAULT_TOPICS_EXCLUDE = r".*[\-\.]internal, .*\.replica, __.*"
DEFAULT_TOPICS_EXCLUDE_4 = r"mm2.*\.internal, .*\.replica, __.*"

# Feeds a standalone sidecar reads: MM2's own topics, and the target's end offsets translated
# through the offset syncs (target-progress needs offset-syncs). The callback feed is in-process.
LRO_FEEDS = ("offset-syncs", "connect-offsets", "target-progress")

SECRET_KEY_PATTERN = re.compile(r"password|secret|sasl\.jaas\.config|ssl\.key|token", re.IGNORECASE)


def is_secret_key(key: str) -> bool:
    """True for keys whose values must never be printed (passwords, JAAS config, private keys)."""
    return bool(SECRET_KEY_PATTERN.search(key))


@dataclass(frozen=True)
class ClusterSettings:
    alias: str
    bootstrap_servers: str
    # librdkafka client configuration (already translated from Java keys), incl. bootstrap.servers.
    client: dict[str, str]  # a real dict: confluent-kafka wants one

    def __repr__(self) -> str:  # never leak secrets through a repr in a log line
        safe = {k: ("***" if is_secret_key(k) else v) for k, v in self.client.items()}
        return f"ClusterSettings(alias={self.alias!r}, client={safe!r})"


@dataclass(frozen=True)
class EngineParams:
    """The lag engine's knobs for one flow."""

    lag_time_max_s: float = 30.0  # replication.lag.time.max.ms
    sample_window_s: float = 30.0  # metrics.sample.window.ms
    num_samples: int = 2  # metrics.num.samples
    freshness_points: int = 60  # mirrorlag.freshness.table.points: (LEO, time) points kept per partition
    retention_warn_s: float = 3600.0  # mirrorlag.retention.headroom.warn.ms: AT_RISK below this


@dataclass(frozen=True)
class FlowSettings:
    source: str
    target: str
    topics_include: re.Pattern[str]  # `topics`, comma-separated regexes joined with |, fullmatch
    topics_exclude: re.Pattern[str]  # `topics.exclude` (legacy `topics.blacklist`), fullmatch
    policy: ReplicationPolicy
    offset_lag_max: int = 100
    offset_syncs_topic_location: str = "source"  # "source" | "target"
    engine: EngineParams = field(default_factory=EngineParams)
    # Connect's offset.storage.topic for this flow's worker, on the target cluster.
    connect_offsets_topic: str = ""
    # <target>.offset.flush.interval.ms: how often MM2 commits offsets, the resolution of evidence
    # that moves once per flush (connect-offsets; offset syncs of a partition slower than offset.lag.max).
    offset_flush_interval_s: float = 60.0
    # <target>.exactly.once.source.support = enabled: MM2 writes the target in transactions, whose
    # markers take target offsets, so the target's end offset no longer counts copied records.
    target_transactional: bool = False
    # The isolation.level MM2's source consumer reads at, as MirrorMakerConfig resolves it, and the
    # key (with file:line) that set it ("" for Java's default, read_uncommitted).
    consumer_isolation_level: str = "read_uncommitted"
    consumer_isolation_level_from: str = ""
    # The level this flow's LEOs and source probe are read at: MM2's, unless
    # mirrorlag.leo.isolation.level overrides it (then isolation_level_from names that key).
    isolation_level: str = "read_uncommitted"
    isolation_level_from: str = ""
    # emit.offset-syncs.enabled (MM2 >= 3.9, KIP-1031): false means MM2 writes no offset syncs for
    # this flow, so syncs left in the topic are old and the flow's syncs are not read at all.
    emit_offset_syncs: bool = True
    # auto.offset.reset of MM2's source consumer (MirrorSourceConfig.sourceConsumerConfig, default
    # earliest): where it starts a partition it never copied. "earliest": every record from the
    # log start is owed; otherwise the records before its first copy are not.
    source_consumer_reset: str = "earliest"
    # The checkpoint connector's groups (`groups`, `groups.exclude` / legacy `groups.blacklist`),
    # whether it runs for this flow (emit.checkpoints.enabled, with offset syncs and an interval
    # >= 0) and how often (emit.checkpoints.interval.seconds), and sync.group.offsets.enabled.
    groups_include: re.Pattern[str] = field(default_factory=lambda: compile_patterns(GROUPS_DEFAULT))
    groups_exclude: re.Pattern[str] = field(default_factory=lambda: compile_patterns(GROUPS_EXCLUDE_DEFAULT))
    emit_checkpoints: bool = True
    emit_checkpoints_interval_s: float = 60.0
    sync_group_offsets: bool = False

    def __post_init__(self) -> None:
        if not self.connect_offsets_topic:
            object.__setattr__(self, "connect_offsets_topic", f"mm2-offsets.{self.source}.internal")

    @property
    def id(self) -> FlowId:
        return FlowId(self.source, self.target)

    @property
    def group_filter(self) -> GroupFilter:
        return GroupFilter(self.groups_include, self.groups_exclude)

    def should_replicate(self, topic: str) -> bool:
        """MirrorSourceConnector.shouldReplicateTopic: filter, never internal topics, never cycles."""
        selected = (
            self.topics_include.fullmatch(topic) is not None
            and self.topics_exclude.fullmatch(topic) is None
        ) or self.policy.is_heartbeats_topic(topic)
        return selected and not self.policy.is_internal_topic(topic) and not self._is_cycle(topic)

    def should_checkpoint(self, topic: str) -> bool:
        """Whether MM2 checkpoints a group's offsets on `topic`: MirrorCheckpointTask's filter is
        the topics filter alone (shouldCheckpointTopic), so a heartbeats topic it does not name is
        copied but never checkpointed; and it translates only topics MM2 copies."""
        return (self.should_replicate(topic) and self.topics_include.fullmatch(topic) is not None
                and self.topics_exclude.fullmatch(topic) is None)

    def _is_cycle(self, topic: str) -> bool:
        while True:
            source = self.policy.topic_source(topic)
            if source is None:
                return False
            if source == self.target:
                return True
            upstream = self.policy.upstream_topic(topic)
            if upstream is None or upstream == topic:
                return False
            topic = upstream


@dataclass(frozen=True)
class S3UploadSettings:
    """mirrorlag.history.upload.s3.*: what an s3:// upload uses instead of the AWS SDK's defaults.

    Unset fields fall back to botocore's own chain (AWS_* environment variables, ~/.aws, web
    identity, instance metadata). The secret fields never appear in a repr."""

    endpoint_url: str | None = None  # ...s3.endpoint.url (MinIO, Ceph, moto); else AWS_ENDPOINT_URL(_S3)
    region: str | None = None  # ...s3.region; else AWS_REGION / AWS_DEFAULT_REGION
    access_key_id: str | None = None  # ...s3.access.key.id, with ...s3.secret.access.key
    secret_access_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)  # ...s3.session.token
    path_style: bool = False  # ...s3.path.style.access: bucket in the path, not the host name

    @property
    def secrets(self) -> tuple[str, ...]:
        return tuple(v for v in (self.secret_access_key, self.session_token) if v)


@dataclass(frozen=True)
class HistorySettings:
    """Lag history as Parquet segments (docs/design.md §7); present only when `mirrorlag.history.dir` is set."""

    dir: Path  # mirrorlag.history.dir, absolute: <dir>/date=YYYY-MM-DD/part-*.parquet
    segment_s: float = 300.0  # mirrorlag.history.segment.ms: a segment closes this long after it opened
    segment_max_rows: int = 1_000_000  # mirrorlag.history.segment.max.rows
    buffer_max_rows: int = 2_000_000  # mirrorlag.history.buffer.max.rows: beyond it the oldest rows are dropped
    retention_s: float | None = 7 * 86400.0  # mirrorlag.history.retention.ms; None when -1 (keep forever)
    # mirrorlag.history.retention.max.ms: past retention a segment is kept until the rollup's receipt
    # for its day names it, and past this whatever the rollup did (with a warning); None when -1.
    retention_max_s: float | None = 14 * 86400.0
    upload_uri: str | None = None  # mirrorlag.history.upload.uri: fsspec URL, None = no upload
    # mirrorlag.history.upload.max.bytes.per.second; None = unlimited (Kafka's default, Long.MAX_VALUE)
    upload_max_bytes_per_s: int | None = None
    upload_quota_window_num: int = 11  # mirrorlag.history.upload.quota.window.num (KIP-956)
    upload_quota_window_s: float = 1.0  # mirrorlag.history.upload.quota.window.size.seconds (KIP-956)
    upload_s3: S3UploadSettings | None = None  # mirrorlag.history.upload.s3.*; None when none is set
    # mirrorlag.history.writer.id, on every row: the rollup counts one writer's samples where two
    # sidecars write one history. Unset: "<hostname>:<http port>" (resolved by the loader).
    writer_id: str = ""
    # replication.record.lag.metric.refresh.interval, on every row: how long a sample stands for
    # in the rollup. None when polling is off.
    refresh_interval_s: float | None = None


@dataclass(frozen=True)
class FailoverSettings:
    """mirrorlag.failover.*: failover readiness per consumer group (docs/design.md §9)."""

    enabled: bool = True  # mirrorlag.failover.enabled
    interval_s: float = 60.0  # mirrorlag.failover.interval.ms; 0 there: the flows' emit.checkpoints.interval.seconds
    reread_max_records: int = 100_000  # mirrorlag.failover.reread.max.records: READY at or below
    checkpoint_max_age_s: float = 0.0  # mirrorlag.failover.checkpoint.max.age.ms; 0: 3 x the flow's emission interval
    groups_max_in_flight: int = 8  # mirrorlag.failover.groups.max.in.flight: ListConsumerGroupOffsets at once
    partition_series_max: int = 1000  # mirrorlag.failover.partition.series.max: not-READY group partitions


@dataclass(frozen=True)
class InForce:
    """A key mirrorlag reads, set to something other than its default (config/effective.py)."""

    key: str
    shown: str  # the value as written (trimmed), *** for a secret
    file: Path
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.key} = {self.shown}"


@dataclass(frozen=True)
class Settings:
    files: tuple[Path, ...]
    clusters: Mapping[str, ClusterSettings]
    flows: tuple[FlowSettings, ...]
    # KIP-971: replication.record.lag.metric.refresh.interval; None when -1 (polling disabled).
    refresh_interval_s: float | None = 15.0
    # KIP-971: replication.record.lag.metric.last.replicated.offset.ttl
    lro_ttl_s: float = 20.0
    http_host: str = "0.0.0.0"  # mirrorlag.http.listener, host part
    http_port: int = 9464  # mirrorlag.http.listener, port part
    # mirrorlag.http.web.config.file: TLS and basic auth of the listener (exporter-toolkit's web
    # config format); None: plain HTTP. `mirrorlag run --web.config.file` wins over it.
    http_web_config_file: Path | None = None
    # mirrorlag.leo.isolation.level: overrides every flow's isolation level; None (unset): each
    # flow's LEOs and probe read at the level MM2's source consumer reads at.
    leo_isolation: str | None = None
    leo_chunk_size: int = 250  # mirrorlag.leo.chunk.size: partitions per ListOffsets call
    request_timeout_s: float = 10.0  # mirrorlag.request.timeout.ms: metadata/ListOffsets deadline
    lro_feeds: tuple[str, ...] = LRO_FEEDS  # mirrorlag.lro.feeds: MM2 topics to read LROs from
    # mirrorlag.metrics.detail: auto (KIP-971's series for every partition, the rest for those not
    # IN_SYNC, within metrics_partition_series_max), full (every series of every partition), or
    # lag (fewer series per partition, every partition)
    metrics_detail: str = "auto"
    metrics_partition_series_max: int = 10_000  # mirrorlag.metrics.partition.series.max (auto)
    retention_poll_interval_s: float = 60.0  # mirrorlag.retention.poll.interval.ms: log starts move slowly
    # mirrorlag.metadata.max.age.ms: how old the topic metadata may be before a poll reads it again
    # (0: every poll; an end offset that fails or goes back reads it at once). A read costs client
    # CPU in proportion to the cluster's partitions.
    metadata_max_age_s: float = 60.0
    history: HistorySettings | None = None  # mirrorlag.history.*; None when mirrorlag.history.dir is unset
    failover: FailoverSettings = field(default_factory=FailoverSettings)
    # The keys read that are not at their defaults, with file and line and secrets masked: `run`
    # logs them at its start (config/effective.py).
    non_defaults: tuple[InForce, ...] = field(default=(), repr=False, compare=False)

    def flow(self, flow_id: FlowId) -> FlowSettings:
        for flow in self.flows:
            if flow.id == flow_id:
                return flow
        raise KeyError(str(flow_id))

    @property
    def source_aliases(self) -> tuple[str, ...]:
        return tuple(sorted({f.source for f in self.flows}))
