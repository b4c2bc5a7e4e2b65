"""Which days a run rolls up (docs/design.md §7, "Late data and finality"): each day's inputs listed and
compared with its manifest (manifest.decide). A listing, no Spark read: with local history and
output, before Spark even starts, so a night with nothing new costs no Spark session.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta
from typing import TYPE_CHECKING

from mirrorlag.history.layout import ROLLUP_RECEIPT
from mirrorlag.rollup.errors import RollupError
from mirrorlag.rollup.manifest import DIR, Action, Decision, Manifest, Segment, decide, manifest_name
from mirrorlag.rollup.options import RollupOptions
from mirrorlag.rollup.paths import (DayStatus, day_dir, exists, group_day_dir, join, list_files, local_path, manifests,
                                    partition_days)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class DayPlan:
    day: date
    status: DayStatus
    decision: Decision
    segments: tuple[Segment, ...]
    previous: Manifest | None
    group_segments: tuple[Segment, ...] = ()  # the consumer groups' segments (`_groups/date=DAY/`)
    # Committed and not rolled up again, its history still there without the receipt (deleted, or
    # its write failed): written again from the manifest, for the sidecar's expiry waits for it.
    receipt_missing: bool = False


@dataclass(frozen=True)
class Plan:
    days: list[DayPlan]
    committed: dict[date, Manifest]

    @property
    def work(self) -> bool:
        return any(p.decision.action is Action.ROLL for p in self.days)


def manifest_path(out: str, day: date) -> str:
    return join(out, DIR, manifest_name(day))


def needs_spark(opts: RollupOptions) -> bool:
    return local_path(opts.history) is None or local_path(opts.out) is None


def plan_days(opts: RollupOptions, now_ms: int, spark: "SparkSession | None") -> Plan:
    """Every day of `opts.days` listed and decided. Raises RollupError for a day asked for by
    --date/--from that would lose inputs (manifest.decide), before anything is written."""
    committed = manifests(opts.out, spark)
    days = set(opts.days)
    if opts.lookback and opts.catch_up_days > 0:
        last = max(days)
        days |= set(unreceipted_days(opts.history, last - timedelta(days=opts.catch_up_days - 1), min(days), spark))
    planned = []
    for day in sorted(days):
        directory = day_dir(opts.history, day)
        segments = tuple(list_files(directory, spark))
        group_segments = tuple(list_files(group_day_dir(opts.history, day), spark))
        status = (DayStatus.PRESENT if segments else
                  DayStatus.EMPTY if exists(directory, spark) else DayStatus.MISSING)
        previous = committed.get(day)
        decision = decide(day, previous, segments, now_ms=now_ms, settle_ms=int(opts.settle_seconds * 1000),
                          max_gap_seconds=opts.max_gap_seconds, asked=not opts.lookback, force=opts.force,
                          group_segments=group_segments)
        if decision.action is Action.REFUSE:
            raise RollupError(f"{day}: not rolled up again: {decision.why}. --force replaces it anyway")
        receipt_missing = (previous is not None and decision.action is not Action.ROLL and (
            (bool(segments) and not exists(join(directory, ROLLUP_RECEIPT), spark)) or
            (bool(previous.group_segments) and bool(group_segments)
             and not exists(join(group_day_dir(opts.history, day), ROLLUP_RECEIPT), spark))))
        planned.append(DayPlan(day, status, decision, segments, previous, group_segments, receipt_missing))
    return Plan(planned, committed)


def unreceipted_days(history: str, first: date, before: date, spark: "SparkSession | None") -> list[date]:
    """The history's days from `first` to before `before` that hold segments and no rollup
    receipt: nights missed for longer than the lookback. The sidecar keeps such a day until
    mirrorlag.history.retention.max.ms (14 days by default), the catch-up's default reach."""
    return [d for d in partition_days(history, spark)
            if first <= d < before and not exists(join(day_dir(history, d), ROLLUP_RECEIPT), spark)]
