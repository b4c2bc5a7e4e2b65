"""A Strimzi `KafkaMirrorMaker2` resource read as the MM2 properties it stands for (docs/design.md §5).

Strimzi generates no mm2.properties: it runs MM2 as connectors on a Kafka Connect cluster of the
target and configures them itself. This module does what its operator does with the resource
(Strimzi's KafkaMirrorMaker2Cluster.validateAndUpdateToNewAPI and KafkaMirrorMaker2Connectors,
read at 0.48.0 for v1beta2 and at 8541da1e, after 1.2.0, for v1) and writes the outcome as the keys
the .properties loader already reads, each remembering the line of the resource it came from:

- v1 (`spec.target`, `spec.mirrors[].source`) and v1beta2 (`spec.connectCluster`, `spec.clusters`,
  `spec.mirrors[].sourceCluster/targetCluster`) are told apart as the operator does: no `target`
  means the v1beta2 layout, whose Connect cluster is the one `connectCluster` names.
- Flow `<source>-><target>` per mirror; its connectors are `<source>-><target>.MirrorSourceConnector`
  and `...MirrorCheckpointConnector`, so the Connect worker's offsets topic holds the source
  offsets under the same key the connect-offsets feed reads.
- The worker's offsets topic: `spec.target.offsetStorageTopic` (v1); v1beta2 takes
  `offset.storage.topic` from the Connect cluster's `config`, else `mirrormaker2-cluster-offsets`.
- `topicsPattern`, `topicsExcludePattern` (v1beta2: else `topicsBlacklistPattern`), `groupsPattern`,
  `groupsExcludePattern` become `topics`, `topics.exclude`, `groups`, `groups.exclude`, over any
  such key in a connector's `config` (the operator puts them last).
- Client security per cluster: `tls` means SSL (SASL_SSL with SASL), its `trustedCertificates` the
  truststore; `authentication` tls, scram-sha-512, scram-sha-256 and plain (strimzi_security.py).
  Strimzi hands the connectors its Secrets through a config provider; mirrorlag runs in its own
  pod, so it reads each Secret `S`'s key `K` from a file, `<secrets dir>/S/K` (a volume per Secret
  at `<secrets dir>/S`; strimzi_fields.py).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from mirrorlag.config.client import Prop
from mirrorlag.config.strimzi_fields import DEFAULT_SECRETS_DIR, ResourceReader, StrimziSource, text
from mirrorlag.config.strimzi_security import authentication, trusted_certificates
from mirrorlag.config.yaml_lines import LineMap, load_documents

log = logging.getLogger(__name__)

API_GROUP = "kafka.strimzi.io"
API_VERSIONS = ("v1", "v1beta2")
KIND = "KafkaMirrorMaker2"
# v1beta2 without spec.target: the operator's defaults for the Connect worker (0.48.0-0.51.0).
V1BETA2_OFFSETS_TOPIC = "mirrormaker2-cluster-offsets"
_WORKER_IDENTITY_KEYS = ("group.id", "config.storage.topic", "offset.storage.topic", "status.storage.topic")

# Keys only MirrorCheckpointConnector reads: from checkpointConnector.config, never sourceConnector's.
CHECKPOINT_KEYS = (
    "groups", "groups.exclude", "groups.blacklist", "emit.checkpoints.enabled", "emit.checkpoints.interval.seconds",
    "sync.group.offsets.enabled", "sync.group.offsets.interval.seconds", "refresh.groups.enabled",
    "refresh.groups.interval.seconds", "checkpoints.topic.replication.factor",
)
# Keys both connectors read: mirrorlag takes the source connector's (it writes the syncs and names
# the remote topics); the checkpoint connector's "has to match" (Strimzi's example), else a warning.
SHARED_KEYS = (
    "offset-syncs.topic.location", "replication.policy.class", "replication.policy.separator",
    "replication.policy.internal.topic.separator.enabled", "emit.offset-syncs.enabled",
)
# The fields of a mirror and of a cluster in either API version; any other is pruned by the API
# server (a misspelt field does nothing there) and warned about here.
MIRROR_FIELDS = frozenset({
    "source", "sourceCluster", "targetCluster", "sourceConnector", "checkpointConnector", "heartbeatConnector",
    "topicsPattern", "topicsExcludePattern", "topicsBlacklistPattern", "groupsPattern", "groupsExcludePattern",
    "groupsBlacklistPattern"})
CLUSTER_FIELDS = frozenset({"alias", "bootstrapServers", "tls", "authentication", "config", "groupId",
                            "configStorageTopic", "offsetStorageTopic", "statusStorageTopic"})


def read_strimzi(source: StrimziSource) -> dict[str, Prop]:
    """The MM2 properties the KafkaMirrorMaker2 resource stands for; any problem is one ConfigError."""
    reader = ResourceReader(source)
    resource = _pick(reader, load_documents(source.file))
    spec = reader.mapping(resource, "spec", "spec")
    assert spec is not None
    target, offsets_topic = _target(reader, spec)
    mirrors = reader.items(spec, "mirrors", "spec.mirrors")
    if not mirrors:
        raise reader.fail(spec.lines.get("mirrors", spec.line), "spec.mirrors", "at least one mirror is required")
    sources = [_mirror_source(reader, spec, mirror, where, target.alias) for mirror, _, where in mirrors]
    aliases = [target.alias, *(s.alias for s in sources)]
    if len(set(aliases)) != len(aliases):
        raise reader.fail(spec.at, "spec", f"the target and source cluster aliases must be unique (as Strimzi "
                                             f"requires): {', '.join(aliases)}")
    reader.put("clusters", ",".join(aliases), spec.at, "spec")
    for cluster in (target, *sources):
        _cluster(reader, cluster)
    reader.put(f"{target.alias}.offset.storage.topic", offsets_topic[0], offsets_topic[1], offsets_topic[2])
    for (mirror, line, where), cluster in zip(mirrors, sources):
        _flow(reader, mirror, line, where, f"{cluster.alias}->{target.alias}")
    return reader.props


@dataclass(frozen=True)
class _Cluster:
    alias: str
    spec: LineMap
    where: str
    is_target: bool = False


def _pick(reader: ResourceReader, documents: list[Any]) -> LineMap:
    found = [d for d in documents if isinstance(d, LineMap) and d.get("kind") == KIND
             and str(d.get("apiVersion", "")).startswith(f"{API_GROUP}/")]
    name = reader.source.name
    if name is not None:
        found = [d for d in found if isinstance(d.get("metadata"), LineMap) and d["metadata"].get("name") == name]
    if not found:
        what = f"named {name} " if name else ""
        raise reader.fail(None, None, f"no {KIND} resource {what}(apiVersion {API_GROUP}/v1 or v1beta2) in the file")
    if len(found) > 1:
        names = ", ".join(str((d.get("metadata") or {}).get("name")) for d in found)
        raise reader.fail(found[1].line, None, f"{len(found)} {KIND} resources ({names}): pick one with "
                                               f"--strimzi {reader.file}#<metadata.name>")
    resource = found[0]
    version = str(resource["apiVersion"]).partition("/")[2]
    if version not in API_VERSIONS:
        raise reader.fail(resource.lines["apiVersion"], "apiVersion",
                          f"{API_GROUP}/{version} is not read (mirrorlag reads {', '.join(API_VERSIONS)})")
    return resource


def _target(reader: ResourceReader, spec: LineMap) -> tuple[_Cluster, tuple[str, int, str]]:
    """The Connect cluster (MM2's target) and its worker's offsets topic (value, line, field)."""
    if "target" in spec:
        target = reader.mapping(spec, "target", "spec.target")
        assert target is not None
        alias = reader.string(target, "alias", "spec.target.alias")
        reader.string(target, "bootstrapServers", "spec.target.bootstrapServers")
        topic = reader.string(target, "offsetStorageTopic", "spec.target.offsetStorageTopic")
        return (_Cluster(str(alias), target, "spec.target", True),
                (str(topic), target.lines["offsetStorageTopic"], "spec.target.offsetStorageTopic"))
    connect = reader.string(spec, "connectCluster", "spec.connectCluster", required=False)
    if connect is None:
        raise reader.fail(spec.at, "spec", "either target (v1) or connectCluster and clusters (v1beta2) are required")
    clusters = {str(c.get("alias")): (c, where) for c, _, where in reader.items(spec, "clusters", "spec.clusters")}
    if connect not in clusters:
        raise reader.fail(spec.lines["connectCluster"], "spec.connectCluster",
                          f"connectCluster with alias {connect} cannot be found in spec.clusters")
    cluster, where = clusters[connect]
    reader.string(cluster, "bootstrapServers", f"{where}.bootstrapServers")
    config = cluster.get("config")
    if isinstance(config, LineMap) and "offset.storage.topic" in config:
        topic = (text(config["offset.storage.topic"]), config.lines["offset.storage.topic"],
                 f"{where}.config.offset.storage.topic")
    else:
        topic = (V1BETA2_OFFSETS_TOPIC, spec.lines["connectCluster"], "spec.connectCluster (Strimzi's default)")
    return _Cluster(connect, cluster, where, True), topic


def _mirror_source(reader: ResourceReader, spec: LineMap, mirror: LineMap, where: str, target: str) -> _Cluster:
    if "source" in mirror:
        source = reader.mapping(mirror, "source", f"{where}.source")
        assert source is not None
        alias = reader.string(source, "alias", f"{where}.source.alias")
        reader.string(source, "bootstrapServers", f"{where}.source.bootstrapServers")
        return _Cluster(str(alias), source, f"{where}.source")
    name = reader.string(mirror, "sourceCluster", f"{where}.sourceCluster", required=False)
    if name is None:
        raise reader.fail(mirror.at, where, "source (v1) or sourceCluster (v1beta2) is required")
    named = mirror.get("targetCluster")
    if named is not None and str(named) != target:
        raise reader.fail(mirror.lines["targetCluster"], f"{where}.targetCluster",
                          f"{named} is not the target cluster ({target}, the connectCluster): Strimzi refuses it")
    for cluster, _, cluster_where in reader.items(spec, "clusters", "spec.clusters"):
        if str(cluster.get("alias")) == name:
            reader.string(cluster, "bootstrapServers", f"{cluster_where}.bootstrapServers")
            return _Cluster(name, cluster, cluster_where)
    raise reader.fail(mirror.lines["sourceCluster"], f"{where}.sourceCluster",
                      f"no cluster with alias {name} in spec.clusters")


def _warn_unknown(reader: ResourceReader, mapping: LineMap, known: frozenset[str], where: str) -> None:
    for key in mapping:
        if key not in known:
            log.warning("%s:%d: %s.%s is not a field of a KafkaMirrorMaker2 (Kubernetes drops it); ignored",
                        reader.file, mapping.lines[key], where, key)


def _cluster(reader: ResourceReader, cluster: _Cluster) -> None:
    alias, spec, where = cluster.alias, cluster.spec, cluster.where
    _warn_unknown(reader, spec, CLUSTER_FIELDS, where)
    reader.put(f"{alias}.bootstrap.servers", spec["bootstrapServers"], spec.lines["bootstrapServers"],
               f"{where}.bootstrapServers")
    tls = reader.mapping(spec, "tls", f"{where}.tls", required=False)
    protocol = "SSL" if "tls" in spec else "PLAINTEXT"  # the operator: any tls section means SSL
    protocol_line = spec.lines.get("tls", spec.at)
    auth = reader.mapping(spec, "authentication", f"{where}.authentication", required=False)
    if auth is not None:
        protocol = authentication(reader, auth, alias, f"{where}.authentication", protocol)
        protocol_line = spec.lines["authentication"]
    if tls is not None:
        trusted_certificates(reader, tls, alias, f"{where}.tls")
    if protocol != "PLAINTEXT":  # Java's default: left unset, so a --config file's top-level key still counts
        reader.put(f"{alias}.security.protocol", protocol, protocol_line, f"{where}.tls")
    config = reader.mapping(spec, "config", f"{where}.config", required=False) or LineMap()
    for key, value in config.items():
        # Strimzi hands a cluster's config to its clients (source.cluster./target.cluster.) and, for
        # the target, to the Connect worker (offset.flush.interval.ms, exactly.once.source.support).
        if cluster.is_target and key in _WORKER_IDENTITY_KEYS:
            continue  # v1beta2's worker topics, read above; the operator takes them out of the config
        reader.put(f"{alias}.{key}", value, config.lines[key], f"{where}.config.{key}")


def _flow(reader: ResourceReader, mirror: LineMap, line: int, where: str, flow: str) -> None:
    _warn_unknown(reader, mirror, MIRROR_FIELDS, where)
    reader.put(f"{flow}.enabled", "true", line, where)
    source = reader.mapping(mirror, "sourceConnector", f"{where}.sourceConnector", required=False)
    checkpoint = reader.mapping(mirror, "checkpointConnector", f"{where}.checkpointConnector", required=False)
    if source is None:
        log.warning("%s:%d: %s has no sourceConnector: Strimzi runs no MirrorSourceConnector for flow %s, "
                    "which copies nothing", reader.file, line, where, flow)
    source_config = _connector_config(reader, source, f"{where}.sourceConnector")
    checkpoint_config = _connector_config(reader, checkpoint, f"{where}.checkpointConnector")
    for key, (value, key_line, key_where) in source_config.items():
        if key not in CHECKPOINT_KEYS:
            reader.put(f"{flow}.{key}", value, key_line, key_where)
    for key, (value, key_line, key_where) in checkpoint_config.items():
        if key in CHECKPOINT_KEYS:
            reader.put(f"{flow}.{key}", value, key_line, key_where)
        elif key in SHARED_KEYS and text(value) != text(source_config.get(key, (None,))[0]):
            log.warning("%s:%d: %s = %s differs from the sourceConnector's (%s): mirrorlag reads the "
                        "sourceConnector's, and MM2's checkpoints may be wrong", reader.file, key_line, key_where,
                        text(value), text(source_config[key][0]) if key in source_config else "unset")
    if checkpoint is None:  # the operator creates no MirrorCheckpointConnector for this mirror
        reader.put(f"{flow}.emit.checkpoints.enabled", "false", line, f"{where} (no checkpointConnector)")
    # The resource's patterns go over any in the connectors' config, as the operator puts them last.
    exclude = "topicsExcludePattern" if "topicsExcludePattern" in mirror else "topicsBlacklistPattern"
    groups_exclude = "groupsExcludePattern" if "groupsExcludePattern" in mirror else "groupsBlacklistPattern"
    for field_name, key in (("topicsPattern", "topics"), (exclude, "topics.exclude"),
                            ("groupsPattern", "groups"), (groups_exclude, "groups.exclude")):
        if mirror.get(field_name) is not None:
            reader.put(f"{flow}.{key}", mirror[field_name], mirror.lines[field_name], f"{where}.{field_name}")


def _connector_config(reader: ResourceReader, connector: LineMap | None, where: str) -> dict[str, tuple[Any, int, str]]:
    if connector is None:
        return {}
    config = reader.mapping(connector, "config", f"{where}.config", required=False) or LineMap()
    return {str(key): (value, config.lines[key], f"{where}.config.{key}") for key, value in config.items()}


__all__ = ["DEFAULT_SECRETS_DIR", "StrimziSource", "read_strimzi"]
