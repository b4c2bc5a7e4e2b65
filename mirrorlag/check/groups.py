"""`mirrorlag check --groups`: failover readiness of every consumer group MM2 checkpoints, in one
look (docs/design.md §9). A Monitoring Plugins status line first (check_output.groups_verdict); exit 0
when every group is READY, 1 when any is not, 3 (UNKNOWN) when a flow's groups could not be read."""

from __future__ import annotations

import json
import sys
from typing import Sequence

from rich import box
from rich.console import Console
from rich.table import Table

from mirrorlag.check.output import Status, groups_verdict, unknown_line
from mirrorlag.config.settings import Settings
from mirrorlag.groups.flow_reader import flow_readers
from mirrorlag.groups.monitor import GroupsMonitor, GroupsSnapshot
from mirrorlag.groups.readiness import group_lro
from mirrorlag.groups.rows import group_rows
from mirrorlag.groups.service import limits_of
from mirrorlag.model import PartitionRow

EXIT_OK, EXIT_WARNING, EXIT_UNKNOWN = Status.OK, Status.WARNING, Status.UNKNOWN


def read_groups(settings: Settings, rows: Sequence[PartitionRow], timeout_s: float) -> GroupsSnapshot:
    """One read of every flow's groups, with the LROs of a poll's `rows`."""
    lros = {(r.key.flow, r.key.topic, r.key.partition): group_lro(r.lro, r.record_lag) for r in rows}
    monitor = GroupsMonitor(flow_readers(settings, timeout_s),
                            lro_of=lambda flow: lambda topic, partition: lros.get((flow, topic, partition)),
                            limits=limits_of(settings))
    try:
        return monitor.run_once()
    finally:
        monitor.close()


def answer(snapshot: GroupsSnapshot, as_json: bool, verbose: bool = False, quiet: bool = False) -> int:
    """Prints the groups and returns the exit status: the status line, then a line per flow (how
    many groups it listed), then, `verbose`, the table of group partitions; `quiet`, nothing when OK."""
    failed = [f for f in snapshot.flows if f.error is not None]
    if failed:
        reason = "; ".join(f"{f.flow}: {f.error}" for f in failed)
        if as_json:  # per flow, as the partition check's UNKNOWN lists its clusters
            json.dump({"status": "UNKNOWN", "reason": reason, "flows": [
                {"flow": str(f.flow), "source": f.flow.source, "target": f.flow.target, "read": f.error is None,
                 "error": f.error} for f in snapshot.flows]}, sys.stdout, indent=2)
            sys.stdout.write("\n")
        else:
            print(unknown_line(reason))
        return EXIT_UNKNOWN
    rows = [row for f in snapshot.flows for row in group_rows(f.flow, f.groups)]
    verdict = groups_verdict([(str(f.flow), g) for f in snapshot.flows for g in f.groups])
    if as_json:
        json.dump(rows, sys.stdout, indent=2)
        sys.stdout.write("\n")
    elif not (quiet and verdict.status is Status.OK):
        print(verdict.line)
        _print_table(rows, snapshot, verbose or (sys.stdout.isatty() and not quiet))
    return verdict.status


def _print_table(rows: list[dict], snapshot: GroupsSnapshot, table_too: bool) -> None:
    console = Console(width=None if sys.stdout.isatty() else 200)
    if not snapshot.flows:
        console.print("no flow checkpoints consumer groups (emit.checkpoints.enabled)")
        return
    for f in snapshot.flows:
        shown = len(f.groups)
        console.print(f"{f.flow}: {shown} group{'s' if shown != 1 else ''} with offsets on mirrored topics, of "
                      f"{f.listed} the source listed (only groups the principal may Describe are listed)"
                      + ("" if f.checkpoints_read else "; MM2's checkpoints topic not read (missing, or not permitted)"))
    if not rows or not table_too:
        return
    table = Table(box=box.SIMPLE_HEAD)
    columns = ("flow", "group", "topic", "partition", "committed", "checkpoint_downstream", "resume_source_offset",
               "reread_records", "skipped_records", "checkpoint_age_s", "state")
    numeric = {"partition", "committed", "checkpoint_downstream", "resume_source_offset", "reread_records",
               "skipped_records", "checkpoint_age_s"}
    for column in columns:
        table.add_column(column.replace("_records", "").replace("_", " "), justify="right" if column in numeric else "left")
    for row in rows:
        cells = ["-" if row[c] is None else (f"{row[c]:.0f}" if c == "checkpoint_age_s" else str(row[c])) for c in columns]
        if row["because"]:
            cells[-1] += f" ({row['because']})"
        elif row["checkpoint_old"] and row["state"] != "CHECKPOINT_OLD":
            cells[-1] += " (checkpoint old)"
        table.add_row(*cells)
    console.print(table)
