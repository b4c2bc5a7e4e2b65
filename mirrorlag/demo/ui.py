"""The demo's live table: one row per partition from the sidecar's /status, coloured by state."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.table import Table

STATE_STYLE = {
    "IN_SYNC": "green", "LAGGING": "yellow", "STALLED": "bold red", "REWIND": "cyan",
    "RESET": "magenta", "UNKNOWN": "dim", "GONE": "dim",
}


def render_table(status: dict[str, Any] | None, caption: str) -> Table:
    table = Table(title="mirrorlag: replication lag per source partition", caption=caption,
                  box=box.SIMPLE_HEAVY, expand=False)
    for name in ("topic", "part", "LEO", "LRO", "lag", "min", "max", "avg", "time lag", "LRO age", "feed", "state"):
        table.add_column(name, justify="left" if name in ("topic", "feed", "state") else "right")
    rows = (status or {}).get("partitions") or []
    for row in rows:
        style = STATE_STYLE.get(row["state"], "")
        table.add_row(
            row["topic"], str(row["partition"]), _n(row["leo"]), _n(row["lro"]), _n(row["record_lag"]),
            _n(row["record_lag_min"]), _n(row["record_lag_max"]), _n(row["record_lag_avg"], 1),
            _s(row["time_lag_s"]), _s(row["lro_age_s"]), row["lro_feed"] or "-",
            f"[{style}]{row['state']}[/]",
        )
    if not rows:
        table.add_row("waiting for the sidecar's first poll...", *[""] * 11)
    return table


def _n(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f}" if digits else f"{value:.0f}"


def _s(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.1f}s"
