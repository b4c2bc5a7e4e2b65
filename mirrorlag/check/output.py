"""The verdict of `mirrorlag check` in the Monitoring Plugins shape, free of I/O.

The first line is what Nagios, Icinga and their kin show: `MIRRORLAG <STATUS> - <summary> | <perfdata>`
(https://www.monitoring-plugins.org/doc/guidelines.html). Thresholds use the guidelines' range
syntax; a value outside the range alerts.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from enum import IntEnum
from typing import Sequence

from mirrorlag.groups.assess import GroupReadiness
from mirrorlag.groups.readiness import GroupState
from mirrorlag.groups.rows import REREAD_LABEL
from mirrorlag.model import PartitionRow, State


class Status(IntEnum):
    """Nagios' exit codes; a larger one is worse, except that UNKNOWN is never a partition's."""

    OK = 0
    WARNING = 1
    CRITICAL = 2
    UNKNOWN = 3


# What each state says without thresholds. STALLED, RESET and AT_RISK need a human now (the mirror
# stopped, the source was recreated, records are or will be lost): CRITICAL. UNKNOWN, REWIND and
# LAGGING heal by themselves or need a look: WARNING.
STATE_STATUS = {State.IN_SYNC: Status.OK, State.LAGGING: Status.WARNING, State.REWIND: Status.WARNING,
                State.UNKNOWN: Status.WARNING, State.STALLED: Status.CRITICAL, State.RESET: Status.CRITICAL,
                State.AT_RISK: Status.CRITICAL}
# Named worst first: the states that need a human, then those that may heal, LAGGING last.
STATE_RANK = {State.STALLED: 0, State.RESET: 1, State.AT_RISK: 2, State.UNKNOWN: 3, State.REWIND: 4, State.LAGGING: 5}
NAMED = 5  # partitions named on the status line; the rest are "and N more"
PERF_STATES = (State.IN_SYNC, State.LAGGING, State.STALLED, State.AT_RISK, State.RESET, State.REWIND, State.UNKNOWN)
_RANGE = re.compile(r"^(@)?(?:(~|[-+]?\d+(?:\.\d+)?):)?([-+]?\d+(?:\.\d+)?)?$")


@dataclass(frozen=True)
class Range:
    """A Monitoring Plugins threshold range: `10` is 0..10, `10:` is 10..inf, `~:10` is -inf..10,
    `10:20` is 10..20; a value outside alerts, or inside with a leading `@`."""

    text: str
    low: float
    high: float
    inside: bool  # `@`: alert inside the range

    @classmethod
    def parse(cls, text: str) -> Range:
        m = _RANGE.match(text.strip())
        if not m or (m.group(2) is None and m.group(3) is None) or text.strip().startswith(":"):
            raise ValueError(f"not a threshold range: {text!r} (10, 10:, ~:10, 10:20 or @10:20)")
        at, start, end = m.groups()
        low = -math.inf if start == "~" else float(start) if start is not None else 0.0
        high = float(end) if end is not None else math.inf
        if low > high:
            raise ValueError(f"not a threshold range: {text!r} (its start is above its end)")
        return cls(text.strip(), low, high, at is not None)

    def alerts(self, value: float) -> bool:
        within = self.low <= value <= self.high
        return within if self.inside else not within


@dataclass(frozen=True)
class Thresholds:
    """--warning/--critical on the largest time lag (s), --warning-records/--critical-records on
    the largest record lag. With any of them, LAGGING alone no longer warns: the ranges judge the lag."""

    warning: Range | None = None
    critical: Range | None = None
    warning_records: Range | None = None
    critical_records: Range | None = None

    @property
    def any(self) -> bool:
        return any((self.warning, self.critical, self.warning_records, self.critical_records))


@dataclass(frozen=True)
class Window:
    """How long the check watched the partitions behind, of the window KIP-16's rule asks for."""

    watched_s: float
    wanted_s: float


@dataclass(frozen=True)
class Verdict:
    status: Status
    line: str  # the status line, perfdata included


def _perf(label: str, value: float | None, uom: str = "", warn: Range | None = None, crit: Range | None = None,
          minimum: float | None = 0, maximum: float | None = None) -> str:
    shown = "U" if value is None else f"{value:g}"  # U: undetermined, the guidelines' word for it
    tail = ";".join(["" if warn is None else warn.text, "" if crit is None else crit.text,
                     "" if minimum is None else f"{minimum:g}", "" if maximum is None else f"{maximum:g}"])
    return f"{label}={shown}{'' if value is None else uom};{tail}".rstrip(";")


