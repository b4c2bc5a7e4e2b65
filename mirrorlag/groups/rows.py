"""Failover readiness as rows: the objects `/status` lists and `check --groups --json` prints, one
per group partition, and the human table's cells. Pure."""

from __future__ import annotations

from typing import Any, Iterable

from mirrorlag.groups.assess import GroupPartition, GroupReadiness
from mirrorlag.model import FlowId

FIELDS = ("flow", "group", "topic", "partition", "committed", "checkpoint_upstream", "checkpoint_downstream",
          "resume_source_offset", "reread_records", "skipped_records", "not_yet_mirrored_records",
          "checkpoint_age_s", "checkpoint_old", "state", "because", "active_on_target")


def partition_row(flow: FlowId, group: GroupReadiness, p: GroupPartition) -> dict[str, Any]:
    r = p.readiness
    return {
        "flow": str(flow),
        "group": group.group,
        "topic": p.topic,
        "partition": p.partition,
        "committed": p.committed,
        "checkpoint_upstream": None if p.checkpoint is None else p.checkpoint.upstream,
        "checkpoint_downstream": None if p.checkpoint is None else p.checkpoint.downstream,
        "resume_source_offset": r.resume_source,
        "reread_records": r.reread,
        "skipped_records": r.skipped,
        "not_yet_mirrored_records": r.not_yet_mirrored,
        "checkpoint_age_s": None if r.checkpoint_age_ms is None else r.checkpoint_age_ms / 1000,
        "checkpoint_old": r.checkpoint_old,
        "state": r.state.value,
        "because": None if r.because is None else r.because.value,
        "active_on_target": group.active_on_target,
    }


REREAD_LABEL = "re-read (sum)"  # a group's figure where one figure a group is shown (assess.py)


def group_reread(rows: Iterable[dict[str, Any]]) -> int | None:
    """A group's re-read from its partition rows (/status's): GroupReadiness.reread_sum, the sum
    of the known ones; None where none is known."""
    known = [r["reread_records"] for r in rows if r["reread_records"] is not None]
    return sum(known) if known else None


def group_rows(flow: FlowId, groups: Iterable[GroupReadiness]) -> list[dict[str, Any]]:
    return [partition_row(flow, g, p) for g in groups for p in g.partitions]
