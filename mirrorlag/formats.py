"""MM2's wire formats, byte for byte (apache/kafka connect/mirror: OffsetSync.java, Heartbeat.java,
mirror-client's Checkpoint.java, and Connect's JSON source offsets). Pure: bytes in, values out; anything malformed is a BadRecord.

Kafka Structs (protocol.types.Schema) carry no version prefix unless the schema says so: a STRING
is an int16 big-endian byte length plus UTF-8, INT32/INT64 are big-endian. Like Schema.read,
decoders ignore trailing bytes after the last field.
"""

from __future__ import annotations

import json
import struct
from typing import Any, NamedTuple

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_TWO_INT64 = struct.Struct(">qq")
# An OffsetSync value (upstreamOffset, offset): all a feed needs from a record whose key it has
# already decoded once (see OffsetSyncsFeed._apply).
SYNC_VALUE = _TWO_INT64
# An OffsetSync key's last field, its INT32 partition (the bytes before it are the topic).
SYNC_KEY_PARTITION = _INT32


class OffsetSync(NamedTuple):
    topic: str
    partition: int
    upstream_offset: int  # source offset of the last replicated record: the LRO
    downstream_offset: int


class BadRecord(ValueError):
    """A record that does not decode: counted and skipped by the feeds, never fatal."""


def _read_string(data: bytes, pos: int) -> tuple[str, int]:
    if len(data) < pos + 2:
        raise BadRecord("truncated string length")
    (length,) = _INT16.unpack_from(data, pos)
    end = pos + 2 + length
    if length < 0 or len(data) < end:
        raise BadRecord(f"string of {length} bytes does not fit")
    try:
        return data[pos + 2:end].decode("utf-8"), end
    except UnicodeDecodeError:
        raise BadRecord("string is not UTF-8") from None


def _string(text: str) -> bytes:
    raw = text.encode("utf-8")
    return _INT16.pack(len(raw)) + raw


def decode_offset_sync(key: bytes | None, value: bytes | None) -> OffsetSync:
    """OffsetSync.KEY_SCHEMA (STRING topic, INT32 partition) and VALUE_SCHEMA (INT64 upstreamOffset,
    INT64 offset)."""
    if key is None or value is None:
        raise BadRecord("null key or value")
    topic, pos = _read_string(key, 0)
    if len(key) < pos + 4:
        raise BadRecord("key lacks its partition")
    (partition,) = _INT32.unpack_from(key, pos)
    if len(value) < 16:
        raise BadRecord(f"value of {len(value)} bytes, expected 16")
    upstream, downstream = _TWO_INT64.unpack_from(value, 0)
    if partition < 0 or upstream < 0:
        raise BadRecord("negative partition or offset")
    return OffsetSync(topic, partition, upstream, downstream)


def encode_offset_sync(sync: OffsetSync) -> tuple[bytes, bytes]:
    """The bytes MM2's OffsetSync.recordKey()/recordValue() produce."""
    return _string(sync.topic) + _INT32.pack(sync.partition), _TWO_INT64.pack(sync.upstream_offset, sync.downstream_offset)


# --- Heartbeat (MirrorHeartbeatConnector): key = two STRINGs, value = INT16 version + INT64 ms ---

_HEARTBEAT_VALUE = struct.Struct(">hq")


class Heartbeat(NamedTuple):
    source_alias: str
    target_alias: str
    timestamp_ms: int


def decode_heartbeat(key: bytes | None, value: bytes | None) -> Heartbeat:
    if key is None or value is None:
        raise BadRecord("null key or value")
    source, pos = _read_string(key, 0)
    target, _ = _read_string(key, pos)
    if len(value) < _HEARTBEAT_VALUE.size:
        raise BadRecord(f"value of {len(value)} bytes, expected {_HEARTBEAT_VALUE.size}")
    version, timestamp = _HEARTBEAT_VALUE.unpack_from(value, 0)
    if version != 0:
        raise BadRecord(f"unknown heartbeat version {version}")
    return Heartbeat(source, target, timestamp)


def encode_heartbeat(heartbeat: Heartbeat) -> tuple[bytes, bytes]:
    key = _string(heartbeat.source_alias) + _string(heartbeat.target_alias)
    return key, _HEARTBEAT_VALUE.pack(0, heartbeat.timestamp_ms)


# --- Connect source offsets (mm2-offsets.<source>.internal): JSON key and value --------------
# key:   ["MirrorSourceConnector",{"cluster":"A","partition":0,"topic":"t"}]  (any key order)
# value: {"offset":123}  (the last replicated record, not +1); null value = tombstone

CONNECTOR_NAME = "MirrorSourceConnector"


