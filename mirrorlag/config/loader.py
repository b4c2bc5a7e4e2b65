"""Build `Settings` from the Java .properties files MM2 runs with (docs/design.md §5).

Semantics follow MirrorMakerConfig: later files override earlier ones key by key, a flow A->B
exists when `A->B.enabled` is true, and a flow's value of key K is `A->B.K`, else K, else MM2's
default. Every value remembers the file and line it came from so that errors can point at it.
"""

from __future__ import annotations

import difflib
import functools
import logging
import os
import re
import socket
import urllib.parse
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import javaproperties

from mirrorlag.config.client import Prop, cluster_client_config, error_at
from mirrorlag.config.effective import non_defaults
from mirrorlag.config.group_filter import GROUPS_DEFAULT, GROUPS_EXCLUDE_DEFAULT, compile_patterns
from mirrorlag.config.near_miss import warn_near_misses
from mirrorlag.config.offset_reset import valid_reset
from mirrorlag.config.policy import DEFAULT_POLICY, IDENTITY_POLICY, ReplicationPolicy
from mirrorlag.config.settings import (
    DEFAULT_TOPICS_EXCLUDE,
    DEFAULT_TOPICS_EXCLUDE_4,
    LRO_FEEDS,
    ClusterSettings,
    EngineParams,
    FailoverSettings,
    FlowSettings,
    HistorySettings,
    S3UploadSettings,
    Settings,
    is_secret_key,
)
from mirrorlag.config.strimzi import StrimziSource, read_strimzi
from mirrorlag.errors import ConfigError

Props = Mapping[str, Prop]

log = logging.getLogger(__name__)


class _Bad(ValueError):
    """A value that does not parse. `expected` and `message` must not contain the value
    unless `message` is only used for non-secret keys (see `_parse`)."""

    def __init__(self, expected: str, message: str | None = None) -> None:
        super().__init__(expected)
        self.expected = expected
        self.message = message


def _parse(prop: Prop, parser: Callable[[str], Any]) -> Any:
    try:
        return parser(prop.value)
    except _Bad as bad:
        if is_secret_key(prop.key):
            raise error_at(prop, f"invalid value (expected {bad.expected})") from None
        raise error_at(prop, bad.message or f"expected {bad.expected}, got {prop.value!r}") from None


# --- value parsers: text -> typed value, or _Bad -------------------------------------------

_JAVA_INT = re.compile(r"[+-]?[0-9]+")  # Integer.parseInt / Long.parseLong after ConfigDef's trim
_INT_MAX = 2**31 - 1
_LONG_MAX = 2**63 - 1
# Durations go into timers, thread waits and datetime arithmetic, which overflow long before
# Long.MAX_VALUE ms: about 31 years is plenty for any interval, window or retention.
_MAX_MS = 10**12
# librdkafka's socket.timeout.ms range, which mirrorlag.request.timeout.ms becomes.
_REQUEST_TIMEOUT_MS = (10, 300_000)


def _integer(minimum: int, noun: str = "an integer", maximum: int = _INT_MAX) -> Callable[[str], int]:
    def parse(text: str) -> int:
        text = text.strip()
        if not _JAVA_INT.fullmatch(text):
            raise _Bad(noun)
        if int(text) < minimum:
            raise _Bad(f"{noun} {'> 0' if minimum == 1 else f'>= {minimum}'}")
        if int(text) > maximum:
            raise _Bad(f"{noun} from {minimum} to {maximum}")
        return int(text)

    return parse


def _seconds(minimum_ms: int, maximum_ms: int = _MAX_MS) -> Callable[[str], float]:
    as_int = _integer(minimum_ms, "an integer number of milliseconds", maximum_ms)
    return lambda text: as_int(text) / 1000.0


def _refresh_interval(text: str) -> float | None:
    text = text.strip()
    if not _JAVA_INT.fullmatch(text):
        raise _Bad("an integer number of milliseconds")
    if int(text) == -1:
        return None  # KIP-971: -1 turns the polling off
    if int(text) <= 0:
        raise _Bad("an integer number of milliseconds > 0, or -1 to disable")
    if int(text) > _MAX_MS:
        raise _Bad(f"an integer number of milliseconds from 1 to {_MAX_MS}, or -1 to disable")
    return int(text) / 1000.0


def _boolean(text: str) -> bool:
    # ConfigDef BOOLEAN: trimmed, case-insensitive, nothing but true/false.
    value = text.strip().lower()
    if value not in ("true", "false"):
        raise _Bad("true or false")
    return value == "true"


