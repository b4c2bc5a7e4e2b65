"""Which keys of an mm2.properties file mirrorlag reads, which are MirrorMaker's, Connect's or the
Kafka clients' own, and how a written key splits into its prefixes (docs/design.md §5).

The names come from MirrorMakerConfig, MirrorConnectorConfig, MirrorSourceConfig,
MirrorCheckpointConfig and MirrorHeartbeatConfig (Kafka 3.x/4.x), Connect's WorkerConfig and
DistributedConfig, the Java clients' CommonClientConfigs / ConsumerConfig / ProducerConfig and
SSL/SASL configs, and the librdkafka names people carry over. A key in VALID_KEYS is never a
"near miss" of a key mirrorlag reads, however close its spelling.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Collection

from mirrorlag.config.client import CLIENT_KEYS

# Keys mirrorlag reads besides the loader's FLOW_KEYS and GLOBAL_KEYS (bare, without prefixes),
# each with its default as MM2 would write it (None: none). MirrorMakerConfig's own and the Java
# client keys at the top level (the client keys under `<alias>.` and `<alias>.admin.` too):
TOP_KEYS_READ: dict[str, str | None] = {
    "clusters": None,
    "topics.blacklist": None,  # the legacy name of topics.exclude, also per flow
    "groups.blacklist": None,  # the legacy name of groups.exclude, also per flow
    "offset.storage.topic": None,
    **{key: None for key in CLIENT_KEYS},
}
FLOW_KEYS_READ: dict[str, str | None] = {"enabled": "false", "topics.blacklist": None, "groups.blacklist": None}  # A->B.
# Connect worker keys of the target's herder, read under `<target>.` only, as MM2's worker does.
WORKER_KEYS_READ: dict[str, str | None] = {
    "offset.flush.interval.ms": "60000",
    "exactly.once.source.support": "disabled",
    "offset.storage.topic": None,
}
OTHER_KEYS_READ = {**TOP_KEYS_READ, **FLOW_KEYS_READ, **WORKER_KEYS_READ}
# Under a client prefix (<source>.consumer., A->B.consumer., A->B.source.consumer., <alias>.admin.).
CONSUMER_KEYS_READ: dict[str, str | None] = {
    "isolation.level": "read_uncommitted",
    "auto.offset.reset": "earliest",
    **{key: None for key in CLIENT_KEYS},
}

_MM2 = """
clusters config.providers enabled name connector.class tasks.max source.cluster.alias target.cluster.alias
replication.policy.class replication.policy.separator replication.policy.internal.topic.separator.enabled
replication.factor topics topics.exclude topics.blacklist groups groups.exclude groups.blacklist
config.properties.exclude config.properties.blacklist topic.filter.class group.filter.class
config.property.filter.class forwarding.admin.class heartbeats.topic.replication.factor
checkpoints.topic.replication.factor offset-syncs.topic.replication.factor offset-syncs.topic.location
consumer.poll.timeout.ms admin.timeout.ms refresh.topics.enabled refresh.topics.interval.seconds
refresh.groups.enabled refresh.groups.interval.seconds sync.topic.configs.enabled
sync.topic.configs.interval.seconds sync.topic.acls.enabled sync.topic.acls.interval.seconds
emit.heartbeats.enabled emit.heartbeats.interval.seconds emit.checkpoints.enabled
emit.checkpoints.interval.seconds sync.group.offsets.enabled sync.group.offsets.interval.seconds
emit.offset-syncs.enabled offset.lag.max checkpoints.tasks.max use.incremental.alter.configs
add.source.alias.to.metrics dedicated.mode.enable.internal.rest metric.reporters
replication.record.lag.metric.refresh.interval replication.record.lag.metric.last.replicated.offset.ttl
exactly.once.support transaction.boundary transaction.boundary.interval.ms offsets.storage.topic
key.converter value.converter header.converter errors.tolerance errors.log.enable
errors.log.include.messages errors.retry.timeout errors.retry.delay.max.ms
"""

_CONNECT_WORKER = """
group.id offset.storage.topic offset.storage.replication.factor offset.storage.partitions
config.storage.topic config.storage.replication.factor status.storage.topic
status.storage.replication.factor status.storage.partitions offset.flush.interval.ms
offset.flush.timeout.ms exactly.once.source.support task.shutdown.graceful.timeout.ms plugin.path
plugin.discovery listeners rest.advertised.host.name rest.advertised.port rest.advertised.listener
rest.host.name rest.port admin.listeners access.control.allow.origin access.control.allow.methods
response.http.headers.config rest.extension.classes heartbeat.interval.ms session.timeout.ms
rebalance.timeout.ms worker.sync.timeout.ms worker.unsync.backoff.ms scheduled.rebalance.max.delay.ms
connect.protocol connector.client.config.override.policy inter.worker.key.generation.algorithm
inter.worker.key.size inter.worker.key.ttl.ms inter.worker.signature.algorithm
inter.worker.verification.algorithms topic.creation.enable offset.storage.file.filename
key.converter.schemas.enable value.converter.schemas.enable task.shutdown.graceful.timeout.ms
"""

_CLIENTS = """
bootstrap.servers client.id client.dns.lookup client.rack connections.max.idle.ms receive.buffer.bytes
send.buffer.bytes reconnect.backoff.ms reconnect.backoff.max.ms retry.backoff.ms retry.backoff.max.ms
request.timeout.ms default.api.timeout.ms socket.connection.setup.timeout.ms
socket.connection.setup.timeout.max.ms metadata.max.age.ms metadata.max.idle.ms metadata.recovery.strategy
metrics.recording.level metrics.num.samples metrics.sample.window.ms auto.include.jmx.reporter
security.protocol security.providers interceptor.classes enable.metrics.push
sasl.mechanism sasl.jaas.config sasl.kerberos.service.name sasl.kerberos.kinit.cmd
sasl.kerberos.ticket.renew.window.factor sasl.kerberos.ticket.renew.jitter
sasl.kerberos.min.time.before.relogin sasl.login.callback.handler.class sasl.login.class
sasl.client.callback.handler.class sasl.login.refresh.window.factor sasl.login.refresh.window.jitter
sasl.login.refresh.min.period.seconds sasl.login.refresh.buffer.seconds sasl.login.connect.timeout.ms
sasl.login.read.timeout.ms sasl.login.retry.backoff.ms sasl.login.retry.backoff.max.ms
sasl.oauthbearer.token.endpoint.url sasl.oauthbearer.jwks.endpoint.url
sasl.oauthbearer.jwks.endpoint.refresh.ms sasl.oauthbearer.scope.claim.name
sasl.oauthbearer.sub.claim.name sasl.oauthbearer.expected.audience sasl.oauthbearer.expected.issuer
sasl.oauthbearer.clock.skew.seconds ssl.protocol ssl.enabled.protocols ssl.provider ssl.cipher.suites
ssl.keystore.type ssl.keystore.location ssl.keystore.password ssl.keystore.key
ssl.keystore.certificate.chain ssl.key.password ssl.truststore.type ssl.truststore.location
ssl.truststore.password ssl.truststore.certificates ssl.keymanager.algorithm ssl.trustmanager.algorithm
ssl.endpoint.identification.algorithm ssl.secure.random.implementation ssl.engine.factory.class
group.instance.id group.protocol group.remote.assignor auto.offset.reset enable.auto.commit
auto.commit.interval.ms isolation.level max.poll.records max.poll.interval.ms fetch.min.bytes
fetch.max.bytes fetch.max.wait.ms max.partition.fetch.bytes partition.assignment.strategy
key.deserializer value.deserializer check.crcs exclude.internal.topics allow.auto.create.topics
acks batch.size linger.ms compression.type compression.gzip.level compression.lz4.level
compression.zstd.level buffer.memory max.block.ms max.request.size
max.in.flight.requests.per.connection retries delivery.timeout.ms enable.idempotence transactional.id
transaction.timeout.ms key.serializer value.serializer partitioner.class partitioner.ignore.keys
partitioner.adaptive.partitioning.enable partitioner.availability.timeout.ms
"""

# librdkafka's names for the same things, which people bring from other tools.
_LIBRDKAFKA = """
metadata.broker.list socket.timeout.ms sasl.mechanisms sasl.username sasl.password ssl.ca.location
ssl.certificate.location ssl.key.location enable.ssl.certificate.verification statistics.interval.ms
topic.metadata.refresh.interval.ms message.max.bytes queue.buffering.max.ms queue.buffering.max.messages
broker.address.family debug api.version.request socket.keepalive.enable
"""

VALID_KEYS: frozenset[str] = frozenset(" ".join((_MM2, _CONNECT_WORKER, _CLIENTS, _LIBRDKAFKA)).split())

# Prefixes MM2 hands to one client of a flow or cluster; what follows is a Kafka client key.
CLIENT_PREFIXES = tuple(sorted(
    [f"{side}{role}." for side in ("", "source.", "target.") for role in ("consumer", "producer", "admin")]
    + [f"{role}.override." for role in ("consumer", "producer", "admin")]
    + ["source.cluster.", "target.cluster."],
    key=len, reverse=True))  # longest first: source.consumer. before consumer.

# Prefixes after which any name is legitimate (plugin settings, providers, converters' own keys).
FREE_PREFIXES = ("config.providers.", "transforms.", "predicates.", "listeners.https.",
                 "admin.listeners.https.", "key.converter.", "value.converter.", "header.converter.",
                 "metrics.context.", "topic.creation.", "mirrorlag.")

_FLOW = re.compile(r"(?P<flow>[^.]*->[^.]*)\.")


@dataclass(frozen=True)
class KeyParts:
    """A key as written, split: `A->B.` or `<alias>.`, then a client prefix, then the bare key."""

    scope: str  # "A->B." or "<alias>." or ""
    client: str  # e.g. "consumer.", "source.consumer.", "admin." or ""
    bare: str

    @property
    def prefix(self) -> str:
        return self.scope + self.client


def split_key(key: str, aliases: Collection[str]) -> KeyParts:
    scope = ""
    if match := _FLOW.match(key):
        scope = match.group(0)
    elif "." in key and key.split(".", 1)[0] in aliases:
        scope = key.split(".", 1)[0] + "."
    rest = key[len(scope):]
    client = next((p for p in CLIENT_PREFIXES if rest.startswith(p) and len(rest) > len(p)), "")
    return KeyParts(scope, client, rest[len(client):])
