"""`mirrorlag check`: one verdict for cron, Nagios and humans.

A single look cannot say how long a partition has been behind, so the check applies KIP-16's rule
over its own window: a partition is IN_SYNC when it is caught up, or when within the window the
mirror copies every record that existed when the check began. One that does not is LAGGING, or
STALLED when its last replicated offset never moved. The window is `--timeout`, capped at the
flow's replication.lag.time.max.ms. Exit 0: all IN_SYNC; 1: anything else; 2: error.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from typing import Sequence

from rich import box
from rich.console import Console
from rich.table import Table

from mirrorlag.config import load_settings
from mirrorlag.errors import MirrorlagError
from mirrorlag.exporters.status import row_to_dict
from mirrorlag.feeds.external import build_feeds
from mirrorlag.model import PartitionKey, PartitionRow, State
from mirrorlag.poller import Poller
from mirrorlag.wiring import lag_engine

RECHECK_INTERVAL_S = 1.0
NOT_OK = {State.LAGGING, State.STALLED, State.RESET, State.UNKNOWN, State.AT_RISK}
# States the check's own window cannot clear: waiting does not bring deleted records back.
FINAL = (State.UNKNOWN, State.RESET, State.AT_RISK)


def run_check(config_paths: Sequence[str], as_json: bool, timeout_s: float) -> int:
    if timeout_s <= 0:
        raise MirrorlagError(f"--timeout must be positive, got {timeout_s}")
    settings = load_settings(config_paths)
    # librdkafka refuses a socket timeout under 10 ms
    settings = dataclasses.replace(settings, request_timeout_s=min(settings.request_timeout_s, max(timeout_s, 0.01)))
    poller = Poller(settings, lag_engine(settings), build_feeds(settings))
    try:
        rows = _observe(poller, timeout_s)
    finally:
        poller.close()  # the feeds' consumers and the source probe's
    if as_json:
        json.dump([row_to_dict(r) for r in rows], sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        _print_table(rows)
    return 1 if any(r.state in NOT_OK for r in rows) else 0


def _observe(poller: Poller, timeout_s: float) -> list[PartitionRow]:
    start = time.monotonic()
    rows = _poll(poller)
    first_leo = {r.key: r.leo for r in rows}
    first_lro = {r.key: r.lro for r in rows}
    resolved = {r.key for r in rows if _settled(r, None)}
    # UNKNOWN, RESET and AT_RISK cannot settle by waiting; everything else gets its window (an
    # UNKNOWN that is only a time lag the probe could not prove too: the window can prove it).
    waiting = {r.key for r in rows if r.key not in resolved and not _final(r)}
    while waiting:
        window = max(min(timeout_s, poller.settings.flow(k.flow).engine.lag_time_max_s) for k in waiting)
        if time.monotonic() - start + RECHECK_INTERVAL_S > window:
            break
        time.sleep(RECHECK_INTERVAL_S)
        rows = [r for r in _poll(poller) if r.key in first_leo]
        settled = {r.key for r in rows if r.key in waiting and _settled(r, first_leo[r.key])}
        resolved |= settled
        waiting -= settled
    return [_verdict(r, r.key in resolved, first_lro.get(r.key)) for r in rows]


def _poll(poller: Poller) -> list[PartitionRow]:
    snapshot = poller.poll_once()
    if poller.stats.poll_errors_total:
        clusters = ", ".join(sorted(poller.stats.poll_errors_total))
        raise MirrorlagError(f"could not read source cluster {clusters} (see the warning above)")
    return [r for r in snapshot.rows if r.state is not State.GONE]


def _final(row: PartitionRow) -> bool:
    """A state the check's window cannot clear. A flagged lower bound (the probe could not date
    record LRO + 1) is no such state: copying all that existed when the check began proves it."""
    return row.state in FINAL and not (row.state is State.UNKNOWN and row.time_lag_lower_bound)


def _settled(row: PartitionRow, leo_at_start: int | None) -> bool:
    """Caught up now, or the mirror has copied everything that existed when the check began."""
    if _final(row):
        return False
    if row.record_lag == 0:  # an empty partition has no LRO, and nothing to copy
        return True
    return row.lro is not None and leo_at_start is not None and row.lro + 1 >= leo_at_start


def _verdict(row: PartitionRow, resolved: bool, lro_at_start: int | None) -> PartitionRow:
    if _final(row):
        return row
    if resolved:
        return row._replace(state=State.IN_SYNC)
    moved = row.lro != lro_at_start
    return row._replace(state=State.LAGGING if moved else State.STALLED)


def _print_table(rows: list[PartitionRow]) -> None:
    console = Console(width=None if sys.stdout.isatty() else 160)
    if not rows:
        console.print("no partitions in the configured flows")
        return
    table = Table(box=box.SIMPLE_HEAD)
    for column in ("flow", "topic", "partition", "leo", "lro", "lag", "state", "feed"):
        table.add_column(column, justify="right" if column in ("partition", "leo", "lro", "lag") else "left")
    for r in rows:
        k: PartitionKey = r.key
        table.add_row(f"{k.source}->{k.target}", k.topic, str(k.partition), _fmt(r.leo), _fmt(r.lro),
                      _fmt(r.record_lag), r.state.value, r.lro_feed or "-")
    console.print(table)


def _fmt(value: int | None) -> str:
    return "-" if value is None else str(value)
