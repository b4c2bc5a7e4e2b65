"""What the demo shows: one row per partition from the sidecar's /status, coloured by state, and
one per consumer group partition with its failover readiness; redrawn in place on a terminal, or
as plain lines where stdout is a pipe or a file."""

from __future__ import annotations

import logging
import math
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, ContextManager, Iterator, Protocol, TextIO

from rich import box
from rich.console import Console, Group as RichGroup, RenderableType
from rich.live import Live
from rich.logging import RichHandler
from rich.table import Table

from mirrorlag.groups.readiness import GroupState
from mirrorlag.groups.rows import group_reread

STATE_STYLE = {
    "IN_SYNC": "green", "LAGGING": "yellow", "STALLED": "bold red", "REWIND": "cyan",
    "RESET": "magenta", "UNKNOWN": "dim", "GONE": "dim",
    # failover readiness (docs/design.md §9)
    "READY": "green", "REREAD_HIGH": "yellow", "CHECKPOINT_OLD": "yellow", "NOT_CHECKPOINTED": "bold red",
    "UNMAPPED": "bold red", "SKIPS": "bold red",
}
_GROUP_RANK = tuple(state.value for state in GroupState)  # worst first
TABLE_WIDTH = 160  # characters: the plain table's 12 columns without wrapping


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


def render(status: dict[str, Any] | None, caption: str) -> RenderableType:
    """The partitions' table, and below it the consumer groups' failover readiness once read."""
    partitions, groups = render_table(status, caption), render_groups(status)
    if groups is None:
        return partitions
    partitions.caption, groups.caption = None, caption  # the caption closes the view
    return RichGroup(partitions, groups)


def render_groups(status: dict[str, Any] | None) -> Table | None:
    rows = (status or {}).get("groups") or []
    if not rows:
        return None
    table = Table(title="failover readiness: where each consumer group would resume on the target",
                  box=box.SIMPLE_HEAVY, expand=False)
    for name in ("group", "topic", "part", "committed", "checkpoint", "resume at", "re-read", "not mirrored",
                 "ckpt age", "state"):
        table.add_column(name, justify="left" if name in ("group", "topic", "state") else "right")
    for row in rows:
        style = STATE_STYLE.get(row["state"], "")
        because = f" ({row['because']})" if row.get("because") else ""
        table.add_row(row["group"], row["topic"], str(row["partition"]), _n(row["committed"]),
                      _n(row["checkpoint_downstream"]), _n(row["resume_source_offset"]), _n(row["reread_records"]),
                      _n(row["not_yet_mirrored_records"]), _s(row["checkpoint_age_s"]),
                      f"[{style}]{row['state']}{because}[/]")
    return table


def group_summaries(status: dict[str, Any]) -> list[dict[str, Any]]:
    """Per group: its state (its worst partition's) and its re-read (the sum over its partitions,
    as check --groups says it)."""
    rows: dict[str, list[dict[str, Any]]] = {}
    for row in status.get("groups") or []:
        rows.setdefault(row["group"], []).append(row)
    return [{"group": group, "state": min((r["state"] for r in its), key=_GROUP_RANK.index),
             "reread": group_reread(its)} for group, its in rows.items()]


def _n(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f}" if digits else f"{value:.0f}"


def _s(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.1f}s"


class View(Protocol):
    def say(self, text: str) -> None: ...

    def showing(self, caption: str) -> ContextManager[None]: ...

    def update(self, status: dict[str, Any] | None, caption: str, summary: str | None) -> None: ...


class LiveView:
    """The table redrawn in place (rich's Live): for a terminal only."""

    def __init__(self) -> None:
        self.console = Console()
        self.live: Live | None = None

    def say(self, text: str) -> None:
        self.console.print(text, markup=False, highlight=False)

    @contextmanager
    def showing(self, caption: str) -> Iterator[None]:
        with Live(render(None, caption), console=self.console, refresh_per_second=4) as live:
            self.live = live
            _log_through(live.console)
            yield

    def update(self, status: dict[str, Any] | None, caption: str, summary: str | None) -> None:
        if self.live is not None:
            self.live.update(render(status, caption))


@dataclass
class PlainView:
    """Plain lines for a pipe or a file (`| tee`), where Live draws nothing: a status line every
    `line_every_s`, the whole table every `table_every_s`."""

    line_every_s: float = 2.0
    table_every_s: float = 30.0
    out: TextIO = field(default_factory=lambda: sys.stdout)
    _last_line: float = -math.inf
    _last_table: float = -math.inf

    def __post_init__(self) -> None:
        # No terminal: no colours or cursor moves, and wide enough for the table's 12 columns.
        self.console = Console(file=self.out, width=TABLE_WIDTH, no_color=True, force_terminal=False)

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    @contextmanager
    def showing(self, caption: str) -> Iterator[None]:
        yield

    def update(self, status: dict[str, Any] | None, caption: str, summary: str | None) -> None:
        now = time.monotonic()
        if status and now - self._last_table >= self.table_every_s:
            self._last_table = self._last_line = now
            self.console.print(render(status, caption))
            self.out.flush()
        elif summary and now - self._last_line >= self.line_every_s:
            self._last_line = now
            stamp = datetime.now(timezone.utc).strftime("%H:%M:%S")
            print(f"{stamp} {caption.splitlines()[0]} | {summary}", file=self.out, flush=True)


def _log_through(console: Console) -> None:
    """Log lines above the live table instead of through it."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    root.addHandler(RichHandler(console=console, show_path=False))
