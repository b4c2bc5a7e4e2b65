"""Small histories with known answers, written the way the sidecar writes them (pyarrow)."""

from __future__ import annotations

from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from mirrorlag.history.schema import SCHEMA  # the sidecar's own: the rollup's input contract

H = 3_600_000  # ms
M = 60_000


def day_ms(day: date) -> int:
    return int(datetime(day.year, day.month, day.day, tzinfo=timezone.utc).timestamp() * 1000)


def series(flow: str, topic: str, partition: int, ts_ms: Sequence[int], states: Sequence[str],
           record_lag: Sequence[int | None], time_lag_ms: Sequence[int | None] | None = None) -> list[dict[str, Any]]:
    """Rows of one partition; leo/lro/freshness/bytes follow from the record lag."""
    source, target = flow.split("->")
    rows = []
    for i, (ts, state, lag) in enumerate(zip(ts_ms, states, record_lag)):
        tl = time_lag_ms[i] if time_lag_ms is not None else (None if lag is None else lag * 10)
        rows.append({
            "ts": ts, "source": source, "target": target, "topic": topic, "partition": partition,
            "leo": 1_000_000 + i, "lro": None if lag is None else 1_000_000 + i - lag - 1,
            "lro_feed": "offset-syncs", "record_lag": lag, "time_lag_ms": tl,
            "freshness_lag_ms": None if tl is None else tl // 2,
            "byte_lag_estimate": None if lag is None else lag * 100, "state": state,
        })
    return rows


def write(root: Path, day: date, rows: list[dict[str, Any]], name: str = "part-0.parquet",
          extra: dict[str, list[Any]] | None = None) -> Path:
    """One segment under root/date=DAY/; `extra` adds columns the rollup does not know (drift)."""
    directory = root / f"date={day.isoformat()}"
    directory.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pylist(rows, schema=SCHEMA)
    for column, values in (extra or {}).items():
        table = table.append_column(column, pa.array(values))
    path = directory / name
    pq.write_table(table, path)
    return path


def every(start_ms: int, end_ms: int, step_ms: int) -> list[int]:
    return list(range(start_ms, end_ms, step_ms))
