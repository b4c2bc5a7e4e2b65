"""Which days a run rolls up (DESIGN §7, "Late data and finality"): each day's inputs listed and
compared with its manifest (manifest.decide). A listing, no Spark read: with local history and
output, before Spark even starts, so a night with nothing new costs no Spark session.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING

from mirrorlag.rollup.errors import RollupError
from mirrorlag.rollup.manifest import DIR, Action, Decision, Manifest, Segment, decide, manifest_name
from mirrorlag.rollup.options import RollupOptions
from mirrorlag.rollup.paths import DayStatus, day_dir, exists, group_day_dir, join, list_files, local_path, manifests

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
    planned = []
    for day in sorted(set(opts.days)):
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
        planned.append(DayPlan(day, status, decision, segments, previous, group_segments))
    return Plan(planned, committed)