def _worst(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def _ranged(value: float | None, warning: Range | None, critical: Range | None) -> Status:
    if value is None:
        return Status.OK
    if critical is not None and critical.alerts(value):
        return Status.CRITICAL
    if warning is not None and warning.alerts(value):
        return Status.WARNING
    return Status.OK


def describe(row: PartitionRow) -> str:
    """`A->B orders/3 LAGGING 1,234 records 45 s`: what the status line says of one partition."""
    k = row.key
    parts = [f"{k.source}->{k.target} {k.topic}/{k.partition} {row.state.value}"]
    if row.record_lag is not None:
        parts.append(f"{row.record_lag:,} record{'' if row.record_lag == 1 else 's'}")
    if row.time_lag_s is not None:
        parts.append(f"{'>=' if row.time_lag_lower_bound else ''}{row.time_lag_s:.0f} s")
    return " ".join(parts)


def partitions_verdict(rows: Sequence[PartitionRow], thresholds: Thresholds = Thresholds(),
                       window: Window | None = None, note: str | None = None) -> Verdict:
    """The status and status line of a check's partitions; `note` ends the summary."""
    t = thresholds
    time_lag = _worst([r.time_lag_s for r in rows])
    records = _worst([r.record_lag for r in rows])
    states = [r.state for r in rows]
    by_state = [STATE_STATUS.get(s, Status.OK) for s in states if not (s is State.LAGGING and t.any)]
    status = max([Status.OK, *by_state, _ranged(time_lag, t.warning, t.critical),
                  _ranged(records, t.warning_records, t.critical_records)])
    total = len(rows)
    perfdata = [_perf("records_behind", records, "", t.warning_records, t.critical_records),
                _perf("time_lag", None if time_lag is None else round(time_lag, 3), "s", t.warning, t.critical)]
    perfdata += [_perf(s.value.lower(), states.count(s), "", None, None, 0, total) for s in PERF_STATES]
    behind = sorted((r for r in rows if r.state is not State.IN_SYNC),
                    key=lambda r: (STATE_RANK.get(r.state, 9), -(r.time_lag_s or 0), -(r.record_lag or 0)))
    if not rows:
        summary = "no partitions in the configured flows"
    elif not behind:
        summary = f"{total} partition{'s' if total != 1 else ''} IN_SYNC"
    else:
        named = ", ".join(describe(r) for r in behind[:NAMED])
        more = f", and {len(behind) - NAMED} more" if len(behind) > NAMED else ""
        summary = f"{len(behind)} of {total} partitions not IN_SYNC: {named}{more}"
    over = []
    if time_lag is not None and _ranged(time_lag, t.warning, t.critical) is not Status.OK:
        over.append(f"time lag {time_lag:.0f} s")
    if records is not None and _ranged(records, t.warning_records, t.critical_records) is not Status.OK:
        over.append(f"{records:,} records behind")
    if over:
        summary += f" ({' and '.join(over)} outside the threshold)"
    if window is not None and behind and window.watched_s < window.wanted_s:
        summary += (f"; window {window.watched_s:.0f} s of {window.wanted_s:.0f} s: a partition behind that "
                    "catches up later reads LAGGING")
    if note:
        summary += f"; {note}"
    return Verdict(status, f"MIRRORLAG {status.name} - {summary} | {' '.join(perfdata)}")


def unknown_line(reason: str) -> str:
    """UNKNOWN's status line: no perfdata, nothing was measured. One line, and no `|`, which would
    start perfdata."""
    return f"MIRRORLAG UNKNOWN - {' '.join(reason.replace('|', '/').split())}"


def _group_worst(state: GroupState) -> int:
    return list(GroupState).index(state)  # GroupState lists the worst first


def describe_group(flow: str, group: GroupReadiness) -> str:
    """`A->B orders-audit REREAD_HIGH re-read (sum) 1,234`: what the status line says of one group,
    its re-read and skipped records summed over its partitions."""
    parts = [f"{flow} {group.group} {group.state.value}"]
    if group.reread_sum:
        parts.append(f"{REREAD_LABEL} {group.reread_sum:,}")
    if group.skipped_sum:
        parts.append(f"skip (sum) {group.skipped_sum:,}")
    return " ".join(parts)


def groups_verdict(groups: Sequence[tuple[str, GroupReadiness]]) -> Verdict:
    """`check --groups`: OK when every group is READY, WARNING otherwise (a failover would cost
    records re-read or skipped, or its cost is unknown: a look, not a page)."""
    total = len(groups)
    states = [g.state for _, g in groups]
    status = Status.OK if all(s is GroupState.READY for s in states) else Status.WARNING
    ages = [g.checkpoint_age_max_ms / 1000 for _, g in groups if g.checkpoint_age_max_ms is not None]
    # The largest of the figures the summary names: a group's sum over its partitions.
    perfdata = [_perf("reread_records", _worst([g.reread_sum if g.reread_known else None for _, g in groups])),
                _perf("skipped_records", _worst([g.skipped_sum if g.partitions else None for _, g in groups])),
                _perf("checkpoint_age", None if not ages else round(max(ages), 3), "s")]
    perfdata += [_perf(s.value.lower(), states.count(s), "", None, None, 0, total) for s in GroupState]
    behind = sorted(((f, g) for f, g in groups if g.state is not GroupState.READY),
                    key=lambda fg: (_group_worst(fg[1].state), -fg[1].reread_sum))
    if not groups:
        summary = "no consumer groups with offsets on mirrored topics"
    elif not behind:
        summary = f"{total} consumer group{'s' if total != 1 else ''} READY"
    else:
        named = ", ".join(describe_group(f, g) for f, g in behind[:NAMED])
        more = f", and {len(behind) - NAMED} more" if len(behind) > NAMED else ""
        summary = f"{len(behind)} of {total} consumer groups not READY: {named}{more}"
    return Verdict(status, f"MIRRORLAG {status.name} - {summary} | {' '.join(perfdata)}")
