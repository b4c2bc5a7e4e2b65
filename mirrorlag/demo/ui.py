"""The demo's live table: one row per partition, coloured by state."""

from __future__ import annotations

from rich import box
from rich.table import Table

from mirrorlag.model import Snapshot, State

STATE_STYLE = {
    State.IN_SYNC: "green", State.LAGGING: "yellow", State.STALLED: "bold red",
    State.RESET: "magenta", State.REWIND: "cyan", State.UNKNOWN: "dim", State.GONE: "dim",
}


def render_table(snapshot: Snapshot | None, caption: str) -> Table:
    table = Table(title="mirrorlag: replication lag per source partition", caption=caption,
                  box=box.SIMPLE_HEAVY, expand=False)
    for name in ("topic", "part", "LEO", "LRO", "lag", "min", "max", "avg", "time lag", "LRO age", "state"):
        table.add_column(name, justify="left" if name in ("topic", "state") else "right")
    for row in snapshot.rows if snapshot else ():
        style = STATE_STYLE[row.state]
        table.add_row(
            row.key.topic, str(row.key.partition), _n(row.leo), _n(row.lro), _n(row.record_lag),
            _n(row.record_lag_min), _n(row.record_lag_max), _n(row.record_lag_avg, 1),
            _s(row.time_lag_s), _s(row.lro_age_s), f"[{style}]{row.state.value}[/]",
        )
    if snapshot is None:
        table.add_row("waiting for the first poll...", *[""] * 10)
    return table


def _n(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f}" if digits else f"{value:.0f}"


def _s(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.1f}s"