def is_source_connector(name: str) -> bool:
    """A MirrorSourceConnector's name: dedicated MM2 names it after the class; Strimzi's
    KafkaMirrorMaker2 (MM2 as connectors on a Connect cluster) names it
    `<source>-><target>.MirrorSourceConnector`. Other names are other connectors."""
    return name == CONNECTOR_NAME or name.endswith("." + CONNECTOR_NAME)


class ConnectOffsetKey(NamedTuple):
    connector: str
    cluster: str
    topic: str
    partition: int


def _json(raw: bytes, what: str) -> Any:
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, ValueError, RecursionError):  # RecursionError: absurdly nested JSON
        raise BadRecord(f"{what} is not JSON") from None


def decode_connect_offset_key(key: bytes | None) -> ConnectOffsetKey | None:
    """The source partition of a MirrorSourceConnector offset (`is_source_connector`); None for
    another connector's key.

    The checkpoint and heartbeat connectors keep their offsets in the same topic with other
    partition maps: not ours to read, and not bad records either.
    """
    if key is None:
        raise BadRecord("null key")
    doc = _json(key, "key")
    if not (isinstance(doc, list) and len(doc) == 2 and isinstance(doc[0], str) and isinstance(doc[1], dict)):
        raise BadRecord("key is not [connector, {partition}]")
    if not is_source_connector(doc[0]):
        return None
    part = doc[1]
    cluster, topic, partition = part.get("cluster"), part.get("topic"), part.get("partition")
    if not (isinstance(cluster, str) and isinstance(topic, str)
            and isinstance(partition, int) and not isinstance(partition, bool) and partition >= 0):
        raise BadRecord("key partition lacks cluster, topic or partition")
    return ConnectOffsetKey(doc[0], cluster, topic, partition)


def decode_connect_offset_value(value: bytes | None) -> int | None:
    """The replicated offset, or None for a tombstone."""
    if value is None:
        return None
    doc = _json(value, "value")
    offset = doc.get("offset") if isinstance(doc, dict) else None
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        raise BadRecord("value has no non-negative integer offset")
    return offset


def encode_connect_offset(key: ConnectOffsetKey, offset: int | None) -> tuple[bytes, bytes | None]:
    """The bytes Connect's JsonConverter writes for MirrorSourceTask's offsets (no schemas)."""
    partition = {"cluster": key.cluster, "partition": key.partition, "topic": key.topic}
    raw_key = json.dumps([key.connector, partition], separators=(",", ":")).encode()
    return raw_key, None if offset is None else json.dumps({"offset": offset}, separators=(",", ":")).encode()


# --- Checkpoint (MirrorCheckpointConnector, mirror-client's Checkpoint.java) ---------------
# key:   STRING group, STRING topic (the remote topic), INT32 partition
# value: INT16 version (0), then V0: INT64 upstreamOffset, INT64 offset (downstream), STRING metadata

_CHECKPOINT_HEAD = struct.Struct(">hqq")


class Checkpoint(NamedTuple):
    group: str
    topic: str  # the remote topic on the target, as MM2 names it
    partition: int
    upstream_offset: int  # the group's committed source offset when MM2 read it
    downstream_offset: int  # where the group resumes on the target
    metadata: str


def decode_checkpoint_key(key: bytes | None) -> tuple[str, str, int]:
    """(group, topic, partition): all a tombstone (a null value) carries."""
    if key is None:
        raise BadRecord("null key")
    group, pos = _read_string(key, 0)
    topic, pos = _read_string(key, pos)
    if len(key) < pos + 4:
        raise BadRecord("key lacks its partition")
    (partition,) = _INT32.unpack_from(key, pos)
    return group, topic, partition


def decode_checkpoint(key: bytes | None, value: bytes | None) -> Checkpoint:
    if key is None or value is None:
        raise BadRecord("null key or value")
    group, topic, partition = decode_checkpoint_key(key)
    if len(value) < _CHECKPOINT_HEAD.size + 2:
        raise BadRecord(f"value of {len(value)} bytes, expected at least {_CHECKPOINT_HEAD.size + 2}")
    version, upstream, downstream = _CHECKPOINT_HEAD.unpack_from(value, 0)
    if version != 0:
        raise BadRecord(f"unknown checkpoint version {version}")
    metadata, _ = _read_string(value, _CHECKPOINT_HEAD.size)
    if partition < 0 or upstream < 0 or downstream < 0:
        raise BadRecord("negative partition or offset")
    return Checkpoint(group, topic, partition, upstream, downstream, metadata)


def encode_checkpoint(checkpoint: Checkpoint) -> tuple[bytes, bytes]:
    """The bytes MM2's Checkpoint.recordKey()/recordValue() produce."""
    key = _string(checkpoint.group) + _string(checkpoint.topic) + _INT32.pack(checkpoint.partition)
    value = _CHECKPOINT_HEAD.pack(0, checkpoint.upstream_offset, checkpoint.downstream_offset)
    return key, value + _string(checkpoint.metadata)
