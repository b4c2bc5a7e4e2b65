"""Snapshot rows as JSON objects: the shape of `check --json` and `GET /status`."""

from __future__ import annotations

import json
from typing import Any

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
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def status_document(snapshot: Snapshot | None, ready: bool, extra: dict[str, Any]) -> bytes:
    doc = {
        "ready": ready,
        "taken_at": snapshot.taken_at if snapshot else None,
        **extra,
        "partitions": [row_to_dict(r) for r in snapshot.rows] if snapshot else [],
    }
    return json.dumps(doc, separators=(",", ":")).encode()
