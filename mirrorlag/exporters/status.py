"""Snapshot rows as JSON objects: the shape of `check --json` and `GET /status`."""

from __future__ import annotations

import json
from typing import Any, Iterator, Sequence

from mirrorlag.config.settings import FlowSettings
from mirrorlag.model import PartitionRow, Snapshot


def row_to_dict(row: PartitionRow) -> dict[str, Any]:
    key = row.key
    return {
        "flow": f"{key.source}->{key.target}",
        "source": key.source,
        "target": key.target,
        "topic": key.topic,
        "partition": key.partition,
        "state": row.state.value,
        "leo": row.leo,
        "lro": row.lro,
        "lro_feed": row.lro_feed,
        "lro_age_s": _round(row.lro_age_s),
        "record_lag": row.record_lag,
        "record_lag_min": row.record_lag_min,
        "record_lag_max": row.record_lag_max,
        "record_lag_avg": row.record_lag_avg,
        "time_lag_s": _round(row.time_lag_s),
        "time_lag_lower_bound": row.time_lag_lower_bound,
        "freshness_lag_s": _round(row.freshness_lag_s),
        "freshness_lower_bound": row.freshness_lower_bound,
        "byte_lag_estimate": row.byte_lag_estimate,
        "append_rate": _round(row.append_rate),
        "copy_rate": _round(row.copy_rate),
        "catch_up_s": _round(row.catch_up_s),
        "log_start": row.log_start,
        "retention_headroom_records": row.retention_headroom_records,
        "retention_headroom_s": _round(row.retention_headroom_s),
        "records_lost": row.records_lost,
        "records_lost_unverified": row.records_lost_unverified,
    }


def flow_to_dict(flow: FlowSettings) -> dict[str, Any]:
    """What the sidecar read of one flow's MM2 keys: the `flows[]` of `/status`."""
    return {
        "flow": str(flow.id),
        # The level the flow's LEOs and source probe are read at, and the key that set it (null:
        # Java's default, read_uncommitted); MM2's own consumer's where an override differs.
        "isolation_level": flow.isolation_level,
        "isolation_level_from": flow.isolation_level_from or None,
        "mm2_isolation_level": flow.consumer_isolation_level,
        # <target>.offset.flush.interval.ms: the resolution of the flow's connect-offsets and
        # offset-syncs evidence.
        "offset_flush_interval_s": flow.offset_flush_interval_s,
        "emit_offset_syncs": flow.emit_offset_syncs,  # false: its syncs are not read (feeds[].off)
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


STATUS_PIECE_ROWS = 2000  # rows per json.dumps call: short enough a hold of the GIL, little alive at once


def status_chunks(snapshot: Snapshot | None, ready: bool, extra: dict[str, Any],
                  encoded: Sequence[tuple[str, bytes]] = ()) -> Iterator[bytes]:
    """The /status document, a piece at a time: its head, then the partitions `STATUS_PIECE_ROWS`
    at a time, then the `encoded` members (name, JSON already encoded: the groups' rows, encoded
    once a groups run). The same bytes as one json.dumps of the whole document, without its cost:
    a row dict per partition alive at once, and one C call that holds the GIL for all of them."""
    # `is not None`: a snapshot of no partitions is falsy (len 0), yet it was taken
    head = json.dumps({"ready": ready, "taken_at": snapshot.taken_at if snapshot is not None else None, **extra},
                      separators=(",", ":"))
    yield f'{head[:-1]},"partitions":['.encode()
    sep = ""
    cols = snapshot.columns if snapshot else None
    for lo in range(0, len(cols) if cols is not None else 0, STATUS_PIECE_ROWS):
        rows = cols[lo:lo + STATUS_PIECE_ROWS].rows()  # a piece's rows exist only while it is written
        yield (sep + json.dumps([row_to_dict(r) for r in rows], separators=(",", ":"))[1:-1]).encode()
        sep = ","
    if not encoded:
        yield b"]}"
        return
    yield b"]"
    for name, body in encoded:  # each its own piece: a large body is not copied again
        yield b"," + json.dumps(name).encode() + b":"
        yield body
    yield b"}"