def _choice(*choices: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        value = text.strip().lower()
        if value not in choices:
            raise _Bad(f"one of {', '.join(choices)}")
        return value

    return parse


_ISOLATION_LEVELS = ("read_uncommitted", "read_committed")


def _consumer_isolation(text: str) -> str:
    # ConsumerConfig's isolation.level: a STRING (trimmed) that must be one of these exactly, case
    # and all; MM2's consumer refuses anything else, so MM2 itself would not start.
    value = text.strip()
    if value not in _ISOLATION_LEVELS:
        raise _Bad("read_uncommitted or read_committed (MM2's consumer refuses anything else)")
    return value


def _isolation_override(text: str) -> str | None:
    # Blank means unset: every flow reads at MM2's own level.
    return _choice(*_ISOLATION_LEVELS)(text) if text.strip() else None


def _mm2_version(text: str) -> tuple[int, int] | None:
    """`4.3.1`, `3.9` or blank (unset): the MirrorMaker 2 beside the sidecar, major and minor."""
    value = text.strip()
    if not value:
        return None
    match = re.fullmatch(r"(\d+)\.(\d+)(?:\.\d+)?", value)
    if match is None:
        raise _Bad("a Kafka version such as 3.9.2 or 4.3.1")
    return int(match[1]), int(match[2])


def _separator(text: str) -> str:
    if not text.strip():  # ConfigDef trims strings; an empty separator names nothing
        raise _Bad("a non-empty separator")
    return text.strip()


def _policy_identity(text: str) -> bool:
    name = text.strip()
    if name in (DEFAULT_POLICY, "DefaultReplicationPolicy"):
        return False
    if name in (IDENTITY_POLICY, "IdentityReplicationPolicy"):
        return True
    raise _Bad(
        "DefaultReplicationPolicy or IdentityReplicationPolicy",
        f"unsupported replication.policy.class {name} "
        "(mirrorlag knows DefaultReplicationPolicy and IdentityReplicationPolicy)",
    )


def _feeds(text: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    for name in names:
        if name not in LRO_FEEDS:
            close = difflib.get_close_matches(name, LRO_FEEDS, n=1)
            hint = f"; did you mean {close[0]}?" if close else f" (known: {', '.join(LRO_FEEDS)})"
            raise _Bad("feed names", f"unknown feed {name!r}{hint}")
    if not names:
        raise _Bad("feed names", f"expected at least one of {', '.join(LRO_FEEDS)}")
    if "target-progress" in names and "offset-syncs" not in names:
        raise _Bad("feed names", "target-progress translates the target's end offsets through the offset "
                                 "syncs: list offset-syncs too")
    return names


def _topic_patterns(text: str) -> re.Pattern[str]:
    try:
        return compile_patterns(text)
    except ValueError as err:
        raise _Bad("comma-separated regular expressions", str(err)) from None


def _optional_path(text: str) -> Path | None:
    # Blank means unset, so a later file can turn history off by writing `mirrorlag.history.dir =`.
    # Relative paths are relative to the working directory, as Kafka's log.dirs are; kept absolute
    # (not resolved) so a symlinked volume stays what the operator wrote.
    text = text.strip()
    return Path(os.path.abspath(os.path.expanduser(text))) if text else None


def _retention(text: str) -> float | None:
    text = text.strip()
    if not _JAVA_INT.fullmatch(text):
        raise _Bad("an integer number of milliseconds")
    if int(text) == -1:
        return None  # as Kafka's retention.ms: -1 keeps everything
    if int(text) <= 0:
        raise _Bad("an integer number of milliseconds > 0, or -1 to keep segments forever")
    if int(text) > _MAX_MS:
        raise _Bad(f"an integer number of milliseconds from 1 to {_MAX_MS}, or -1 to keep segments forever")
    return int(text) / 1000.0


def _bytes_per_second(text: str) -> int | None:
    value = _integer(1, maximum=_LONG_MAX)(text)
    return None if value == _LONG_MAX else value  # Long.MAX_VALUE is Kafka's "no quota"


def _upload_uri(text: str) -> str | None:
    uri = text.strip()
    if not uri:
        return None
    import fsspec  # only when an upload is configured

    # Check every protocol of a chained URL (e.g. simplecache::s3://b/p) without instantiating a
    # filesystem: that would need credentials and a network at config time. The URL itself is never
    # echoed: it may carry a user and password.
    for protocol in _protocols(uri):
        try:
            fsspec.get_filesystem_class(protocol)
        except ImportError as err:
            raise _Bad("an fsspec URL", f"the {protocol}:// filesystem is not installed ({err})") from None
        except ValueError:
            raise _Bad("an fsspec URL", f"unknown filesystem protocol {protocol!r} (expected e.g. file://, s3://, gs://, hdfs://)") from None
    for part in map(urllib.parse.urlsplit, uri.split("::")):
        if part.scheme in ("s3", "s3a") and "@" in part.netloc:
            # s3fs would take key:secret@bucket for a bucket name, and show it in every error.
            raise _Bad("an fsspec URL", "an s3:// URL carries no credentials: set mirrorlag.history.upload.s3."
                                        "access.key.id and ...s3.secret.access.key, or the AWS_* variables")
    return uri


def _text(text: str) -> str | None:
    return text.strip() or None


def _endpoint_url(text: str) -> str | None:
    url = text.strip()
    if not url:
        return None
    parts = urllib.parse.urlsplit(url)
    if "@" in parts.netloc:  # never echoed: what precedes the @ may be a password
        raise _Bad("an http(s) URL", "expected http(s)://host[:port] without credentials "
                                     "(set ...s3.access.key.id and ...s3.secret.access.key)")
    try:
        parts.port  # noqa: B018 (raises for a port that is not a number in 0..65535)
    except ValueError:
        raise _Bad("http(s)://host[:port] with a port in 0..65535") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise _Bad("http(s)://host[:port]")
    return url


def _protocols(uri: str) -> tuple[str, ...]:
    """Every protocol of a (chained) fsspec URL, outermost first; `file` for a plain path."""
    import fsspec

    return tuple(dict.fromkeys(fsspec.core.split_protocol(part)[0] or "file" for part in uri.split("::")))


_LISTENER = re.compile(r"(?:\[(?P<v6>[^\[\]]+)\]|(?P<host>[^:\[\]]*)):(?P<port>[0-9]{1,5})")


def _listener(text: str) -> tuple[str, int]:
    match = _LISTENER.fullmatch(text.strip())
    if match is None or int(match["port"]) > 65535:
        raise _Bad("host:port, [ipv6]:port or :port with a port in 0..65535")
    # `:9464` is every interface, as Prometheus exporters' --web.listen-address reads it.
    return match["v6"] or match["host"] or "0.0.0.0", int(match["port"])


# --- the keys mirrorlag reads: key -> (parser, default text as MM2 would write it) -----------

Row = tuple[Callable[[str], Any], str]

# Per flow: `A->B.K`, else `K`, else the default.
FLOW_KEYS: dict[str, Row] = {
    "topics": (_topic_patterns, ".*"),
    "topics.exclude": (_topic_patterns, DEFAULT_TOPICS_EXCLUDE),  # legacy: topics.blacklist
    "replication.policy.class": (_policy_identity, DEFAULT_POLICY),
    "replication.policy.separator": (_separator, "."),
    "replication.policy.internal.topic.separator.enabled": (_boolean, "true"),
    "offset.lag.max": (_integer(0, maximum=_LONG_MAX), "100"),
    "offset-syncs.topic.location": (_choice("source", "target"), "source"),
    "emit.offset-syncs.enabled": (_boolean, "true"),  # MM2 >= 3.9 (KIP-1031)
    # The checkpoint connector (MirrorCheckpointConfig): which groups it checkpoints, how often.
    "groups": (_topic_patterns, GROUPS_DEFAULT),
    "groups.exclude": (_topic_patterns, GROUPS_EXCLUDE_DEFAULT),  # legacy: groups.blacklist
    "emit.checkpoints.enabled": (_boolean, "true"),
    "emit.checkpoints.interval.seconds": (_integer(-_LONG_MAX, maximum=_LONG_MAX), "60"),  # < 0: none
    "sync.group.offsets.enabled": (_boolean, "false"),
    "replication.lag.time.max.ms": (_seconds(1), "30000"),
    "metrics.sample.window.ms": (_seconds(1), "30000"),
    "metrics.num.samples": (_integer(1), "2"),
    # mirrorlag's own engine knobs: each flow has its own EngineParams.
    "mirrorlag.freshness.table.points": (_integer(2), "60"),
    "mirrorlag.retention.headroom.warn.ms": (_seconds(1), "3600000"),
}

# Why a key can only be global, for the warning when it is given per flow (`A->B.K`).
_ONLY_GLOBAL = {
    "replication.record.lag.metric.refresh.interval": "one poll schedule reads every flow",
    "replication.record.lag.metric.last.replicated.offset.ttl": "one LRO cache holds every flow's offsets",
}

# Top level only. Every `mirrorlag.*` key not listed here or in FLOW_KEYS is an error (typos must
# not pass); `A->B.K` for one of these is a warning (the global value is used).
GLOBAL_KEYS: dict[str, Row] = {
    "replication.record.lag.metric.refresh.interval": (_refresh_interval, "15000"),
    "replication.record.lag.metric.last.replicated.offset.ttl": (_seconds(1), "20000"),
    "mirrorlag.http.listener": (_listener, "0.0.0.0:9464"),
    "mirrorlag.http.web.config.file": (_optional_path, ""),  # blank: plain HTTP, no auth
    "mirrorlag.leo.isolation.level": (_isolation_override, ""),  # blank: each flow at MM2's own level
    # The MM2 version's defaults where 3.x and 4.x differ (topics.exclude, internal topics, the
    # *.blacklist aliases); blank: 3.x's.
    "mirrorlag.mm2.version": (_mm2_version, ""),
    "mirrorlag.leo.chunk.size": (_integer(1), "250"),
    "mirrorlag.request.timeout.ms": (_seconds(*_REQUEST_TIMEOUT_MS), "10000"),
    "mirrorlag.lro.feeds": (_feeds, ",".join(LRO_FEEDS)),
    "mirrorlag.retention.poll.interval.ms": (_seconds(1), "60000"),
    "mirrorlag.metadata.max.age.ms": (_seconds(0), "60000"),
    "mirrorlag.metrics.detail": (_choice("auto", "full", "lag"), "auto"),
    "mirrorlag.metrics.partition.series.max": (_integer(0), "10000"),
    # Failover readiness per consumer group (docs/design.md §9). interval 0: the shortest of the flows'
    # emit.checkpoints.interval.seconds (a checkpoint is never fresher than that).
    "mirrorlag.failover.enabled": (_boolean, "true"),
    "mirrorlag.failover.interval.ms": (_seconds(0), "0"),
    "mirrorlag.failover.reread.max.records": (_integer(0, maximum=_LONG_MAX), "100000"),
    "mirrorlag.failover.checkpoint.max.age.ms": (_seconds(0), "0"),
    "mirrorlag.failover.groups.max.in.flight": (_integer(1), "8"),
    "mirrorlag.failover.partition.series.max": (_integer(0), "1000"),
    # Lag history (docs/design.md §7), off while the dir is unset (then only upload.uri is an error: see _history).
    "mirrorlag.history.dir": (_optional_path, ""),
    "mirrorlag.history.segment.ms": (_seconds(1), "300000"),
    "mirrorlag.history.segment.max.rows": (_integer(1, maximum=_LONG_MAX), "1000000"),
    "mirrorlag.history.buffer.max.rows": (_integer(1, maximum=_LONG_MAX), "2000000"),
    "mirrorlag.history.retention.ms": (_retention, "604800000"),
    # Past retention.ms a segment waits for the rollup's receipt of its day; past this, not (-1: forever).
    "mirrorlag.history.retention.max.ms": (_retention, "1209600000"),
    "mirrorlag.history.upload.uri": (_upload_uri, ""),
    # Names this sidecar on its history rows; blank: the host's name and the HTTP listener's port.
    "mirrorlag.history.writer.id": (_text, ""),
    # KIP-956's remote.log.manager.copy.* quota, same defaults and units (window size in whole seconds).
    "mirrorlag.history.upload.max.bytes.per.second": (_bytes_per_second, str(_LONG_MAX)),
    "mirrorlag.history.upload.quota.window.num": (_integer(1), "11"),
    "mirrorlag.history.upload.quota.window.size.seconds": (_integer(1), "1"),
    # s3:// uploads: instead of botocore's defaults (AWS_* variables, ~/.aws, instance roles).
    "mirrorlag.history.upload.s3.endpoint.url": (_endpoint_url, ""),
    "mirrorlag.history.upload.s3.region": (_text, ""),
    "mirrorlag.history.upload.s3.access.key.id": (_text, ""),
    "mirrorlag.history.upload.s3.secret.access.key": (_text, ""),
    "mirrorlag.history.upload.s3.session.token": (_text, ""),
    "mirrorlag.history.upload.s3.path.style.access": (_boolean, "false"),
}
_S3_KEYS = tuple(key for key in GLOBAL_KEYS if key.startswith("mirrorlag.history.upload.s3."))


def _value(prop: Prop | None, row: Row) -> Any:
    parser, default = row
    return parser(default) if prop is None else _parse(prop, parser)


def _means_default(row: Row, text: str) -> bool:
    """Whether `text` parses to the row's default (30000 and +30000 both do)."""
    try:
        return bool(row[0](text) == row[0](row[1]))
    except _Bad:
        return False


def _default_tests(rows: Mapping[str, Row]) -> dict[str, Callable[[str], bool]]:
    return {key: functools.partial(_means_default, row) for key, row in rows.items()}


# --- loading -----------------------------------------------------------------------------


def load_settings(paths: Sequence[str | os.PathLike[str]], strimzi: StrimziSource | None = None) -> Settings:
    """Read, merge and validate `paths` (later files win) over the MM2 keys of a Strimzi
    KafkaMirrorMaker2 resource, if given; any problem is one ConfigError."""
    files = tuple(Path(p).resolve() for p in paths)
    if not files and strimzi is None:
        raise ConfigError("no configuration file given")
    props: dict[str, Prop] = dict(read_strimzi(strimzi)) if strimzi is not None else {}
    for file in files:
        props.update(_read(file))
    if strimzi is not None:
        files = (strimzi.file, *files)

    aliases, clusters_prop = _clusters(props, files)
    _check_own_keys(props)
    warn_near_misses(props, aliases, {key: row[1] for key, row in {**GLOBAL_KEYS, **FLOW_KEYS}.items()})
    own = {key: _value(props.get(key), row) for key, row in GLOBAL_KEYS.items()}
    clusters = {alias: _cluster(alias, props, clusters_prop) for alias in aliases}
    override = props.get("mirrorlag.leo.isolation.level") if own["mirrorlag.leo.isolation.level"] else None
    mm2_4 = (own["mirrorlag.mm2.version"] or (3, 9)) >= (4, 0)
    flows = tuple(_flow(props, s, t, override, mm2_4) for s, t in _flow_pairs(props, aliases, clusters_prop))
    host, port = own["mirrorlag.http.listener"]
    return Settings(
        files=files,
        clusters=clusters,
        flows=flows,
        refresh_interval_s=own["replication.record.lag.metric.refresh.interval"],
        lro_ttl_s=own["replication.record.lag.metric.last.replicated.offset.ttl"],
        http_host=host,
        http_port=port,
        http_web_config_file=own["mirrorlag.http.web.config.file"],
        leo_isolation=own["mirrorlag.leo.isolation.level"],
        leo_chunk_size=own["mirrorlag.leo.chunk.size"],
        request_timeout_s=own["mirrorlag.request.timeout.ms"],
        lro_feeds=own["mirrorlag.lro.feeds"],
        retention_poll_interval_s=own["mirrorlag.retention.poll.interval.ms"],
        metadata_max_age_s=own["mirrorlag.metadata.max.age.ms"],
        metrics_detail=own["mirrorlag.metrics.detail"],
        metrics_partition_series_max=own["mirrorlag.metrics.partition.series.max"],
        history=_history(props, own),
        failover=FailoverSettings(
            enabled=own["mirrorlag.failover.enabled"],
            interval_s=own["mirrorlag.failover.interval.ms"] or min(
                (f.emit_checkpoints_interval_s for f in flows if f.emit_checkpoints), default=60.0),
            reread_max_records=own["mirrorlag.failover.reread.max.records"],
            checkpoint_max_age_s=own["mirrorlag.failover.checkpoint.max.age.ms"],
            groups_max_in_flight=own["mirrorlag.failover.groups.max.in.flight"],
            partition_series_max=own["mirrorlag.failover.partition.series.max"],
        ),
        non_defaults=non_defaults(props, files, aliases, [f"{f.source}->{f.target}" for f in flows],
                                  _default_tests(GLOBAL_KEYS), _default_tests(FLOW_KEYS)),
    )


def _read(file: Path) -> dict[str, Prop]:
    try:
        data = file.read_bytes()  # bytes: javaproperties then decodes Latin-1, as Java's load does
    except OSError as err:
        raise ConfigError(f"cannot read file: {err.strerror or err}", file=file) from None
    props: dict[str, Prop] = {}
    line = 1  # where the next element starts
    try:
        for element in javaproperties.parse(data):
            if isinstance(element, javaproperties.KeyValue):
                prop = Prop(element.value, file, line, element.key)
                first = props.get(element.key)
                if first is not None and "->" in element.key:
                    # Java keeps the last silently; a flow said twice in one file is a slip
                    # (later *files* may override, that is the layering).
                    raise error_at(prop, f"duplicate flow key (first set on line {first.line})")
                props[element.key] = prop
            source = element.source
            line += source.count("\n") + source.count("\r") - source.count("\r\n")
    except javaproperties.InvalidUEscapeError:
        # Its message quotes part of the value, which may be a password: don't repeat it.
        message = "not a valid properties file: invalid \\uXXXX escape"
        raise ConfigError(message, file=file, line=line) from None
    return props


def _clusters(props: Props, files: tuple[Path, ...]) -> tuple[list[str], Prop]:
    prop = props.get("clusters")
    if prop is None:
        read = ", ".join(str(f) for f in files)
        raise ConfigError(f"required key is missing (read {read})", key="clusters")
    # ConfigDef LIST; MM2 keeps the aliases in a set, so a repeated alias is one cluster.
    aliases = list(dict.fromkeys(a.strip() for a in prop.value.split(",") if a.strip()))
    if not aliases:
        raise error_at(prop, "expected a comma-separated list of cluster aliases, got an empty value")
    return aliases, prop


def _check_own_keys(props: Props) -> None:
    # Compare what follows "mirrorlag.": the shared prefix would make every key look close.
    known = [key.removeprefix("mirrorlag.") for key in (*GLOBAL_KEYS, *FLOW_KEYS) if key.startswith("mirrorlag.")]
    for key, prop in props.items():
        own = key[key.index(".") + 1:] if _FLOW_PREFIX.match(key) else key  # A->B.mirrorlag.x: mirrorlag.x
        if own.startswith("mirrorlag.") and own not in GLOBAL_KEYS and own not in FLOW_KEYS:
            close = difflib.get_close_matches(own.removeprefix("mirrorlag."), known, n=1)
            raise error_at(prop, "unknown key" + (f"; did you mean mirrorlag.{close[0]}?" if close else ""))


_FLOW_PREFIX = re.compile(r"[^.]*->[^.]*\.")  # A->B. (MM2's cluster aliases have no dots in practice)


def _warn_global_only(props: Props, source: str, target: str) -> None:
    """One warning per `A->B.K` whose K can only be global, naming where it was set and what is
    used instead (never silently ignored); a secret's value is never shown."""
    for key in GLOBAL_KEYS:
        prop = props.get(f"{source}->{target}.{key}")
        if prop is None:
            continue
        why = _ONLY_GLOBAL.get(key, "it is read once for the whole sidecar")
        used = props.get(key)
        value = "***" if is_secret_key(key) else (used.value.strip() if used is not None else GLOBAL_KEYS[key][1])
        instead = f"{key} = {value} from {used.file}:{used.line}" if used is not None else f"{key} = {value} (the default)"
        log.warning("%s:%d: %s is ignored: %s cannot take a per-flow value (%s); using %s",
                    prop.file, prop.line, prop.key, key, why, instead)


def _cluster(alias: str, props: Props, clusters_prop: Prop) -> ClusterSettings:
    if f"{alias}.bootstrap.servers" not in props:
        raise error_at(clusters_prop, f"cluster {alias} has no {alias}.bootstrap.servers")
    client = cluster_client_config(alias, props)
    return ClusterSettings(alias=alias, bootstrap_servers=client["bootstrap.servers"], client=client)


def _java_true(text: str) -> bool:
    # MirrorMakerConfig reads A->B.enabled with Boolean.parseBoolean on the raw value: only
    # "true" in any case counts, so "true " (trailing blank) leaves the flow off in MM2 too.
    return text.lower() == "true"


_FLOW_ENABLED = re.compile(r"(?P<source>.+?)->(?P<target>.+)\.enabled")


def _flow_pairs(props: Props, aliases: list[str], clusters_prop: Prop) -> list[tuple[str, str]]:
    for key, prop in props.items():
        match = _FLOW_ENABLED.fullmatch(key)
        if match is None or not _java_true(prop.value):
            continue
        source, target = match["source"], match["target"]
        if "." in target and target not in aliases:
            continue  # a per-flow key such as A->B.emit.heartbeats.enabled
        undefined = [a for a in (source, target) if a not in aliases]
        if undefined:
            names = f"cluster{'s' if len(undefined) > 1 else ''} {' and '.join(undefined)}"
            raise error_at(prop, f"flow {source}->{target} names undefined {names}")
    pairs = [
        (s, t)
        for s in aliases
        for t in aliases
        if s != t and f"{s}->{t}.enabled" in props and _java_true(props[f"{s}->{t}.enabled"].value)
    ]
    if not pairs:
        example = f"{aliases[0]}->{aliases[1]}" if len(aliases) > 1 else "A->B"
        raise error_at(clusters_prop, f"no enabled flow (set e.g. {example}.enabled = true)")
    return pairs


def _flow(props: Props, source: str, target: str, isolation_override: Prop | None = None,
          mm2_4: bool = False) -> FlowSettings:
    """One flow's settings as its MM2 reads them; `mm2_4`: MM2 4.0 or later (mirrorlag.mm2.version)."""
    def prop(key: str) -> Prop | None:
        return props.get(f"{source}->{target}.{key}") or props.get(key)

    def get(key: str) -> Any:
        return _value(prop(key), FLOW_KEYS[key])

    _warn_global_only(props, source, target)
    _warn_syncs_refused(prop("emit.offset-syncs.enabled"), props, source, target)

    # ConfigUtils.translateDeprecatedConfigs: topics.blacklist only counts if topics.exclude is
    # unset at both levels (the flow's view merges them before translating); MM2 4.0 dropped both
    # aliases and reads the exclude keys alone.
    exclude = prop("topics.exclude") or (None if mm2_4 else prop("topics.blacklist"))
    groups_exclude = prop("groups.exclude") or (None if mm2_4 else prop("groups.blacklist"))
    exclude_row = (FLOW_KEYS["topics.exclude"][0], DEFAULT_TOPICS_EXCLUDE_4) if mm2_4 else FLOW_KEYS["topics.exclude"]
    for alias in ("topics.blacklist", "groups.blacklist") if mm2_4 else ():
        if (legacy := prop(alias)) is not None:
            log.warning("%s: MirrorMaker 2 4.0+ ignores it (mirrorlag.mm2.version), and so does mirrorlag: use %s",
                        _where(legacy), alias.replace("blacklist", "exclude"))
    checkpoint_interval = get("emit.checkpoints.interval.seconds")
    policy = ReplicationPolicy(
        separator=get("replication.policy.separator"),
        internal_separator_enabled=get("replication.policy.internal.topic.separator.enabled"),
        heartbeats_topic="heartbeats",
        identity=get("replication.policy.class"),
        internal_suffixes=not mm2_4,
    )
    consumer_isolation, consumer_isolation_from = _mm2_isolation(props, source, target)
    isolation, isolation_from = consumer_isolation, consumer_isolation_from
    if isolation_override is not None:
        isolation, isolation_from = _parse(isolation_override, _isolation_override), _where(isolation_override)
        if isolation != consumer_isolation:
            why = ("records of open transactions, which MM2 cannot read yet, count as uncopied"
                   if isolation == "read_uncommitted" else "an LRO past the last stable offset reads as RESET")
            log.warning("%s: flow %s->%s: LEOs and probes read at %s while MM2's consumer reads at %s (%s): %s",
                        isolation_from, source, target, isolation, consumer_isolation,
                        consumer_isolation_from or "Java's default", why)
    return FlowSettings(
        source=source,
        target=target,
        topics_include=get("topics"),
        topics_exclude=_value(exclude, exclude_row),
        policy=policy,
        offset_lag_max=get("offset.lag.max"),
        offset_syncs_topic_location=get("offset-syncs.topic.location"),
        engine=EngineParams(
            lag_time_max_s=get("replication.lag.time.max.ms"),
            sample_window_s=get("metrics.sample.window.ms"),
            num_samples=get("metrics.num.samples"),
            freshness_points=get("mirrorlag.freshness.table.points"),
            retention_warn_s=get("mirrorlag.retention.headroom.warn.ms"),
        ),
        connect_offsets_topic=_connect_offsets_topic(props, source, target),
        # A Connect worker setting: MM2 builds each herder's worker config from the target's
        # `<target>.` keys, so a top-level offset.flush.interval.ms never reaches it.
        offset_flush_interval_s=_value(props.get(f"{target}.offset.flush.interval.ms"), (_seconds(1), "60000")),
        # A worker setting too (MM2's docs: `<target>.exactly.once.source.support = enabled`).
        target_transactional=_exactly_once(props.get(f"{target}.exactly.once.source.support")),
        consumer_isolation_level=consumer_isolation,
        consumer_isolation_level_from=consumer_isolation_from,
        isolation_level=isolation,
        isolation_level_from=isolation_from,
        emit_offset_syncs=get("emit.offset-syncs.enabled"),
        source_consumer_reset=_reset(_source_consumer_prop(props, source, target, "auto.offset.reset")),
        groups_include=get("groups"),
        groups_exclude=_value(groups_exclude, FLOW_KEYS["groups.exclude"]),
        # MM2 checkpoints nothing without offset syncs to translate through, or with a negative interval.
        emit_checkpoints=get("emit.checkpoints.enabled") and get("emit.offset-syncs.enabled") and checkpoint_interval >= 0,
        emit_checkpoints_interval_s=float(max(checkpoint_interval, 1)),
        sync_group_offsets=get("sync.group.offsets.enabled"),
    )


# Connector keys of MirrorSourceConfig that MirrorMakerConfig.connectorBaseConfig hands a flow's
# connectors from the top level (any `A->B.` key reaches them too).
_SYNC_TOPIC_KEYS = ("offset-syncs.topic.location", "offset-syncs.topic.replication.factor")


def _warn_syncs_refused(emit: Prop | None, props: Props, source: str, target: str) -> None:
    """MM2 (>= 3.9, seen on 3.9.2 and 4.3.1) refuses a flow's MirrorSourceConnector whose
    emit.offset-syncs.enabled is the string "false" while any `offset-syncs.topic.*` or
    `offset-syncs-*` key reaches its config ("can't setup offset-syncs feature while
    emit.offset-syncs.enabled set to false"): that flow copies nothing. The sidecar reports it as
    it is (nothing copied), and says why here."""
    if emit is None or emit.value != "false":
        return
    flow = f"{source}->{target}."
    clash = [p for key, p in props.items()
             if key in _SYNC_TOPIC_KEYS or key.startswith((flow + "offset-syncs.topic.", flow + "offset-syncs-"))]
    if clash:
        named = ", ".join(f"{p.key} ({p.file}:{p.line})" for p in clash)
        log.warning("%s:%d: flow %s->%s: MM2 refuses to run its MirrorSourceConnector (it copies nothing) while "
                    "%s = false and %s reach its configuration; set such keys per flow (A->B.) for the flows "
                    "that emit offset syncs", emit.file, emit.line, source, target, emit.key, named)


def _source_consumer_prop(props: Props, source: str, target: str, key: str) -> Prop | None:
    """A key of MM2's source consumer for one flow, as MirrorMakerConfig hands it to the
    connector and MirrorSourceConfig.sourceConsumerConfig layers it: `A->B.consumer.` first, then
    `source.consumer.` (from `<source>.consumer.`, overridden by `A->B.source.consumer.`) over it."""
    return (props.get(f"{source}->{target}.source.consumer.{key}") or props.get(f"{source}.consumer.{key}")
            or props.get(f"{source}->{target}.consumer.{key}"))


def _reset(prop: Prop | None) -> str:
    if prop is None:
        return "earliest"
    value = prop.value.strip()
    if not valid_reset(value):
        raise error_at(prop, "auto.offset.reset must be earliest, latest, none or by_duration:<a duration "
                             f"not negative, as PnDTnHnMn.nS> (Kafka 4.0+), not {value!r}")
    return value


def _mm2_isolation(props: Props, source: str, target: str) -> tuple[str, str]:
    """The isolation.level of MM2's source consumer for flow source->target, and where it was set
    ("" for Java's default, read_uncommitted).

    MirrorMakerConfig.connectorBaseConfig turns `<source>.consumer.K` into `source.consumer.K` and
    `A->B.K` into `K` (so `A->B.consumer.K` into `consumer.K`, `A->B.source.consumer.K` into
    `source.consumer.K`, overriding the cluster's); MirrorConnectorConfig.sourceConsumerConfig then
    lays `source.consumer.` over `consumer.` (MM2 >= 2.8; a `source.cluster.` isolation.level is
    dropped, as is a top-level `consumer.K`, which no connector config names)."""
    if (prop := _source_consumer_prop(props, source, target, "isolation.level")) is not None:
        return _parse(prop, _consumer_isolation), _where(prop)
    return "read_uncommitted", ""


def _where(prop: Prop) -> str:
    return f"{prop.key} at {prop.file}:{prop.line}"


def _history(props: Props, own: Mapping[str, Any]) -> HistorySettings | None:
    directory: Path | None = own["mirrorlag.history.dir"]
    upload_uri: str | None = own["mirrorlag.history.upload.uri"]
    upload_s3 = _upload_s3(props, own, upload_uri)
    if directory is None:
        if upload_uri is not None:
            raise error_at(props["mirrorlag.history.upload.uri"],
                           "needs mirrorlag.history.dir: segments are written locally, then uploaded")
        return None
    max_rows, cap = own["mirrorlag.history.segment.max.rows"], own["mirrorlag.history.buffer.max.rows"]
    if max_rows > cap:
        # A segment could never fill: the buffer would drop its oldest rows first.
        prop = props.get("mirrorlag.history.segment.max.rows") or props["mirrorlag.history.buffer.max.rows"]
        raise error_at(prop, f"mirrorlag.history.segment.max.rows ({max_rows}) must not exceed "
                             f"mirrorlag.history.buffer.max.rows ({cap})")
    retention, hard = own["mirrorlag.history.retention.ms"], own["mirrorlag.history.retention.max.ms"]
    if retention is not None and hard is not None and hard < retention:
        if props.get("mirrorlag.history.retention.max.ms") is None:
            hard = 2 * retention  # the default follows a longer retention.ms
    if retention is not None and hard is not None and hard < retention:
        raise error_at(props["mirrorlag.history.retention.max.ms"],
                       f"mirrorlag.history.retention.max.ms ({hard * 1000:.0f}) must not be less than "
                       f"mirrorlag.history.retention.ms ({retention * 1000:.0f})")
    if upload_uri is not None and _inside(upload_uri, directory):
        # Uploaded copies would be read back as segments and uploaded again, forever.
        raise error_at(props["mirrorlag.history.upload.uri"], "must not be inside mirrorlag.history.dir")
    return HistorySettings(
        dir=directory,
        segment_s=own["mirrorlag.history.segment.ms"],
        segment_max_rows=max_rows,
        buffer_max_rows=cap,
        retention_s=own["mirrorlag.history.retention.ms"],
        retention_max_s=hard,
        upload_uri=upload_uri,
        upload_max_bytes_per_s=own["mirrorlag.history.upload.max.bytes.per.second"],
        upload_quota_window_num=own["mirrorlag.history.upload.quota.window.num"],
        upload_quota_window_s=float(own["mirrorlag.history.upload.quota.window.size.seconds"]),
        upload_s3=upload_s3,
        writer_id=own["mirrorlag.history.writer.id"] or _default_writer_id(own["mirrorlag.http.listener"][1]),
        refresh_interval_s=own["replication.record.lag.metric.refresh.interval"],
    )


def _default_writer_id(port: int) -> str:
    """A pod's hostname is its name: stable across container restarts, different for each
    replica; the port tells two sidecars on one host apart."""
    return f"{socket.gethostname() or 'localhost'}:{port}"


def _upload_s3(props: Props, own: Mapping[str, Any], upload_uri: str | None) -> S3UploadSettings | None:
    given = [props[key] for key in _S3_KEYS if key in props and props[key].value.strip()]
    if not given:
        return None
    if upload_uri is None or not {"s3", "s3a"} & set(_protocols(upload_uri)):
        # A credential that is silently unused is worse than an error.
        raise error_at(given[0], "applies only to an s3:// mirrorlag.history.upload.uri")
    prefix = "mirrorlag.history.upload.s3."
    s3 = S3UploadSettings(
        endpoint_url=own[prefix + "endpoint.url"],
        region=own[prefix + "region"],
        access_key_id=own[prefix + "access.key.id"],
        secret_access_key=own[prefix + "secret.access.key"],
        session_token=own[prefix + "session.token"],
        path_style=own[prefix + "path.style.access"],
    )
    key_id, secret, token = (prefix + k for k in ("access.key.id", "secret.access.key", "session.token"))
    if bool(s3.access_key_id) != bool(s3.secret_access_key):
        present, missing = (key_id, secret) if s3.access_key_id else (secret, key_id)
        raise error_at(props[present], f"needs {missing} too")
    if s3.session_token and not s3.access_key_id:
        raise error_at(props[token], f"needs {key_id} and {secret} too (a session token goes with a key pair)")
    return s3


def _inside(uri: str, directory: Path) -> bool:
    protocol, path = uri.split("://", 1) if "://" in uri else ("file", uri)
    if protocol not in ("file", "local"):
        return False
    target = Path(os.path.abspath(os.path.expanduser(path)))
    return target == directory or directory in target.parents


def _exactly_once(prop: Prop | None) -> bool:
    """True when Connect's exactly.once.source.support is `enabled` (`preparing` and `disabled`
    leave source tasks non-transactional)."""
    if prop is None:
        return False
    value = prop.value.strip().lower()
    if value not in ("enabled", "preparing", "disabled"):
        raise error_at(prop, f"exactly.once.source.support must be enabled, preparing or disabled, not {prop.value.strip()!r}")
    return value == "enabled"


def _connect_offsets_topic(props: Props, source: str, target: str) -> str:
    # MirrorMakerConfig.workerConfig: the target's `B.offset.storage.topic`, overridden by a
    # top-level `offset.storage.topic`, else Connect's per-source default.
    prop = props.get("offset.storage.topic") or props.get(f"{target}.offset.storage.topic")
    return prop.value.strip() if prop else f"mm2-offsets.{source}.internal"
